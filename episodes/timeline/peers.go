package timeline

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Who was hurt: the clients that lost requests in a stop, by address, the
// few that lost most (MaxPeers), the rest summed, each named where the
// agent knows the address (a pod of its node, the node itself). A pod's
// address is reused after it goes: named by what held it at the stop.

// MaxPeers is how many peers an episode names; the rest are summed.
const MaxPeers = 5

// PeerKind is what a peer's address is.
type PeerKind string

const (
	PeerUnknown   PeerKind = ""          // not known here: another node's pod, a node, outside the cluster
	PeerPod       PeerKind = "pod"       // a pod's address (Namespace, Name, Workload)
	PeerNode      PeerKind = "node"      // an address of this node: a process on it, a host-network pod, NodePort traffic kube-proxy masqueraded
	PeerNamespace PeerKind = "namespace" // the container's own network namespace: a sidecar proxy's calls for its clients (given back from self_refused)
)

// PeerName is what the agent knows of a peer's address at the stop.
type PeerName struct {
	Kind      PeerKind
	Namespace string // a pod's
	Name      string // a pod's name, or the node's
	Workload  string // a pod's owner, "Deployment/web"
}

// Peer is one client's part of what a stop lost.
type Peer struct {
	Addr netip.Addr // invalid for PeerNamespace
	// Lost and MaybeLost are the client's part of Traffic.Lost and
	// MaybeLost; Kinds their split.
	Lost, MaybeLost uint64
	Kinds           [sigvocab.NumNetKinds]uint64
	Who             PeerName
}

// Peers is who was hurt, on a Traffic.
type Peers struct {
	Top []Peer // the MaxPeers that lost most, most first
	// More sums the others: how many, and what they lost.
	More                    int
	MoreLost, MoreMaybeLost uint64
	// Unattributed is what the kernel lost track of: lost requests no
	// peer holds (its table of 4096 clients was full).
	Unattributed uint64
}

// lostKinds are the kinds Traffic.Lost sums; MaybeLost is NetUndecided.
var lostKinds = []sigvocab.NetKind{sigvocab.NetRefused, sigvocab.NetResetSent, sigvocab.NetCut, sigvocab.NetUnanswered, sigvocab.NetAfterClose}

// takePeers builds who was hurt from the kernel's peers (known), with
// back refused attempts given back from self_refused (a sidecar's calls
// in the namespace, which the kernel took off its peers).
func (t *Traffic) takePeers(ps []sigvocab.PeerCounts, back uint64) {
	var all []Peer
	for _, pc := range ps {
		p := Peer{Addr: pc.Addr}
		if pc.Addr.IsLoopback() {
			p.Who.Kind = PeerNamespace // a client beside it: a sidecar, a process in the namespace
		}
		for _, k := range lostKinds {
			if t.Known(k) {
				p.Kinds[k] = pc.N[k]
				p.Lost += pc.N[k]
			}
		}
		if t.Known(sigvocab.NetUndecided) {
			p.Kinds[sigvocab.NetUndecided] = pc.N[sigvocab.NetUndecided]
			p.MaybeLost = pc.N[sigvocab.NetUndecided]
		}
		if p.Lost+p.MaybeLost > 0 {
			all = append(all, p)
		}
	}
	if back > 0 {
		p := Peer{Lost: back, Who: PeerName{Kind: PeerNamespace}}
		p.Kinds[sigvocab.NetRefused] = back
		all = append(all, p)
	}
	slices.SortFunc(all, func(a, b Peer) int {
		return cmp.Or(cmp.Compare(b.Lost, a.Lost), cmp.Compare(b.MaybeLost, a.MaybeLost), a.Addr.Compare(b.Addr))
	})
	out := &Peers{}
	var held uint64
	for i, p := range all {
		held += p.Lost
		if i < MaxPeers {
			out.Top = append(out.Top, p)
			continue
		}
		out.More++
		out.MoreLost += p.Lost
		out.MoreMaybeLost += p.MaybeLost
	}
	if lost := t.Lost(); lost > held {
		out.Unattributed = lost - held
	}
	t.Peers = out
}

