package container

import (
	"strings"
)

// Runtime names as they appear in Info.Runtime.
const (
	RuntimeDocker     = "docker"
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimePodman     = "podman"
)

// ParseCgroupFile finds the container a process belongs to from the content
// of /proc/PID/cgroup (cgroup v1 lines, the v2 "0::" line, or both on a
// hybrid host). It returns the full container ID and the runtime that named
// the cgroup, and ok=false for a process outside any container (user.slice,
// init.scope, a system service).
//
// The v2 line is preferred, then the v1 memory controller's line (the one
// sigscope's events carry an id for), then any other line: on a hybrid host
// the v2 line is often just "/" while the v1 lines hold the container.
func ParseCgroupFile(content string) (id, runtime string, ok bool) {
	var v2, memory string
	var others []string
	for _, line := range strings.Split(content, "\n") {
		hier, rest, found := strings.Cut(strings.TrimSpace(line), ":")
		if !found {
			continue
		}
		controllers, path, found := strings.Cut(rest, ":")
		if !found {
			continue
		}
		switch {
		case hier == "0" && controllers == "":
			v2 = path
		case hasController(controllers, "memory"):
			memory = path
		default:
			others = append(others, path)
		}
	}
	for _, p := range append([]string{v2, memory}, others...) {
		if id, runtime, ok := ParseCgroupPath(p); ok {
			return id, runtime, true
		}
	}
	return "", "", false
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// ParseCgroupPath finds the container in one cgroup path, as written in
// /proc/PID/cgroup or relative to a hierarchy's mount point. The deepest
// component that names a container wins: for docker-in-docker that is the
// inner container, and a runtime's own subgroups below the container's
// cgroup (podman's "container", systemd's "init.scope" inside a container
// running systemd) are skipped.
//
// Recognised, with 64 hex digits as the ID:
//
//	docker      /docker/<id>                       cgroupfs
//	            /system.slice/docker-<id>.scope    systemd
//	containerd  .../cri-containerd-<id>.scope      systemd (Kubernetes)
//	            /kubepods/<qos>/pod<uid>/<id>      cgroupfs (Kubernetes; also dockershim)
//	cri-o       .../crio-<id>.scope, .../crio-<id> (crio-conmon-<id> is the monitor, not the container)
//	podman      .../libpod-<id>.scope              systemd (libpod-conmon-<id> is the monitor)
//	            /libpod_parent/libpod-<id>         cgroupfs
func ParseCgroupPath(path string) (id, runtime string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		parent := ""
		if i > 0 {
			parent = parts[i-1]
		}
		if id, runtime, ok := parseComponent(parts[i], parent, parts[:i]); ok {
			return id, runtime, true
		}
	}
	return "", "", false
}

func parseComponent(c, parent string, ancestors []string) (id, runtime string, ok bool) {
	scope := strings.TrimSuffix(c, ".scope")
	for _, p := range []struct{ prefix, runtime string }{
		// Monitors first: their names would otherwise match the runtime's
		// prefix, and their cgroups hold conmon, not the container.
		{"crio-conmon-", ""},
		{"libpod-conmon-", ""},
		{"docker-", RuntimeDocker},
		{"cri-containerd-", RuntimeContainerd},
		{"crio-", RuntimeCRIO},
		{"libpod-", RuntimePodman},
	} {
		rest, found := strings.CutPrefix(scope, p.prefix)
		if !found {
			continue
		}
		if p.runtime == "" || !isID(rest) {
			return "", "", false
		}
		return rest, p.runtime, true
	}
	if !isID(c) {
		return "", "", false
	}
	// A bare ID: its parent or ancestors say whose it is.
	if parent == "docker" {
		return c, RuntimeDocker, true
	}
	for _, a := range ancestors {
		if a == "kubepods" || strings.HasPrefix(a, "kubepods.") || strings.HasPrefix(a, "kubepods-") {
			// The kubelet's cgroupfs layout. containerd is the common
			// runtime there; dockershim and cri-dockerd use the same
			// layout, and enrichment corrects the runtime to docker when
			// only Docker knows the ID.
			return c, RuntimeContainerd, true
		}
	}
	return "", "", false
}

// isID reports whether s is a full container ID: 64 lowercase hex digits,
// as docker, containerd (under the kubelet), CRI-O and podman generate.
// Requiring the full form keeps hex-looking names of other software (a
// 32-digit session hash, say) from being taken for containers.
func isID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
