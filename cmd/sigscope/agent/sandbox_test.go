package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/critest"
	"github.com/sigscope/sigscope/test/testutil"
)

// A pod deleted as the kubelet does it through CRI (containerd): its
// container is stopped (SIGTERM, handled), then its sandbox (the runtime
// SIGKILLs the pause process). The container's stop is one episode; the
// sandbox's end is no episode and does not move the stops counter. The
// harness leaves the pod's pid namespace mode at CRI's default (POD): the
// container shares the sandbox's namespace, as with shareProcessNamespace,
// so its main process is no namespace init (the pause process is).
func TestPodSandboxIsNoStop(t *testing.T) {
	cri := critest.EnsureCRI(t)
	// The tag the container tests import too: containerd names an image by
	// the first tag of its content, and busybox images have the same.
	img := cri.ImportImage(t, "sigscope-cri-app:latest", "")
	c := http.DefaultClient
	base := startAgent(t, Options{CRISockets: []string{cri.Socket}}, "http", c)

	ids := cri.StartPod(t, critest.Pod{Name: "web-0", Namespace: "shop", UID: "5e1c0000-0000-4000-8000-00000000a9e1",
		Container: "app", Image: img, GracePeriod: 10,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"}})
	pid := cri.ContainerPID(t, ids.Container)
	testutil.WaitSigMask(t, pid, "SigCgt", syscall.SIGTERM)
	time.Sleep(time.Second) // the agent's resolver learns the sandbox and the container
	_, before := get(t, c, base+"/metrics")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cri.RT.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ids.Container, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := cri.RT.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: ids.Sandbox}); err != nil {
		t.Fatal(err)
	}

	testutil.Poll(100*time.Millisecond, func() bool {
		_, body := get(t, c, base+"/api/v1/episodes?namespace=shop&pod=web-0")
		var eps []timeline.Episode
		if err := json.Unmarshal([]byte(body), &eps); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return len(eps) > 0
	})
	time.Sleep(1500 * time.Millisecond) // a sandbox episode would have settled by now
	_, body := get(t, c, base+"/api/v1/episodes?namespace=shop&pod=web-0")
	var eps []timeline.Episode
	if err := json.Unmarshal([]byte(body), &eps); err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || eps[0].Container.ID != ids.Container || eps[0].Outcome != timeline.OutcomeGraceful || eps[0].MainIsInit {
		t.Fatalf("episodes of the pod: %s", body)
	}
	sandboxStep := false
	for _, s := range eps[0].Steps {
		sandboxStep = sandboxStep || s.Kind == timeline.StepSandbox
	}
	if !sandboxStep {
		t.Logf("no sandbox step (the sandbox went after the episode settled): %s", body)
	}
	_, after := get(t, c, base+"/metrics")
	total := func(m string) float64 {
		var sum float64
		for _, o := range []string{"graceful", "killed", "ignored_by_init", "ignored", "handler_timeout", "exited", "oom_killed", "unfinished"} {
			sum += metric(t, m, `sigscope_container_stops_total{outcome="`+o+`"}`)
		}
		return sum
	}
	if got := total(after) - total(before); got != 1 {
		t.Errorf("stops moved by %v, want 1 (the container, not its sandbox)", got)
	}
	if got := metric(t, after, `sigscope_container_stops_total{outcome="killed"}`) - metric(t, before, `sigscope_container_stops_total{outcome="killed"}`); got != 0 {
		t.Errorf("killed stops moved by %v: the sandbox counted", got)
	}
}
