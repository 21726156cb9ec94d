package timeline

import (
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// AtKill is what the main process's tasks were doing when the SIGKILL came,
// as the kernel read them (blocked records, sigvocab.KindBlocked) at that
// SIGKILL and at the stop signal before it: the system call each was in and
// the CPU time it used in between. The words say what it means (Verdict)
// and the hint follows from it; nil when the kernel read nothing (no
// SIGKILL to a namespace init from outside, a kernel or an object that
// does not read it).
type AtKill struct {
	Main     TaskAt   // the main thread
	Threads  []TaskAt // up to three other threads
	Children []TaskAt // up to four children
	// ThreadCount is the process's threads; MoreThreads and MoreChildren
	// say some were not read.
	ThreadCount               int
	MoreThreads, MoreChildren bool
	// Since is the time between the two readings (the stop signal and the
	// SIGKILL); 0 when the stop signal's was not read: then no CPU time
	// is known.
	Since time.Duration
	// Verdict says what the process was doing, in a sentence (the words).
	Verdict string
}

// TaskAt is one task's reading at the SIGKILL.
type TaskAt struct {
	Proc
	TID uint32
	// Syscall is the system call it was in ("wait4"), "" when it was in
	// none; Arg its first argument (a pid, an fd), Fd the kind of that fd.
	Syscall string
	Arg     int64
	Fd      string
	// CPU is the CPU time it used since the stop signal's reading; nil
	// when that reading is missing (the task did not exist then, or the
	// stop signal's was not read).
	CPU *time.Duration
	// Ignores says a child ignores the stop signal (SIG_IGN), Handles that
	// it has a handler for it.
	Ignores, Handles bool
	// Unread: the kernel could not read the system call (a kernel task
	// without a stack, or not x86_64): Syscall "" says nothing then.
	Unread bool
}

// maxReadings bounds the blocked records an episode keeps per capture: the
// main thread's two, three threads, four children, and four execs with two
// children each.
const maxReadings = 24

// reading is one blocked record, kept until completion.
type reading struct {
	target sigvocab.Process
	task   sigvocab.TaskReading
}

// taskReading keeps a blocked record of the episode's main process: one of
// the readings at its first stop signal, or at the SIGKILL that counted,
// which it follows with that signal's time stamp.
func (ep *episode) taskReading(ev *sigvocab.Event) {
	r := reading{target: ev.Target, task: ev.Task}
	switch {
	case !ep.KillAt.IsZero() && ev.Time.Equal(ep.KillAt):
		if len(ep.atKill) < maxReadings {
			ep.atKill = append(ep.atKill, r)
		}
	case !ep.StopAt.IsZero() && ev.Time.Equal(ep.StopAt):
		if len(ep.atStop) < maxReadings {
			ep.atStop = append(ep.atStop, r)
		}
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
		before[r.target.TID] = r.task.CPUNs
	}
	if len(ep.atStop) > 0 {
		a.Since = ep.KillAt.Sub(ep.StopAt)
	}
	stop := ep.StopSignal
	if stop == 0 {
		stop = sigvocab.SIGTERM
	}
	for _, r := range ep.atKill {
		t := ep.taskAt(&r, before)
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
		if r.task.Role == sigvocab.RoleExec && r.target.PID == s.proc.PID {
			h, slot = &HookAt{Process: ep.taskAt(&r, before)}, int(r.task.Slot)
		}
	}
	if h == nil {
		return
	}
	for _, r := range ep.atKill {
		if r.task.Role == sigvocab.RoleExecChild && int(r.task.Slot) == slot {
			c := ep.taskAt(&r, before)
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
func (ep *episode) taskAt(r *reading, before map[uint32]uint64) TaskAt {
	t := TaskAt{Proc: proc(&r.target), TID: r.target.TID, Syscall: sigvocab.SyscallName(r.task.Syscall), Fd: r.task.FdKind.String(),
		Arg: int64(int32(uint32(r.task.Arg))), Unread: r.task.Syscall == -2}
	if was, ok := before[r.target.TID]; ok && r.task.CPUNs >= was {
		d := time.Duration(r.task.CPUNs - was)
		t.CPU = &d
	}
	return t
}

// progress is the CPU time the busiest of the process's tasks used between
// the two readings, and whether that was real progress: a quarter of the
// time or more.
func (a *AtKill) progress() (time.Duration, bool) {
	var most time.Duration
	for _, t := range append([]TaskAt{a.Main}, a.Threads...) {
		if t.CPU != nil && *t.CPU > most {
			most = *t.CPU
		}
	}
	return most, busy(most, a.Since)
}
