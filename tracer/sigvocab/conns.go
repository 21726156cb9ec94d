package sigvocab

import (
	"net/netip"
	"time"
)

// NetKind is one fate of a stopping container's TCP connections that the
// kernel counts (enum net_kind in bpf/sigscope.h, value for value). An
// inbound connection is counted once, when it ends on the container's
// side, by who spoke last on it; a request that comes on it after the
// container closed it moves it to NetAfterClose. Kinds are added, never
// renumbered or renamed: the journal, the API and the metrics name them.
type NetKind uint8

const (
	NetAccepted       NetKind = 0  // a handshake completed on one of the namespace's listening sockets: a client still routed to it
	NetClosed         NetKind = 1  // closed with a FIN, its process alive, after the container spoke last (an answer, an idle keep-alive connection): nothing lost. Before NetUnanswered existed, every FIN close
	NetResetSent      NetKind = 2  // aborted with a RST, its process alive: a request unread (abort on close)
	NetResetReceived  NetKind = 3  // reset by the client: its choice
	NetCut            NetKind = 4  // open at its process's death with a request in it, unread or read and unanswered. Before NetIdleAtExit existed, every connection open at the death
	NetRefused        NetKind = 5  // a connection attempt answered with a RST: nothing listened (Linux 6.10 and later)
	NetListenerClosed NetKind = 6  // a listening socket closed: the application stopped accepting
	NetUnanswered     NetKind = 7  // closed with a FIN, its process alive, after the client spoke last: a request read and never answered (the keep-alive race)
	NetAfterClose     NetKind = 8  // a request that came after the container closed the connection, answered with a RST (the keep-alive race)
	NetIdleAtExit     NetKind = 9  // open at its process's death but idle (the container had spoken last, all of it acknowledged): nothing lost
	NetUndecided      NetKind = 10 // who spoke last cannot be told (a short write right before a FIN: a TLS close_notify, an HTTP/2 GOAWAY; a write in flight at the death): possibly lost
	// The namespace's own calls (outbound connections), not its clients'.
	NetOutRefused  NetKind = 11 // a connect() of the namespace refused by a peer elsewhere
	NetOutReset    NetKind = 12 // a connection the namespace opened, reset by its peer
	NetSelfRefused NetKind = 13 // a connect() of the namespace refused by the namespace itself (localhost): not in NetRefused
)

var netKindNames = [...]string{
	NetAccepted:       "accepted",
	NetClosed:         "closed",
	NetResetSent:      "reset_sent",
	NetResetReceived:  "reset_received",
	NetCut:            "cut",
	NetRefused:        "refused",
	NetListenerClosed: "listener_closed",
	NetUnanswered:     "unanswered",
	NetAfterClose:     "after_close",
	NetIdleAtExit:     "idle_at_exit",
	NetUndecided:      "undecided",
	NetOutRefused:     "out_refused",
	NetOutReset:       "out_reset",
	NetSelfRefused:    "self_refused",
}

// NumNetKinds is the number of net kinds: every NetKind below it is one.
const NumNetKinds = len(netKindNames)

// NetKindOf is the kind named name (NetKind.String); false for none.
func NetKindOf(name string) (NetKind, bool) {
	for k, n := range netKindNames {
		if n == name {
			return NetKind(k), true
		}
	}
	return 0, false
}

func (k NetKind) String() string {
	if int(k) < NumNetKinds {
		return netKindNames[k]
	}
	return "unknown"
}

// LastSpeakerKind reports whether k is one of the kinds that only a count
// that tells who spoke last has (Connections.SeesLastSpeaker): the kinds
// added with it, the namespace's own calls among them.
func LastSpeakerKind(k NetKind) bool { return k >= NetUnanswered && int(k) < NumNetKinds }

// OutboundKind reports whether k counts the namespace's own calls, not its
// clients' connections.
func OutboundKind(k NetKind) bool { return k >= NetOutRefused && k <= NetSelfRefused }

// NetCount is what the kernel counted of one kind: how many, and the first
// and last (zero when N is 0).
type NetCount struct {
	N           uint64
	First, Last time.Time
}

// Connections is what the kernel counted of one network namespace's TCP
// connections from the first stop signal that came into it (Since) until
// user space read the count (the net event's time). IPv4 and IPv6.
type Connections struct {
	Since  time.Time
	Counts [NumNetKinds]NetCount
	// SeesRefused is whether this kernel reports every RST it sends
	// (Linux 6.10 and later): refused attempts (a SYN answered with a RST
	// because nothing listened) and the RST of a timewait socket that
	// answers a request after a close. Without it Counts[NetRefused] and
	// Counts[NetAfterClose] are unknown, not zero.
	SeesRefused bool
	// SeesLastSpeaker is whether the counts tell who spoke last on a
	// connection: NetUnanswered, NetAfterClose, NetIdleAtExit and
	// NetUndecided are counted, and NetClosed and NetCut hold only what
	// their comments say. Every tracer since those kinds does; a recording
	// made before them has it false, and its NetClosed counts every FIN
	// close and its NetCut every connection open at the death.
	SeesLastSpeaker bool
	// SeesProbes is whether the probers' connections (the kubelet's
	// probes: the tracer was told its processes) are counted apart, in
	// Probes, by the same kinds, and are in none of Counts.
	SeesProbes bool
	Probes     [NumNetKinds]uint64
	// SeesData is whether the kernel timed the clients' data (its tick
	// was known): LastData is when a client's data last arrived on an
	// inbound connection that ended (a request on a pooled connection, or
	// a new connection's first), at the kernel tick's resolution, zero
	// when none did after Since; a probe's never counts.
	SeesData bool
	LastData time.Time
	// SeesPeers is whether the kernel kept who lost requests: Peers are
	// the clients that lost or may have lost one, by address (the lost
	// kinds and NetUndecided only), sorted by address; an LRU of 4096
	// keeps them, so their sum may fall short of Counts on a stop with
	// more (a probe's never).
	SeesPeers bool
	Peers     []PeerCounts
	// SeesCgroups is whether the kernel records each socket's cgroup v2,
	// so that ByCgroup splits the counts.
	SeesCgroups bool
	// ByCgroup splits the counts by the cgroup v2 of the process that made
	// each socket (an accepted connection is its listener's): the
	// containers of a pod share the namespace, not a cgroup. Sorted by
	// cgroup; refused attempts (no socket) are never here, and sockets of
	// the root cgroup (every process of a cgroup v1 node) neither.
	ByCgroup []CgroupCounts
}

// PeerCounts is one client's part of a stop's lost connections, by kind.
type PeerCounts struct {
	Addr netip.Addr
	N    [NumNetKinds]uint64
}

// numKinds is how many kinds the counts have: the kinds that tell who
// spoke last come last, and a recording made before them has none.
func (c *Connections) numKinds() int {
	if c.SeesLastSpeaker {
		return NumNetKinds
	}
	return int(NetUnanswered)
}

// CgroupCounts is the part of a namespace's counts whose sockets processes
// of one cgroup made.
type CgroupCounts struct {
	CgroupID uint64
	N        [NumNetKinds]uint64
}
