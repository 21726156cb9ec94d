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

// reading is one blocked record, kept until completion: the task as the
// words read it, read when the record came (all but its CPU time, which
// completion works out from the two readings), and the kernel's record.
type reading struct {
	at   TaskAt
	task sigvocab.TaskReading
}

// taskReading keeps a blocked record of the episode's main process: one of
// the readings at its first stop signal, or at the SIGKILL that counted,
// which it follows with that signal's time stamp.
func (ep *episode) taskReading(ev *sigvocab.Event) {
	r := reading{at: TaskAt{Proc: proc(&ev.Target), TID: ev.Target.TID, Syscall: sigvocab.SyscallName(ev.Task.Syscall),
		Fd: ev.Task.FdKind.String(), Arg: int64(int32(uint32(ev.Task.Arg))), Unread: ev.Task.Syscall == -2}, task: ev.Task}
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
