package timeline

import (
	"fmt"

	"github.com/sigscope/sigscope/internal/langrt"
	"github.com/sigscope/sigscope/internal/sigvocab"
)

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
		mainIsInit:   !ep.mainKnown || ep.MainIsInit,
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

// decide gives the outcome. The first rule that applies wins:
//
//  1. oom_killed: the OOM killer picked the main process, or another
//     process before any stop signal or SIGKILL. The memory limit is the
//     cause, whatever the runtime did next.
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
// "Killed by SIGKILL" is read from the exit when it was seen: a SIGKILL that
// arrived while the process was already exiting by itself did not kill it
// (its exit has a code), and an exit by SIGKILL is a kill even when the
// SIGKILL's own event was lost or not traced. Without an exit (Flush), a
// delivered SIGKILL counts.
func decide(f facts) Outcome {
	killed := f.kill
	if f.exit {
		killed = f.exitSignal == sigvocab.SIGKILL
	}
	switch {
	case f.oomMain:
		return OutcomeOOMKilled
	case f.startUnseen && !f.stop:
		return OutcomeUnfinished
	case f.oomFirst:
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

// Fixes named by the hints.
const (
	// FixInit is the fix for a PID 1 that does not act on the stop signal; the
	// audit's predictions use it too, so both say the same thing.
	FixInit = langrt.FixExecForm
	fixOOM  = "Raise the memory limit (docker run --memory, Kubernetes resources.limits.memory) or reduce the application's memory use"
)

// initFix is the fix for a PID 1 that does not act on the stop signal.
func (ep *episode) initFix() string {
	if ep.graceSource == "kubernetes" {
		return FixInit + " in the image."
	}
	return FixInit + " (docker run --init)."
}

// graceFix names the knob that sets the grace period on this runtime.
func (ep *episode) graceFix() string {
	switch ep.graceSource {
	case "kubernetes":
		return "terminationGracePeriodSeconds"
	case "docker":
		return "docker stop -t, docker run --stop-timeout, compose stop_grace_period"
	}
	return "docker stop -t or --stop-timeout; Kubernetes terminationGracePeriodSeconds"
}

// who names the main process with its command, and its runtime when that
// says more: "PID 1 (sh)", "PID 1 (node, Node.js)", "the main process
// (sleep)".
func (ep *episode) who() string {
	if ep.Main.Comm == "" {
		return ep.mainName()
	}
	return fmt.Sprintf("%s (%s)", ep.mainName(), mainLabel(ep.Main))
}

// handleFix is the fix for a main process that does not act on the stop
// signal: its runtime's way to handle it when the runtime is known (with an
// init as the other way), else the generic one (exec form, an init).
func (ep *episode) handleFix() string {
	rt := ep.Main.Runtime
	f := rt.HandleFix()
	switch {
	case f == "" || rt == langrt.Shell:
		if !ep.facts().mainIsInit {
			return "Handle it in the application, or set the stop signal (STOPSIGNAL, --stop-signal, lifecycle.stopSignal) to one it handles."
		}
		return ep.initFix()
	case !ep.facts().mainIsInit:
		return capitalize(f) + "."
	case ep.graceSource == "kubernetes":
		return capitalize(f) + "; or make an init that passes signals on (tini, dumb-init) the image's ENTRYPOINT."
	}
	return capitalize(f) + "; or run it under an init that passes signals on (docker run --init)."
}

// droppedHint explains why the main process did not act on the stop
// signal, from the kernel's verdict; "" when it did.
func (ep *episode) droppedHint() string {
	who, sig := ep.who(), ep.StopSignal
	fix := ep.handleFix()
	if ep.facts().reraiseDrop {
		return fmt.Sprintf("%s ran its %s handler, and the handler raised %s again with the default action to end the process: the kernel drops that for a namespace init, so only the SIGKILL ended it. %s",
			who, sig, sig, fix)
	}
	switch ep.StopVerdict {
	case sigvocab.FateDroppedInit:
		if ep.stopBlocked {
			return fmt.Sprintf("%s had %s blocked and has no handler for it: when it unblocked it the kernel dropped it, as it drops every signal a namespace init has no handler for (a shell blocks it while it waits for a foreground command). %s",
				who, sig, fix)
		}
		if ep.configuredStop != 0 && sig != sigvocab.SIGTERM {
			return fmt.Sprintf("%s has no %s handler: the kernel drops %s sent to a namespace init. The container's stop signal is %s: handle it, or stop with a signal the application handles (STOPSIGNAL, --stop-signal, lifecycle.stopSignal). %s",
				who, sig, sig, sig, fix)
		}
		return fmt.Sprintf("%s has no %s handler: the kernel drops %s sent to a namespace init. %s", who, sig, sig, fix)
	case sigvocab.FateDroppedSigIgn:
		return fmt.Sprintf("%s ignores %s (SIG_IGN: `trap '' %s`, nohup, or an ignore inherited across exec): remove it, or set the stop signal (STOPSIGNAL) to one the application handles.",
			who, sig, shortName(sig))
	case sigvocab.FateDroppedDefault:
		return fmt.Sprintf("The default action of %s is to do nothing and %s has no handler for it: set the stop signal (STOPSIGNAL) to one the application handles, or handle %s.",
			sig, who, sig)
	case sigvocab.FateBlocked, sigvocab.FateAlreadyPending:
		if ep.handled || ep.forwarded {
			return ""
		}
		if ep.stopHandler == sigvocab.DispHandler {
			return fmt.Sprintf("%s has a %s handler but kept %s blocked until the SIGKILL, so the handler never ran: unblock it while the application runs (a shell blocks it while it waits for a foreground command). %s",
				who, sig, sig, fix)
		}
		return fmt.Sprintf("%s kept %s blocked until the SIGKILL and has no handler for it, and nothing read it (sigwait, signalfd). %s",
			who, sig, fix)
	}
	return ""
}

func shortName(s sigvocab.Signal) string {
	n := s.String()
	if len(n) > 3 && n[:3] == "SIG" {
		return n[3:]
	}
	return n
}

// hint says what to change, for the outcomes that call for a change.
func hint(ep *episode) string {
	who := ep.who()
	switch ep.Outcome {
	case OutcomeOOMKilled:
		victim := "a process"
		if len(ep.OOMVictims) > 0 {
			v := ep.OOMVictims[0]
			if ep.oomMain {
				for _, p := range ep.OOMVictims {
					if p.PID == ep.Main.PID {
						v = p
					}
				}
			}
			victim = procText(v)
		}
		return fmt.Sprintf("The kernel's OOM killer killed %s: the container ran out of memory (its memory limit, or the node's). %s.", victim, fixOOM)
	case OutcomeKilled:
		if ep.killKernel {
			return fmt.Sprintf("The kernel SIGKILLed %s with no stop signal before it; with no OOM event traced, the OOM killer is the usual cause. %s.", who, fixOOM)
		}
		return fmt.Sprintf("%s was SIGKILLed with no stop signal before it (docker kill, docker rm -f, kill -9), so it had no chance to shut down. If a clean shutdown matters, stop it with docker stop or a normal pod deletion, which send the stop signal first.", who)
	case OutcomePreStopTimeout:
		used := ""
		if d, ok := ep.PreStop.Duration(ep.StopAt); ok {
			used = fmt.Sprintf(" (it had run %.1fs)", d.Seconds())
		}
		return fmt.Sprintf("The preStop hook (%s) was still running when the grace period (%s) ran out%s, so the kubelet sent %s with only its 2 s minimum left and then SIGKILLed %s: make the hook finish well within the grace period, or raise terminationGracePeriodSeconds to cover the hook and the shutdown after %s.",
			ep.PreStop.Kind, ep.GracePeriod, used, ep.StopSignal, who, ep.StopSignal)
	case OutcomeIgnoredByInit, OutcomeIgnored:
		if h := ep.droppedHint(); h != "" {
			return h
		}
		return fmt.Sprintf("%s did not act on %s before the SIGKILL. %s", who, ep.StopSignal, ep.initFix())
	case OutcomeHandlerTimeout:
		grace := ""
		switch {
		case ep.GracePeriod > 0:
			grace = fmt.Sprintf(" (grace period %s)", ep.GracePeriod)
		case ep.StopTimeout > 0 && !ep.KillAt.IsZero():
			grace = " (" + ep.givenText() + ")"
		}
		used := ""
		if d, ok := ep.KillAfter(); ok {
			used = fmt.Sprintf(" %.1fs later", d.Seconds())
		}
		took := "handled"
		if ep.ForwardingInit != "" || ep.forwarded && !ep.handled {
			took = "passed on"
		}
		faster := "make its shutdown faster"
		if f := ep.Main.Runtime.SlowFix(); f != "" && ep.ForwardingInit == "" {
			faster = f
		}
		return fmt.Sprintf("%s %s %s but was still running%s, when the SIGKILL came%s: %s, or raise the grace period (%s).",
			who, took, ep.StopSignal, used, grace, faster, ep.graceFix())
	case OutcomeGraceful:
		if ep.facts().reraiseDrop && ep.ExitSignal == 0 {
			h := fmt.Sprintf("%s stopped, but its exit code %d is not the %d a death by %s gives: its handler raised %s again, the kernel dropped that for PID 1, and it exited by itself.",
				who, ep.ExitStatus, 128+int(ep.StopSignal), ep.StopSignal, ep.StopSignal)
			if f := ep.Main.Runtime.HandleFix(); f != "" {
				h += " If the code matters (a non-zero exit reads as a failure), " + f + "."
			}
			return h
		}
		if n := len(ep.CascadeKills) + ep.CascadeOmitted; n > 0 {
			return fmt.Sprintf("%s exited while %d other process(es) still ran, and the kernel SIGKILLed them: if they need a clean shutdown, have PID 1 forward %s and wait for them (tini and dumb-init do).",
				who, n, ep.StopSignal)
		}
		return ""
	case OutcomeExited:
		if ep.stopped() {
			if h := ep.droppedHint(); h != "" {
				return h
			}
		}
		switch {
		case ep.ExitSignal != 0:
			return fmt.Sprintf("%s was killed by %s, not by a stop: look for a crash in the application's logs.", who, ep.ExitSignal)
		case ep.ExitStatus != 0:
			return fmt.Sprintf("%s exited on its own with code %d: see the application's logs.", who, ep.ExitStatus)
		}
		return ""
	case OutcomeUnfinished:
		if h := ep.droppedHint(); h != "" {
			return h + " Unless it exits on its own, the runtime will SIGKILL it at the end of the grace period."
		}
		return ""
	}
	return ""
}
