package tracer

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// allConnectionPrograms count a stopping namespace's TCP connections
// (bpf/sigscope.bpf.c: handle_tcp_state and the two RST hooks).
var allConnectionPrograms = []string{sigscopeProgHandleTcpState, sigscopeProgHandleTcpRstReceived, sigscopeProgHandleTcpRstSent}

// connectionPrograms returns the programs to attach for the connection
// count, and whether this kernel reports refused connection attempts:
// tcp_send_reset fires with no socket (a SYN that nothing listened for)
// since Linux 6.10, the release that gave it a third argument, the reset's
// reason. Read from the tracepoints' prototypes in the kernel's BTF, never
// from a version number.
func connectionPrograms(spec *btf.Spec) ([]string, bool, error) {
	for _, tp := range []string{"inet_sock_set_state", "tcp_receive_reset"} {
		if _, err := tracepointParams(spec, tp); err != nil {
			return nil, false, err
		}
	}
	n, err := tracepointParams(spec, "tcp_send_reset")
	if err != nil {
		return nil, false, err
	}
	return allConnectionPrograms, n >= 4, nil // the context, sk, skb, reason
}

// sockHasCgroup reports whether the kernel's sockets carry their creator's
// cgroup v2 (struct sock's sk_cgrp_data, CONFIG_SOCK_CGROUP_DATA), which
// splits a namespace's counts by container.
func sockHasCgroup(spec *btf.Spec) bool {
	var sk *btf.Struct
	if spec == nil || spec.TypeByName("sock", &sk) != nil {
		return false
	}
	for _, m := range sk.Members {
		if m.Name == "sk_cgrp_data" {
			return true
		}
	}
	return false
}

// SeesRefused reports whether the kernel reports refused connection
// attempts ([sigvocab.NetRefused]): Linux 6.10 and later.
func (t *Tracer) SeesRefused() bool { return t.seesRefused }

// CountsConnections reports whether stopping namespaces' connections are
// counted (not Options.NoConnections, and the kernel has the tracepoints).
func (t *Tracer) CountsConnections() bool { return t.nets != nil }

// Connections returns what the kernel counted of netns's connections since
// it was watched, with its times on the wall clock; nil when the namespace
// is not watched.
func (t *Tracer) Connections(netns uint32) (*sigvocab.Connections, error) {
	if t.nets == nil {
		return nil, nil
	}
	var st sigscopeNetStats
	if err := t.nets.Lookup(netns, &st); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the connections of network namespace %d: %w", netns, err)
	}
	clk := NewClock()
	c := &sigvocab.Connections{Since: clk.Wall(st.BeginNs), SeesRefused: t.seesRefused, SeesLastSpeaker: true, SeesProbes: t.probersOn.Load(),
		SeesData: t.seesData}
	if st.LastDataNs != 0 {
		c.LastData = clk.Wall(st.LastDataNs)
	}
	if c.SeesProbes {
		copy(c.Probes[:], st.Probes[:])
	}
	for k := range c.Counts {
		n := &c.Counts[k]
		if n.N = st.Count[k]; n.N == 0 {
			continue
		}
		n.First, n.Last = clk.Wall(st.FirstNs[k]), clk.Wall(st.LastNs[k])
	}
	var err error
	if c.Peers, c.SeesPeers, err = t.peers(netns, st.BeginNs); err != nil {
		return nil, err
	}
	if t.netCgroups != nil {
		c.SeesCgroups = true
		err := t.eachCgroupCount(func(k sigscopeNetCgKey, v *sigscopeNetCgCounts) {
			if k.Netns == netns && k.BeginNs == st.BeginNs {
				g := sigvocab.CgroupCounts{CgroupID: k.CgroupId}
				copy(g.N[:], v.Count[:])
				c.ByCgroup = append(c.ByCgroup, g)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("reading the connections of network namespace %d by cgroup: %w", netns, err)
		}
		slices.SortFunc(c.ByCgroup, func(a, b sigvocab.CgroupCounts) int { return cmp.Compare(a.CgroupID, b.CgroupID) })
	}
	return c, nil
}

// eachCgroupCount calls f with each entry of the split by cgroup. The
// table holds 4096; it is walked when a stop's counts are read or let go.
func (t *Tracer) eachCgroupCount(f func(sigscopeNetCgKey, *sigscopeNetCgCounts)) error {
	var (
		k sigscopeNetCgKey
		v sigscopeNetCgCounts
	)
	it := t.netCgroups.Iterate()
	for it.Next(&k, &v) {
		f(k, &v)
	}
	return it.Err()
}

// SetProbers makes the connections the processes pids open (the
// kubelet's: its probes) count apart from the clients' in every watched
// namespace (sigvocab.Connections.Probes), from now on; none undoes it.
// The kernel then also looks at every connect() of the node's processes
// for theirs: one look-up each.
func (t *Tracer) SetProbers(pids []uint32) error {
	if t.probers == nil {
		return nil
	}
	var (
		k    uint32
		v    uint8
		have []uint32
	)
	for it := t.probers.Iterate(); it.Next(&k, &v); {
		have = append(have, k)
	}
	for _, pid := range have {
		if !slices.Contains(pids, pid) {
			if err := t.probers.Delete(pid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("forgetting prober %d: %w", pid, err)
			}
		}
	}
	for _, pid := range pids {
		if err := t.probers.Put(pid, uint8(1)); err != nil {
			return fmt.Errorf("naming prober %d: %w", pid, err)
		}
	}
	on := uint32(0)
	if len(pids) > 0 {
		on = 1
	}
	if err := t.coll.Variables[sigscopeVarProbersOn].Set(on); err != nil {
		return fmt.Errorf("turning probes on: %w", err)
	}
	t.probersOn.Store(len(pids) > 0)
	return nil
}

// Watch makes the kernel count netns's connections from begin on, for a
// stop that began with no signal from outside (a preStop hook runs before
// the stop signal). A namespace already watched keeps its beginning.
func (t *Tracer) Watch(netns uint32, begin time.Time) error {
	if t.nets == nil || netns == 0 {
		return nil
	}
	clk := NewClock()
	st := sigscopeNetStats{BeginNs: uint64(begin.UnixNano() - clk.offset)}
	err := t.nets.Update(netns, &st, ebpf.UpdateNoExist)
	if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
		return fmt.Errorf("watching network namespace %d: %w", netns, err)
	}
	return nil
}

