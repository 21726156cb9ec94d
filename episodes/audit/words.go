package audit

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The words of a prediction: its hint, from its cause. The kernel's part is
// said in the fate's own words (sigvocab.Fate.Reason, the timeline's too),
// the main process is named as the timeline names it (timeline.MainRole),
// and a hint ends with the timeline's fix (HandleFix, StopSignalFix,
// CleanExitFix), so that a prediction and the stop it predicts name one
// fix, worded once.

// toKill is what a stop signal the process will not act on leads to.
const toKill = "the stop will wait the whole timeout and end in SIGKILL (exit 137)"

// Hint says why the prediction is what it is and what to change; "" when
// there is nothing to say (a handler that ends the process).
func (p Prediction) Hint() string {
	f := p.facts
	sig, st, fate := f.Signal, f.State, p.Fate
	name := processName(f)
	// why is the kernel's reason, about the process by name or as "it".
	why := func(who string) string { return fate.Reason(sig, st.Handler, who) }
	rt := f.Runtime
	switch p.Cause {
	case CauseStopIsKill:
		return fmt.Sprintf("The stop signal is SIGKILL: %s gets no chance to shut down. %s", name, timeline.StopSignalFix(sig, fate, role(st)))
	case CauseExiting:
		return fmt.Sprintf("%s: the kernel drops every signal sent to it now.", why(name))
	case CauseOneShot:
		return fmt.Sprintf("%s: its %s handler is one-shot (SA_RESETHAND): it re-raises the signal with the default action, and the kernel drops that for PID 1, so %s. %s",
			name, sig, toKill, handleFix(f))
	case CauseRuntimeReraise:
		return fmt.Sprintf("%s is %s and has a %s handler; /proc does not show whether it is %s's own one-shot handler (SA_RESETHAND), which re-raises the signal with the default action for the kernel to drop at PID 1, or one the application registered. Inferred from the runtime: unless the application handles %s itself, %s. %s",
			name, rt.Name(), sig, rt.Name(), sig, toKill, handleFix(f))
	case CauseRuntimeExit:
		return fmt.Sprintf("%s runs on %s: unless the application handles %s itself, %s re-raises it, the kernel drops that for PID 1, and %s then exits at once with status %d: a stop without cleanup, with exit status %d rather than %d. %s",
			name, rt.Name(), sig, rt.Name(), rt.Name(), rt.ExitAfterReraise(), rt.ExitAfterReraise(), 128+int(sig), timeline.CleanExitFix(rt))
	case CauseForwarderSigwait:
		return fmt.Sprintf("%s is %s: %s and forwards it.", role(st), p.Forwarder, why("it"))
	case CauseSigwait:
		return fmt.Sprintf("%s: the kernel queues it for the wait (sigtimedwait or sigwaitinfo).", why(name))
	case CauseBlockedHandler:
		return fmt.Sprintf("%s right now; it is delivered when %s unblocks it.", why(name), role(st))
	case CauseForwarderSignalfd:
		return fmt.Sprintf("%s is %s: it reads %s from a signalfd and forwards it.", role(st), p.Forwarder, sig)
	case CauseSignalfd:
		return fmt.Sprintf("%s and reads it from a signalfd.", why(name))
	case CauseSigIgn:
		return fmt.Sprintf("%s: %s. %s",
			sigvocab.FateDroppedSigIgn.Reason(sig, st.Handler, name), toKill, timeline.StopSignalFix(sig, sigvocab.FateDroppedSigIgn, role(st)))
	case CauseBlockedInit:
		return fmt.Sprintf("%s and no signalfd for it: it stays pending, and a namespace init discards it even when unblocked, so %s. %s", why(name), toKill, handleFix(f))
	case CauseBlocked:
		return fmt.Sprintf("%s and no signalfd for it: it stays pending until unblocked, so the stop may wait the whole timeout and end in SIGKILL (exit 137).", why(name))
	case CauseDefaultKills:
		return fmt.Sprintf("%s is not a namespace init and has no %s handler: %s at once, with no cleanup.", name, sig, why("it"))
	case CauseDefaultStops:
		return fmt.Sprintf("%s has no %s handler and %s: %s. %s", name, sig, why("it"), toKill, timeline.StopSignalFix(sig, fate, role(st)))
	case CauseNoHandlerInit:
		shell := ""
		if isShell(f) {
			shell = " It is a shell: shell-form ENTRYPOINT/CMD (`/bin/sh -c app`) makes the shell PID 1 and it does not forward signals."
		}
		return fmt.Sprintf("%s: the kernel drops signals to a namespace init that has none, so %s.%s %s", why(name), toKill, shell, handleFix(f))
	case CauseDefaultIgnored:
		return fmt.Sprintf("%s has no %s handler and %s: %s. %s", name, sig, why(name), toKill, timeline.StopSignalFix(sig, fate, role(st)))
	}
	return ""
}

// handleFix is how a hint ends when the process must act on the stop
// signal itself: the timeline's fix for its runtime (a program run by a
// shell, by its argv[0], is the shell's), as a prediction says it.
func handleFix(f Facts) string {
	rt := f.Runtime
	if rt == langrt.Unknown && isShell(f) {
		rt = langrt.Shell
	}
	return timeline.HandleFix(rt, f.State.NSInit, timeline.FixForPrediction)
}

// role is how hints call the main process.
func role(st sigvocab.TaskState) string { return timeline.MainRole(st.NSInit) }

// processName is role with the command, for the start of a sentence.
func processName(f Facts) string {
	name := role(f.State)
	name = strings.ToUpper(name[:1]) + name[1:] // the start of a sentence
	switch {
	case len(f.Cmdline) > 0:
		return fmt.Sprintf("%s (%s)", name, filepath.Base(f.Cmdline[0]))
	case f.Comm != "":
		return fmt.Sprintf("%s (%s)", name, f.Comm)
	}
	return name
}
