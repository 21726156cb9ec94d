package timeline

import (
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The rules of a count begun from a preStop hook, without a tracer: it
// begins at an exec of the hook's program into the container's own
// network namespace, a stop signal takes it up, and one no stop signal
// took up is let go HookGrace after the hook's end.
func TestHookCounts(t *testing.T) {
	h := NewHookCounts(2)
	info := &identity.Info{PreStop: &identity.Hook{Kind: "exec", Command: []string{"/bin/sleep", "2"}}}
	base := time.Unix(1000, 0)
	exec := func(netns, pid uint32, comm string, flags sigvocab.Flags) *sigvocab.Event {
		e := &sigvocab.Event{Kind: sigvocab.KindExec, Time: base, NetNS: netns, Flags: flags, Target: sigvocab.Process{PID: pid}}
		copy(e.Target.Comm[:], comm)
		return e
	}
	if !h.Begins(exec(1, 101, "sleep", 0), info) || h.Begins(exec(1, 101, "curl", 0), info) ||
		h.Begins(exec(1, 101, "sleep", sigvocab.FlagNetShared), info) || h.Begins(exec(1, 101, "sleep", 0), &identity.Info{}) {
		t.Fatal("Begins: only an exec of the hook's program into a network namespace of the container's own")
	}
	h.Begun(1, 101, time.Time{})
	h.Begun(2, 102, time.Time{})
	h.Begun(3, 0, base.Add(5*time.Second)) // past max: not held
	if !h.Counting(1) || !h.Counting(2) || h.Counting(3) {
		t.Fatal("held counts")
	}
	if !h.Next().IsZero() {
		t.Errorf("Next %v with no hook ended", h.Next())
	}
	h.Saw(&sigvocab.Event{Kind: sigvocab.KindExit, Time: base.Add(time.Second), Target: sigvocab.Process{PID: 101}})
	h.Saw(&sigvocab.Event{Kind: sigvocab.KindGenerate, Time: base.Add(time.Second), NetNS: 2, Signal: sigvocab.SIGTERM})
	if h.Counting(2) {
		t.Error("the stop signal did not take the count up")
	}
	if want := base.Add(time.Second + HookGrace + time.Millisecond); !h.Next().Equal(want) {
		t.Errorf("Next %v, want %v", h.Next(), want)
	}
	var gone []uint32
	h.LetGo(base.Add(time.Second+HookGrace), func(n uint32) { gone = append(gone, n) })
	if len(gone) != 0 {
		t.Fatalf("let go within HookGrace of the hook's end: %v", gone)
	}
	h.LetGo(base.Add(time.Second+HookGrace+time.Millisecond), func(n uint32) { gone = append(gone, n) })
	if len(gone) != 1 || gone[0] != 1 || h.Counting(1) {
		t.Errorf("let go %v, want [1]", gone)
	}
	// A hook the kubelet runs itself: held until its end at the latest.
	h.Begun(3, 0, base.Add(5*time.Second))
	h.Saw(&sigvocab.Event{Kind: sigvocab.KindExit, Time: base, Target: sigvocab.Process{PID: 0}})
	gone = nil
	h.LetGo(base.Add(5*time.Second+HookGrace+time.Millisecond), func(n uint32) { gone = append(gone, n) })
	if len(gone) != 1 || gone[0] != 3 {
		t.Errorf("the kubelet's hook: let go %v, want [3]", gone)
	}
}
