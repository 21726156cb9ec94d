package timeline

import (
	"fmt"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The hint: what to change, for each outcome that calls for a change,
// from the outcome and the causes.

// hint says what to change, for the outcomes that call for a change.
func (ep *episode) hint(c causes) string {
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
	case OutcomeOOMKillSurvived:
		return fmt.Sprintf("The kernel's OOM killer killed %s while the container ran; %s went on, so the container was not restarted and its work may be half done. %s.",
			procList(ep.OOMVictims), who, fixOOM)
	case OutcomeKilled:
		if ep.killKernel {
			return fmt.Sprintf("The kernel SIGKILLed %s with no stop signal before it; with no OOM event traced, the OOM killer is the usual cause. %s.", who, fixOOM)
		}
		return fmt.Sprintf("%s was SIGKILLed with no stop signal before it (docker kill, docker rm -f, kill -9), so it had no chance to shut down. If a clean shutdown matters, stop it with docker stop or a normal pod deletion, which send the stop signal first.", who)
	case OutcomePreStopTimeout:
		if h := ep.hookHint(c.hook); h != "" {
			return h
		}
		used := ""
		if d, ok := ep.PreStop.Duration(ep.StopAt); ok {
			used = fmt.Sprintf(" (it had run %.1fs)", d.Seconds())
		}
		return fmt.Sprintf("The preStop hook (%s) was still running when the grace period (%s) ran out%s, so the kubelet sent %s with only its 2 s minimum left and then SIGKILLed %s: make the hook finish well within the grace period, or raise terminationGracePeriodSeconds to cover the hook and the shutdown after %s.",
			ep.PreStop.Kind, ep.GracePeriod, used, ep.StopSignal, who, ep.StopSignal)
	case OutcomeIgnoredByInit, OutcomeIgnored:
		if h := ep.droppedHint(c.unacted); h != "" {
			return h
		}
		return fmt.Sprintf("%s did not act on %s before the SIGKILL. %s", who, ep.StopSignal, initFix(ep.fixFor()))
	case OutcomeHandlerTimeout:
		if h := ep.atKillHint(c.atKill); h != "" {
			return h
		}
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
		if c.unacted == unactedReraise && ep.ExitSignal == 0 {
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
			if h := ep.droppedHint(c.unacted); h != "" {
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
		if h := ep.droppedHint(c.unacted); h != "" {
			return h + " Unless it exits on its own, the runtime will SIGKILL it at the end of the grace period."
		}
		return ""
	}
	return ""
}

// droppedHint explains why the main process did not act on the stop
// signal, from its cause; "" when it did.
func (ep *episode) droppedHint(why unactedKind) string {
	who, sig := ep.who(), ep.StopSignal
	fix := HandleFix(ep.Main.Runtime, ep.initLike(), ep.fixFor())
	switch why {
	case unactedReraise:
		return fmt.Sprintf("%s ran its %s handler, and the handler raised %s again with the default action to end the process: the kernel drops that for a namespace init, so only the SIGKILL ended it. %s",
			who, sig, sig, fix)
	case unactedInitBlocked:
		return fmt.Sprintf("%s had %s blocked and has no handler for it: when it unblocked it the kernel dropped it, as it drops every signal a namespace init has no handler for (a shell blocks it while it waits for a foreground command). %s",
			who, sig, fix)
	case unactedInitConfigured:
		return fmt.Sprintf("%s has no %s handler: the kernel drops %s sent to a namespace init. The container's stop signal is %s: handle it, or stop with a signal the application handles (STOPSIGNAL, --stop-signal, lifecycle.stopSignal). %s",
			who, sig, sig, sig, fix)
	case unactedInit:
		return fmt.Sprintf("%s has no %s handler: the kernel drops %s sent to a namespace init. %s", who, sig, sig, fix)
	case unactedSigIgn:
		return fmt.Sprintf("%s ignores %s (SIG_IGN: `trap '' %s`, nohup, or an ignore inherited across exec): remove it, or set the stop signal (STOPSIGNAL) to one the application handles.",
			who, sig, shortName(sig))
	case unactedDefault:
		return fmt.Sprintf("The default action of %s is to do nothing and %s has no handler for it: set the stop signal (STOPSIGNAL) to one the application handles, or handle %s.",
			sig, who, sig)
	case unactedBlockedHandler:
		return fmt.Sprintf("%s has a %s handler but kept %s blocked until the SIGKILL, so the handler never ran: unblock it while the application runs (a shell blocks it while it waits for a foreground command). %s",
			who, sig, sig, fix)
	case unactedBlocked:
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
