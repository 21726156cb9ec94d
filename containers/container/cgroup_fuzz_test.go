package container

import (
	"strings"
	"testing"
	"unicode"
)

// Container IDs and a pod uid for the fuzz seeds.
const (
	fuzzID  = "e234594215242c484e48457ceb63e7a6a8517e3c65fbc2d2f426cc94a3e7e598"
	fuzzID2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	fuzzUID = "0f9b4b6e-6b1c-4a2a-9d0a-3c2f1e8d7a65"
)

// fuzzCgroupPaths are the layouts ParseCgroupPath knows, and near misses.
var fuzzCgroupPaths = []string{
	"/docker/" + fuzzID,
	"/system.slice/docker-" + fuzzID + ".scope",
	"/system.slice/docker-" + fuzzID + ".scope/init.scope",
	"/docker/" + fuzzID + "/docker/" + fuzzID2,
	"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f9b4b6e_6b1c_4a2a_9d0a_3c2f1e8d7a65.slice/cri-containerd-" + fuzzID + ".scope",
	"/kubepods/burstable/pod" + fuzzUID + "/" + fuzzID,
	"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f9b4b6e_6b1c_4a2a_9d0a_3c2f1e8d7a65.slice/crio-" + fuzzID + ".scope/container",
	"/kubepods.slice/crio-conmon-" + fuzzID + ".scope",
	"/machine.slice/libpod-" + fuzzID + ".scope/container",
	"/machine.slice/libpod-conmon-" + fuzzID + ".scope",
	"/libpod_parent/libpod-" + fuzzID,
	"/user.slice/user-1000.slice/session-3.scope",
	"/docker/" + strings.ToUpper(fuzzID),
	"/docker/" + fuzzID[:63],
	"/",
	"",
}

func knownRuntime(r string) bool {
	switch r {
	case RuntimeDocker, RuntimeContainerd, RuntimeCRIO, RuntimePodman:
		return true
	}
	return false
}

// A container found in a path is a full ID (64 lowercase hex digits) of a
// known runtime, taken from the path itself; slashes around the path do not
// matter; and the same path as a cgroup file's v2 line gives the same.
func FuzzParseCgroupPath(f *testing.F) {
	for _, p := range fuzzCgroupPaths {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		id, runtime, ok := ParseCgroupPath(path)
		if !ok {
			if id != "" || runtime != "" {
				t.Fatalf("not a container, but %q %q", id, runtime)
			}
		} else if !isID(id) || !knownRuntime(runtime) || !strings.Contains(path, id) {
			t.Fatalf("ParseCgroupPath(%q) = %q, %q", path, id, runtime)
		}
		if id2, rt2, ok2 := ParseCgroupPath("//" + path + "/"); id2 != id || rt2 != runtime || ok2 != ok {
			t.Fatalf("slashes around %q change %q %q %v into %q %q %v", path, id, runtime, ok, id2, rt2, ok2)
		}
		if !strings.Contains(path, "\n") && strings.TrimRightFunc(path, unicode.IsSpace) == path {
			if id2, rt2, ok2 := ParseCgroupFile("0::" + path + "\n"); id2 != id || rt2 != runtime || ok2 != ok {
				t.Fatalf("as a v2 line, %q gives %q %q %v, not %q %q %v", path, id2, rt2, ok2, id, runtime, ok)
			}
		}
	})
}

// A container found in a cgroup file is a full ID of a known runtime, from
// the file's text, and what one of its lines' paths names.
func FuzzParseCgroupFile(f *testing.F) {
	f.Add("9:name=systemd:/docker/" + fuzzID + "\n8:pids:/docker/" + fuzzID + "\n4:memory:/docker/" + fuzzID + "\n0::/docker/" + fuzzID + "\n")
	f.Add("12:memory:/docker/" + fuzzID + "\n11:cpu,cpuacct:/docker/" + fuzzID + "\n0::/\n")
	f.Add("10:memory:/kubepods/besteffort/pod" + fuzzUID + "/crio-" + fuzzID + "\r\n1:name=systemd:/\n0::/init.scope")
	f.Add("0::/system.slice/docker-" + fuzzID + ".scope\n3:memory:/docker/" + fuzzID2 + "\n")
	f.Add("0::/user.slice\n")
	f.Add(":::\n::\n0:\n")
	for _, p := range fuzzCgroupPaths {
		f.Add("0::" + p + "\n")
	}
	f.Fuzz(func(t *testing.T, content string) {
		id, runtime, ok := ParseCgroupFile(content)
		if !ok {
			if id != "" || runtime != "" {
				t.Fatalf("not a container, but %q %q", id, runtime)
			}
			return
		}
		if !isID(id) || !knownRuntime(runtime) || !strings.Contains(content, id) {
			t.Fatalf("ParseCgroupFile(%q) = %q, %q", content, id, runtime)
		}
		for _, line := range strings.Split(content, "\n") {
			_, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
			_, path, found := strings.Cut(rest, ":")
			if !found {
				continue
			}
			if pid, prt, pok := ParseCgroupPath(path); pok && pid == id && prt == runtime {
				return
			}
		}
		t.Fatalf("ParseCgroupFile(%q) = %q, %q: no line's path names it", content, id, runtime)
	})
}
