package container

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// addStat writes /proc/<pid>/stat with ppid as its parent.
func (h *fakeHost) addStat(pid, ppid uint32, comm string) {
	h.t.Helper()
	stat := strconv.Itoa(int(pid)) + " (" + comm + ") S " + strconv.Itoa(int(ppid)) + " 1 1 0 -1 4194560\n"
	if err := os.WriteFile(filepath.Join(h.proc, strconv.Itoa(int(pid)), "stat"), []byte(stat), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// A cgroup2-only runtime on a hybrid host (a Docker whose /sys/fs/cgroup
// is cgroup2 in its own mount namespace) makes its containers' cgroups in
// the unified hierarchy only: their v1 memory cgroup is the one the daemon
// and its shims run in, shared with host processes. A container there under
// a custom --cgroup-parent is known by its v2 cgroup; the v1 one, its
// shim's too, is not its own, and a host process in it is no container's.
func TestOwnersV1CgroupOfTheRuntime(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{
		id1: dockerInspectJSON(id1, "v2-only", nil, "", nil, 4321),
	})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}, NoCgroupWatch: true})
	const runner = "/ci-runner" // the daemon's, the shim's and the test's v1 memory cgroup
	path := "/sigscope-parent/" + id1
	v2 := h.mkCgroup(false, path)
	v1 := h.mkCgroup(true, runner)
	h.addProcess(4000, sigvocab.HostPidNS, "4:memory:"+runner+"\n0::/\n") // the shim
	h.addProcess(4321, 4026532100, "4:memory:"+runner+"\n0::"+path+"\n")
	h.addStat(4321, 4000, "sleep")
	main := &sigvocab.Process{PID: 4321, NsPID: 1, PidNS: 4026532100, CgroupID: v2, CgroupV1ID: v1}
	if info := r.Lookup(main); info == nil || info.ID != id1 || info.Name != "v2-only" || info.MainPID != 4321 {
		t.Fatalf("the container's main process: %+v, want v2-only", info)
	}
	host := h.hostProcess(900, runner)
	if info := r.Lookup(host); info != nil {
		t.Errorf("a host process in the runtime's v1 cgroup was taken for container %s", info.Name)
	}
	// Gone, with only its v1 id: nothing names it, rather than the
	// container.
	h.removeProcess(900)
	gone := &sigvocab.Process{PID: 901, NsPID: 901, PidNS: sigvocab.HostPidNS, CgroupID: 1, CgroupV1ID: v1}
	if info := r.Lookup(gone); info != nil {
		t.Errorf("a gone host process of the runtime's v1 cgroup was taken for container %s", info.Name)
	}
}

func TestParentPID(t *testing.T) {
	for stat, want := range map[string]int{
		"4321 (sleep) S 4000 1 1 0":  4000,
		"7 (a) b) S) R 12 7 7":       12,
		"7 (sleep)":                  0,
		"garbage":                    0,
		"8 (x) S notanumber 1 1 0 0": 0,
	} {
		if got := parentPID(stat); got != want {
			t.Errorf("parentPID(%q) = %d, want %d", stat, got, want)
		}
	}
}
