package timeline

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Two containers of one pod (the app, then a native sidecar stopped after
// it) and the sandbox: one pod stop, containers in the order they stopped,
// complete when the sandbox goes.
func TestPodGrouper(t *testing.T) {
	app := &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "containerd", Name: "app", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30}
	side := &identity.Info{Identity: identity.Identity{ID: idB, Runtime: "containerd", Name: "proxy", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30}
	// The app drops SIGTERM and is killed at the end of its grace
	// period; then the kubelet stops its native sidecar, which handles it;
	// then the sandbox goes, while both episodes are still settling.
	a := newSim(t, nsA, 5151, "app", app)
	a.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).kill(5*time.Second, runc).initExit(5*time.Second+30*time.Microsecond, sigvocab.SIGKILL, 0)
	s := newSim(t, nsB, 6161, "envoy", side)
	s.stop(5*time.Second+ms, sigvocab.SIGTERM, sigvocab.DispHandler, false).deliver(5*time.Second+2*ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		initExit(5*time.Second+3*ms, 0, 0)
	pause := &identity.Info{Identity: identity.Identity{ID: idSandbox, Runtime: "containerd", Pod: "web-0", Namespace: "shop"}, Sandbox: true, MainPID: 4900}
	p := newSim(t, 4026532999, 4900, "pause", pause)
	p.kill(5100*ms, runc)
	// Episode by episode as they complete: the app's, with the sandbox's
	// teardown in it, comes while the sidecar's is still open.
	e := newEngine(Options{})
	g := NewPodGrouper(0, e.HasOpen)
	var pods []PodStop
	var single []Episode
	for _, in := range merge(a.in, s.in, p.in) {
		got, sg := g.Add(e.Add(&in.ev, in.c))
		pods, single = append(pods, got...), append(single, sg...)
	}
	// The app's episode completes alone, the sidecar's is still open.
	got, sg := g.Add(e.Advance(base.Add(6001 * ms)))
	if len(got) != 0 || len(sg) != 0 || !e.HasOpen("shop", "web-0") {
		t.Fatalf("the pod was handed over with an episode of it still open: %+v", got)
	}
	got, sg = g.Add(e.Advance(base.Add(time.Minute)))
	pods, single = append(pods, got...), append(single, sg...)
	pods = append(pods, g.Flush()...)
	if len(pods) != 1 || len(single) != 0 {
		t.Fatalf("%d pods, %d single episodes", len(pods), len(single))
	}
	ps := pods[0]
	if len(ps.Episodes) != 2 || ps.Episodes[0].Container.Name != "app" || ps.Episodes[1].Container.Name != "proxy" || ps.SandboxAt.IsZero() {
		t.Fatalf("pod stop %+v", ps)
	}
	var b bytes.Buffer
	if err := ps.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{"pod shop/web-0: 2 container(s) stopped", "app    runc (4242) sends SIGTERM", "proxy  runc (4242) sends SIGTERM",
		"the pod's sandbox is torn down", "app: ignored_by_init", "proxy: graceful"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if strings.Index(text, "+5.003s") > strings.Index(text, "the pod's sandbox") {
		t.Errorf("steps out of order:\n%s", text)
	}
}
