package timeline

import (
	"math"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The lag that matters: when the clients' last request came into the
// container's network namespace while the kernel counted, against the stop
// and against its endpoint's leaving. What sends to a pod (a load
// balancer, kube-proxy, an ingress, a pooled client) follows the
// EndpointSlice later, by its own delay; only the connections show when it
// stopped. One rule here for the race's verdict, the suggested preStop
// sleep and kubectl sigscope top's figure over many stops.

// ArrivalKind is how a client request came.
type ArrivalKind uint8

const (
	ArrivalNone       ArrivalKind = iota
	ArrivalNew                    // a new connection, accepted
	ArrivalData                   // a request on an open connection (a pooled one): its data
	ArrivalRefused                // a connection attempt, refused: nothing listened
	ArrivalAfterClose             // a request on a connection the container had closed, answered with a RST
)

var arrivalNames = [...]string{"", "new_connection", "data", "refused", "after_close"}

func (k ArrivalKind) String() string {
	if int(k) < len(arrivalNames) {
		return arrivalNames[k]
	}
	return ""
}

// dataTie is how much later a connection's last data must be than the last
// accepted connection to be told a request on an open connection: a new
// connection's data time is its handshake's (icsk_ack.lrcvtime), at the
// kernel's tick, which rounds by up to 10 ms (HZ=100).
const dataTie = 10 * time.Millisecond

// Arrival is the last client request that came into the namespace while
// the kernel counted. A probe's never counts (Traffic.Probes).
type Arrival struct {
	At   time.Time
	Kind ArrivalKind
	// Whole: every way a request comes was seen, refused attempts
	// (SeesRefused) and requests on open connections (SeesData); else a
	// later one may have come unseen.
	Whole bool
}

// LastArrival is the last client request the kernel saw come into the
// namespace while it counted: a new connection accepted, a request on an
// open connection (when a connection's data last came, taken at its end),
// an attempt refused, a request after a close. ok is false when the counts
// were not read or none came.
func (t *Traffic) LastArrival() (a Arrival, ok bool) {
	if t == nil || t.Unread != "" {
		return Arrival{}, false
	}
	a.Whole = t.SeesRefused && t.SeesData
	later := func(at time.Time, k ArrivalKind) {
		if !at.IsZero() && at.After(a.At) {
			a.At, a.Kind = at, k
		}
	}
	if t.N(sigvocab.NetAccepted) > 0 {
		later(t.Counts[sigvocab.NetAccepted].Last, ArrivalNew)
	}
	if !t.LastData.IsZero() && (a.At.IsZero() || t.LastData.Sub(a.At) > dataTie) {
		later(t.LastData, ArrivalData)
	}
	if t.N(sigvocab.NetRefused) > 0 {
		later(t.Counts[sigvocab.NetRefused].Last, ArrivalRefused)
	}
	if t.N(sigvocab.NetAfterClose) > 0 {
		later(t.Counts[sigvocab.NetAfterClose].Last, ArrivalAfterClose)
	}
	return a, a.Kind != ArrivalNone
}

// unseenArrivals names what of the requests this kernel does not see.
func (t *Traffic) unseenArrivals() string {
	switch {
	case !t.SeesRefused && !t.SeesData:
		return "refused attempts and requests on open connections"
	case !t.SeesRefused:
		return "refused attempts"
	default:
		return "requests on open connections"
	}
}

// Lag is the last client request against the stop: from the stop's
// beginning (the preStop hook's start when there was one, else the stop
// signal), from the stop signal, and from the pod's endpoint's first
// leaving a Service (the first of not ready, not serving, terminating and
// removed: EndpointChange.First, as this agent saw the EndpointSlices).
type Lag struct {
	Arrival
	AfterBegin time.Duration
	AfterStop  *time.Duration // nil: no stop signal was seen
	AfterLeft  *time.Duration // nil: the endpoint's leaving was not seen
	Service    string         // the Service it left first
	// StillComing: requests came until shortly before the counts were
	// read (within NetLinger): a later one may have come after.
	StillComing bool
	// KubeletDelay is how long after the pod's deletion (as this agent saw
	// it) the stop began: the kubelet's own delay, busy with the pod (a
	// sync still running) or the node. The next stop may begin at once,
	// so a preStop sleep that covers is counted from the deletion. 0 when
	// the deletion was not seen or came after the stop began.
	KubeletDelay time.Duration
}

// begin is when the stop began: the preStop hook's start when there was
// one, else the stop signal; zero when neither was seen.
func (ep *Episode) begin() time.Time {
	begin := ep.StopAt
	if p := ep.PreStop; p != nil && !p.StartAt.IsZero() && (begin.IsZero() || p.StartAt.Before(begin)) {
		begin = p.StartAt
	}
	return begin
}

// endpointLeft is when the pod's endpoint first left a Service, and
// which; zero when that was not seen.
func (ep *Episode) endpointLeft() (left time.Time, svc string) {
	for _, c := range ep.Endpoints {
		if f := c.First(); !f.IsZero() && (left.IsZero() || f.Before(left)) {
			left, svc = f, c.Service
		}
	}
	return left, svc
}

// deletionSeen is when this agent saw the pod's deletion, which each
// endpoint change carries as its lag after it; zero when not known.
func (ep *Episode) deletionSeen() time.Time {
	for _, c := range ep.Endpoints {
		if f := c.First(); !f.IsZero() && c.AfterDeletion != nil {
			return f.Add(-*c.AfterDeletion)
		}
	}
	return time.Time{}
}

// kubeletDelay is Lag.KubeletDelay: from the pod's deletion to the stop's
// beginning, 0 when unknown or negative (another watch's delay).
func (ep *Episode) kubeletDelay() time.Duration {
	del, begin := ep.deletionSeen(), ep.begin()
	if del.IsZero() || begin.IsZero() || !begin.After(del) {
		return 0
	}
	return begin.Sub(del)
}

// Lag measures the last client request against the stop; ok is false when
// none came while the kernel counted, or nothing says when the stop began.
func (ep *Episode) Lag() (l Lag, ok bool) {
	a, ok := ep.Traffic.LastArrival()
	begin := ep.begin()
	if !ok || begin.IsZero() {
		return Lag{}, false
	}
	l = Lag{Arrival: a, AfterBegin: a.At.Sub(begin), StillComing: ep.Traffic.Until.Sub(a.At) < NetLinger, KubeletDelay: ep.kubeletDelay()}
	if !ep.StopAt.IsZero() {
		d := a.At.Sub(ep.StopAt)
		l.AfterStop = &d
	}
	if left, svc := ep.endpointLeft(); !left.IsZero() {
		d := a.At.Sub(left)
		l.AfterLeft, l.Service = &d, svc
	}
	return l, true
}

// CoveringPreStopSleep is the preStop sleep, in whole seconds, that would
// have covered every client request counted: from the stop's beginning to
// the last request (Lag.AfterBegin), plus the kubelet's delay after the
// pod's deletion (Lag.KubeletDelay: what sends to the pod follows the
// deletion, and the next stop's kubelet may not be late), at least 1; an
// existing hook is part of it, not added to it. A server that stops
// accepting at its stop signal then refuses no one, and closes no
// connection a client still sends on. ok is false when no request was
// counted, or nothing says when the stop began.
func (ep *Episode) CoveringPreStopSleep() (secs int, ok bool) {
	l, ok := ep.Lag()
	if !ok {
		return 0, false
	}
	return max(1, int(math.Ceil((l.AfterBegin + l.KubeletDelay).Seconds()))), true
}

// raceState is the endpoint race's verdict, from what the connections
// showed after the application stopped accepting.
type raceState uint8

const (
	raceNone    raceState = iota // not measured: no counts, no endpoint, or the application never stopped accepting
	raceOpen                     // the application did not stop accepting while the kernel counted
	raceWon                      // nothing came after the application stopped accepting
	raceLost                     // client requests came after it
	raceUnknown                  // none seen after, but this kernel cannot see refused attempts
)

// raceCause is the endpoint race decided: against the last sender, not
// the EndpointSlice's time (what sends to the pod follows the slice
// later).
type raceCause struct {
	state    raceState
	left     time.Time // the endpoint's first leaving
	svc      string
	stopped  time.Time // the first listening socket's close
	refused  uint64    // attempts refused after it
	lost     uint64    // requests lost on connections after it (unanswered, after_close)
	lastLate time.Time // the last request after it
}

// raceCause decides the endpoint race: won only if no client request came
// after the application stopped accepting (its first listening socket
// closed); lost if one did (a refused attempt, a request on a connection,
// answered or lost); unknown where none was seen but refused attempts
// cannot be (before Linux 6.10).
func (ep *Episode) raceCause() raceCause {
	t := ep.Traffic
	if t == nil || t.Unread != "" {
		return raceCause{}
	}
	left, svc := ep.endpointLeft()
	if left.IsZero() {
		return raceCause{}
	}
	c := raceCause{left: left, svc: svc}
	lc := t.Counts[sigvocab.NetListenerClosed]
	if lc.N == 0 {
		c.state = raceOpen
		return c
	}
	c.stopped = lc.First
	late := func(n sigvocab.NetCount, k sigvocab.NetKind) uint64 {
		if t.N(k) == 0 || n.Last.Before(c.stopped) {
			return 0
		}
		if n.Last.After(c.lastLate) {
			c.lastLate = n.Last
		}
		return t.N(k)
	}
	c.refused = late(t.Counts[sigvocab.NetRefused], sigvocab.NetRefused)
	c.lost = late(t.Counts[sigvocab.NetUnanswered], sigvocab.NetUnanswered) + late(t.Counts[sigvocab.NetAfterClose], sigvocab.NetAfterClose)
	late(t.Counts[sigvocab.NetAccepted], sigvocab.NetAccepted)
	if t.LastData.After(c.stopped) && t.LastData.After(c.lastLate) {
		c.lastLate = t.LastData
	}
	switch {
	case !c.lastLate.IsZero():
		c.state = raceLost
	case !t.Known(sigvocab.NetRefused):
		c.state = raceUnknown
	default:
		c.state = raceWon
	}
	return c
}
