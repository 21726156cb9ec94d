package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sigscope/sigscope/internal/dockertest"
	"github.com/sigscope/sigscope/tracer"
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
	if err != nil || !caught.Has(tracer.SIGTERM) {
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
	if n := fresh.Errors(); len(n) != 0 {
		t.Errorf("errors %v", n)
	}
}
