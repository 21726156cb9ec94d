package timeline

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Traffic is what a stop cost the clients of the container's network
// namespace: the fates of its inbound TCP connections that the kernel
// counted from the first stop signal that came into the namespace from
// outside (Since) until user space read the counts (Until), with a verdict
// and a hint the words wrote from them. The containers of a pod share one
// namespace: their episodes show the same counts. The traffic never
// changes the episode's outcome, which is the kernel's verdict on the
// signals; docs/timelines.md, "What the stop cost its clients".
type Traffic struct {
	NetNS        uint32    // inode of the network namespace (/proc/PID/ns/net)
	Since, Until time.Time // zero when the counts were not read
	// Counts is what the kernel counted of each kind; all zero when the
	// counts were not read, Counts[NetRefused] when it cannot tell
	// (SeesRefused false).
	Counts      [sigvocab.NumNetKinds]sigvocab.NetCount
	SeesRefused bool // the kernel reports every RST it sends (Linux 6.10 and later): refused attempts, requests after a close
	// SeesLastSpeaker: the counts tell who spoke last on each connection
	// (sigvocab.Connections.SeesLastSpeaker); false in an episode from a
	// recording or a journal line made before, whose closed and cut keep
	// the wider meaning they had then.
	SeesLastSpeaker bool
	// Unread says why the counts are missing ("the trace ended", "no counts
	// arrived in time"); "" when they were read.
	Unread  string
	Verdict string // what the clients suffered, in a sentence
	Hint    string // how to spare them, from what was measured; "" when nothing was lost
	// Own is the part of Counts whose sockets the container's own
	// processes made (by its main process's cgroup v2; an accepted
	// connection is its listener's), and Others the part of other cgroups'
	// sockets in the namespace (a pod's sidecar); nil when that cannot be
	// told, and OwnUnknown says why. Refused attempts have no socket: they
	// are the namespace's alone.
	Own, Others *[sigvocab.NumNetKinds]uint64
	OwnUnknown  string
	// Probes are the kubelet's probes' connections, by the same kinds,
	// counted apart and in none of Counts (the kubelet's processes make
	// them: sigvocab.Connections.Probes); nil when they were not told
	// apart (no kubelet found, an older count), and then Counts has them.
	Probes *[sigvocab.NumNetKinds]uint64
	// SeesData: the kernel timed the clients' data on their connections;
	// LastData is when a client's data last came on one (a request on a
	// pooled connection, a new connection's handshake), zero when none
	// came (sigvocab.Connections.LastData). LastArrival reads them.
	SeesData bool
	LastData time.Time
	// Peers is who was hurt: the clients that lost requests, by address
	// (peers.go); nil when the kernel kept none (an older count).
	Peers *Peers
}

// Split reports whether the counts are shown split by container: known,
// and the namespace shared (a pod's, or other containers' sockets in it).
func (t *Traffic) Split(pod bool) bool {
	if t.Own == nil || t.Unread != "" {
		return false
	}
	if pod {
		return true
	}
	for _, n := range t.Others {
		if n > 0 {
			return true
		}
	}
	return false
}

// Known reports whether the count of kind k is known: read, and for
// refused attempts, reported by this kernel.
func (t *Traffic) Known(k sigvocab.NetKind) bool {
	return t.Unread == "" && (k != sigvocab.NetRefused && k != sigvocab.NetAfterClose || t.SeesRefused) && (!sigvocab.LastSpeakerKind(k) || t.SeesLastSpeaker)
}

// N is the count of kind k; 0 when it is not known.
func (t *Traffic) N(k sigvocab.NetKind) uint64 {
	if !t.Known(k) {
		return 0
	}
	return t.Counts[k].N
}

// Shared reports whether the container shares its network namespace with
// the runtime (the node's): nothing was counted, and nothing could be.
func (t *Traffic) Shared() bool { return t.Unread == unreadShared.words() }

// Lost counts the requests the stop cost the clients, of those known, a
// connection at most one: attempts refused, connections the application
// reset with a request unread, requests read and never answered
// (unanswered), requests sent after the application closed the connection
// (after_close), and connections cut with a request in them when their
// process died. A connection the client reset is not lost (the client
// chose it), nor an idle one closed (closed, idle_at_exit); one where who
// spoke last cannot be told is MaybeLost. The one rule of "lost".
func (t *Traffic) Lost() uint64 {
	return t.N(sigvocab.NetRefused) + t.N(sigvocab.NetResetSent) + t.N(sigvocab.NetCut) +
		t.N(sigvocab.NetUnanswered) + t.N(sigvocab.NetAfterClose)
}

