package container

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/langrt"
)

// setComm writes /proc/<pid>/comm on the fake host: what langrt.Detect
// reads there (the fake has no exe link and no cmdline).
func (h *fakeHost) setComm(pid int, comm string) {
	h.t.Helper()
	dir := filepath.Join(h.proc, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// Where the runtime names the main pid, the resolver reads the main
// process's language runtime once: a later answer for the same main
// process reuses it (the program is not read again), a restart's new main
// process is read, and a stopped container keeps what its main process ran,
// as it keeps MainPID.
func TestMainRuntimeOncePerMainProcess(t *testing.T) {
	h := newFakeHost(t)
	h.setComm(4321, "node")
	d := startFakeDocker(t, map[string]map[string]any{id1: dockerInspectJSON(id1, "web", nil, "", nil, 4321)})
	const ttl = time.Minute
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}, TTL: ttl, NoCgroupWatch: true})
	p := h.dockerProcess(100, 4026532100, id1)
	if info := r.Lookup(p); info == nil || info.MainPID != 4321 || info.MainRuntime != langrt.NodeJS {
		t.Fatalf("Info %+v, want MainPID 4321 running %q", info, langrt.NodeJS)
	}

	// Asked again after the TTL, same main pid: not read again (the comm
	// it would read now says something else).
	h.setComm(4321, "python3")
	h.clock.advance(ttl + time.Second)
	if info := r.Lookup(p); info == nil || info.MainRuntime != langrt.NodeJS {
		t.Fatalf("after the TTL, same main pid: %+v, want %q still", info, langrt.NodeJS)
	}
	if n := d.requests.Load(); n != 2 {
		t.Fatalf("%d API calls, want 2", n)
	}

	// Restarted: a new main process, read.
	h.setComm(5555, "java")
	d.set(id1, dockerInspectJSON(id1, "web", nil, "", nil, 5555))
	h.clock.advance(ttl + time.Second)
	if info := r.Lookup(p); info == nil || info.MainPID != 5555 || info.MainRuntime != langrt.JVM {
		t.Fatalf("after a restart: %+v, want MainPID 5555 running %q", info, langrt.JVM)
	}

	// Stopped: the runtime has no pid any more; both are kept.
	stopped := dockerInspectJSON(id1, "web", nil, "", nil, 0)
	stopped["State"] = map[string]any{"Status": "exited", "Running": false, "Pid": 0}
	d.set(id1, stopped)
	h.clock.advance(ttl + time.Second)
	if info := r.Lookup(p); info == nil || info.MainPID != 5555 || info.MainRuntime != langrt.JVM {
		t.Fatalf("after the stop: %+v, want MainPID 5555 running %q kept", info, langrt.JVM)
	}
}

// A main process not recognised yet (the runtime named it while runc's
// init still ran) is read again at the next answer; ListRunning's
// containers carry their runtime too.
func TestMainRuntimeUnknownIsReadAgain(t *testing.T) {
	h := newFakeHost(t)
	h.setComm(4321, "runc:[2:INIT]")
	d := startFakeDocker(t, map[string]map[string]any{id1: dockerInspectJSON(id1, "web", nil, "", nil, 4321)})
	const ttl = time.Minute
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}, TTL: ttl, NoCgroupWatch: true})
	p := h.dockerProcess(100, 4026532100, id1)
	if info := r.Lookup(p); info == nil || info.MainRuntime != langrt.Unknown {
		t.Fatalf("Info %+v, want an unknown runtime", info)
	}
	h.setComm(4321, "ruby3.1")
	h.clock.advance(ttl + time.Second)
	if info := r.Lookup(p); info == nil || info.MainRuntime != langrt.Ruby {
		t.Fatalf("Info %+v, want %q once recognisable", info, langrt.Ruby)
	}
	runs, err := r.ListRunning(context.Background())
	if err != nil || len(runs) != 1 || runs[0].Info.MainRuntime != langrt.Ruby {
		t.Fatalf("ListRunning = %+v, %v; want one container running %q", runs, err, langrt.Ruby)
	}
}
