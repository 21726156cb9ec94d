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
	id, runtime, ok, _ = splitCgroupFile(content).parse()
	return id, runtime, ok
}

// cgroupLines are the paths of one /proc/PID/cgroup file that matter here.
type cgroupLines struct {
	v2, memory string   // "" when the file has no such line
	others     []string // the other v1 controllers' paths
}

func splitCgroupFile(content string) cgroupLines {
	var l cgroupLines
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
			l.v2 = path
		case hasController(controllers, "memory"):
			l.memory = path
		default:
			l.others = append(l.others, path)
		}
	}
	return l
}

// splitCgroupPath is one path as a cgroupLines, for parse.
func splitCgroupPath(path string) cgroupLines { return cgroupLines{v2: path} }

// parse is ParseCgroupFile on the split file; nested reports that the
// path that named the container has a container-like component (a
// 64-hex ID) below the one that matched: a container nested in it, laid
// out as no pattern knows (a runtime inside the container with a cgroup
// parent of its own).
func (l cgroupLines) parse() (id, runtime string, ok, nested bool) {
	for _, p := range append([]string{l.v2, l.memory}, l.others...) {
		if id, runtime, depth, ok := parseCgroupPath(p); ok {
			return id, runtime, true, hasContainerID(strings.Join(strings.Split(strings.Trim(p, "/"), "/")[depth+1:], "/"))
		}
	}
	return "", "", false, false
}

// owned is the paths the runtimes' main processes are looked up by (see
// owners.go): the v2 and the v1 memory paths, as events carry ids for
// those, but not a hierarchy's root, which is nobody's container (on a
// hybrid host every process's v2 path may be "/").
func (l cgroupLines) owned() []cgPath {
	var out []cgPath
	if l.v2 != "" && l.v2 != "/" {
		out = append(out, cgPath{path: l.v2})
	}
	if l.memory != "" && l.memory != "/" {
		out = append(out, cgPath{v1: true, path: l.memory})
	}
	return out
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
	id, runtime, _, ok = parseCgroupPath(path)
	return id, runtime, ok
}

// parseCgroupPath is ParseCgroupPath, with the index of the component
// that matched among path's components.
func parseCgroupPath(path string) (id, runtime string, depth int, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		parent := ""
		if i > 0 {
			parent = parts[i-1]
		}
		if id, runtime, ok := parseComponent(parts[i], parent, parts[:i]); ok {
			return id, runtime, i, true
		}
	}
	return "", "", 0, false
}

// hasContainerID reports whether path holds a full container ID (64
// lowercase hex digits, alone or within a component, as in
// "docker-<id>.scope"): every runtime names its containers' cgroups so
// unless told otherwise, and no other software's cgroups look like that.
func hasContainerID(path string) bool {
	run := 0
	for i := 0; i <= len(path); i++ {
		if i < len(path) && (path[i] >= '0' && path[i] <= '9' || path[i] >= 'a' && path[i] <= 'f') {
			run++
			continue
		}
		if run == 64 {
			return true
		}
		run = 0
	}
	return false
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
