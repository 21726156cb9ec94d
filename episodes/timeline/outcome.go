package timeline

import "github.com/sigscope/sigscope/tracer/sigvocab"

// facts are what an outcome is decided on, apart from the steps.
type facts struct {
	stop         bool            // a stop signal was sent to the main process (and it was not already exiting)
	stopSignal   sigvocab.Signal //
	stopFate     sigvocab.Fate   // the kernel's final decision on the first stop signal
	acted        bool            // the main process acted on it: a handler ran, or it forwarded a signal
	reraiseDrop  bool            // its handler re-raised it with the default action, and the kernel dropped that
	mainIsInit   bool            // the main process is its pid namespace's init
	kill         bool            // a SIGKILL was delivered to the main process
	exit         bool            // the main process's exit was seen
	exitSignal   sigvocab.Signal // the signal that ended it, 0 for an exit code
	oomMain      bool            // the OOM killer picked the main process
	oomFirst     bool            // an OOM kill came before any stop signal, SIGKILL or exit
	hookTimedOut bool            // the preStop hook used up the grace period
	startUnseen  bool            // the stop may have begun before tracing did (Episode.StartUnseen)
}

func (ep *episode) facts() facts {
	return facts{
		stop:         ep.stopped(),
		stopSignal:   ep.StopSignal,
		stopFate:     ep.StopVerdict,
		acted:        ep.handled || ep.forwarded,
		reraiseDrop:  ep.reraised && ep.ReraiseVerdict.Dropped(),
		mainIsInit:   ep.initLike(),
		kill:         ep.killed,
		exit:         ep.exited,
		exitSignal:   ep.ExitSignal,
		oomMain:      ep.oomMain,
		oomFirst:     ep.oomFirst,
		hookTimedOut: ep.PreStop.timedOut(&ep.Episode),
		startUnseen:  ep.StartUnseen,
	}
}

// ignoredStop reports whether the stop signal never ended the main process
// as it was meant to: the kernel dropped it, it stayed blocked with nothing
// taking it, or the handler's only answer was to raise it again with the
// default action and the kernel dropped that (a namespace init: Node.js's
// one-shot handler).
func (f facts) ignoredStop() bool {
	return f.stopFate.Dropped() || f.stopFate == sigvocab.FateBlocked && !f.acted || f.reraiseDrop
}

// killed reports whether the main process was killed by SIGKILL, the one
// rule every outcome and cause reads: from its exit when that was seen (a
// SIGKILL that came while it was already exiting by itself did not kill
// it; an exit by SIGKILL is a kill even when the SIGKILL's own event was
// lost), else from a delivered SIGKILL (Flush).
func (f facts) killed() bool {
	if f.exit {
		return f.exitSignal == sigvocab.SIGKILL
	}
	return f.kill
}

// decide gives the outcome. The first rule that applies wins:
//
//  1. oom_killed: the OOM killer picked the main process; or another
//     process before any stop signal or SIGKILL, and the main process then
//     died with no stop signal sent (an init whose child it was ends). The
//     memory limit is the cause, whatever the runtime did next. When
//     nothing followed (no stop, no SIGKILL, no exit: the main process
//     lived on), the episode is no stop: oom_kill_survived. When a stop
//     signal followed, the stop is judged by the rules below, the OOM kill
//     one of its steps.
//  2. unfinished: the stop may have begun before tracing did (no stop
//     signal seen, nor the main process's start, and the first event
//     within the stop budget after tracing began): a SIGKILL or an exit
//     alone cannot tell whether a stop signal came first and what the main
//     process did with it, so no verdict below is given. An OOM kill of
//     the main process stands (rule 1); one of another process does not
//     (it may have come after an unseen stop signal).
//  3. killed: the main process was killed by SIGKILL with no stop signal
//     before it.
//  4. prestop_timeout: killed by SIGKILL after a stop signal that came late
//     because the container's preStop hook used up the grace period (the
//     kubelet then gives the stop signal its 2 s minimum).
//  5. ignored_by_init (an init) or ignored (a main process that is no
//     init): killed by SIGKILL after a stop signal it never acted on: the
//     kernel dropped it (no handler at an init, SIG_IGN, a signal whose
//     default is to do nothing), or it stayed blocked and no handler ran
//     and nothing was forwarded; or its handler's answer was to raise it
//     again with the default action, which the kernel dropped because the
//     main process is a namespace init (Node.js's one-shot handler). This
//     is read from the kernel's verdict on the re-raise, not from a list of
//     programs.
//  6. handler_timeout: killed by SIGKILL after it took the stop signal (a
//     handler, a forwarding init, a sigwait, the default action) but had
//     not ended.
//  7. graceful: the kernel queued or delivered the stop signal and the main
//     process ended before any SIGKILL, with an exit code (0, 143 from a
//     trap or an init passing on its child's death, 1) or by that signal
//     (a default action). The mechanism does not matter: a handler,
//     sigwait (tini), signalfd (catatonit), a shell trap, or a re-raise the
//     kernel dropped followed by an exit of its own (the Go runtime exits
//     2 at once).
//  8. exited: the main process ended and none of the above holds: no stop
//     signal, one it never acted on, or a death by another signal (a crash
//     during shutdown).
//  9. unfinished: only a stop signal, and the recording ended first.
//
// "Killed by SIGKILL" is facts.killed: read from the exit when it was
// seen, else from a delivered SIGKILL.
func decide(f facts) Outcome {
	killed := f.killed()
	switch {
	case f.oomMain:
		return OutcomeOOMKilled
	case f.startUnseen && !f.stop:
		return OutcomeUnfinished
	case f.oomFirst && !f.stop && !f.kill && !f.exit:
		return OutcomeOOMKillSurvived
	case f.oomFirst && !f.stop:
		return OutcomeOOMKilled
	case killed && !f.stop:
		return OutcomeKilled
	case killed && f.hookTimedOut:
		return OutcomePreStopTimeout
	case killed && f.ignoredStop() && f.mainIsInit:
		return OutcomeIgnoredByInit
	case killed && f.ignoredStop():
		return OutcomeIgnored
	case killed:
		return OutcomeHandlerTimeout
	case f.exit && f.stop && !f.stopFate.Dropped() && (f.exitSignal == 0 || f.exitSignal == f.stopSignal):
		return OutcomeGraceful
	case f.exit:
		return OutcomeExited
	}
	return OutcomeUnfinished
}

// KilledAfterGrace reports whether o is a stop the SIGKILL ended after a
// stop signal that did not (the grace period ran out): ignored_by_init,
// ignored and handler_timeout, which decide gives only to a main process
// killed (facts.killed) after a stop signal, with no preStop hook that
// used up the grace.
func (o Outcome) KilledAfterGrace() bool {
	switch o {
	case OutcomeIgnoredByInit, OutcomeIgnored, OutcomeHandlerTimeout:
		return true
	}
	return false
}
