package timeline

import (
	"fmt"
	"strings"
	"time"
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

// EndpointRace says how the stop's two timelines met: when the
// application stopped accepting (its first listening socket closed, from
// the kernel's count) against when its endpoint first left a Service
// (from the API server, as the agent saw it), and the verdict, which is
// against the last sender: won only if no client request came after the
// application stopped accepting (raceCause). "" when either was not
// measured.
func (ep *Episode) EndpointRace() string {
	if ep.race != "" {
		return ep.race
	}
	return ep.raceText()
}

// raceText is the race, from the finished episode's fields.
func (ep *Episode) raceText() string {
	c := ep.raceCause()
	at := func(x time.Time) string {
		if ep.StopAt.IsZero() {
			return x.UTC().Format(time.RFC3339Nano)
		}
		return fmt.Sprintf("%+.3fs from %s", x.Sub(ep.StopAt).Seconds(), ep.StopSignal)
	}
	left := fmt.Sprintf("the endpoint left %s (%s)", c.svc, at(c.left))
	var s string
	switch c.state {
	case raceNone:
		return ""
	case raceOpen:
		return fmt.Sprintf("the endpoint left %s at %s; the application did not stop accepting while the kernel counted", c.svc, at(c.left))
	case raceWon:
		s = fmt.Sprintf("race won: no client request came after the application stopped accepting (%s); %s", at(c.stopped), left)
	case raceUnknown:
		s = fmt.Sprintf("race unknown: no client request was seen after the application stopped accepting (%s), but this kernel cannot see refused attempts (Linux 6.10 and later do); %s", at(c.stopped), left)
	case raceLost:
		var what []string
		if c.refused > 0 {
			what = append(what, countWas(c.refused, "connection attempt")+" refused")
		}
		if c.lost > 0 {
			what = append(what, count(c.lost, "request")+" lost on connections it closed")
		}
		s = fmt.Sprintf("race lost: clients still sent after the application stopped accepting (%s), the last at %s", at(c.stopped), at(c.lastLate))
		if len(what) > 0 {
			s += " (" + strings.Join(what, ", ") + ")"
		}
		s += "; " + left
	}
	if !c.stopped.IsZero() && c.stopped.Before(c.left) {
		s += fmt.Sprintf(", %.3fs after the application stopped accepting", c.left.Sub(c.stopped).Seconds())
	}
	return s + seenBy
}

// LagText says when the last client request came, against the stop and
// the endpoint's leaving, and for a pod the preStop sleep that would have
// covered it: "+2.104s from SIGTERM (a new connection), 1.900s after the
// endpoint left shop/web; a preStop sleep of 3 s would have covered it".
// "" when none was counted.
func (ep *Episode) LagText() string {
	l, ok := ep.Lag()
	if !ok {
		return ""
	}
	kind := map[ArrivalKind]string{ArrivalNew: "a new connection", ArrivalData: "a request on an open connection",
		ArrivalRefused: "a refused attempt", ArrivalAfterClose: "a request on a connection it had closed"}[l.Kind]
	var s string
	if l.AfterStop != nil {
		s = fmt.Sprintf("%+.3fs from %s (%s)", l.AfterStop.Seconds(), ep.StopSignal, kind)
	} else {
		s = fmt.Sprintf("%.3fs after the preStop hook began (%s)", l.AfterBegin.Seconds(), kind)
	}
	if l.AfterLeft != nil {
		if *l.AfterLeft >= 0 {
			s += fmt.Sprintf(", %.3fs after the endpoint left %s", l.AfterLeft.Seconds(), l.Service)
		} else {
			s += fmt.Sprintf(", %.3fs before the endpoint left %s", -l.AfterLeft.Seconds(), l.Service)
		}
	}
	if !l.Whole {
		s += ", of the requests this kernel sees (" + ep.Traffic.unseenArrivals() + " not)"
	}
	if l.StillComing {
		s += "; requests were still coming when the counts were read"
	}
	if secs, ok := ep.CoveringPreStopSleep(); ok && ep.Container.Pod != "" {
		least := ""
		if l.StillComing || !l.Whole {
			least = "at least " // a later request, or one this kernel does not see, may need more
		}
		s += fmt.Sprintf("; a preStop sleep of %s%d s%s would have covered it", least, secs, kubeletDelayWords(l.KubeletDelay))
	}
	return s
}

// kubeletDelayWords says, after a covering figure, that it counts the
// kubelet's delay after the pod's deletion, when there was one to speak
// of (Lag.KubeletDelay): a clause set off by commas; "" otherwise.
func kubeletDelayWords(d time.Duration) string {
	if d < 100*time.Millisecond {
		return ""
	}
	return fmt.Sprintf(", counted from the pod's deletion (this stop began %.1fs after it, and the next may begin at once),", d.Seconds())
}

// seenBy qualifies a race's endpoint time: the agent's observation of the
// EndpointSlice, later than the change by the watch's delay, against the
// kernel's own time for the listener: a margin within that delay is no
// measure of which came first.
const seenBy = " (the endpoint's time is when this agent saw the EndpointSlice change, a watch's delay after it)"
