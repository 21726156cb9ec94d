package timeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// What a stop cost its clients (Episode.Traffic): the verdict, read at a
// glance, and a hint that names the fix from what the kernel measured,
// never from a guess (trafficCause).

// words says why an episode's counts are missing (Traffic.Unread); ""
// when they were read.
func (r unreadReason) words() string {
	switch r {
	case unreadEnded:
		return "the trace ended"
	case unreadLate:
		return "no counts arrived in time"
	case unreadShared:
		return "the container shares its network namespace with the runtime that stopped it (the node's: --network host, " +
			"hostNetwork), so its connections cannot be told from the node's and none were counted"
	}
	return ""
}

// words says why a container's own connections cannot be told from its
// namespace's others (Traffic.OwnUnknown); "" when they can.
func (r ownReason) words() string {
	switch r {
	case ownNoSocketCgroup:
		return "the counts carry no split by socket cgroup (the kernel keeps none)"
	case ownRootCgroup:
		return "the container's processes are in the root cgroup v2 (a cgroup v1 node), so a socket's container cannot be told"
	}
	return ""
}

const refusedUnknown = "refused attempts unknown: this kernel (before Linux 6.10) does not report them"

// resetsUnknown says what a kernel that does not report every RST it sends
// leaves unknown: refused attempts, and requests sent after a close where
// the counts tell who spoke last.
func resetsUnknown(t *Traffic) string {
	if t.SeesLastSpeaker {
		return "refused attempts and requests sent after a close unknown: this kernel (before Linux 6.10) does not report them"
	}
	return refusedUnknown
}

// undecidedWhy is why a connection counts as possibly lost (NetUndecided).
const undecidedWhy = "closed right after a short write (a TLS close_notify or an HTTP/2 GOAWAY perhaps), with a write in flight when the process died, or with the client's last data crossing the answer (a request's body sent behind its headers, a request sent at once): who spoke last cannot be told"

// lostUnit is what Lost counts: requests where the kernel tells who spoke
// last, connections in counts made before it did.
func lostUnit(t *Traffic) string {
	if t.SeesLastSpeaker {
		return "request"
	}
	return "connection"
}

// trafficVerdict says what the clients suffered, and what the kubelet's
// probes met, apart.
func trafficVerdict(t *Traffic, c trafficCause) string {
	v := clientsVerdict(t, c)
	if c.state == trafficLost || c.state == trafficMaybe || c.state == trafficUnhurt {
		v += probesClause(t) + ownCallsClause(t)
	}
	return v
}

// ownCallsClause is what the container's own calls met during its stop,
// apart from its clients: "" when none failed, or whose they were cannot be
// told.
func ownCallsClause(t *Traffic) string {
	refused, reset, ok := t.OwnCalls()
	if !ok || refused+reset == 0 {
		return ""
	}
	var kinds []string
	if refused > 0 {
		kinds = append(kinds, fmt.Sprintf("%d refused", refused))
	}
	if reset > 0 {
		kinds = append(kinds, fmt.Sprintf("%d reset by the peer", reset))
	}
	return "; its own calls failed, apart from its clients: " + strings.Join(kinds, ", ") + " (a peer it called, a sidecar perhaps, had stopped first)"
}

// probesClause is what the kubelet's probes met, counted apart: "" when
// none were, or they were not told apart.
func probesClause(t *Traffic) string {
	if t.Probes == nil {
		return ""
	}
	var kinds []string
	for k, n := range t.Probes {
		if n > 0 && sigvocab.NetKind(k) != sigvocab.NetListenerClosed {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, strings.ReplaceAll(sigvocab.NetKind(k).String(), "_", " ")))
		}
	}
	if len(kinds) == 0 {
		return ""
	}
	return "; the kubelet's probes, counted apart: " + strings.Join(kinds, ", ")
}

