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
		tr.Counts[sigvocab.NetRefused].N = 7
		e.Traffic = tr
		c := EndpointChange{Service: "shop/web", NotReadyAt: stop.Add(left), TerminatingAt: stop.Add(left)}
		c.SetLags(stop.Add(-time.Second), stop)
		e.Endpoints = []EndpointChange{c, {Service: "shop/admin", RemovedAt: stop.Add(left + time.Second)}}
		return e
	}
	lost := ep(10*ms, 800*ms)
	if got := lost.EndpointRace(); !strings.HasPrefix(got, "race lost: the application stopped accepting (+0.010s from SIGTERM) 0.790s before the endpoint left shop/web (+0.800s from SIGTERM): 7 connection attempts were refused") {
		t.Errorf("lost race: %q", got)
	}
	won := ep(2*time.Second, 0)
	if got := won.EndpointRace(); !strings.HasPrefix(got, "race won: the endpoint left shop/web (+0.000s from SIGTERM) 2.000s before the application stopped accepting (+2.000s from SIGTERM)") {
		t.Errorf("won race: %q", got)
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
