package timeline

import (
	"container/heap"
	"slices"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Completion: what the engine gathers when an episode's events are over,
// before it hands the episode out. Each part takes what apply kept while
// the stop ran (the connection counts, the kernel's readings at the
// SIGKILL, the steps) and makes it the episode's facts; nothing here
// decides an outcome or writes a sentence (Finish does, in facts.go).

// end completes ep, whose events are over as of t; or, when it watched a
// network namespace whose counts it has not got, makes it wait for them
// until NetWait after t, and completes it without them then.
func (e *Engine) end(ep *episode, t time.Time, out *[]Episode) {
	switch {
	case ep.netns == 0 || ep.counted():
		e.complete(ep, out)
	case ep.netWait:
		ep.unread = unreadLate
		e.complete(ep, out)
	default:
		e.wait(ep, t)
	}
}

// wait makes ep wait for its counts, from t, when it would have completed.
// It leaves the indexes as a completed episode would: later events of its
// container begin another one. Its counts are due at t, or NetLinger after
// its main process's exit when that is later.
func (e *Engine) wait(ep *episode, t time.Time) {
	e.detach(ep)
	ep.netWait, ep.netDue = true, t
	if linger := ep.ExitAt.Add(NetLinger); !ep.ExitAt.IsZero() && linger.After(t) {
		ep.netDue = linger
	}
	for _, o := range e.waiting {
		if o.netns == ep.netns && o.netAsked {
			ep.netAsked = true // a read is on its way
		}
	}
	e.waiting = append(e.waiting, ep)
	ep.deadline = t.Add(NetWait)
	if ep.heapIdx < 0 {
		heap.Push(&e.settling, ep)
	} else {
		heap.Fix(&e.settling, ep.heapIdx)
	}
}

// complete takes ep out of the engine and hands it out settled: its
// traffic, its readings at the SIGKILL and its steps in order; finished
// with no facts from outside unless the caller finishes it (Options.Settled).
func (e *Engine) complete(ep *episode, out *[]Episode) {
	e.remove(ep)
	if ep.netns != 0 && ep.connsAt.IsZero() && ep.unread == countsRead {
		ep.unread = unreadEnded // no path completes so; were one added, it would not claim counts
	}
	if ep.unread != countsRead {
		e.stats.NetUnread++
	}
	ep.takeTraffic()
	ep.takeAtKill()
	ep.order()
	if e.beganUnseen(ep) {
		ep.StartUnseen, ep.TracedSince = true, e.since
	}
	if ep.mainKnown && ep.exited {
		e.starts.forget(procKey{ep.Main.PID, ep.mainNS})
	}
	e.stats.Completed++
	ep.Episode.settled = ep
	*out = append(*out, ep.Episode)
	if !e.opts.Settled {
		Finish(&(*out)[len(*out)-1], Facts{})
	}
}

// beganUnseen reports whether the episode may have begun before tracing
// did: no stop signal was seen, nor its main process's start, and its
// first event came within its stop budget after tracing began. A stop
// signal sent just before then (and the main process's answer to it) would
// look exactly so: only the SIGKILL at the end of the grace period, or the
// exit, is left. Only a container's (an ID from its runtime or its cgroup
// path): a pid namespace no runtime made (unshare, a clone) is stopped by
// no runtime with a grace period, and may start without an exec to show it.
func (e *Engine) beganUnseen(ep *episode) bool {
	if ep.stopped() || e.since.IsZero() || ep.Container.ID == "" {
		return false
	}
	if ep.mainKnown && e.starts.seen(procKey{ep.Main.PID, ep.mainNS}) {
		return false
	}
	if ep.Start.Sub(e.since) > ep.StopBudget() {
		return false
	}
	if from := ep.Start.Add(-ep.StopBudget()); e.opts.History.Covers(ep.Container.Runtime, from) {
		_, asked := e.opts.History.LastRequest(ep.Container.ID, from)
		return asked
	}
	return true
}

// order puts the steps in time order and starts the episode at the first.
// Events reach the ring buffer from several CPUs and can arrive a few
// microseconds out of order (a SIGKILL's generate after the exit it caused);
// the steps are told in the order they happened. A traffic step does not
// move the start: it is the namespace's, which another container of the
// pod may have begun to stop earlier.
func (ep *episode) order() {
	slices.SortStableFunc(ep.Steps, func(a, b Step) int { return a.Time.Compare(b.Time) })
	for _, s := range ep.Steps {
		if s.Kind.traffic() {
			continue
		}
		if s.Time.Before(ep.Start) {
			ep.Start = s.Time
		}
		break
	}
	for i := range ep.Steps {
		ep.Steps[i].At = ep.Steps[i].Time.Sub(ep.Start)
	}
}

// takeTraffic makes the counts the episode holds its traffic, at
// completion, with a step for each moment the kernel recorded that tells
// the stop: the listener's close, the first refused attempt, the first
// connection cut. Nil when no stop signal was watched; the words write the
// verdict and the hint.
func (ep *episode) takeTraffic() {
	if ep.netns == 0 {
		if ep.netShared != 0 {
			ep.Traffic, ep.unread = &Traffic{NetNS: ep.netShared}, unreadShared
		}
		return
	}
	t := &Traffic{NetNS: ep.netns}
	ep.Traffic = t
	if ep.unread != countsRead {
		return
	}
	c := &ep.conns
	t.Since, t.Until, t.Counts, t.SeesRefused, t.SeesLastSpeaker = c.Since, ep.connsAt, c.Counts, c.SeesRefused, c.SeesLastSpeaker
	t.SeesData, t.LastData = c.SeesData, c.LastData
	if c.SeesProbes {
		p := c.Probes
		t.Probes = &p
	}
	switch {
	case !c.SeesCgroups:
		ep.ownUnknown = ownNoSocketCgroup
	case ep.mainCgroup <= 1:
		ep.ownUnknown = ownRootCgroup
	default:
		var own, others [sigvocab.NumNetKinds]uint64
		for _, g := range c.ByCgroup {
			dst := &others
			if g.CgroupID == ep.mainCgroup {
				dst = &own
			}
			for k, n := range g.N {
				dst[k] += n
			}
		}
		t.Own, t.Others = &own, &others
	}
	back := t.selfRefusedBack()
	if c.SeesPeers {
		t.takePeers(c.Peers, back)
	}
	if n := c.Counts[sigvocab.NetListenerClosed]; n.N > 0 {
		ep.add(Step{Time: n.First, Kind: StepListenerClosed, facts: stepFacts{event: sigvocab.KindNet, n: n.N, last: n.Last}}, true)
	}
	if n := t.Counts[sigvocab.NetRefused]; n.N > 0 && c.SeesRefused {
		ep.add(Step{Time: n.First, Kind: StepRefused, facts: stepFacts{event: sigvocab.KindNet, n: n.N, last: n.Last}}, true)
	}
	for _, k := range []struct {
		kind sigvocab.NetKind
		step StepKind
	}{{sigvocab.NetUnanswered, StepUnanswered}, {sigvocab.NetAfterClose, StepAfterClose}} {
		if n := c.Counts[k.kind]; n.N > 0 && c.SeesLastSpeaker {
			ep.add(Step{Time: n.First, Kind: k.step, facts: stepFacts{event: sigvocab.KindNet, n: n.N, last: n.Last}}, true)
		}
	}
	if n := c.Counts[sigvocab.NetCut]; n.N > 0 {
		s := Step{Time: n.First, Kind: StepCut, facts: stepFacts{event: sigvocab.KindNet, n: n.N, last: n.Last, died: ep.exited}}
		if ep.mainKnown {
			s.Target = ep.Main
		}
		ep.add(s, true)
	}
}

// takeAtKill makes the readings the episode's AtKill at completion, with a
// step at the SIGKILL; the words write its verdict.
func (ep *episode) takeAtKill() {
	if len(ep.atKill) == 0 {
		return
	}
	a := &AtKill{}
	before := map[uint32]uint64{}
	for _, r := range ep.atStop {
		before[r.at.TID] = r.task.CPUNs
	}
	if len(ep.atStop) > 0 {
		a.Since = ep.KillAt.Sub(ep.StopAt)
	}
	stop := ep.StopSignal
	if stop == 0 {
		stop = sigvocab.SIGTERM
	}
	for _, r := range ep.atKill {
		t := taskAt(&r, before)
		switch r.task.Role {
		case sigvocab.RoleMainThread:
			if r.task.MoreThreads || r.task.MoreChildren {
				a.MoreThreads = a.MoreThreads || r.task.MoreThreads
				a.MoreChildren = a.MoreChildren || r.task.MoreChildren
				continue // the truncation's own record
			}
			a.Main, a.ThreadCount = t, int(r.task.Threads)
		case sigvocab.RoleThread:
			a.Threads = append(a.Threads, t)
		case sigvocab.RoleChild:
			d := r.task.Disposition(stop)
			t.Ignores, t.Handles = d == sigvocab.DispIgnore, d == sigvocab.DispHandler
			a.Children = append(a.Children, t)
		}
	}
	ep.AtKill = a
	ep.add(Step{Time: ep.KillAt, Kind: StepAtKill, Target: a.Main.Proc, facts: stepFacts{event: sigvocab.KindBlocked}}, true)
	ep.takeHookAt(before)
}

// takeHookAt keeps the reading of the exec preStop hook's process, when it
// still ran at the SIGKILL, and of its child, with a step; before are the
// stop signal's readings' CPU times by thread.
func (ep *episode) takeHookAt(before map[uint32]uint64) {
	s := ep.hookSession()
	if s == nil || !s.end.IsZero() && s.end.Before(ep.KillAt) {
		return
	}
	var h *HookAt
	slot := -1
	for _, r := range ep.atKill {
		if r.task.Role == sigvocab.RoleExec && r.at.PID == s.proc.PID {
			h, slot = &HookAt{Process: taskAt(&r, before)}, int(r.task.Slot)
		}
	}
	if h == nil {
		return
	}
	for _, r := range ep.atKill {
		if r.task.Role == sigvocab.RoleExecChild && int(r.task.Slot) == slot {
			c := taskAt(&r, before)
			if h.Child == nil || h.Process.Arg > 0 && uint32(h.Process.Arg) == c.PID {
				h.Child = &c
			}
		}
	}
	ep.hookAt = h
	ep.add(Step{Time: ep.KillAt, Kind: StepHookAtKill, Target: h.Process.Proc, facts: stepFacts{event: sigvocab.KindBlocked, hook: true}}, true)
}

// taskAt is a reading as a TaskAt, with the CPU time it used since the
// stop signal's reading of the same thread when there was one.
func taskAt(r *reading, before map[uint32]uint64) TaskAt {
	t := r.at
	if was, ok := before[t.TID]; ok {
		if d, ok := r.task.CPUSince(was); ok {
			t.CPU = &d
		}
	}
	return t
}

// selfRefusedBack gives the clients' refused attempts back those that a
// socket of the namespace made and the namespace itself refused
// (NetSelfRefused) but the container's own processes did not: a pod's
// sidecar proxy calling the application on its behalf (the inbound path of
// a service mesh) is its clients' request. Only the container's own calls
// stay apart (OwnCalls); where the split cannot tell whose socket it was,
// every one is given back: never "nobody was hurt" on a guess.
func (t *Traffic) selfRefusedBack() (back uint64) {
	self := t.Counts[sigvocab.NetSelfRefused]
	back = self.N
	if t.Own != nil {
		back -= min(back, t.Own[sigvocab.NetSelfRefused])
	}
	if back == 0 {
		return 0
	}
	r := &t.Counts[sigvocab.NetRefused]
	if r.N == 0 || self.First.Before(r.First) {
		r.First = self.First
	}
	if self.Last.After(r.Last) {
		r.Last = self.Last
	}
	r.N += back
	return back
}
