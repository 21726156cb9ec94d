package timeline

import (
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A stop's connections are counted from its stop signal, or, when the
// container has a preStop hook, from the hook's start, which comes first
// and is when the endpoint's race begins. The rules of a count begun from
// a hook are decided here: when one begins (an exec of the hook's program
// into the container's network namespace, or the API server's report of
// the pod's deletion for a hook the kubelet runs itself: sleep, httpGet),
// how long it is held (until a stop signal takes it up), and when it is
// let go (HookGrace after the hook's end with no stop signal: the exec
// was something else, a kubectl exec of the same program, and its count
// must not stand for a later stop's). The pipeline does what they say
// (the tracer's Watch and Unwatch); the episode's own hook (its session,
// its time, its reading at the SIGKILL) is exec.go's and atkill.go's.

// HookGrace is how long after a hook's end a count begun from it waits for
// the stop signal that follows a real preStop hook (the kubelet sends it
// as the hook returns) before it is let go.
const HookGrace = 2 * time.Second

// HookCounts are the counts begun from preStop hooks that no stop signal
// took up yet, by network namespace; at most max. Not safe for concurrent
// use: the reader's.
type HookCounts struct {
	max int
	m   map[uint32]hookCount
}

// hookCount is a count begun from a hook: pid is the hook's process (0 for
// one the kubelet runs itself), ended its end when known.
type hookCount struct {
	pid   uint32
	ended time.Time
}

// NewHookCounts returns HookCounts that hold at most max counts.
func NewHookCounts(max int) *HookCounts { return &HookCounts{max: max} }

// Begins reports whether e begins a count from its container's preStop
// hook: the exec of the hook's program (target's PreStop) into a network
// namespace of the container's own. One shared with the runtime
// (hostNetwork) is the node's, whose connections are no stop's.
func (h *HookCounts) Begins(e *sigvocab.Event, target *identity.Info) bool {
	return e.Kind == sigvocab.KindExec && e.NetNS != 0 && !e.Flags.Has(sigvocab.FlagNetShared) && target != nil &&
		target.PreStop.RunsAs(e.Target.Comm.String())
}

// Begun notes a count begun in netns: from the exec of process pid
// (Begins), or, with pid 0, from a hook the kubelet runs itself, which
// ends at until at the latest.
func (h *HookCounts) Begun(netns, pid uint32, until time.Time) {
	if h.m == nil {
		h.m = make(map[uint32]hookCount)
	}
	if len(h.m) < h.max {
		h.m[netns] = hookCount{pid: pid, ended: until}
	}
}

// Saw follows an event: a stop signal in a namespace takes its count up
// (it is the stop's from now on), and the hook's process's exit ends it.
func (h *HookCounts) Saw(e *sigvocab.Event) {
	switch {
	case e.Kind == sigvocab.KindGenerate && e.NetNS != 0:
		delete(h.m, e.NetNS)
	case e.Kind == sigvocab.KindExit && len(h.m) > 0:
		for netns, c := range h.m {
			if c.pid != 0 && c.pid == e.Target.PID && c.ended.IsZero() {
				c.ended = e.Time
				h.m[netns] = c
			}
		}
	}
}

// LetGo calls f with each namespace whose count no stop signal took up
// within HookGrace of its hook's end, by now, and forgets it.
func (h *HookCounts) LetGo(now time.Time, f func(netns uint32)) {
	for netns, c := range h.m {
		if !c.ended.IsZero() && now.Sub(c.ended) > HookGrace {
			delete(h.m, netns)
			f(netns)
		}
	}
}

// Counting reports whether a count begun from a hook in netns is held.
func (h *HookCounts) Counting(netns uint32) bool {
	_, ok := h.m[netns]
	return ok
}

// Next is when the first count held will be let go, if no stop signal
// takes it up: a caller that sleeps between events wakes then; the zero
// time when none waits to be.
func (h *HookCounts) Next() time.Time {
	var next time.Time
	if h == nil {
		return next
	}
	for _, c := range h.m {
		if at := c.ended.Add(HookGrace + time.Millisecond); !c.ended.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}
