package sigvocab

import "fmt"

// Fate is what the kernel did, or will do, with one signal sent to one
// process. It is decided here and nowhere else: [Classify] reads it from an
// event's facts and the kernel's result, [PredictFate] from a live task's
// state for the audit, and the timeline and the audit only read it.
type Fate uint8

const (
	FateUnknown        Fate = iota
	FateHandler             // queued for a user handler
	FateSigwait             // queued for a task that waits for it (sigtimedwait, sigwaitinfo)
	FateBlocked             // queued while blocked: acted on when unblocked, or read from a signalfd
	FateDefault             // queued with the default action: terminate, dump core or stop (SIGKILL too)
	FateAlreadyPending      // merged into the same signal already pending
	FateFailed              // not queued: the real-time signal queue was full
	FateDroppedInit         // dropped: a pid-namespace init with no handler (SIG_DFL)
	FateDroppedSigIgn       // dropped: SIG_IGN installed
	FateDroppedDefault      // dropped: its default action is to ignore it (SIGCHLD, SIGWINCH, ...)
	FateDroppedExiting      // dropped: the process was already exiting
)

// The words are those of the timeline's stop_verdict and the trace's fate.
var fateNames = [...]string{
	FateUnknown:        "unknown",
	FateHandler:        "handler",
	FateSigwait:        "sigwait",
	FateBlocked:        "blocked",
	FateDefault:        "delivered",
	FateAlreadyPending: "already_pending",
	FateFailed:         "overflow_fail",
	FateDroppedInit:    "pid1_ignored",
	FateDroppedSigIgn:  "sig_ign",
	FateDroppedDefault: "default_ignored",
	FateDroppedExiting: "target_exiting",
}

func (f Fate) String() string {
	if int(f) < len(fateNames) {
		return fateNames[f]
	}
	return "unknown"
}

// ParseFate returns the fate named s.
func ParseFate(s string) (Fate, error) {
	for i, n := range fateNames {
		if n == s {
			return Fate(i), nil
		}
	}
	return FateUnknown, fmt.Errorf("unknown fate %q", s)
}

// Dropped reports whether the kernel discarded the signal: the process will
// never act on it.
func (f Fate) Dropped() bool { return f >= FateDroppedInit }

// TaskState is what decides the fate of a signal at a process: the
// disposition and masks the kernel reads in prepare_signal(), taken under
// the target's siglock (an event) or from the task iterator (the audit).
type TaskState struct {
	Handler Disposition
	Blocked bool // in task->blocked
	Waited  bool // in real_blocked but not in blocked: the task sleeps in sigtimedwait for it
	NSInit  bool // SIGNAL_UNKILLABLE: the init of a pid namespace
	Exiting bool // SIGNAL_GROUP_EXIT: the process is dying
	// OneShot: the handler has SA_RESETHAND, so it runs once and the
	// disposition is SIG_DFL from then on. Only the task iterator reads
	// sa_flags (events and /proc leave it false); it does not change the
	// signal's fate, only what a handler that re-raises it can achieve.
	OneShot bool
}

// PredictFate applies prepare_signal() (kernel/signal.c) to a signal sent
// to a process in state st. force is the kernel's own word: the sender has
// no pid in the target's namespace (the host, a container runtime) or the
// kernel raised the signal. The order is the kernel's:
//
//  1. a dying process drops everything (kernel 6.0 and later);
//  2. a signal in blocked or real_blocked is queued, whatever the handler
//     (sig_ignored() returns false before looking at it);
//  3. an init with SIG_DFL drops it unless it is SIGKILL or SIGSTOP sent
//     with force (sig_task_ignored());
//  4. SIG_IGN drops it, and so does SIG_DFL for a signal whose default
//     action is to ignore it;
//  5. anything else is queued for the handler or the default action.
func PredictFate(sig Signal, st TaskState, force bool) Fate {
	switch {
	case st.Exiting:
		return FateDroppedExiting
	case st.Blocked:
		return FateBlocked
	case st.Waited:
		return FateSigwait
	}
	switch st.Handler {
	case DispHandler:
		if sig == SIGKILL || sig == SIGSTOP {
			return FateDefault // cannot be caught: the handler table is never read
		}
		return FateHandler
	case DispIgnore:
		return FateDroppedSigIgn
	}
	switch {
	case defaultIgnored(sig):
		// An init drops these for rule 3 first; the reason that matters
		// is that nobody acts on them anyway.
		return FateDroppedDefault
	case st.NSInit && !(force && (sig == SIGKILL || sig == SIGSTOP)):
		return FateDroppedInit
	}
	return FateDefault
}

// Kills reports whether a signal with this fate ends the process by itself:
// the default action of a terminating signal at a process that is not a
// namespace init (or SIGKILL).
func (f Fate) Kills(sig Signal) bool {
	if f != FateDefault {
		return false
	}
	return !sig.Stops() && !defaultIgnored(sig)
}

// Stops reports whether the default action of s stops a process rather
// than ending it: SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU.
func (s Signal) Stops() bool {
	switch s {
	case SIGSTOP, 20, 21, 22:
		return true
	}
	return false
}

// stateOf is the target's state as an event recorded it.
func stateOf(e *Event) TaskState {
	return TaskState{
		Handler: e.Handler,
		Blocked: e.Facts&FactBlocked != 0,
		Waited:  e.Facts&FactSigwaited != 0,
		NSInit:  e.SigFlags&SignalUnkillable != 0,
		Exiting: e.SigFlags&SignalGroupExit != 0,
	}
}

// generateFate reads the fate of a generated signal. The kernel's result
// says whether it was dropped; the state says why. The tracepoint fires
// after complete_signal(), which for a fatal signal has already set
// SIGNAL_GROUP_EXIT (wiping SIGNAL_UNKILLABLE), so the state's Exiting and
// NSInit are only read for a signal the kernel dropped.
func generateFate(e *Event) Fate {
	st := stateOf(e)
	force := e.Facts&FactSenderInTargetNS == 0 || e.Code == CodeKernel
	switch e.Result {
	case ResultAlreadyPending:
		return FateAlreadyPending
	case ResultOverflowFail:
		return FateFailed
	case ResultIgnored:
		if st.Exiting {
			return FateDroppedExiting
		}
		st.Blocked, st.Waited = false, false // the kernel dropped it: neither held it
		if f := PredictFate(e.Signal, st, force); f.Dropped() {
			return f
		}
		// Dropped for a reason the state does not show (an init's own
		// SIGKILL from inside its namespace has force false; a kernel
		// thread): the init rule is the only other one that drops.
		return FateDroppedInit
	}
	st.Exiting, st.NSInit = false, false
	return PredictFate(e.Signal, st, force)
}

// deliverFate reads the fate of a signal a task dequeued in get_signal():
// a handler runs, or the default action is taken, or (an init that had the
// signal blocked when it came, SIG_DFL) the kernel discards it now.
func deliverFate(e *Event) Fate {
	switch e.Handler {
	case DispHandler:
		return FateHandler
	case DispIgnore:
		return FateDroppedSigIgn
	}
	switch {
	case defaultIgnored(e.Signal):
		return FateDroppedDefault
	case e.Signal != SIGKILL && e.Signal != SIGSTOP && e.SigFlags&SignalUnkillable != 0:
		return FateDroppedInit
	}
	return FateDefault
}