// clientsVerdict says what the clients suffered.
func clientsVerdict(t *Traffic, c trafficCause) string {
	switch c.state {
	case trafficUncounted:
		return "not counted: " + t.Unread
	case trafficUnread:
		return "not known: the connection counts were not read (" + t.Unread + ")"
	case trafficLost:
		var kinds []string
		if n := t.N(sigvocab.NetRefused); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d refused", n))
		}
		if n := t.N(sigvocab.NetResetSent); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d reset by the application", n))
		}
		if n := t.N(sigvocab.NetUnanswered); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d read and never answered", n))
		}
		if n := t.N(sigvocab.NetAfterClose); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d sent after the close", n))
		}
		if n := t.N(sigvocab.NetCut); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d cut", n))
		}
		v := count(t.Lost(), lostUnit(t)) + " lost: " + strings.Join(kinds, ", ")
		if c.keepAlive {
			v += "; the keep-alive race: the application closed connections its clients were still sending requests on"
		}
		if n := t.MaybeLost(); n > 0 {
			v += fmt.Sprintf("; %s possibly more (%s)", count(n, "connection"), undecidedWhy)
		}
		if !t.SeesRefused {
			v += "; " + resetsUnknown(t)
		}
		return v
	case trafficMaybe:
		v := fmt.Sprintf("possibly %s lost: %s", count(t.MaybeLost(), "request"), undecidedWhy)
		if !t.SeesRefused {
			v += "; " + resetsUnknown(t)
		}
		return v
	}
	accepted, closed, reset := t.N(sigvocab.NetAccepted), t.N(sigvocab.NetClosed), t.N(sigvocab.NetResetReceived)
	var v string
	switch {
	case accepted == 0 && closed == 0 && reset == 0:
		v = "no connection was accepted or ended after the stop began"
	case accepted == 0:
		v = "no connection was accepted after the stop began, and every one that ended was closed cleanly"
	default:
		v = count(accepted, "connection") + " accepted after the stop began, all closed cleanly"
	}
	if reset > 0 {
		v += fmt.Sprintf(" (%d reset by the client)", reset)
	}
	if n := t.N(sigvocab.NetIdleAtExit); n > 0 {
		v += fmt.Sprintf("; %s open but idle when the process ended, and not sent on after", count(n, "keep-alive connection"))
	}
	if !t.SeesRefused {
		return "no connection lost that this kernel reports: " + v + "; " + resetsUnknown(t)
	}
	return "no client was hurt: " + v
}

// trafficHint names the fix for each kind of loss measured; "" when
// nothing was lost, or the counts were not read.
func (ep *episode) trafficHint(c trafficCause) string {
	if c.state != trafficLost {
		return ""
	}
	t := ep.Traffic
	var parts []string
	if c.refused != refusedNone {
		parts = append(parts, ep.refusedHint(c))
	}
	if c.keepAlive {
		parts = append(parts, ep.keepAliveHint())
	}
	if c.cut != cutNone {
		parts = append(parts, ep.cutHint(c.cut))
	}
	if n := t.N(sigvocab.NetResetSent); n > 0 {
		parts = append(parts, fmt.Sprintf("The application aborted %s with a reset while it ran: drain keep-alive connections after their in-flight request, and let queued connections be accepted before closing the listener.",
			count(n, "connection")))
	}
	return strings.Join(parts, " ")
}

// refusedHint: clients still connected after the application stopped
// listening. The delay to give them is read from the last refused attempt,
// counted from the stop signal.
func (ep *episode) refusedHint(c trafficCause) string {
	t := ep.Traffic
	r := t.Counts[sigvocab.NetRefused]
	switch c.refused {
	case refusedUntied:
		// Not tied to the stop by what was counted: a port nothing
		// listened on, or a listener that closed before the counting
		// began (a preStop hook that stops the server). No fix.
		return fmt.Sprintf("%s refused before any listening socket of the namespace closed while the kernel counted: they were for a port nothing listened on then, or one closed before the counting began (a preStop hook that stops the server); what was counted does not tell which.",
			countWas(r.N, "connection attempt"))
	case refusedUnstopped:
		return fmt.Sprintf("%s refused after the application stopped listening, the last %.1fs after the kernel began counting: clients were still sent to it. Stop it with its stop signal first (docker stop, a normal pod deletion), so that it can keep serving until they stop coming.",
			countWas(r.N, "connection attempt"), r.Last.Sub(t.Since).Seconds())
	}
	lag, secs := r.Last.Sub(ep.StopAt), c.covering
	least, still := "", ""
	if c.stillComing {
		least, still = "at least ", ", and they were still coming when the counts were read"
	}
	h := fmt.Sprintf("%s refused after the application stopped listening, the last %.1fs after %s%s: clients were still sent to it.",
		countWas(r.N, "connection attempt"), lag.Seconds(), ep.StopSignal, still)
	switch {
	case ep.fixFor() != FixForKubernetes:
		return h + fmt.Sprintf(" Keep serving after %s until the load balancer has stopped sending to it (%s%d s here), then close the listener; keep the grace period (%s) above that plus the shutdown.",
			ep.StopSignal, least, secs, ep.timeoutKnob())
	case ep.PreStop != nil:
		return h + fmt.Sprintf(" Keep accepting after the stop begins until the endpoint is removed: lengthen the preStop hook (%s) by %s%d s%s, which delays %s that long, and keep terminationGracePeriodSeconds above the hook plus the shutdown.",
			ep.PreStop.Kind, least, secs, strings.TrimSuffix(kubeletDelayWords(ep.kubeletDelay()), ","), ep.StopSignal)
	}
	return h + fmt.Sprintf(" Keep accepting after the stop begins until the endpoint is removed: a preStop sleep of %s%d s (lifecycle.preStop)%s delays %s that long; keep terminationGracePeriodSeconds above the sleep plus the shutdown.",
		least, secs, kubeletDelayWords(ep.kubeletDelay()), ep.StopSignal)
}