// Watch identifies the kernel's count a Traffic was read from: one stop of
// one network namespace. A pod's containers share the namespace, and each
// of their episodes carries the count, from the same read or (a container
// whose stop went on past the others') from a later one, which includes
// the earlier read's.
type Watch struct {
	NetNS        uint32
	Since, Until time.Time
}

// Watch is the count t was read from.
func (t *Traffic) Watch() Watch { return Watch{NetNS: t.NetNS, Since: t.Since, Until: t.Until} }

// Same reports whether w and o are one count: the same namespace, watched
// from the same stop signal. Since is compared to the millisecond, as each
// read turns the kernel's boot-time beginning into wall-clock time anew;
// one watch of a namespace ends before the next begins, seconds apart. A
// count without a beginning is the same only at the same read.
func (w Watch) Same(o Watch) bool {
	if w.NetNS != o.NetNS {
		return false
	}
	if w.Since.IsZero() || o.Since.IsZero() {
		return w.Since.IsZero() && o.Since.IsZero() && w.Until.Equal(o.Until)
	}
	d := w.Since.Sub(o.Since)
	return d < time.Millisecond && d > -time.Millisecond
}

// MaybeLost counts the connections that may have lost a request: closed
// right after a short write (a TLS close_notify, an HTTP/2 GOAWAY) or with
// a write in flight at the death, where who spoke last cannot be told.
func (t *Traffic) MaybeLost() uint64 { return t.N(sigvocab.NetUndecided) }

// OwnCalls are the container's own calls that failed during its stop:
// connect()s refused (by a peer elsewhere, or on its own namespace's
// localhost: a sidecar that stopped first) and connections its peer reset,
// as the socket cgroup split tells them (Own); never a client's loss. ok is
// false where the split cannot tell.
func (t *Traffic) OwnCalls() (refused, reset uint64, ok bool) {
	if t.Own == nil || !t.SeesLastSpeaker {
		return 0, 0, false
	}
	return t.Own[sigvocab.NetOutRefused] + t.Own[sigvocab.NetSelfRefused], t.Own[sigvocab.NetOutReset], true
}

// keepAliveRace counts the requests lost because the application closed
// connections its clients were still sending on.
func (t *Traffic) keepAliveRace() uint64 {
	return t.N(sigvocab.NetUnanswered) + t.N(sigvocab.NetAfterClose)
}

// refusedAfterClose reports whether connection attempts were refused
// after a listening socket of the namespace closed (the last refused at or
// after the first close): what ties the refused attempts to the stop.
func (t *Traffic) refusedAfterClose() bool {
	r, lc := t.Counts[sigvocab.NetRefused], t.Counts[sigvocab.NetListenerClosed]
	return t.N(sigvocab.NetRefused) > 0 && lc.N > 0 && !r.Last.Before(lc.First)
}

// CoveringDelay is how many whole seconds the stop signal would have had to
// come later for the stop to refuse no connection attempt that was
// counted: from the stop signal to the last refused attempt, plus the
// kubelet's delay after the pod's deletion (Lag.KubeletDelay), at least 1
// (a preStop sleep of that long on Kubernetes; keeping serving that long
// elsewhere). ok is false when no attempt was refused after a listener of
// the namespace closed, or nothing says when the stop signal came: then no
// delay is measured. The traffic hint's figure.
func (ep *Episode) CoveringDelay() (secs int, ok bool) {
	t := ep.Traffic
	if t == nil || ep.StopAt.IsZero() || !t.refusedAfterClose() {
		return 0, false
	}
	d := t.Counts[sigvocab.NetRefused].Last.Sub(ep.StopAt) + ep.kubeletDelay()
	return max(1, int(math.Ceil(d.Seconds()))), true
}

// CoveringQuorum is how many stops must have measured a delay before the
// figure over them is a high percentile rather than the longest.
const CoveringQuorum = 20

// CoveringOverStops is the one figure of a delay over many stops (the
// preStop sleep that would have covered a workload's stops: kubectl
// sigscope top's, a rollout's), from each stop's (CoveringPreStopSleep):
// the longest while fewer than CoveringQuorum stops measured one, the 95th
// percentile (nearest rank) from then on, so that one outlier in a large
// sample does not set the advice and a small one is not guessed at. how
// says which, in words ("the longest of 3 stops"); ok is false for none.
func CoveringOverStops(secs []int) (figure int, how string, ok bool) {
	if len(secs) == 0 {
		return 0, "", false
	}
	s := slices.Clone(secs)
	slices.Sort(s)
	if len(s) < CoveringQuorum {
		return s[len(s)-1], fmt.Sprintf("the longest of %s", count(uint64(len(s)), "stop")), true
	}
	rank := int(math.Ceil(0.95*float64(len(s)))) - 1
	return s[rank], fmt.Sprintf("the 95th percentile of %d stops", len(s)), true
}
