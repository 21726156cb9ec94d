package e2e

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/test/critest"
	"github.com/sigscope/sigscope/test/testutil"
)

// criRuntimes are the CRI runtimes the end-to-end tests play kubelet
// against, by the name sigscope gives them, with a pod uid prefix each and
// the process that runs runc to signal a container (containerd's shim;
// CRI-O itself, conmon only monitors).
var criRuntimes = []struct {
	name   string
	ensure func(testing.TB) *critest.CRI
	uid    string
	runner string
}{
	{"containerd", critest.EnsureCRI, "5e1ce2e0", "containerd-shim"},
	{"cri-o", critest.EnsureCRIO, "5e1ce2e1", "crio"},
}

// TestCRIStopShellForm plays kubelet deleting a pod on each CRI runtime: a
// pod without shareProcessNamespace (so its container's PID 1 is the init
// of a pid namespace of its own), a shell-form PID 1 with two children,
// stopped with CRI StopContainer and a 2 s timeout, as the kubelet does
// with the pod's grace period. The runtime's SIGTERM is dropped by the
// kernel (no handler, a namespace init), its SIGKILL comes at the timeout,
// the kernel kills the children, exit 137. sigscope is pointed at the
// runtime with --cri-socket, and names the pod from CRI.
func TestCRIStopShellForm(t *testing.T) {
	for _, rt := range criRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			c := rt.ensure(t)
			img := c.ImportImage(t, "sigscope-cri-app:latest", "")
			uid := fmt.Sprintf("%s-0000-4000-8000-%012d", rt.uid, os.Getpid())
			ids := c.StartPod(t, critest.Pod{Name: "shell-0", Namespace: "e2e", UID: uid, Container: "app",
				Image: img, Command: []string{"sh", "-c", "sleep 1000 & sleep 1000 & wait"}, GracePeriod: 2,
				OwnPIDNamespace: true})
			pid := c.ContainerPID(t, ids.Container)
			testutil.WaitChildren(t, pid, 2)

			a := auditOf(t, ids.Container, "--cri-socket", c.Socket)
			if a.Prediction != "ignored_by_init" || a.Catches || a.StopSignal != "SIGTERM" {
				t.Errorf("audit before the stop: %+v", a)
			}
			l := startTimeline(t, "--cri-socket", c.Socket)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := c.RT.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ids.Container, Timeout: 2}); err != nil {
				t.Fatalf("StopContainer: %v", err)
			}
			st, err := c.RT.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ids.Container})
			if err != nil {
				t.Fatalf("ContainerStatus: %v", err)
			}
			if code := st.GetStatus().GetExitCode(); code != 137 {
				t.Errorf("%s reports exit %d, want 137", rt.name, code)
			}

			ep := episodeOf(t, l.stop(t, ids.Container), ids.Container)
			t.Logf("episode: %s", ep.raw)
			if ep.Outcome != "ignored_by_init" || ep.StopSignal != "SIGTERM" || !ep.MainIsInit {
				t.Errorf("episode: outcome %s signal %s main_is_init %v", ep.Outcome, ep.StopSignal, ep.MainIsInit)
			}
			if ep.Container.Runtime != rt.name || ep.Container.Name != "app" || ep.Container.Pod != "shell-0" ||
				ep.Container.Namespace != "e2e" || ep.Container.Image != img {
				t.Errorf("episode container %+v", ep.Container)
			}
			if ep.GracePeriod == nil || *ep.GracePeriod != 2 {
				t.Errorf("grace_period_s %v, want the pod's 2", ep.GracePeriod)
			}
			if ep.StopSender == nil || ep.StopSender.Comm != "runc" || len(ep.StopSender.Ancestors) == 0 ||
				ep.StopSender.Ancestors[0].Comm != rt.runner {
				t.Errorf("stop sender %+v, want runc run by %s", ep.StopSender, rt.runner)
			}
			within(t, "kill_after_s", ep.KillAfter, 1.8, 6)
			if len(ep.CascadeKills) != 2 {
				t.Errorf("cascade kills %+v, want the 2 sleeps", ep.CascadeKills)
			}
			if ep.ExitStatus == nil || *ep.ExitStatus != 137 {
				t.Errorf("exit status %v, want 137", ep.ExitStatus)
			}
		})
	}
}

// TestCRIPodDeletion plays kubelet deleting a pod whose containers share
// the sandbox's pid namespace (CRI's default; shareProcessNamespace), on
// each CRI runtime: the container is stopped (its SIGTERM trap exits 0),
// then the sandbox. Here CRI-O runs a pause process and stops it with
// SIGTERM, containerd SIGKILLs its own: either way the sandbox's end is no
// container stop, so the only episode of the pod is its container's.
func TestCRIPodDeletion(t *testing.T) {
	for _, rt := range criRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			c := rt.ensure(t)
			img := c.ImportImage(t, "sigscope-cri-app:latest", "")
			uid := fmt.Sprintf("%s-0000-4000-8001-%012d", rt.uid, os.Getpid())
			ids := c.StartPod(t, critest.Pod{Name: "del-0", Namespace: "e2e", UID: uid, Container: "web",
				Image: img, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"}, GracePeriod: 10})
			pausePID, pid := c.SandboxPID(t, ids.Sandbox), c.ContainerPID(t, ids.Container)
			testutil.WaitChildren(t, pid, 1)
			l := startTimeline(t, "--cri-socket", c.Socket)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := c.RT.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ids.Container, Timeout: 10}); err != nil {
				t.Fatalf("StopContainer: %v", err)
			}
			if _, err := c.RT.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: ids.Sandbox}); err != nil {
				t.Fatalf("StopPodSandbox: %v", err)
			}
			// Gone (and reaped) before the timeline stops, so that its end
			// is in the stream.
			if !testutil.Poll(20*time.Millisecond, func() bool { return syscall.Kill(pausePID, 0) != nil }) {
				t.Fatalf("the pause process (%d) still exists %v after StopPodSandbox", pausePID, testutil.Bound)
			}
			eps := l.stop(t, ids.Container)
			for _, ep := range eps {
				if ep.Container.ID == ids.Sandbox || ep.Container.Name == "POD" || ep.Main.PID == uint32(pausePID) {
					t.Errorf("an episode of the sandbox: %s", ep.raw)
				}
			}
			ep := episodeOf(t, eps, ids.Container)
			if ep.Outcome != "graceful" || ep.MainIsInit || ep.ExitStatus == nil || *ep.ExitStatus != 0 ||
				ep.Container.Runtime != rt.name || ep.Container.Pod != "del-0" || ep.Container.Name != "web" {
				t.Errorf("episode: %s", ep.raw)
			}
		})
	}
}