// keepAliveHint: requests lost to the keep-alive race, with the numbers
// measured. The fix is the same whatever closed the connections: drain
// them, do not close them under the clients.
func (ep *episode) keepAliveHint() string {
	t := ep.Traffic
	var how []string
	if n := t.N(sigvocab.NetUnanswered); n > 0 {
		how = append(how, fmt.Sprintf("%d read and never answered", n))
	}
	if n := t.N(sigvocab.NetAfterClose); n > 0 {
		how = append(how, fmt.Sprintf("%d sent after the close", n))
	}
	return fmt.Sprintf("The application closed keep-alive connections while their clients were still sending requests on them (%s): a proxy turns each into a 502. Drain them instead: answer the next request on each with `Connection: close` (HTTP/2: send GOAWAY) and keep serving until the clients have moved, rather than closing idle connections under them.",
		strings.Join(how, ", "))
}

// cutHint: requests lost with the process that held their connections. The
// fix depends on how it died.
func (ep *episode) cutHint(how cutKind) string {
	n := countWas(ep.Traffic.N(sigvocab.NetCut), "connection")
	who := ep.who()
	switch how {
	case cutByOOM:
		return fmt.Sprintf("%s still open when the OOM kill ended its process: a request in flight on any of them was lost with it, and the memory fix above spares them too.", n)
	case cutKilledUnstopped:
		return fmt.Sprintf("%s still open at the SIGKILL, which came with no stop signal before it: a request in flight on any of them was lost. Stop it with its stop signal first (docker stop, a normal pod deletion), so that it can finish them.", n)
	case cutKilledIgnored:
		return fmt.Sprintf("%s still open at the SIGKILL: %s never acted on %s (the hint above), so nothing finished a request in flight on them. Once it does, have it close its listener and finish in-flight requests within the grace period (%s).",
			n, who, ep.StopSignal, ep.timeoutKnob())
	case cutKilled:
		after := ""
		if d, ok := ep.KillAfter(); ok {
			after = fmt.Sprintf(", %.1fs after %s", d.Seconds(), ep.StopSignal)
		}
		return fmt.Sprintf("%s still open at the SIGKILL%s: requests were still in flight. Finish in-flight requests within the grace period, or lengthen it (%s).",
			n, after, ep.timeoutKnob())
	case cutEndedAfterStop:
		return fmt.Sprintf("%s still open when %s ended after %s: a request in flight on any of them was lost. On %s, close the listener, finish in-flight requests, then exit.",
			n, who, ep.StopSignal, ep.StopSignal)
	}
	return fmt.Sprintf("%s still open when their process ended on its own: a request in flight on any of them was lost.", n)
}

