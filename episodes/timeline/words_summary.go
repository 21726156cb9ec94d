package timeline

import (
	"fmt"
	"strings"

	"github.com/sigscope/sigscope/containers/langrt"
)

// The summary: the outcome in one sentence, with the grace, the exit
// and the cascade; and how the sentences name the main process.

// Summary is the outcome in one sentence: what PID 1 did with the stop
// signal, when the SIGKILL came against the grace period, the exit status
// and the cascade. It quotes untrusted comms unescaped, like Step.Text.
func (ep *Episode) Summary() string {
	if ep.summary != "" {
		return ep.summary
	}
	return ep.summaryText()
}

// summaryText is the summary, from the finished episode's fields.
func (ep *Episode) summaryText() string {
	who := ep.who()
	reraiseDropped := ep.ReraiseVerdict.Dropped()
	var parts []string
	switch ep.Outcome {
	case OutcomeGraceful:
		switch {
		case reraiseDropped:
			parts = append(parts, fmt.Sprintf("%s ran its %s handler, which re-raised %s with the default action; the kernel dropped that, as it drops every signal a namespace init has no handler for, and %s exited by itself with code %d (not %d: a signal cannot end a namespace init that has no handler for it)",
				who, ep.StopSignal, ep.StopSignal, ep.mainRole(), ep.ExitStatus, 128+int(ep.StopSignal)))
		case ep.ForwardingInit != "":
			parts = append(parts, fmt.Sprintf("%s, an init, passed %s on and exited", who, ep.StopSignal))
		case ep.ExitSignal == ep.StopSignal && ep.StopSignal != 0:
			parts = append(parts, fmt.Sprintf("%s ended by %s's default action", who, ep.StopSignal))
		default:
			parts = append(parts, fmt.Sprintf("%s took %s (%s) and exited", who, ep.StopSignal, fateWord(ep.StopVerdict)))
		}
	case OutcomeIgnoredByInit, OutcomeIgnored:
		if reraiseDropped {
			parts = append(parts, fmt.Sprintf("%s ran its %s handler, which re-raised %s with the default action, and the kernel dropped that (%s): a namespace init is not ended by a signal it has no handler for",
				who, ep.StopSignal, ep.StopSignal, fateWord(ep.ReraiseVerdict)))
			break
		}
		parts = append(parts, fmt.Sprintf("%s did not act on %s (%s)", who, ep.StopSignal, fateWord(ep.StopVerdict)))
	case OutcomeHandlerTimeout:
		parts = append(parts, fmt.Sprintf("%s took %s (%s) but was still running at the SIGKILL", who, ep.StopSignal, fateWord(ep.StopVerdict)))
	case OutcomeKilled:
		switch {
		case ep.KillSender != nil && ep.KillSender.Kernel:
			parts = append(parts, fmt.Sprintf("SIGKILL from the kernel (in %s %d) with no stop signal before it", ep.KillSender.Comm, ep.KillSender.PID))
		case ep.KillSender != nil:
			parts = append(parts, fmt.Sprintf("SIGKILL from %s (%d) with no stop signal before it", ep.KillSender.Comm, ep.KillSender.PID))
		default:
			parts = append(parts, "killed by SIGKILL with no stop signal before it (the SIGKILL itself was not recorded)")
		}
	case OutcomeOOMKilled:
		s := "the OOM killer killed " + procList(ep.OOMVictims)
		if ep.ExitAt.IsZero() {
			s += "; " + who + " lived on"
		}
		parts = append(parts, s)
	case OutcomeOOMKillSurvived:
		parts = append(parts, "the OOM killer killed "+procList(ep.OOMVictims)+"; "+who+" lived on and nothing stopped the container: not a stop")
	case OutcomeExited:
		if ep.StopSignal != 0 {
			parts = append(parts, fmt.Sprintf("%s ended on its own after %s (%s)", who, ep.StopSignal, fateWord(ep.StopVerdict)))
		} else {
			parts = append(parts, fmt.Sprintf("%s ended on its own", who))
		}
	case OutcomeUnfinished:
		if ep.StartUnseen {
			parts = append(parts, ep.unseenStart(who))
			break
		}
		parts = append(parts, fmt.Sprintf("%s was still running after %s (%s) when the recording ended", who, ep.StopSignal, fateWord(ep.StopVerdict)))
	}
	if d, ok := ep.KillAfter(); ok {
		s := fmt.Sprintf("SIGKILL %.3fs after %s", d.Seconds(), ep.StopSignal)
		switch {
		case ep.GracePeriod > 0 && ep.GraceFrom != "":
			s += fmt.Sprintf(" (grace period %s, from %s)", ep.GracePeriod, ep.GraceFrom)
		case ep.GracePeriod > 0:
			s += fmt.Sprintf(" (grace period %s)", ep.GracePeriod)
		case ep.StopTimeout > 0:
			s += " (" + ep.givenText() + ")"
		}
		parts = append(parts, s)
	} else if d, ok := ep.ExitAfter(); ok {
		parts = append(parts, fmt.Sprintf("exit %.3fs after %s", d.Seconds(), ep.StopSignal))
	}
	if b := ep.budget(); b != "" {
		parts = append(parts, b)
	}
	if ep.StopReason != "" {
		parts = append(parts, "stopped because: "+ep.StopReason)
	}
	if !ep.ExitAt.IsZero() {
		parts = append(parts, fmt.Sprintf("exit status %d", ep.ExitStatus))
	} else if ep.Outcome != OutcomeUnfinished && ep.Outcome != OutcomeOOMKilled {
		parts = append(parts, "the main process's exit not recorded")
	}
	if n := len(ep.CascadeKills) + ep.CascadeOmitted; n > 0 {
		parts = append(parts, fmt.Sprintf("the namespace cascade killed %d process(es)", n))
	}
	if ep.EventsDropped > 0 {
		parts = append(parts, fmt.Sprintf("MAY BE INCOMPLETE: the kernel dropped %d event(s) (ring buffer full) while it was open", ep.EventsDropped))
	}
	return strings.Join(parts, "; ")
}

