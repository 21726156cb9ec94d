package timeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The pod's endpoints: each first change's step, and how the stop's two
// timelines met (the endpoint race).

// endpointStepText: "endpoint of shop/web: not ready, terminating (0.002s
// after the deletion)".
func endpointStepText(c *EndpointChange, first time.Time) string {
	var what []string
	for _, w := range []struct {
		at   time.Time
		word string
	}{{c.NotReadyAt, "not ready"}, {c.NotServingAt, "not serving"}, {c.TerminatingAt, "terminating"}, {c.RemovedAt, "removed"}} {
		if w.at.Equal(first) {
			what = append(what, w.word)
		}
	}
	s := "endpoint of " + c.Service + ": " + strings.Join(what, ", ")
	if c.AfterDeletion != nil {
		s += fmt.Sprintf(" (%.3fs after the deletion, as the agent saw the EndpointSlices)", c.AfterDeletion.Seconds())
	}
	return s
}

// EndpointRace says how the stop's two timelines met: when the application
// stopped accepting (its first listening socket closed, from the kernel's
// count) against when its endpoint first left a Service (from the API
// server, as the agent saw it). "" when either was not measured.
func (ep *Episode) EndpointRace() string {
	if ep.race != "" {
		return ep.race
	}
	return ep.raceText()
}

// raceText is the race, from the finished episode's fields.
func (ep *Episode) raceText() string {
	t := ep.Traffic
	if t == nil || t.Unread != "" || len(ep.Endpoints) == 0 {
		return ""
	}
	var left time.Time
	var svc string
	for _, c := range ep.Endpoints {
		if f := c.First(); !f.IsZero() && (left.IsZero() || f.Before(left)) {
			left, svc = f, c.Service
		}
	}
	if left.IsZero() {
		return ""
	}
	at := func(x time.Time) string {
		if ep.StopAt.IsZero() {
			return x.UTC().Format(time.RFC3339Nano)
		}
		return fmt.Sprintf("%+.3fs from %s", x.Sub(ep.StopAt).Seconds(), ep.StopSignal)
	}
	lc := t.Counts[sigvocab.NetListenerClosed]
	if lc.N == 0 {
		return fmt.Sprintf("the endpoint left %s at %s; the application did not stop accepting while the kernel counted", svc, at(left))
	}
	if !lc.First.Before(left) {
		return fmt.Sprintf("race won: the endpoint left %s (%s) %.3fs before the application stopped accepting (%s)",
			svc, at(left), lc.First.Sub(left).Seconds(), at(lc.First)) + seenBy
	}
	s := fmt.Sprintf("race lost: the application stopped accepting (%s) %.3fs before the endpoint left %s (%s)",
		at(lc.First), left.Sub(lc.First).Seconds(), svc, at(left))
	if t.Known(sigvocab.NetRefused) {
		s += fmt.Sprintf(": %s refused while the kernel counted", countWas(t.N(sigvocab.NetRefused), "connection attempt"))
	}
	return s + seenBy
}

// seenBy qualifies a race's endpoint time: the agent's observation of the
// EndpointSlice, later than the change by the watch's delay, against the
// kernel's own time for the listener: a margin within that delay is no
// measure of which came first.
const seenBy = " (the endpoint's time is when this agent saw the EndpointSlice change, a watch's delay after it)"
