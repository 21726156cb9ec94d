package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/critest"
	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// Names that never wait for a runtime's API (issue 35): every request of
// the agent to Docker's, containerd's and CRI-O's APIs is held for a
// minute while containers start and stop under them. Each stop's episode
// names its container, image, and for a pod's container its pod and
// namespace, from the runtime's own files, before any API answered.

// apiStall is the minute the runtimes' APIs stall.
const apiStall = 60 * time.Second

// stalledContainer is a container started during the stall, and what its
// episode must name.
type stalledContainer struct {
	id, runtime, name, image, pod, namespace string
}

func TestNamesWhileAPIsStall(t *testing.T) {
	testutil.RequirePrivileged(t)
	d := dockertest.EnsureDaemon(t)
	img := busyboxImage(t)
	docker := testutil.NewStallProxy(t, d.Socket)
	args := []string{"--docker-socket", docker.Path}
	type criUnder struct {
		name, uid string
		c         *critest.CRI
		proxy     *testutil.StallProxy
		img       string
	}
	var cris []criUnder
	for _, rt := range criRuntimes {
		c := rt.ensure(t)
		p := testutil.NewStallProxy(t, c.Socket)
		cris = append(cris, criUnder{name: rt.name, uid: rt.uid, c: c, proxy: p, img: c.ImportImage(t, "sigscope-cri-app:latest", "")})
		args = append(args, "--cri-socket", p.Path)
	}
	port, agentErr := startServe(t, args...)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz")

	until := time.Now().Add(apiStall)
	docker.Stall(apiStall)
	for _, c := range cris {
		c.proxy.Stall(apiStall)
	}
	tag := fmt.Sprint(time.Now().UnixNano() % 1e6)
	var ctrs []stalledContainer

	// Docker: services stopped with docker stop, one removed right after
	// (its record goes with it), and a one-second job.
	var services []namedContainer
	for i := range 3 {
		c := startNamed(t, d, img, fmt.Sprintf("stall-%s-svc-%d", tag, i))
		services = append(services, c)
		ctrs = append(ctrs, stalledContainer{id: c.id, runtime: "docker", name: c.name, image: img})
	}
	job := startScript(t, d, img, fmt.Sprintf("stall-%s-job", tag), "sleep 1; exit 4")
	ctrs = append(ctrs, stalledContainer{id: job.id, runtime: "docker", name: job.name, image: img})

	// containerd's CRI and CRI-O: a pod each, its container stopped as the
	// kubelet stops it, then the pod removed.
	for i, c := range cris {
		uid := fmt.Sprintf("%s-0000-4000-8035-%012d", c.uid, os.Getpid()+i)
		pod := fmt.Sprintf("stall-%s-%d", tag, i)
		ids := c.c.StartPod(t, critest.Pod{Name: pod, Namespace: "e2e-stall", UID: uid, Container: "app",
			Image: c.img, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"}, GracePeriod: 5, OwnPIDNamespace: true})
		testutil.WaitChildren(t, c.c.ContainerPID(t, ids.Container), 1)
		ctrs = append(ctrs, stalledContainer{id: ids.Container, runtime: c.name, name: "app", image: c.img, pod: pod, namespace: "e2e-stall"})
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound)
		if _, err := c.c.RT.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ids.Container, Timeout: 5}); err != nil {
			t.Fatalf("%s StopContainer: %v", c.name, err)
		}
		_, _ = c.c.RT.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: ids.Sandbox})
		_, _ = c.c.RT.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: ids.Sandbox})
		cancel()
	}
	for _, c := range services {
		testutil.WaitChildren(t, mainPID(t, c.name), 1) // its trap is set before its sleep starts
	}
	stopNamed(t, d, services...)
	if out, err := d.DockerErr("rm", services[0].name); err != nil {
		t.Fatalf("docker rm: %v\n%s", err, out)
	}

	for _, c := range ctrs {
		ep := faultWaitEpisode(t, base, c.id)
		got := ep.Container
		t.Logf("%s %s: %s, image %q, pod %q/%q, identity from %q (not in them: %q), outcome %s", c.runtime, identity.ShortID(c.id),
			got.Name, got.Image, got.Namespace, got.Pod, got.IdentityFrom, got.NotInFiles, ep.Outcome)
		if got.Name != c.name || got.Image != c.image || got.Runtime != c.runtime || got.Pod != c.pod || got.Namespace != c.namespace {
			t.Errorf("%s container %s: episode names %q, image %q, runtime %q, pod %q/%q; want %q, %q, %q, %q/%q (name_unknown %q)",
				c.runtime, identity.ShortID(c.id), got.Name, got.Image, got.Runtime, got.Namespace, got.Pod,
				c.name, c.image, c.runtime, c.namespace, c.pod, got.NameUnknown)
		}
		if got.IdentityFrom != timeline.IdentityFromFiles || got.NotInFiles != "" {
			t.Errorf("%s container %s: identity_from %q, not_in_files %q; want %q and nothing missing (no API could answer)",
				c.runtime, identity.ShortID(c.id), got.IdentityFrom, got.NotInFiles, timeline.IdentityFromFiles)
		}
		var text strings.Builder
		if err := ep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "named from the runtime's files") {
			t.Errorf("the episode's text does not say where its name came from:\n%s", text.String())
		}
	}
	if time.Now().After(until) {
		t.Fatalf("the episodes were read after the stall ended (%v): their names may have come from the APIs", apiStall)
	}
	for _, p := range append([]*testutil.StallProxy{docker}, func() (ps []*testutil.StallProxy) {
		for _, c := range cris {
			ps = append(ps, c.proxy)
		}
		return ps
	}()...) {
		// The agent asks each API in the background, one request at a
		// time: a stalled one delays the next runtime's first request.
		if !testutil.Poll(100*time.Millisecond, func() bool { return p.HeldRequests() > 0 || time.Now().After(until) }) || p.HeldRequests() == 0 {
			t.Errorf("the stall of %s held no request of the agent: the test did not test it", p.To)
		}
	}
	if t.Failed() {
		t.Logf("agent:\n%s", tail(agentErr.String()))
	}
}