// mainLabel is the main process's command, with its runtime when that
// says more than the command: "node, Node.js", "api-server, the Go
// runtime"; a shell's or an init's name says enough.
func mainLabel(p Proc) string {
	if rt := p.Runtime; langrt.Known(rt) && rt != langrt.Shell && rt != langrt.Init {
		return p.Comm + ", " + rt.Name()
	}
	return p.Comm
}

// who names the main process with its command, and its runtime when that
// says more: "PID 1 (sh)", "PID 1 (node, Node.js)", "the main process
// (sleep)".
func (ep *Episode) who() string {
	if ep.Main.Comm == "" {
		return ep.mainRole()
	}
	return fmt.Sprintf("%s (%s)", ep.mainRole(), mainLabel(ep.Main))
}

// mainRole is how a sentence calls the main process a second time: "PID 1"
// or "the main process".
func (ep *Episode) mainRole() string {
	// A main process that never showed itself is judged as an init.
	return MainRole(ep.MainIsInit || ep.Main.PID == 0)
}

// MainRole is how every text calls the process a runtime stops: "PID 1"
// when it is its pid namespace's init, "the main process" when it is not
// (a shared pid namespace). The timeline's texts and the audit's hints
// both take it from here.
func MainRole(nsInit bool) string {
	if nsInit {
		return "PID 1"
	}
	return "the main process"
}

// timeoutKnob names the setting StopTimeout was read from.
func (ep *Episode) timeoutKnob() string {
	if ep.Container.Pod != "" {
		return "terminationGracePeriodSeconds"
	}
	return "StopTimeout"
}

// givenText says how long a stop whose grace was not the configured one
// was given: "the container's StopTimeout is 10s: the stop was given
// 3.0s", counted from the preStop hook's start when one was seen.
func (ep *Episode) givenText() string {
	return fmt.Sprintf("the container's %s is %s: the stop was given %.1fs", ep.timeoutKnob(), ep.StopTimeout, ep.KillAt.Sub(ep.graceBegin()).Seconds())
}

// unseenStart explains an episode that may have begun before tracing did,
// and says what was seen of it.
func (ep *Episode) unseenStart(who string) string {
	s := fmt.Sprintf("its stop may have begun before tracing did (first event %.3fs after tracing began, within its stop budget of %s) and no stop signal was seen, so how %s met one is not known",
		ep.Start.Sub(ep.TracedSince).Seconds(), ep.StopBudget(), who)
	switch {
	case ep.KillSender != nil && ep.KillSender.Kernel:
		s += fmt.Sprintf("; SIGKILL from the kernel (in %s %d)", ep.KillSender.Comm, ep.KillSender.PID)
	case ep.KillSender != nil:
		s += fmt.Sprintf("; SIGKILL from %s (%d)", ep.KillSender.Comm, ep.KillSender.PID)
	case !ep.ExitAt.IsZero() && ep.ExitSignal != 0:
		s += fmt.Sprintf("; %s was killed by %s", who, ep.ExitSignal)
	case !ep.ExitAt.IsZero():
		s += fmt.Sprintf("; %s exited", who)
	}
	if len(ep.OOMVictims) > 0 {
		s += "; the OOM killer killed " + procList(ep.OOMVictims)
	}
	return s
}

// budget says how the grace period was spent when there was a preStop
// hook: "grace 6s = preStop exec 3.0s + 3.0s after SIGTERM".
func (ep *Episode) budget() string {
	hook, ok := ep.PreStop.Duration(ep.StopAt)
	if !ok || ep.StopAt.IsZero() {
		return ""
	}
	end := ep.KillAt
	if end.IsZero() {
		end = ep.ExitAt
	}
	if end.IsZero() {
		return ""
	}
	est := ""
	switch {
	case ep.PreStop.Estimated:
		est = " (estimated)"
	case ep.PreStop.FromAPI:
		est = " (from the pod's deletion as the API server reported it)"
	}
	s := fmt.Sprintf("preStop %s %.1fs%s + %.1fs after %s", ep.PreStop.Kind, hook.Seconds(), est, end.Sub(ep.StopAt).Seconds(), ep.StopSignal)
	if ep.GracePeriod > 0 {
		s = fmt.Sprintf("grace %s = %s", ep.GracePeriod, s)
	}
	return s
}
