package timeline

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/tracer"
)

// Two containers of one pod (the app, then a native sidecar stopped after
// it) and the sandbox: one pod stop, containers in the order they stopped,
// complete when the sandbox goes.
func TestPodGrouper(t *testing.T) {
	app := &container.Info{ID: idA, Runtime: "containerd", Name: "app", Pod: "web-0", Namespace: "shop", GracePeriod: 30}
	side := &container.Info{ID: idB, Runtime: "containerd", Name: "proxy", Pod: "web-0", Namespace: "shop", GracePeriod: 30}
	a := newSim(t, nsA, 5151, "app", app)
	a.stop(0, tracer.SIGTERM, tracer.DispHandler, false).deliver(ms, tracer.SIGTERM, tracer.DispHandler).initExit(2*ms, 0, 0)
	s := newSim(t, nsB, 6161, "envoy", side)
	s.stop(10*ms, tracer.SIGTERM, tracer.DispDefault, false).kill(2010*ms, runc).initExit(2010*ms+30*time.Microsecond, tracer.SIGKILL, 0)
	pause := &container.Info{ID: idSandbox, Runtime: "containerd", Pod: "web-0", Namespace: "shop", Sandbox: true, MainPID: 4900}
	p := newSim(t, 4026532999, 4900, "pause", pause)
	p.kill(2100*ms, runc)
	done, flushed := feed(newEngine(Options{}), merge(a.in, s.in, p.in))
	g := NewPodGrouper(0)
	pods, single := g.Add(append(done, flushed...))
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
	for _, want := range []string{"pod shop/web-0: 2 container(s) stopped", "app    runc (4242) sends SIGTERM", "proxy  runc (4242) sends SIGKILL",
		"the pod's sandbox is torn down", "app: graceful", "proxy: ignored_by_init"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if strings.Index(text, "+2.010s") > strings.Index(text, "the pod's sandbox") {
		t.Errorf("steps out of order:\n%s", text)
	}
}
