package tracer

import (
	"encoding/json"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// TestVocabularyMatchesBPF holds sigvocab's numbers, written by hand so that
// it links no loader, to what bpf2go generated from bpf/sigscope.h: a C
// change that renumbers or adds a kind or a fact, or resizes a record's
// arrays, fails here until the vocabulary follows.
func TestVocabularyMatchesBPF(t *testing.T) {
	kinds := map[sigscopeEventType]sigvocab.Kind{
		sigscopeEventTypeEV_GENERATE: sigvocab.KindGenerate,
		sigscopeEventTypeEV_DELIVER:  sigvocab.KindDeliver,
		sigscopeEventTypeEV_EXIT:     sigvocab.KindExit,
		sigscopeEventTypeEV_OOM:      sigvocab.KindOOM,
		sigscopeEventTypeEV_EXEC:     sigvocab.KindExec,
		sigscopeEventTypeEV_NS_EMPTY: sigvocab.KindNSEmpty,
		sigscopeEventTypeEV_NET:      sigvocab.KindNet,
		sigscopeEventTypeEV_BLOCKED:  sigvocab.KindBlocked,
	}
	for c, k := range kinds {
		if uint32(c) != uint32(k) {
			t.Errorf("%s is %d in C, %d in sigvocab", k, c, k)
		}
	}
	// Every C kind below EV_TYPES has a Go kind, and no Go kind is left
	// without one: the per-kind counters are indexed the same way.
	if len(kinds) != sigvocab.NumKinds || len(sigvocab.Kinds) != sigvocab.NumKinds {
		t.Errorf("C has %d event types, sigvocab %d kinds (Kinds lists %d)", len(kinds), sigvocab.NumKinds, len(sigvocab.Kinds))
	}
	for i, k := range sigvocab.Kinds {
		if int(k) != i || !k.Valid() || k.String() == "unknown" {
			t.Errorf("Kinds[%d] = %d (%s): kinds must be numbered from 0 without a gap, each named", i, k, k)
		}
	}
	var c sigscopeCounters
	if sigvocab.NumKinds > len(c.Seen) || int(sigscopeEventTypeEV_TYPES) != len(c.Seen) {
		t.Errorf("the kernel counts %d kinds (EV_TYPES %d), sigvocab has %d", len(c.Seen), sigscopeEventTypeEV_TYPES, sigvocab.NumKinds)
	}

	facts := map[sigscopeFact]uint32{
		sigscopeFactFACT_INFO_NOINFO:         sigvocab.FactInfoNoinfo,
		sigscopeFactFACT_INFO_PRIV:           sigvocab.FactInfoPriv,
		sigscopeFactFACT_SENDER_EXITING:      sigvocab.FactSenderExiting,
		sigscopeFactFACT_SENDER_REAPER:       sigvocab.FactSenderReaper,
		sigscopeFactFACT_TARGET_IN_SENDER_NS: sigvocab.FactTargetInSenderNS,
		sigscopeFactFACT_SENDER_IN_TARGET_NS: sigvocab.FactSenderInTargetNS,
		sigscopeFactFACT_TARGET_NS_INIT:      sigvocab.FactTargetNSInit,
		sigscopeFactFACT_BLOCKED:             sigvocab.FactBlocked,
		sigscopeFactFACT_GROUP_DEAD:          sigvocab.FactGroupDead,
		sigscopeFactFACT_TARGET_NS_CHILD:     sigvocab.FactTargetNSChild,
		sigscopeFactFACT_SIGWAITED:           sigvocab.FactSigwaited,
		sigscopeFactFACT_TARGET_GONE:         sigvocab.FactTargetGone,
		sigscopeFactFACT_NET_WATCHED:         sigvocab.FactNetWatched,
		sigscopeFactFACT_NET_SHARED:          sigvocab.FactNetShared,
		sigscopeFactFACT_MORE_THREADS:        sigvocab.FactMoreThreads,
		sigscopeFactFACT_MORE_CHILDREN:       sigvocab.FactMoreChildren,
	}
	var all uint32
	for c, g := range facts {
		if uint32(c) != g {
			t.Errorf("fact %#x in C is %#x in sigvocab", uint32(c), g)
		}
		all |= g
	}
	// The facts are bits 0 to n-1: a new C fact takes bit n, which this
	// map does not have yet.
	if want := uint32(1)<<len(facts) - 1; all != want {
		t.Errorf("the facts cover %#x, want %#x", all, want)
	}

	roles := map[sigscopeBlockedRole]sigvocab.TaskRole{
		sigscopeBlockedRoleBLOCKED_MAIN:       sigvocab.RoleMainThread,
		sigscopeBlockedRoleBLOCKED_THREAD:     sigvocab.RoleThread,
		sigscopeBlockedRoleBLOCKED_CHILD:      sigvocab.RoleChild,
		sigscopeBlockedRoleBLOCKED_EXEC:       sigvocab.RoleExec,
		sigscopeBlockedRoleBLOCKED_EXEC_CHILD: sigvocab.RoleExecChild,
	}
	for c, g := range roles {
		if uint8(c) != uint8(g) {
			t.Errorf("blocked role %d in C is %d in sigvocab", c, g)
		}
	}

	netKinds := map[sigscopeNetKind]sigvocab.NetKind{
		sigscopeNetKindNET_ACCEPTED:        sigvocab.NetAccepted,
		sigscopeNetKindNET_CLOSED:          sigvocab.NetClosed,
		sigscopeNetKindNET_RESET_SENT:      sigvocab.NetResetSent,
		sigscopeNetKindNET_RESET_RECEIVED:  sigvocab.NetResetReceived,
		sigscopeNetKindNET_CUT:             sigvocab.NetCut,
		sigscopeNetKindNET_REFUSED:         sigvocab.NetRefused,
		sigscopeNetKindNET_LISTENER_CLOSED: sigvocab.NetListenerClosed,
		sigscopeNetKindNET_UNANSWERED:      sigvocab.NetUnanswered,
		sigscopeNetKindNET_AFTER_CLOSE:     sigvocab.NetAfterClose,
		sigscopeNetKindNET_IDLE_AT_EXIT:    sigvocab.NetIdleAtExit,
		sigscopeNetKindNET_UNDECIDED:       sigvocab.NetUndecided,
		sigscopeNetKindNET_OUT_REFUSED:     sigvocab.NetOutRefused,
		sigscopeNetKindNET_OUT_RESET:       sigvocab.NetOutReset,
		sigscopeNetKindNET_SELF_REFUSED:    sigvocab.NetSelfRefused,
	}
	for c, k := range netKinds {
		if uint32(c) != uint32(k) {
			t.Errorf("net kind %s is %d in C, %d in sigvocab", k, c, k)
		}
	}
	var ns sigscopeNetStats
	if len(netKinds) != sigvocab.NumNetKinds || int(sigscopeNetKindNET_KINDS) != len(ns.Count) || sigvocab.NumNetKinds > len(ns.Count) {
		t.Errorf("C has %d net kinds in %d slots, sigvocab %d", len(netKinds), len(ns.Count), sigvocab.NumNetKinds)
	}

	var e sigscopeEvent
	if len(e.Ancestors) != sigvocab.MaxAncestors {
		t.Errorf("an event carries %d ancestors in C, MaxAncestors is %d", len(e.Ancestors), sigvocab.MaxAncestors)
	}
	var comm sigvocab.Comm
	if len(e.Target.Comm) != len(comm) || len(e.Ancestors[0].Comm) != len(comm) {
		t.Errorf("comm is %d bytes in C, %d in sigvocab", len(e.Target.Comm), len(comm))
	}
	var ts taskstateTaskState
	if len(ts.Comm) != len(comm) {
		t.Errorf("the task iterator's comm is %d bytes, sigvocab's %d", len(ts.Comm), len(comm))
	}
	var _ uint64 = ts.Blocked // read as a SignalSet: 64 bits, one for each signal up to MaxSignal
}

// TestStatsJSON holds Stats' JSON to what encoding/json wrote when each
// kind had a field of its own (blocked, issue 31's, after the others).
func TestStatsJSON(t *testing.T) {
	type kindStats struct {
		Seen    uint64 `json:"seen"`
		Emitted uint64 `json:"emitted"`
		Dropped uint64 `json:"dropped"`
	}
	type oldStats struct {
		Generate     kindStats `json:"generate"`
		Deliver      kindStats `json:"deliver"`
		Exit         kindStats `json:"exit"`
		OOM          kindStats `json:"oom"`
		Exec         kindStats `json:"exec"`
		NSEmpty      kindStats `json:"ns_empty"`
		Blocked      kindStats `json:"blocked"`
		Read         uint64    `json:"read"`
		DecodeErrors uint64    `json:"decode_errors"`
		Wakeups      uint64    `json:"wakeups"`
		Missed       uint64    `json:"missed"`
	}
	s := Stats{Read: 17, DecodeErrors: 2, Wakeups: 3, Missed: 4}
	for k := range s.PerKind {
		s.PerKind[k] = KindStats{Seen: uint64(100*k + 3), Emitted: uint64(100*k + 2), Dropped: 1}
	}
	ks := func(k sigvocab.Kind) kindStats {
		return kindStats{s.PerKind[k].Seen, s.PerKind[k].Emitted, s.PerKind[k].Dropped}
	}
	want, err := json.Marshal(oldStats{ks(sigvocab.KindGenerate), ks(sigvocab.KindDeliver), ks(sigvocab.KindExit), ks(sigvocab.KindOOM), ks(sigvocab.KindExec), ks(sigvocab.KindNSEmpty), ks(sigvocab.KindBlocked), 17, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{s, &s} {
		got, err := json.Marshal(v)
		if err != nil || string(got) != string(want) {
			t.Errorf("Stats JSON:\n got %s, %v\nwant %s", got, err, want)
		}
	}
	if tot := s.Total(); tot != (KindStats{Seen: 2824, Emitted: 2816, Dropped: 8}) {
		t.Errorf("Total = %+v", tot)
	}
	if got := s.Kind(sigvocab.Kind(sigvocab.NumKinds)); got != (KindStats{}) {
		t.Errorf("Kind(past the last) = %+v", got)
	}
}