// trafficCounts lists a traffic's counts for the text output, its times
// as offsets from start: "network namespace 4026532300, counted +0.000s to
// +4.210s: 12 accepted, 12 closed, 0 reset by the application, 1 reset by
// the client, 0 cut, 3 refused; listener closed at +0.512s".
// A pod's containers share its network namespace: what is counted there is
// the pod's, and it says so.
func trafficCounts(t *Traffic, start time.Time, pod bool) string {
	s := fmt.Sprintf("network namespace %d", t.NetNS)
	if t.Shared() {
		return s + ", the node's"
	}
	if pod {
		s = fmt.Sprintf("the pod's network namespace %d, shared by its containers", t.NetNS)
	}
	if t.Unread != "" {
		return s
	}
	s += fmt.Sprintf(", counted %s to %s: %d accepted, %d closed, %d reset by the application, %d reset by the client, %d cut, ",
		offset(t.Since.Sub(start)), offset(t.Until.Sub(start)), t.N(sigvocab.NetAccepted), t.N(sigvocab.NetClosed),
		t.N(sigvocab.NetResetSent), t.N(sigvocab.NetResetReceived), t.N(sigvocab.NetCut))
	if t.Known(sigvocab.NetRefused) {
		s += fmt.Sprintf("%d refused", t.N(sigvocab.NetRefused))
	} else {
		s += "refused unknown"
	}
	if t.SeesLastSpeaker {
		s += fmt.Sprintf(", %d read and never answered, %d sent after the close, %d idle at the exit, %d undecided",
			t.N(sigvocab.NetUnanswered), t.N(sigvocab.NetAfterClose), t.N(sigvocab.NetIdleAtExit), t.N(sigvocab.NetUndecided))
	}
	if lc := t.Counts[sigvocab.NetListenerClosed]; lc.N > 0 {
		s += "; listener closed at " + offset(lc.First.Sub(start))
	}
	switch {
	case t.Split(pod):
		o := t.Own
		s += fmt.Sprintf("; this container's own sockets: %d accepted, %d closed, %d reset by the application, %d reset by the client, %d cut",
			o[sigvocab.NetAccepted], o[sigvocab.NetClosed], o[sigvocab.NetResetSent], o[sigvocab.NetResetReceived], o[sigvocab.NetCut])
	case pod && t.OwnUnknown != "":
		s += "; whose each connection was cannot be told: " + t.OwnUnknown
	}
	return s
}

// PeersText says who was hurt: "10.0.0.5 (pod shop/ingress-7c9,
// Deployment/ingress): 12 lost (10 refused, 2 read and never answered);
// 4 more clients: 6 lost". "" when the kernel kept no peers or none lost.
func (t *Traffic) PeersText() string {
	ps := t.Peers
	if ps == nil || len(ps.Top) == 0 && ps.Unattributed == 0 {
		return ""
	}
	var parts []string
	for _, p := range ps.Top {
		s := fmt.Sprintf("%s: %d lost", peerWho(&p), p.Lost)
		var kinds []string
		for _, k := range lostKinds {
			if n := p.Kinds[k]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%d %s", n, peerKindWords[k]))
			}
		}
		if len(kinds) > 1 {
			s += " (" + strings.Join(kinds, ", ") + ")"
		} else if len(kinds) == 1 {
			s += " (" + strings.SplitN(kinds[0], " ", 2)[1] + ")"
		}
		if p.MaybeLost > 0 {
			s += fmt.Sprintf(", %d possibly", p.MaybeLost)
		}
		parts = append(parts, s)
	}
	if ps.More > 0 {
		more := "1 more client"
		if ps.More > 1 {
			more = fmt.Sprintf("%d more clients", ps.More)
		}
		parts = append(parts, fmt.Sprintf("%s: %d lost", more, ps.MoreLost))
	}
	if ps.Unattributed > 0 {
		parts = append(parts, fmt.Sprintf("%d lost by clients the kernel's table (4096) did not keep", ps.Unattributed))
	}
	return strings.Join(parts, "; ")
}

var peerKindWords = map[sigvocab.NetKind]string{sigvocab.NetRefused: "refused", sigvocab.NetResetSent: "reset by the application",
	sigvocab.NetCut: "cut", sigvocab.NetUnanswered: "read and never answered", sigvocab.NetAfterClose: "sent after the close"}

// peerWho names a peer: its address and what the agent (or the kubectl
// plugin) knew of it.
func peerWho(p *Peer) string {
	switch p.Who.Kind {
	case PeerNamespace:
		if p.Addr.IsValid() {
			return p.Addr.String() + " (the container's own network namespace: a sidecar, or a process beside it)"
		}
		return "the pod's own namespace (a sidecar's calls for its clients)"
	case PeerPod:
		s := p.Addr.String() + " (pod " + p.Who.Namespace + "/" + p.Who.Name
		if p.Who.Workload != "" {
			s += ", " + p.Who.Workload
		}
		return s + ")"
	case PeerNode:
		// Named, it may be another node than the episode's: the kubectl
		// plugin names the nodes of the cluster.
		s := p.Addr.String() + " (this node"
		if p.Who.Name != "" {
			s = p.Addr.String() + " (node " + p.Who.Name
		}
		return s + ": a process on it, a host-network pod, or traffic kube-proxy masqueraded)"
	}
	return p.Addr.String()
}
