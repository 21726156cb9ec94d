package timeline

import (
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A pod deleted with a grace of its own (kubectl delete --grace-period=5)
// while its spec says 30 s: the kernel's record shows a SIGKILL 5 s after
// the SIGTERM, which is no configured grace, and only the API server says
// where the 5 s came from. The hint, the summary and the grace agree: the
// facts are applied before anything is worded (before Finish, the hint
// was written at the engine's completion and named the spec's 30 s while
// the summary named the API server's 5 s).
func TestFinishGraceFromAPIAgrees(t *testing.T) {
	info := &identity.Info{Identity: identity.Identity{ID: strings.Repeat("ab", 32), Runtime: "containerd", Name: "app", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30}
	s := newSim(t, 4026532300, 5000, "server", info)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(time.Millisecond, sigvocab.SIGTERM, sigvocab.DispHandler).
		kill(5*time.Second, runc).
		initExit(5*time.Second+time.Millisecond, sigvocab.SIGKILL, 0).
		nsEmpty(5*time.Second + 2*time.Millisecond)
	done, flushed := feed(newEngine(Options{Settled: true}), s.in)
	eps := append(done, flushed...)
	if len(eps) != 1 {
		t.Fatalf("%d episodes", len(eps))
	}
	ep := eps[0]
	if ep.Hint != "" || ep.Outcome != "" {
		t.Fatalf("a settled episode is worded or decided already: outcome %q hint %q", ep.Outcome, ep.Hint)
	}
	Finish(&ep, Facts{Kube: &KubeFacts{Reason: "deleted", Grace: 5 * time.Second, GraceFrom: GraceFromDeletion, EndpointsRead: true}})
	if ep.Outcome != OutcomeHandlerTimeout || ep.GracePeriod != 5*time.Second || ep.GraceFrom != GraceFromDeletion {
		t.Fatalf("outcome %s grace %v from %q", ep.Outcome, ep.GracePeriod, ep.GraceFrom)
	}
	if !strings.Contains(ep.Summary(), "grace period 5s, from the pod's deletion") || !strings.Contains(ep.Hint, "grace period 5s") || strings.Contains(ep.Hint, "30s") {
		t.Errorf("the hint and the summary name different graces:\nsummary %s\nhint %s", ep.Summary(), ep.Hint)
	}
	if ep.StopReason != "deleted" || ep.settled != nil {
		t.Errorf("stop_reason %q, still settled %v", ep.StopReason, ep.settled != nil)
	}
}