// NamePeers names the top peers from what the agent knew of their
// addresses at the stop (Facts.PeerNames).
func (t *Traffic) NamePeers(names map[netip.Addr]PeerName) {
	if t.Peers == nil {
		return
	}
	for i := range t.Peers.Top {
		p := &t.Peers.Top[i]
		if n, ok := names[p.Addr]; ok && p.Addr.IsValid() && p.Who.Kind != PeerNamespace {
			p.Who = n
		}
	}
}

// PeerAddrs are the addresses an episode's top peers need named, and
// when: what the pipeline asks the agent's namer for (Facts.PeerNames).
func (ep *Episode) PeerAddrs() (addrs []netip.Addr, at time.Time) {
	t := ep.Traffic
	if t == nil || t.Peers == nil {
		return nil, time.Time{}
	}
	for _, p := range t.Peers.Top {
		if p.Addr.IsValid() {
			addrs = append(addrs, p.Addr)
		}
	}
	at = ep.StopAt
	if at.IsZero() {
		at = ep.Start
	}
	return addrs, at
}

// jsonPeers is Traffic.Peers in an episode's JSON.
type jsonPeers struct {
	Top           []jsonPeer `json:"top"`
	More          int        `json:"more,omitempty"`
	MoreLost      uint64     `json:"more_lost,omitempty"`
	MoreMaybeLost uint64     `json:"more_maybe_lost,omitempty"`
	Unattributed  uint64     `json:"unattributed,omitempty"`
}

type jsonPeer struct {
	Address   string            `json:"address,omitempty"` // omitted for the namespace itself
	Lost      uint64            `json:"lost"`
	MaybeLost uint64            `json:"maybe_lost,omitempty"`
	Kinds     map[string]uint64 `json:"kinds"` // the kinds that are not 0
	Kind      PeerKind          `json:"kind,omitempty"`
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name,omitempty"`
	Workload  string            `json:"workload,omitempty"`
}

func peersJSON(ps *Peers) *jsonPeers {
	if ps == nil {
		return nil
	}
	j := &jsonPeers{Top: []jsonPeer{}, More: ps.More, MoreLost: ps.MoreLost, MoreMaybeLost: ps.MoreMaybeLost, Unattributed: ps.Unattributed}
	for _, p := range ps.Top {
		jp := jsonPeer{Lost: p.Lost, MaybeLost: p.MaybeLost, Kinds: map[string]uint64{}, Kind: PeerKind(textsafe.UTF8(string(p.Who.Kind))),
			Namespace: textsafe.UTF8(p.Who.Namespace), Name: textsafe.UTF8(p.Who.Name), Workload: textsafe.UTF8(p.Who.Workload)}
		if p.Addr.IsValid() {
			jp.Address = p.Addr.String()
		}
		for k, n := range p.Kinds {
			if n > 0 {
				jp.Kinds[sigvocab.NetKind(k).String()] = n
			}
		}
		j.Top = append(j.Top, jp)
	}
	return j
}

func peersFromJSON(j *jsonPeers) (*Peers, error) {
	if j == nil {
		return nil, nil
	}
	ps := &Peers{More: j.More, MoreLost: j.MoreLost, MoreMaybeLost: j.MoreMaybeLost, Unattributed: j.Unattributed}
	for _, jp := range j.Top {
		p := Peer{Lost: jp.Lost, MaybeLost: jp.MaybeLost, Who: PeerName{Kind: jp.Kind, Namespace: jp.Namespace, Name: jp.Name, Workload: jp.Workload}}
		if jp.Address != "" {
			a, err := netip.ParseAddr(jp.Address)
			if err != nil {
				return nil, fmt.Errorf("traffic peer: %w", err)
			}
			p.Addr = a
		}
		for name, n := range jp.Kinds {
			if k, ok := sigvocab.NetKindOf(name); ok {
				p.Kinds[k] = n
			}
		}
		ps.Top = append(ps.Top, p)
	}
	return ps, nil
}
