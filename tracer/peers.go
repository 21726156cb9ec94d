package tracer

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A stopping namespace's lost and possibly lost connections by the
// client's address (bpf/sigscope.bpf.c: peer_count, table stopping_peers,
// an LRU of 4096): who was hurt. Read with the counts, let go with them.

const afInet6 = 10 // AF_INET6

// peerAddr is a peer key's address.
func peerAddr(k *sigscopePeerKey) netip.Addr {
	if k.Family == afInet6 {
		return netip.AddrFrom16(k.Addr).Unmap()
	}
	return netip.AddrFrom4([4]byte(k.Addr[:4]))
}

// peers reads the peers of netns's watch that began at begin, sorted by
// address; ok is false when the kernel keeps none (no table).
func (t *Tracer) peers(netns uint32, begin uint64) ([]sigvocab.PeerCounts, bool, error) {
	if t.netPeers == nil {
		return nil, false, nil
	}
	var out []sigvocab.PeerCounts
	err := t.eachPeer(func(k *sigscopePeerKey, v *sigscopePeerCounts) {
		if k.Netns != netns || k.BeginNs != begin {
			return
		}
		p := sigvocab.PeerCounts{Addr: peerAddr(k)}
		copy(p.N[:], v.Count[:])
		out = append(out, p)
	})
	if err != nil {
		return nil, true, fmt.Errorf("reading the peers of network namespace %d: %w", netns, err)
	}
	slices.SortFunc(out, func(a, b sigvocab.PeerCounts) int { return cmp.Compare(a.Addr.String(), b.Addr.String()) })
	return out, true, nil
}

func (t *Tracer) eachPeer(f func(*sigscopePeerKey, *sigscopePeerCounts)) error {
	var (
		k sigscopePeerKey
		v sigscopePeerCounts
	)
	it := t.netPeers.Iterate()
	for it.Next(&k, &v) {
		f(&k, &v)
	}
	return it.Err()
}

// dropPeers deletes the peers' entries that drop says to.
func (t *Tracer) dropPeers(drop func(*sigscopePeerKey) bool) error {
	if t.netPeers == nil {
		return nil
	}
	var stale []sigscopePeerKey
	err := t.eachPeer(func(k *sigscopePeerKey, _ *sigscopePeerCounts) {
		if drop(k) {
			stale = append(stale, *k)
		}
	})
	for _, k := range stale {
		if e := t.netPeers.Delete(&k); e != nil && !errors.Is(e, ebpf.ErrKeyNotExist) && err == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("deleting from the connections' peers: %w", err)
	}
	return nil
}
