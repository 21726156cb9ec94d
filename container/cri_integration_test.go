package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sigscope/sigscope/internal/dockertest"
	"github.com/sigscope/sigscope/internal/sigvocab"
)

// TestRealCRI plays kubelet against a real containerd: a pod with the
// kubelet's labels and grace-period annotation, in the kubelet's cgroupfs
// layout, looked up from its PID 1 and listed through the CRI API.
func TestRealCRI(t *testing.T) {
	c := dockertest.EnsureCRI(t)
	img := c.ImportImage(t, "sigscope-cri-app:latest", "")
	uid := fmt.Sprintf("5e1c0a2b-0000-4000-8000-%012d", os.Getpid())
	id := c.RunPod(t, dockertest.Pod{
		Name: "app-0", Namespace: "prod", UID: uid, Container: "app",
		Image: img, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"},
		GracePeriod: 45,
	})

	r := NewResolver(Options{DockerSocket: filepath.Join(t.TempDir(), "no-docker.sock"), CRISockets: []string{c.Socket}})
	defer r.Close()
	runs, err := r.ListRunning(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var run *Running
	for i := range runs {
		if runs[i].Info.ID == id {
			run = &runs[i]
		}
	}
	if run == nil || run.PID <= 0 {
		t.Fatalf("ListRunning has no %s with a pid: %+v", id, runs)
	}
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", run.PID))
	t.Logf("container %s pid %d cgroup:\n%s", id[:12], run.PID, data)
	if run.Info.Runtime != RuntimeContainerd || run.Info.Pod != "app-0" || run.Info.Namespace != "prod" ||
		run.Info.PodUID != uid || run.Info.Name != "app" || run.Info.GracePeriod != 45 || run.Info.Image != img {
		t.Errorf("ListRunning Info %+v", run.Info)
	}
	caught, _, _, _, err := PID1Signals("", run.PID)
	if err != nil || !caught.Has(sigvocab.SIGTERM) {
		t.Errorf("PID1Signals: caught %s, err %v; want SIGTERM caught", caught, err)
	}

	// Lookup from the process, on a resolver that has not listed anything.
	fresh := NewResolver(Options{DockerSocket: filepath.Join(t.TempDir(), "no-docker.sock"), CRISockets: []string{c.Socket}})
	defer fresh.Close()
	info := fresh.Lookup(processOf(t, run.PID))
	if info == nil || info.ID != id || info.Runtime != RuntimeContainerd || info.Pod != "app-0" ||
		info.Namespace != "prod" || info.Name != "app" || info.GracePeriod != 45 {
		t.Errorf("Lookup = %+v", info)
	}
	// Only CRI counts: the watch also sees the Docker containers other
	// tests run on this host, and this resolver has no Docker socket.
	if n := fresh.Errors(); n[SourceCRI] != 0 {
		t.Errorf("errors %v", n)
	}
}

// TestRealCRISandbox plays kubelet against a real containerd with a
// resolver already watching, as the agent would be: the pod's sandbox
// (pause process) resolves as a sandbox of the pod, and the containers'
// main pids are known without any lookup, although both cgroups appeared
// before containerd could say anything about them (a sandbox is
// registered once it runs, a container has no pid until it starts).
func TestRealCRISandbox(t *testing.T) {
	c := dockertest.EnsureCRI(t)
	img := c.ImportImage(t, "sigscope-cri-app:latest", "")
	noDocker := filepath.Join(t.TempDir(), "no-docker.sock")
	watching := NewResolver(Options{DockerSocket: noDocker, CRISockets: []string{c.Socket}})
	defer watching.Close()

	uid := fmt.Sprintf("5e1c0a2b-0000-4000-8001-%012d", os.Getpid())
	ids := c.StartPod(t, dockertest.Pod{
		Name: "sb-0", Namespace: "stage", UID: uid, Container: "app",
		Image: img, Command: []string{"sh", "-c", "sleep 1000"},
	})
	pausePID, appPID := c.SandboxPID(t, ids.Sandbox), c.ContainerPID(t, ids.Container)
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pausePID))
	t.Logf("sandbox %s pause pid %d (%q); container %s pid %d", ids.Sandbox[:12], pausePID, cmdline, ids.Container[:12], appPID)

	// Before any lookup: what the watch's enrichment and its rechecks
	// learnt.
	for _, w := range []struct {
		id      string
		sandbox bool
		pid     int
	}{{ids.Sandbox, true, pausePID}, {ids.Container, false, appPID}} {
		var info *Info
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			watching.mu.Lock()
			if m, ok := watching.metas.get(w.id); ok {
				info = m.info
			}
			watching.mu.Unlock()
			if info != nil && info.Sandbox == w.sandbox && info.MainPID == w.pid {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the watching resolver has %+v, want Sandbox %v and MainPID %d", w.id[:12], info, w.sandbox, w.pid)
			}
		}
	}

	fresh := NewResolver(Options{DockerSocket: noDocker, CRISockets: []string{c.Socket}})
	defer fresh.Close()
	for _, r := range []*Resolver{watching, fresh} {
		sb := r.Lookup(processOf(t, pausePID))
		if sb == nil || !sb.Sandbox || sb.ID != ids.Sandbox || sb.Runtime != RuntimeContainerd || sb.Pod != "sb-0" ||
			sb.Namespace != "stage" || sb.PodUID != uid || sb.MainPID != pausePID {
			t.Errorf("pause process: Lookup = %+v", sb)
		}
		app := r.Lookup(processOf(t, appPID))
		if app == nil || app.Sandbox || app.ID != ids.Container || app.Name != "app" || app.Pod != "sb-0" || app.MainPID != appPID {
			t.Errorf("app process: Lookup = %+v", app)
		}
		if n := r.Errors(); n[SourceCRI] != 0 {
			t.Errorf("errors %v", n)
		}
	}

	runs, err := fresh.ListRunning(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, run := range runs {
		if run.Info.ID == ids.Sandbox || run.Info.Sandbox {
			t.Errorf("ListRunning lists a sandbox: %+v", run.Info)
		}
		if run.Info.ID == ids.Container {
			found = true
			if run.PID != appPID || run.Info.MainPID != appPID {
				t.Errorf("ListRunning: %+v pid %d, want %d", run.Info, run.PID, appPID)
			}
		}
	}
	if !found {
		t.Errorf("ListRunning has no %s", ids.Container[:12])
	}
}
