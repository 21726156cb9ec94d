package timeline

import (
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The race between the two timelines of a pod's stop, both ways, and the
// endpoint steps put in the timeline at their times.
func TestEndpointRace(t *testing.T) {
	stop := time.Unix(1000, 0)
	ms := time.Millisecond
	ep := func(listenerClosed, left time.Duration) *Episode {
		e := &Episode{Start: stop, StopAt: stop, StopSignal: sigvocab.SIGTERM,
			Steps: []Step{{At: 0, Time: stop, Kind: StepStopSignal}, {At: 3 * time.Second, Time: stop.Add(3 * time.Second), Kind: StepMainExit}}}
		tr := &Traffic{NetNS: 9, Since: stop, Until: stop.Add(4 * time.Second), SeesRefused: true}
		tr.Counts[sigvocab.NetListenerClosed] = sigvocab.NetCount{N: 1, First: stop.Add(listenerClosed), Last: stop.Add(listenerClosed)}
		tr.Counts[sigvocab.NetRefused] = sigvocab.NetCount{N: 7, First: stop.Add(500 * ms), Last: stop.Add(700 * ms)}
		e.Traffic = tr
		c := EndpointChange{Service: "shop/web", NotReadyAt: stop.Add(left), TerminatingAt: stop.Add(left)}
		c.SetLags(stop.Add(-time.Second), stop)
		e.Endpoints = []EndpointChange{c, {Service: "shop/admin", RemovedAt: stop.Add(left + time.Second)}}
		return e
	}
	lost := ep(10*ms, 800*ms)
	// The race is against the last sender: lost, though the agent saw
	// the endpoint leave after the refusals.
	if got := lost.EndpointRace(); !strings.HasPrefix(got, "race lost: clients still sent after the application stopped accepting (+0.010s from SIGTERM), the last at +0.700s from SIGTERM (7 connection attempts were refused); the endpoint left shop/web (+0.800s from SIGTERM), 0.790s after the application stopped accepting") {
		t.Errorf("lost race: %q", got)
	}
	won := ep(2*time.Second, 0)
	if got := won.EndpointRace(); !strings.HasPrefix(got, "race won: no client request came after the application stopped accepting (+2.000s from SIGTERM); the endpoint left shop/web (+0.000s from SIGTERM)") {
		t.Errorf("won race: %q", got)
	}
	// Nothing seen after, on a kernel that cannot see refused attempts.
	unknown := ep(2*time.Second, 0)
	unknown.Traffic.SeesRefused = false
	if got := unknown.EndpointRace(); !strings.HasPrefix(got, "race unknown: no client request was seen after the application stopped accepting (+2.000s from SIGTERM), but this kernel cannot see refused attempts") {
		t.Errorf("unknown race: %q", got)
	}
	// A request on an open connection after the application stopped
	// accepting loses the race too, though nothing was lost: the sender
	// had not moved.
	pooled := ep(2*time.Second, 0)
	pooled.Traffic.SeesData, pooled.Traffic.LastData = true, stop.Add(2500*ms)
	if got := pooled.EndpointRace(); !strings.HasPrefix(got, "race lost: clients still sent after the application stopped accepting (+2.000s from SIGTERM), the last at +2.500s from SIGTERM; the endpoint left") {
		t.Errorf("pooled race: %q", got)
	}
	pooled.Container.Pod = "web-0"
	// The kubelet began the stop a second after the pod's deletion: the
	// next stop may begin at once, and its sleep must cover 3.5 s.
	if got := pooled.LagText(); got != "+2.500s from SIGTERM (a request on an open connection), 2.500s after the endpoint left shop/web; a preStop sleep of 4 s, counted from the pod's deletion (this stop began 1.0s after it, and the next may begin at once), would have covered it" {
		t.Errorf("lag %q", got)
	}
	if secs, ok := pooled.CoveringPreStopSleep(); !ok || secs != 4 {
		t.Errorf("covering sleep %d %v, want 4 (the last request at +2.5 s, the stop 1 s after the deletion)", secs, ok)
	}
	// A kubelet that began at the deletion: the stop's own lag.
	for i := range pooled.Endpoints {
		pooled.Endpoints[i].SetLags(stop, stop)
	}
	if got := pooled.LagText(); got != "+2.500s from SIGTERM (a request on an open connection), 2.500s after the endpoint left shop/web; a preStop sleep of 3 s would have covered it" {
		t.Errorf("lag %q", got)
	}
	if secs, ok := pooled.CoveringPreStopSleep(); !ok || secs != 3 {
		t.Errorf("covering sleep %d %v, want 3 (the last request at +2.5 s)", secs, ok)
	}
	lost.Container.Pod = "web-0"
	if got := lost.LagText(); !strings.HasSuffix(got, "; a preStop sleep of at least 2 s, counted from the pod's deletion (this stop began 1.0s after it, and the next may begin at once), would have covered it") {
		t.Errorf("lag of what this kernel partly sees: %q, want the sleep as a lower bound", got)
	}
	lost.Container.Pod = ""
	if got := lost.LagText(); got != "+0.700s from SIGTERM (a refused attempt), 0.100s before the endpoint left shop/web, of the requests this kernel sees (requests on open connections not)" {
		t.Errorf("lag %q", got)
	}
	// The API server's endpoints finish the episode (kubemeta's facts).
	lost.Container.Pod, lost.Container.Namespace = "web-0", "shop"
	Finish(lost, Facts{Kube: &KubeFacts{EndpointsRead: true, Endpoints: lost.Endpoints}})
	var kinds []StepKind
	for _, s := range lost.Steps {
		kinds = append(kinds, s.Kind)
	}
	if len(lost.Steps) != 4 || lost.Steps[1].Kind != StepEndpoint || lost.Steps[2].Kind != StepEndpoint || lost.Steps[3].Kind != StepMainExit {
		t.Fatalf("steps %v: the two endpoint steps belong between the signal and the exit", kinds)
	}
	if s := lost.Steps[1]; s.At != 800*ms || s.Text != "endpoint of shop/web: not ready, terminating (1.800s after the deletion, as the agent saw the EndpointSlices)" {
		t.Errorf("step %+v", s)
	}
	if s := lost.Steps[2]; s.Text != "endpoint of shop/admin: removed" {
		t.Errorf("step %q", s.Text)
	}
	noTraffic := ep(0, 0)
	noTraffic.Traffic = nil
	if got := noTraffic.EndpointRace(); got != "" {
		t.Errorf("no counts, yet a race: %q", got)
	}
	var b strings.Builder
	if err := lost.WriteText(&b); err != nil || !strings.Contains(b.String(), "\nendpoints: race lost:") {
		t.Errorf("text %q, %v", b.String(), err)
	}
}
