package sigvocab

import "time"

// NetKind is one fate of a stopping container's TCP connections that the
// kernel counts (enum net_kind in bpf/sigscope.h, value for value).
// A connection is counted once, when it ends on the container's side.
type NetKind uint8

const (
	NetAccepted       NetKind = 0 // a handshake completed on one of the namespace's listening sockets: a client still routed to it
	NetClosed         NetKind = 1 // an inbound connection the container closed with a FIN, its process alive
	NetResetSent      NetKind = 2 // an inbound connection the container aborted with a RST, its process alive
	NetResetReceived  NetKind = 3 // an inbound connection the client reset
	NetCut            NetKind = 4 // an inbound connection still open when its process died (SIGKILL, exit): the kernel closed it
	NetRefused        NetKind = 5 // a connection attempt answered with a RST: nothing listened (Linux 6.10 and later)
	NetListenerClosed NetKind = 6 // a listening socket closed: the application stopped accepting
)

var netKindNames = [...]string{
	NetAccepted:       "accepted",
	NetClosed:         "closed",
	NetResetSent:      "reset_sent",
	NetResetReceived:  "reset_received",
	NetCut:            "cut",
	NetRefused:        "refused",
	NetListenerClosed: "listener_closed",
}

// NumNetKinds is the number of net kinds: every NetKind below it is one.
const NumNetKinds = len(netKindNames)

func (k NetKind) String() string {
	if int(k) < NumNetKinds {
		return netKindNames[k]
	}
	return "unknown"
}

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
	// SeesRefused is whether this kernel reports refused attempts (a SYN
	// answered with a RST because nothing listened: Linux 6.10 and
	// later). Without it Counts[NetRefused] is unknown, not zero.
	SeesRefused bool
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

// CgroupCounts is the part of a namespace's counts whose sockets processes
// of one cgroup made.
type CgroupCounts struct {
	CgroupID uint64
	N        [NumNetKinds]uint64
}
