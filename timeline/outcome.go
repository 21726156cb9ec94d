package timeline

import (
	"fmt"

	"github.com/sigscope/sigscope/tracer"
)

// facts are what an outcome is decided on, apart from the steps.
type facts struct {
	stop       bool          // a stop signal was sent to PID 1 (and PID 1 was not already exiting)
	stopSignal tracer.Signal //
	handled    bool          // a stop signal reached a handler in PID 1
	kill       bool          // a SIGKILL was delivered to PID 1
	exit       bool          // PID 1's exit was seen
	exitSignal tracer.Signal // the signal that ended PID 1, 0 for an exit code
	oomInit    bool          // the OOM killer picked PID 1
	oomFirst   bool          // an OOM kill came before any stop signal, SIGKILL or exit
}

func (ep *episode) facts() facts {
	return facts{
		stop:       ep.stopped(),
		stopSignal: ep.StopSignal,
		handled:    ep.handled,
		kill:       ep.killed,
		exit:       ep.exited,
		exitSignal: ep.ExitSignal,
		oomInit:    ep.oomInit,
		oomFirst:   ep.oomFirst,
	}
}

// decide gives the outcome. The first rule that applies wins:
//
//  1. oom_killed: the OOM killer picked PID 1, or another process before any
//     stop signal or SIGKILL. The memory limit is the cause, whatever the
//     runtime did next.
//  2. killed: PID 1 was killed by SIGKILL with no stop signal before it.
//  3. handler_timeout: killed by SIGKILL after a stop signal reached a handler.
//  4. ignored_by_init: killed by SIGKILL after a stop signal that PID 1 dropped
//     (no handler, SIG_IGN, kept blocked: no handler ever ran).
//  5. graceful: a stop signal reached a handler and PID 1 then exited with a
//     code (any code: 0, 143 from a shell trap, 1), or by that stop signal.
//  6. exited: PID 1 exited and none of the above holds: no stop signal, one
//     it dropped, or a death by another signal (a crash during shutdown).
//  7. unfinished: only a stop signal, and the recording ended first.
//
// "Killed by SIGKILL" is read from PID 1's exit when it was seen: a SIGKILL
// that arrived while PID 1 was already exiting by itself did not kill it (its
// exit has a code), and an exit by SIGKILL is a kill even when the SIGKILL's
// own event was lost or not traced. Without an exit (Flush), a delivered
// SIGKILL counts.
func decide(f facts) Outcome {
	killed := f.kill
	if f.exit {
		killed = f.exitSignal == tracer.SIGKILL
	}
	switch {
	case f.oomInit || f.oomFirst:
		return OutcomeOOMKilled
	case killed && !f.stop:
		return OutcomeKilled
	case killed && f.handled:
		return OutcomeHandlerTimeout
	case killed:
		return OutcomeIgnoredByInit
	case f.exit && f.stop && f.handled && (f.exitSignal == 0 || f.exitSignal == f.stopSignal):
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
	FixInit = "Use the exec form of ENTRYPOINT/CMD, `exec` the app in the entrypoint script, or run an init such as tini"
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

// droppedHint explains why PID 1 did not act on the stop signal, from the
// kernel's verdict; "" when it did.
func (ep *episode) droppedHint() string {
	comm, sig := ep.Init.Comm, ep.StopSignal
	switch ep.StopVerdict {
	case VerdictPID1Ignored:
		if ep.stopBlocked {
			return fmt.Sprintf("PID 1 (%s) had %s blocked and has no handler for it: when it unblocked it the kernel dropped it, as it drops every signal a namespace init has no handler for (a shell blocks it while it waits for a foreground command). %s",
				comm, sig, ep.initFix())
		}
		return fmt.Sprintf("PID 1 (%s) has no %s handler: the kernel drops %s sent to a namespace init. %s", comm, sig, sig, ep.initFix())
	case VerdictSigIgn:
		return fmt.Sprintf("PID 1 (%s) ignores %s (SIG_IGN: `trap '' %s`, nohup, or an ignore inherited across exec): remove it, or set the stop signal (STOPSIGNAL) to one the application handles.",
			comm, sig, shortName(sig))
	case VerdictDefaultIgnored:
		return fmt.Sprintf("The default action of %s is to do nothing and PID 1 (%s) has no handler for it: set the stop signal (STOPSIGNAL) to one the application handles, or handle %s.",
			sig, comm, sig)
	case VerdictBlocked, VerdictAlreadyPending:
		if ep.stopHandler == tracer.DispHandler {
			return fmt.Sprintf("PID 1 (%s) has a %s handler but kept %s blocked until the SIGKILL, so the handler never ran: unblock it while the application runs (a shell blocks it while it waits for a foreground command). %s",
				comm, sig, sig, ep.initFix())
		}
		return fmt.Sprintf("PID 1 (%s) kept %s blocked until the SIGKILL and has no handler for it (a shell blocks it while it waits for a foreground command). %s",
			comm, sig, ep.initFix())
	}
	return ""
}

func shortName(s tracer.Signal) string {
	n := s.String()
	if len(n) > 3 && n[:3] == "SIG" {
		return n[3:]
	}
	return n
}

// hint says what to change, for the outcomes that call for a change.
func hint(ep *episode) string {
	comm := ep.Init.Comm
	switch ep.Outcome {
	case OutcomeOOMKilled:
		victim := "a process"
		if len(ep.OOMVictims) > 0 {
			v := ep.OOMVictims[0]
			if ep.oomInit {
				for _, p := range ep.OOMVictims {
					if p.NsPID == 1 {
						v = p
					}
				}
			}
			victim = procText(v)
		}
		return fmt.Sprintf("The kernel's OOM killer killed %s: the container ran out of memory (its memory limit, or the node's). %s.", victim, fixOOM)
	case OutcomeKilled:
		if ep.killKernel {
			return fmt.Sprintf("The kernel SIGKILLed PID 1 (%s) with no stop signal before it; with no OOM event traced, the OOM killer is the usual cause. %s.", comm, fixOOM)
		}
		return fmt.Sprintf("PID 1 (%s) was SIGKILLed with no stop signal before it (docker kill, docker rm -f, kill -9), so it had no chance to shut down. If a clean shutdown matters, stop it with docker stop or a normal pod deletion, which send the stop signal first.", comm)
	case OutcomeIgnoredByInit:
		if h := ep.droppedHint(); h != "" {
			return h
		}
		return fmt.Sprintf("PID 1 (%s) did not act on %s before the SIGKILL. %s", comm, ep.StopSignal, ep.initFix())
	case OutcomeHandlerTimeout:
		grace := ""
		if ep.GracePeriod > 0 {
			grace = fmt.Sprintf(" (grace period %s)", ep.GracePeriod)
		}
		used := ""
		if d, ok := ep.KillAfter(); ok {
			used = fmt.Sprintf(" %.1fs later", d.Seconds())
		}
		return fmt.Sprintf("PID 1 (%s) handled %s but was still running%s, when the SIGKILL came%s: make its shutdown faster, or raise the grace period (%s).",
			comm, ep.StopSignal, used, grace, ep.graceFix())
	case OutcomeGraceful:
		if n := len(ep.CascadeKills) + ep.CascadeOmitted; n > 0 {
			return fmt.Sprintf("PID 1 (%s) exited while %d other process(es) still ran, and the kernel SIGKILLed them: if they need a clean shutdown, have PID 1 forward %s and wait for them (tini and dumb-init do).",
				comm, n, ep.StopSignal)
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
			return fmt.Sprintf("PID 1 (%s) was killed by %s, not by a stop: look for a crash in the application's logs.", comm, ep.ExitSignal)
		case ep.ExitStatus != 0:
			return fmt.Sprintf("PID 1 (%s) exited on its own with code %d: see the application's logs.", comm, ep.ExitStatus)
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