// Unwatch ends the count of netns's connections.
func (t *Tracer) Unwatch(netns uint32) error {
	if t.nets == nil {
		return nil
	}
	if err := t.nets.Delete(netns); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unwatching network namespace %d: %w", netns, err)
	}
	err := t.dropPeers(func(k *sigscopePeerKey) bool { return k.Netns == netns })
	if t.netCgroups == nil {
		return err
	}
	// Its split by cgroup goes too. A program that found the namespace
	// watched just before may add an entry back: keyed by the watch's
	// beginning, it never counts for a later watch, and SweepSplit takes
	// it.
	return errors.Join(err, t.dropSplit(func(k sigscopeNetCgKey) bool { return k.Netns == netns }))
}

// SweepSplit deletes the entries of the split by cgroup whose watch is
// over (a race with Unwatch can leave one); the pipeline calls it with its
// sweep of watched namespaces.
func (t *Tracer) SweepSplit() error {
	if t.nets == nil {
		return nil
	}
	live := make(map[[2]uint64]bool)
	var (
		k  uint32
		st sigscopeNetStats
	)
	it := t.nets.Iterate()
	for it.Next(&k, &st) {
		live[[2]uint64{uint64(k), st.BeginNs}] = true
	}
	if err := it.Err(); err != nil {
		return err
	}
	return errors.Join(t.dropPeers(func(k *sigscopePeerKey) bool { return !live[[2]uint64{uint64(k.Netns), k.BeginNs}] }),
		t.dropSplit(func(k sigscopeNetCgKey) bool { return !live[[2]uint64{uint64(k.Netns), k.BeginNs}] }))
}

// dropSplit deletes the split's entries that drop says to.
func (t *Tracer) dropSplit(drop func(sigscopeNetCgKey) bool) error {
	if t.netCgroups == nil {
		return nil
	}
	var stale []sigscopeNetCgKey
	err := t.eachCgroupCount(func(k sigscopeNetCgKey, _ *sigscopeNetCgCounts) {
		if drop(k) {
			stale = append(stale, k)
		}
	})
	for _, k := range stale {
		if e := t.netCgroups.Delete(&k); e != nil && !errors.Is(e, ebpf.ErrKeyNotExist) && err == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("deleting from the connections' split by cgroup: %w", err)
	}
	return nil
}

// Watched lists the watched namespaces with the time each began, so that
// one whose stop no episode took up can be let go.
func (t *Tracer) Watched() (map[uint32]time.Time, error) {
	if t.nets == nil {
		return nil, nil
	}
	clk := NewClock()
	out := make(map[uint32]time.Time)
	var (
		k  uint32
		st sigscopeNetStats
	)
	it := t.nets.Iterate()
	for it.Next(&k, &st) {
		out[k] = clk.Wall(st.BeginNs)
	}
	return out, it.Err()
}
