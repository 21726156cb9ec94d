package container

import (
	"os"
	"strings"
	"testing"
)

// A Docker daemon that restarts makes a new socket file: the containers
// started right after it are named at once, not a retry interval after the
// outage (a fault test restarting dockerd under sigscope found a container
// run and stopped after the restart left unnamed). Stopped, the daemon
// removes its socket; crashed, it leaves it behind refusing connections,
// and the new one may get the same inode (ext4 reuses it at once).
func TestRestartedRuntimeIsAskedAtOnce(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		name := map[bool]string{false: "stopped", true: "crashed"}[crashed]
		t.Run(name, func(t *testing.T) { restartedRuntime(t, crashed) })
	}
}

func restartedRuntime(t *testing.T, crashed bool) {
	h := newFakeHost(t)
	d := &fakeDocker{socket: socketPath(t, "docker.sock")}
	d.set(id1, dockerInspectJSON(id1, "before", nil, "", nil, 1))
	stop, crash := d.listen(t)
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	if info := r.Lookup(h.dockerProcess(100, 4026532100, id1)); info == nil || info.Name != "before" {
		t.Fatalf("before the outage: %+v", info)
	}

	if crashed {
		crash()
	} else {
		stop()
	}
	if _, err := os.Stat(d.socket); (err == nil) != crashed {
		t.Fatalf("socket file after the daemon went: %v", err)
	}
	if info := r.Lookup(h.dockerProcess(101, 4026532101, id2)); info == nil || info.ID != id2 || info.Name != "" {
		t.Fatalf("during the outage: %+v, want the ID from the cgroup path alone", info)
	}
	if n := r.Errors()[SourceDocker]; n != 1 {
		t.Fatalf("docker errors %d during the outage, want 1", n)
	}
	if info := r.Lookup(h.dockerProcess(102, 4026532102, strings.Repeat("c", 64))); info == nil || info.Name != "" {
		t.Fatalf("during the outage: %+v", info)
	}
	if n := r.Errors()[SourceDocker]; n != 1 {
		t.Fatalf("docker errors %d: a runtime down is not asked again within the retry interval", n)
	}

	// It is back, with a new socket, and runs a new container: no time
	// has passed on the resolver's clock.
	id3 := strings.Repeat("d", 64)
	d.set(id3, dockerInspectJSON(id3, "after", nil, "", nil, 3))
	stop, _ = d.listen(t)
	t.Cleanup(stop)
	if info := r.Lookup(h.dockerProcess(103, 4026532103, id3)); info == nil || info.Name != "after" {
		t.Fatalf("after the restart: %+v, want it named at once", info)
	}
	if !strings.Contains(h.logs.String(), "answers again") {
		t.Errorf("no recovery message:\n%s", h.logs.String())
	}
}
