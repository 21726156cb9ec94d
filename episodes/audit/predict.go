package audit

import (
	"path/filepath"

	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Facts are what a prediction is made from: the stop signal and the main
// process's state for it, as the kernel or /proc showed it.
type Facts struct {
	Signal   sigvocab.Signal
	State    sigvocab.TaskState // for Signal
	Signalfd bool               // a signalfd of the process watches Signal
	Cmdline  []string
	Comm     string
	// Runtime is the process's language runtime: whether a handler that
	// re-raises the signal ends it, and the fix a hint names.
	Runtime langrt.Runtime
	// Source is where State came from (SourceKernel when empty).
	// SourceProc shows no sa_flags: State.OneShot is unknown then.
	Source string
}

// Prediction is what the audit predicts of a stop, as typed values: the
// outcome, the kernel's fate for the stop signal, and the cause, which
// the hint words ([Prediction.Hint], words.go).
type Prediction struct {
	// Outcome is the stop's, in the timeline's words (Graceful,
	// IgnoredByInit, Ignored, Killed), or Unknown.
	Outcome timeline.Outcome
	Fate    sigvocab.Fate // what the kernel will do with the stop signal
	Cause   Cause         // why; CauseNone when there is nothing to say
	// Forwarder names the known init that forwards the signal
	// (CauseForwarderSigwait, CauseForwarderSignalfd).
	Forwarder string

	facts Facts // what the hint names: the signal, the process, its runtime
}

// unknown is Unknown as a prediction's outcome: no outcome of a stop.
const unknown timeline.Outcome = Unknown

// Cause is why a prediction is what it is.
type Cause uint8

const (
	CauseNone              Cause = iota // nothing to say: a handler ends the process, or a fate this cannot tell
	CauseStopIsKill                     // the stop signal is SIGKILL itself: no chance to shut down
	CauseExiting                        // the process is already exiting: the kernel drops every signal
	CauseOneShot                        // a namespace init's one-shot handler (SA_RESETHAND) re-raises it, and the kernel drops that
	CauseRuntimeReraise                 // /proc shows a handler of a runtime whose own one re-raises it for good (Node.js): inferred
	CauseRuntimeExit                    // the runtime's handler re-raises it, the kernel drops that, and the runtime exits at once (Go): no cleanup
	CauseForwarderSigwait               // a known init waits for it (sigtimedwait) and forwards it
	CauseSigwait                        // the process waits for it (sigtimedwait or sigwaitinfo)
	CauseBlockedHandler                 // blocked now, delivered to its handler when unblocked
	CauseForwarderSignalfd              // a known init reads it from a signalfd and forwards it
	CauseSignalfd                       // the process reads it from a signalfd
	CauseBlockedInit                    // blocked, no handler, no signalfd: a namespace init discards it even when unblocked
	CauseBlocked                        // blocked, no handler, no signalfd: pending until unblocked
	CauseDefaultKills                   // no handler, and its default action ends a process that is no init
	CauseDefaultStops                   // no handler, and its default action does not end the process
	CauseNoHandlerInit                  // a namespace init with no handler: the kernel drops it
	CauseSigIgn                         // the process ignores it (SIG_IGN)
	CauseDefaultIgnored                 // no handler, and its default action is to do nothing
)

// Predict says what the runtime's stop signal will do. The kernel's part,
// the signal's fate, is sigvocab.PredictFate's (with force: the runtime sends
// from the host); this adds what the process does with a queued signal,
// and the cause its hint says (in the fate's own words, sigvocab.Fate.Reason,
// the timeline's too).
func Predict(f Facts) Prediction {
	sig, st := f.Signal, f.State
	p := Prediction{Fate: sigvocab.PredictFate(sig, st, true), facts: f}
	// byInit is the outcome of a stop signal the process will not act on.
	byInit := timeline.OutcomeIgnored
	if st.NSInit {
		byInit = timeline.OutcomeIgnoredByInit
	}
	if sig == sigvocab.SIGKILL {
		return p.is(timeline.OutcomeKilled, CauseStopIsKill)
	}
	switch p.Fate {
	case sigvocab.FateDroppedExiting:
		return p.is(unknown, CauseExiting)
	case sigvocab.FateHandler:
		return p.is(handled(f))
	case sigvocab.FateSigwait:
		if p.Forwarder = forwarder(f); p.Forwarder != "" {
			return p.is(timeline.OutcomeGraceful, CauseForwarderSigwait)
		}
		return p.is(timeline.OutcomeGraceful, CauseSigwait)
	case sigvocab.FateBlocked:
		switch {
		case st.Handler == sigvocab.DispHandler:
			// Once unblocked it goes to the handler: what the handler
			// does decides, as for one that is not blocked.
			if o, c := handled(f); o != timeline.OutcomeGraceful {
				return p.is(o, c)
			}
			return p.is(timeline.OutcomeGraceful, CauseBlockedHandler)
		case f.Signalfd && st.Handler == sigvocab.DispDefault:
			if p.Forwarder = forwarder(f); p.Forwarder != "" {
				return p.is(timeline.OutcomeGraceful, CauseForwarderSignalfd)
			}
			return p.is(timeline.OutcomeGraceful, CauseSignalfd)
		case st.Handler == sigvocab.DispIgnore:
			return p.is(byInit, CauseSigIgn)
		case st.NSInit:
			return p.is(timeline.OutcomeIgnoredByInit, CauseBlockedInit)
		}
		return p.is(timeline.OutcomeIgnored, CauseBlocked)
	case sigvocab.FateDefault:
		if p.Fate.Kills(sig) {
			return p.is(timeline.OutcomeGraceful, CauseDefaultKills)
		}
		return p.is(byInit, CauseDefaultStops)
	case sigvocab.FateDroppedInit:
		return p.is(timeline.OutcomeIgnoredByInit, CauseNoHandlerInit)
	case sigvocab.FateDroppedSigIgn:
		return p.is(byInit, CauseSigIgn)
	case sigvocab.FateDroppedDefault:
		return p.is(byInit, CauseDefaultIgnored)
	}
	return p.is(unknown, CauseNone)
}

// is sets the prediction's outcome and cause.
func (p Prediction) is(o timeline.Outcome, c Cause) Prediction {
	p.Outcome, p.Cause = o, c
	return p
}

// handled predicts the stop of a process whose handler will get the stop
// signal. A process that is no init is ended by whatever its handler does,
// a re-raise included (the default action kills it). A namespace init is
// not: the kernel drops a signal it sends itself with the default action.
func handled(f Facts) (timeline.Outcome, Cause) {
	sig, st, rt := f.Signal, f.State, f.Runtime
	switch {
	case !st.NSInit:
	case st.OneShot && !exitsInHandler(rt):
		// SA_RESETHAND, read from the kernel: the handler runs once with
		// the disposition already back to SIG_DFL, and one that re-raises
		// (Node.js's) sends itself a signal an init drops.
		return timeline.OutcomeIgnoredByInit, CauseOneShot
	case f.Source == SourceProc && reraisesForGood(rt, sig):
		// /proc has no sa_flags: a handler is all it shows, and the
		// runtime's own handler (one-shot, re-raising) cannot be told
		// from one the application registered.
		return timeline.OutcomeIgnoredByInit, CauseRuntimeReraise
	case rt.ExitAfterReraise() != 0 && reraised(sig):
		// The Go runtime: its handler is there whether or not the
		// application called signal.Notify, which no handler table shows.
		return timeline.OutcomeGraceful, CauseRuntimeExit
	}
	return timeline.OutcomeGraceful, CauseNone
}

// reraised reports whether sig is one a runtime's own handler re-raises
// (langrt.Runtime.Reraises): SIGTERM and SIGINT.
func reraised(sig sigvocab.Signal) bool { return sig == sigvocab.SIGTERM || sig == sigvocab.SIGINT }

// reraisesForGood reports whether rt's own handler for sig re-raises it
// and rt does not exit when an init survives that (Node.js).
func reraisesForGood(rt langrt.Runtime, sig sigvocab.Signal) bool {
	return reraised(sig) && rt.Reraises() && rt.ExitAfterReraise() == 0
}

// exitsInHandler reports whether a one-shot handler of rt ends the process
// even at a namespace init: rt exits when its re-raise does not kill it
// (the Go runtime), or rt is known and does not re-raise at all.
func exitsInHandler(rt langrt.Runtime) bool {
	return rt.ExitAfterReraise() != 0 || langrt.Known(rt) && !rt.Reraises()
}

// forwarder names a known init that waits for signals and forwards them to
// its child, from argv[0] or the command name (langrt's one list).
func forwarder(f Facts) string {
	names := []string{f.Comm}
	if len(f.Cmdline) > 0 {
		names = append([]string{filepath.Base(f.Cmdline[0])}, names...)
	}
	for _, n := range names {
		if langrt.ForwardingInit(n) {
			return n
		}
	}
	return ""
}

// isShell reports whether the process is a shell, by its runtime or its
// argv[0] (langrt's one list).
func isShell(f Facts) bool {
	return f.Runtime == langrt.Shell || len(f.Cmdline) > 0 && langrt.IsShell(f.Cmdline[0])
}
