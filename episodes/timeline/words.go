package timeline

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The words: every sentence an episode tells is made here, from the facts
// the state recorded, and nowhere else. A completed episode gets its
// steps' texts and its hint ([episode.words]); its summary is made when it
// is asked for ([Episode.Summary]), since the caller may still add the
// stop's reason and grace; the fixes the hints end with are the audit's
// too. A fate's own words ("ignored — PID 1 has no SIGTERM handler") are
// sigvocab's (fatetext.go). Untrusted comms are quoted unescaped: JSON and
// the terminal escape them, each once.

// words writes what a completed episode says, from its outcome and its
// causes (causes.go), decided first: each step's text, the hint, and what
// its traffic cost the clients.
func (ep *episode) words() {
	c := ep.causes()
	if a := ep.AtKill; a != nil {
		a.Verdict = ep.atKillVerdict(c.atKill)
	}
	if h := ep.hookAt; h != nil {
		h.Verdict = hookVerdict(h, c.hook)
	}
	for i := range ep.Steps {
		if ep.Steps[i].Kind == StepAtKill && ep.AtKill != nil {
			ep.Steps[i].Text = ep.AtKill.Verdict
			continue
		}
		if ep.Steps[i].Kind == StepHookAtKill && ep.hookAt != nil {
			ep.Steps[i].Text = ep.hookAt.Verdict
			continue
		}
		ep.Steps[i].Text = stepText(&ep.Steps[i])
	}
	ep.Hint = capitalize(ep.hint(c))
	if t := ep.Traffic; t != nil {
		t.Unread = ep.unread.words()
		t.OwnUnknown = ep.ownUnknown.words()
		t.Verdict = trafficVerdict(t, c.traffic)
		t.Hint = ep.trafficHint(c.traffic)
	}
	ep.summary, ep.race = ep.summaryText(), ep.raceText()
}

// stepText tells one step.
func stepText(s *Step) string {
	f := &s.facts
	sig := s.Signal.String()
	switch s.Kind {
	case StepStopSignal:
		return senderText(s) + " sends " + sig + " to " + targetText(s)
	case StepKernelVerdict:
		who := MainRole(f.mainInit)
		switch {
		case f.event == sigvocab.KindDeliver: // a drop at dequeue (apply.go's deliver)
			what, why := sig, "it has no handler"
			if f.reraise {
				what = "the re-raised " + sig
			}
			if s.Verdict == sigvocab.FateDroppedSigIgn {
				why = "it has set it to SIG_IGN"
			}
			return "kernel: dropped — " + who + " unblocked " + what + " and " + why
		case f.reraise && s.Verdict == sigvocab.FateDroppedInit:
			return "kernel: ignored — " + who + " cannot be ended by a signal it has no handler for, its own included"
		}
		return "kernel: " + s.Verdict.Explain(s.Signal, f.handler, who)
	case StepDeliver:
		return targetText(s) + " runs its " + sig + " handler"
	case StepSIGKILL:
		how := "sends SIGKILL to"
		if s.Flags.Has(sigvocab.FlagCgroupKill) {
			how = "kills through cgroup.kill:"
		}
		return senderText(s) + " " + how + " " + targetText(s) + resultText(s)
	case StepReraise:
		return targetText(s) + " re-raises " + sig + " with the default action (its handler ran)"
	case StepForward:
		return senderText(s) + " forwards " + sig + " to " + targetText(s) + resultText(s)
	case StepSignal:
		return senderText(s) + " sends " + sig + " to " + targetText(s) + resultText(s)
	case StepCascadeKill:
		if f.victim {
			return fmt.Sprintf("kernel: namespace cascade — PID 1 %s (host %d) exited, SIGKILL to %s", s.Sender.Comm, s.Sender.PID, targetText(s))
		}
		return "kernel: namespace cascade — SIGKILL to " + procText(s.Target)
	case StepSandbox:
		if f.event == sigvocab.KindGenerate {
			return fmt.Sprintf("%s sends SIGKILL to the pod's sandbox (%s, host %d): the pod's teardown", namedSender(f.by, f), s.Target.Comm, s.Target.PID)
		}
		return "the pod's sandbox is torn down: " + exitText(s, fmt.Sprintf("%s (host %d)", s.Target.Comm, s.Target.PID))
	case StepOOMKill:
		return "kernel: the OOM killer picks " + targetText(s)
	case StepExec:
		return fmt.Sprintf("%s (%d) starts %s in the container: %s", f.by.Comm, f.by.PID, procText(s.Target), sessionName(f))
	case StepListenerClosed:
		if f.n > 1 {
			return fmt.Sprintf("listener closed: the application stopped accepting connections (%d listening sockets closed, the last at %s)", f.n, offset(s.At+f.last.Sub(s.Time)))
		}
		return "listener closed: the application stopped accepting connections"
	case StepRefused:
		return fmt.Sprintf("first refused connection attempt: nothing listened (%d in all, the last at %s)", f.n, offset(s.At+f.last.Sub(s.Time)))
	case StepCut:
		who := "their process"
		if f.died && s.Target.PID != 0 {
			who = procText(s.Target)
		}
		return fmt.Sprintf("%s cut: still open when %s died", count(f.n, "connection"), who)
	case StepEndpoint:
		if f.endpoint != nil {
			return endpointStepText(f.endpoint, s.Time)
		}
	case StepProcessExit, StepMainExit:
		if f.event == sigvocab.KindExec {
			return fmt.Sprintf("%s, %s, ends after %.3fs: exit status %d", sessionName(f), procText(s.Target), s.Time.Sub(f.began).Seconds(), f.status)
		}
		return exitText(s, targetText(s))
	}
	return ""
}

// sessionName is what an exec session is to the stop.
func sessionName(f *stepFacts) string {
	if f.hook {
		return "the preStop hook"
	}
	return "an exec session"
}

// resultText ends a sent signal's sentence with what the kernel did when
// it did not deliver it.
func resultText(s *Step) string {
	if w := s.facts.fate.ResultWords(s.facts.result, s.Signal); w != "" {
		return " — " + w
	}
	return ""
}

// exitText tells an exit: "sleep (ns pid 7, host 12687) killed by SIGKILL
// (exit status 137)".
func exitText(s *Step, who string) string {
	st := s.facts.status
	switch {
	case s.Signal != 0 && s.facts.core:
		return fmt.Sprintf("%s killed by %s, core dumped (exit status %d)", who, s.Signal, st)
	case s.Signal != 0:
		return fmt.Sprintf("%s killed by %s (exit status %d)", who, s.Signal, st)
	}
	return fmt.Sprintf("%s exits with code %d", who, st)
}

// procText names a process of the namespace: "PID 1 sh (host 5151)",
// "sleep (ns pid 2, host 5152)".
func procText(p Proc) string {
	if p.NsPID == 1 {
		return fmt.Sprintf("PID 1 %s (host %d)", p.Comm, p.PID)
	}
	return fmt.Sprintf("%s (ns pid %d, host %d)", p.Comm, p.NsPID, p.PID)
}

// targetText names the process a step is about; the kernel's ns_init
// flag makes it PID 1 whatever pid the event carried.
func targetText(s *Step) string {
	p := s.Target
	if s.Flags.Has(sigvocab.FlagNSInit) {
		p.NsPID = 1
	}
	return procText(p)
}

// senderText names a step's sender.
func senderText(s *Step) string { return namedSender(s.Sender, &s.facts) }

// namedSender names a sender: a process of the target's namespace by its
// place there, one outside (runc, kubelet, a shell on the host) by its host
// pid, and a kernel-raised signal as the kernel's, running in that task.
func namedSender(p *Proc, f *stepFacts) string {
	switch {
	case f.kernel:
		return fmt.Sprintf("the kernel (in %s, host %d)", p.Comm, p.PID)
	case f.inside:
		return procText(*p)
	}
	return fmt.Sprintf("%s (%d)", p.Comm, p.PID)
}

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

// procList names processes: "sleep (ns pid 7, host 12687), ...".
func procList(ps []Proc) string {
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, procText(p))
	}
	return strings.Join(names, ", ")
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

// What a stop cost its clients (Episode.Traffic): the verdict, read at a
// glance, and a hint that names the fix from what the kernel measured,
// never from a guess.

// words says why an episode's counts are missing (Traffic.Unread); ""
// when they were read.
func (r unreadReason) words() string {
	switch r {
	case unreadEnded:
		return "the trace ended"
	case unreadLate:
		return "no counts arrived in time"
	case unreadShared:
		return "the container shares its network namespace with the runtime that stopped it (the node's: --network host, " +
			"hostNetwork), so its connections cannot be told from the node's and none were counted"
	}
	return ""
}

// words says why a container's own connections cannot be told from its
// namespace's others (Traffic.OwnUnknown); "" when they can.
func (r ownReason) words() string {
	switch r {
	case ownNoSocketCgroup:
		return "the counts carry no split by socket cgroup (the kernel keeps none)"
	case ownRootCgroup:
		return "the container's processes are in the root cgroup v2 (a cgroup v1 node), so a socket's container cannot be told"
	}
	return ""
}

const refusedUnknown = "refused attempts unknown: this kernel (before Linux 6.10) does not report them"

// trafficVerdict says what the clients suffered.
func trafficVerdict(t *Traffic, c trafficCause) string {
	switch c.state {
	case trafficUncounted:
		return "not counted: " + t.Unread
	case trafficUnread:
		return "not known: the connection counts were not read (" + t.Unread + ")"
	case trafficLost:
		var kinds []string
		if n := t.N(sigvocab.NetRefused); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d refused", n))
		}
		if n := t.N(sigvocab.NetResetSent); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d reset by the application", n))
		}
		if n := t.N(sigvocab.NetCut); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d cut", n))
		}
		v := count(t.Lost(), "connection") + " lost: " + strings.Join(kinds, ", ")
		if !t.SeesRefused {
			v += "; " + refusedUnknown
		}
		return v
	}
	accepted, closed, reset := t.N(sigvocab.NetAccepted), t.N(sigvocab.NetClosed), t.N(sigvocab.NetResetReceived)
	var v string
	switch {
	case accepted == 0 && closed == 0 && reset == 0:
		v = "no connection was accepted or ended after the stop began"
	case accepted == 0:
		v = "no connection was accepted after the stop began, and every one that ended was closed cleanly"
	default:
		v = count(accepted, "connection") + " accepted after the stop began, all closed cleanly"
	}
	if reset > 0 {
		v += fmt.Sprintf(" (%d reset by the client)", reset)
	}
	if !t.SeesRefused {
		return "no connection lost that this kernel reports: " + v + "; " + refusedUnknown
	}
	return "no client was hurt: " + v
}

// trafficHint names the fix for each kind of loss measured; "" when
// nothing was lost, or the counts were not read.
func (ep *episode) trafficHint(c trafficCause) string {
	if c.state != trafficLost {
		return ""
	}
	t := ep.Traffic
	var parts []string
	if c.refused != refusedNone {
		parts = append(parts, ep.refusedHint(c))
	}
	if c.cut != cutNone {
		parts = append(parts, ep.cutHint(c.cut))
	}
	if n := t.N(sigvocab.NetResetSent); n > 0 {
		parts = append(parts, fmt.Sprintf("The application aborted %s with a reset while it ran: drain keep-alive connections after their in-flight request, and let queued connections be accepted before closing the listener.",
			count(n, "connection")))
	}
	return strings.Join(parts, " ")
}

// refusedHint: clients still connected after the application stopped
// listening. The delay to give them is read from the last refused attempt,
// counted from the stop signal.
func (ep *episode) refusedHint(c trafficCause) string {
	t := ep.Traffic
	r := t.Counts[sigvocab.NetRefused]
	switch c.refused {
	case refusedUntied:
		// Not tied to the stop by what was counted: a port nothing
		// listened on, or a listener that closed before the counting
		// began (a preStop hook that stops the server). No fix.
		return fmt.Sprintf("%s refused before any listening socket of the namespace closed while the kernel counted: they were for a port nothing listened on then, or one closed before the counting began (a preStop hook that stops the server); what was counted does not tell which.",
			countWas(r.N, "connection attempt"))
	case refusedUnstopped:
		return fmt.Sprintf("%s refused after the application stopped listening, the last %.1fs after the kernel began counting: clients were still sent to it. Stop it with its stop signal first (docker stop, a normal pod deletion), so that it can keep serving until they stop coming.",
			countWas(r.N, "connection attempt"), r.Last.Sub(t.Since).Seconds())
	}
	lag, secs := r.Last.Sub(ep.StopAt), c.covering
	least, still := "", ""
	if c.stillComing {
		least, still = "at least ", ", and they were still coming when the counts were read"
	}
	h := fmt.Sprintf("%s refused after the application stopped listening, the last %.1fs after %s%s: clients were still sent to it.",
		countWas(r.N, "connection attempt"), lag.Seconds(), ep.StopSignal, still)
	switch {
	case ep.fixFor() != FixForKubernetes:
		return h + fmt.Sprintf(" Keep serving after %s until the load balancer has stopped sending to it (%s%d s here), then close the listener; keep the grace period (%s) above that plus the shutdown.",
			ep.StopSignal, least, secs, ep.timeoutKnob())
	case ep.PreStop != nil:
		return h + fmt.Sprintf(" Keep accepting after the stop begins until the endpoint is removed: lengthen the preStop hook (%s) by %s%d s, which delays %s that long, and keep terminationGracePeriodSeconds above the hook plus the shutdown.",
			ep.PreStop.Kind, least, secs, ep.StopSignal)
	}
	return h + fmt.Sprintf(" Keep accepting after the stop begins until the endpoint is removed: a preStop sleep of %s%d s (lifecycle.preStop) delays %s that long; keep terminationGracePeriodSeconds above the sleep plus the shutdown.",
		least, secs, ep.StopSignal)
}

// cutHint: requests lost with the process that held their connections. The
// fix depends on how it died.
func (ep *episode) cutHint(how cutKind) string {
	n := countWas(ep.Traffic.N(sigvocab.NetCut), "connection")
	who := ep.who()
	switch how {
	case cutByOOM:
		return fmt.Sprintf("%s still open when the OOM kill ended its process: a request in flight on any of them was lost with it, and the memory fix above spares them too.", n)
	case cutKilledUnstopped:
		return fmt.Sprintf("%s still open at the SIGKILL, which came with no stop signal before it: a request in flight on any of them was lost. Stop it with its stop signal first (docker stop, a normal pod deletion), so that it can finish them.", n)
	case cutKilledIgnored:
		return fmt.Sprintf("%s still open at the SIGKILL: %s never acted on %s (the hint above), so nothing finished a request in flight on them. Once it does, have it close its listener and finish in-flight requests within the grace period (%s).",
			n, who, ep.StopSignal, ep.timeoutKnob())
	case cutKilled:
		after := ""
		if d, ok := ep.KillAfter(); ok {
			after = fmt.Sprintf(", %.1fs after %s", d.Seconds(), ep.StopSignal)
		}
		return fmt.Sprintf("%s still open at the SIGKILL%s: requests were still in flight. Finish in-flight requests within the grace period, or lengthen it (%s).",
			n, after, ep.timeoutKnob())
	case cutEndedAfterStop:
		return fmt.Sprintf("%s still open when %s ended after %s: a request in flight on any of them was lost. On %s, close the listener, finish in-flight requests, then exit.",
			n, who, ep.StopSignal, ep.StopSignal)
	}
	return fmt.Sprintf("%s still open when their process ended on its own: a request in flight on any of them was lost.", n)
}

// trafficCounts lists a traffic's counts for the text output, its times
// as offsets from start: "network namespace 4026532300, counted +0.000s to
// +4.210s: 12 accepted, 12 closed, 0 reset by the application, 1 reset by
// the client, 0 cut, 3 refused; listener closed at +0.512s".
// A pod's containers share its network namespace: what is counted there is
// the pod's, and it says so.
func trafficCounts(t *Traffic, start time.Time, pod bool) string {
	s := fmt.Sprintf("network namespace %d", t.NetNS)
	if t.Shared() {
		return s + ", the node's"
	}
	if pod {
		s = fmt.Sprintf("the pod's network namespace %d, shared by its containers", t.NetNS)
	}
	if t.Unread != "" {
		return s
	}
	s += fmt.Sprintf(", counted %s to %s: %d accepted, %d closed, %d reset by the application, %d reset by the client, %d cut, ",
		offset(t.Since.Sub(start)), offset(t.Until.Sub(start)), t.N(sigvocab.NetAccepted), t.N(sigvocab.NetClosed),
		t.N(sigvocab.NetResetSent), t.N(sigvocab.NetResetReceived), t.N(sigvocab.NetCut))
	if t.Known(sigvocab.NetRefused) {
		s += fmt.Sprintf("%d refused", t.N(sigvocab.NetRefused))
	} else {
		s += "refused unknown"
	}
	if lc := t.Counts[sigvocab.NetListenerClosed]; lc.N > 0 {
		s += "; listener closed at " + offset(lc.First.Sub(start))
	}
	switch {
	case t.Split(pod):
		o := t.Own
		s += fmt.Sprintf("; this container's own sockets: %d accepted, %d closed, %d reset by the application, %d reset by the client, %d cut",
			o[sigvocab.NetAccepted], o[sigvocab.NetClosed], o[sigvocab.NetResetSent], o[sigvocab.NetResetReceived], o[sigvocab.NetCut])
	case pod && t.OwnUnknown != "":
		s += "; whose each connection was cannot be told: " + t.OwnUnknown
	}
	return s
}

// count is "1 connection", "3 connections".
func count(n uint64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// countWas is "1 connection was", "3 connections were".
func countWas(n uint64, what string) string {
	if n == 1 {
		return count(n, what) + " was"
	}
	return count(n, what) + " were"
}

// The fixes, each worded once: the episodes' hints end with them, and so
// do the audit's predictions, so that a stop and its prediction name the
// same fix.

// FixInit is the fix for a PID 1 that does not act on the stop signal.
const FixInit = langrt.FixExecForm

const fixOOM = "Raise the memory limit (docker run --memory, Kubernetes resources.limits.memory) or reduce the application's memory use"

// FixFor says who reads a fix, which decides how it ends: the hint of a
// stop on Docker (or on a runtime not known), of a pod's stop, or the
// audit's prediction before any stop.
type FixFor uint8

const (
	FixForDocker FixFor = iota
	FixForKubernetes
	FixForPrediction
)

// fixFor is who reads the episode's fixes, by the knob that set its grace.
func (ep *episode) fixFor() FixFor {
	if ep.graceSource == knobKubernetes {
		return FixForKubernetes
	}
	return FixForDocker
}

// HandleFix is the fix for a main process on runtime rt that does not act
// on the stop signal: its runtime's way to handle it when the runtime is
// known, with an init that passes signals on as the other way for a
// namespace init; else (a shell, an unknown program) the exec form or an
// init. A main process that is no init is told to handle the signal.
func HandleFix(rt langrt.Runtime, nsInit bool, to FixFor) string {
	f := rt.HandleFix()
	switch {
	case (f == "" || rt == langrt.Shell) && !nsInit:
		return "Handle it in the application, or set the stop signal (STOPSIGNAL, --stop-signal, lifecycle.stopSignal) to one it handles."
	case f == "" || rt == langrt.Shell:
		return initFix(to)
	case !nsInit:
		return capitalize(f) + "."
	case to == FixForKubernetes:
		return capitalize(f) + "; or make an init that passes signals on (tini, dumb-init) the image's ENTRYPOINT."
	case to == FixForPrediction:
		return capitalize(f) + ". Or run an init such as tini (docker run --init), which forwards the signal."
	}
	return capitalize(f) + "; or run it under an init that passes signals on (docker run --init)."
}

// initFix is the fix for a PID 1 that does not act on the stop signal and
// whose runtime has no way of its own: the exec form, or an init.
func initFix(to FixFor) string {
	if to == FixForKubernetes {
		return FixInit + " in the image."
	}
	return FixInit + " (docker run --init)."
}

// StopSignalFix is the fix for a stop signal the main process cannot act
// on by its nature (a prediction's): SIGKILL itself, one it ignores
// (SIG_IGN, which who names), one whose default is to do nothing, or one
// whose default only stops it.
func StopSignalFix(sig sigvocab.Signal, fate sigvocab.Fate, who string) string {
	switch {
	case sig == sigvocab.SIGKILL:
		return "Use SIGTERM (or the signal the app handles) as the stop signal."
	case fate == sigvocab.FateDroppedSigIgn:
		return "Stop ignoring it, or use a stop signal " + who + " handles."
	case fate == sigvocab.FateDroppedDefault:
		return "Use a stop signal the process handles."
	}
	return "Use SIGTERM as the stop signal."
}

// CleanExitFix is the fix for a main process on runtime rt that ends at
// the stop signal without its cleanup (the Go runtime's own handler).
func CleanExitFix(rt langrt.Runtime) string {
	return "To shut down cleanly, " + rt.HandleFix() + "."
}

// graceFix names the knob that sets the grace period on this runtime.
func (ep *episode) graceFix() string {
	switch ep.graceSource {
	case knobKubernetes:
		return "terminationGracePeriodSeconds"
	case knobDocker:
		return "docker stop -t, docker run --stop-timeout, compose stop_grace_period"
	}
	return "docker stop -t or --stop-timeout; Kubernetes terminationGracePeriodSeconds"
}

func shortName(s sigvocab.Signal) string {
	n := s.String()
	if len(n) > 3 && n[:3] == "SIG" {
		return n[3:]
	}
	return n
}

// capitalize starts a sentence that may begin with "the main process".
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// addEndpointSteps puts a step in the timeline, at its time, for the first
// change of the pod's endpoint in each Service (Endpoints); its words are
// written with the others'.
func (ep *Episode) addEndpointSteps() {
	for i := range ep.Endpoints {
		c := &ep.Endpoints[i]
		first := c.First()
		if first.IsZero() {
			continue
		}
		s := Step{At: first.Sub(ep.Start), Time: first, Kind: StepEndpoint, facts: stepFacts{endpoint: c}}
		i, _ := slices.BinarySearchFunc(ep.Steps, first, func(s Step, t time.Time) int {
			if s.Time.After(t) {
				return 1
			}
			return -1
		})
		ep.Steps = slices.Insert(ep.Steps, i, s)
	}
}

// endpointStepText: "endpoint of shop/web: not ready, terminating (0.002s
// after the deletion)".
func endpointStepText(c *EndpointChange, first time.Time) string {
	var what []string
	for _, w := range []struct {
		at   time.Time
		word string
	}{{c.NotReadyAt, "not ready"}, {c.NotServingAt, "not serving"}, {c.TerminatingAt, "terminating"}, {c.RemovedAt, "removed"}} {
		if w.at.Equal(first) {
			what = append(what, w.word)
		}
	}
	s := "endpoint of " + c.Service + ": " + strings.Join(what, ", ")
	if c.AfterDeletion != nil {
		s += fmt.Sprintf(" (%.3fs after the deletion, as the agent saw the EndpointSlices)", c.AfterDeletion.Seconds())
	}
	return s
}

// EndpointRace says how the stop's two timelines met: when the application
// stopped accepting (its first listening socket closed, from the kernel's
// count) against when its endpoint first left a Service (from the API
// server, as the agent saw it). "" when either was not measured.
func (ep *Episode) EndpointRace() string {
	if ep.race != "" {
		return ep.race
	}
	return ep.raceText()
}

// raceText is the race, from the finished episode's fields.
func (ep *Episode) raceText() string {
	t := ep.Traffic
	if t == nil || t.Unread != "" || len(ep.Endpoints) == 0 {
		return ""
	}
	var left time.Time
	var svc string
	for _, c := range ep.Endpoints {
		if f := c.First(); !f.IsZero() && (left.IsZero() || f.Before(left)) {
			left, svc = f, c.Service
		}
	}
	if left.IsZero() {
		return ""
	}
	at := func(x time.Time) string {
		if ep.StopAt.IsZero() {
			return x.UTC().Format(time.RFC3339Nano)
		}
		return fmt.Sprintf("%+.3fs from %s", x.Sub(ep.StopAt).Seconds(), ep.StopSignal)
	}
	lc := t.Counts[sigvocab.NetListenerClosed]
	if lc.N == 0 {
		return fmt.Sprintf("the endpoint left %s at %s; the application did not stop accepting while the kernel counted", svc, at(left))
	}
	if !lc.First.Before(left) {
		return fmt.Sprintf("race won: the endpoint left %s (%s) %.3fs before the application stopped accepting (%s)",
			svc, at(left), lc.First.Sub(left).Seconds(), at(lc.First)) + seenBy
	}
	s := fmt.Sprintf("race lost: the application stopped accepting (%s) %.3fs before the endpoint left %s (%s)",
		at(lc.First), left.Sub(lc.First).Seconds(), svc, at(left))
	if t.Known(sigvocab.NetRefused) {
		s += fmt.Sprintf(": %s refused while the kernel counted", countWas(t.N(sigvocab.NetRefused), "connection attempt"))
	}
	return s + seenBy
}

// seenBy qualifies a race's endpoint time: the agent's observation of the
// EndpointSlice, later than the change by the watch's delay, against the
// kernel's own time for the listener: a margin within that delay is no
// measure of which came first.
const seenBy = " (the endpoint's time is when this agent saw the EndpointSlice change, a watch's delay after it)"

// What the main process was doing when the SIGKILL came (Episode.AtKill),
// and what held an exec preStop hook (PreStop.AtKill): the sentences, and
// the fix that follows from each cause (causes.go). "More grace" is offered
// only for a process that was making progress.

// childText names a child: "sleep (pid 7)", with what it was in.
func childText(c *TaskAt) string {
	s := fmt.Sprintf("%s (pid %d", c.Comm, c.NsPID)
	if c.Syscall != "" {
		s += ", in " + c.Syscall
	}
	return s + ")"
}

// cpuText is the CPU time used in the grace: "0.000s of CPU in the 2.0s".
func cpuText(used, since time.Duration) string {
	return fmt.Sprintf("%.3fs of CPU in the %.3fs since the stop signal", used.Seconds(), since.Seconds())
}

// atKillVerdict is the sentence of what the main thread was doing at the
// SIGKILL, and what the other threads that were read were in.
func (ep *episode) atKillVerdict(c atKillCause) string {
	return ep.mainVerdict(c) + ep.AtKill.othersText()
}

// othersText summarises the other threads the kernel read (at most three)
// by the system call each was in: "; its other threads: 2 in futex, 1 in
// epoll_wait (3 of 22 read)". A JVM's or a Go program's main thread only
// waits; what holds the shutdown is often in another.
func (a *AtKill) othersText() string {
	if len(a.Threads) == 0 {
		return ""
	}
	var order []string
	n := map[string]int{}
	for _, t := range a.Threads {
		k := "in " + t.Syscall
		switch {
		case t.Unread:
			k = "not read"
		case t.Syscall == "":
			k = "in no system call"
		}
		if t.CPU != nil && busy(*t.CPU, a.Since) {
			k = "working (" + cpuText(*t.CPU, a.Since) + ")"
		}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d %s", n[k], k)
	}
	s := "; its other threads: " + strings.Join(parts, ", ")
	if others := a.ThreadCount - 1; others > len(a.Threads) {
		s += fmt.Sprintf(" (%d of %d read)", len(a.Threads), others)
	}
	return s
}

// mainVerdict is the sentence of what the main thread was doing at the
// SIGKILL, from its cause.
func (ep *episode) mainVerdict(c atKillCause) string {
	a := ep.AtKill
	who := ep.who()
	m := &a.Main
	idle := ""
	if a.Since > 0 {
		idle = "; it used " + cpuText(c.used, a.Since)
	}
	switch c.kind {
	case atKillProgress:
		return fmt.Sprintf("%s was still working when the SIGKILL came: it used %s", who, cpuText(c.used, a.Since))
	case atKillAnyChild:
		return fmt.Sprintf("%s was waiting for a child (%s) when the SIGKILL came%s", who, m.Syscall, idle)
	case atKillChildIgnores, atKillShellTrap, atKillChild:
		s := fmt.Sprintf("%s was waiting for its child %s when the SIGKILL came%s", who, childText(c.child), idle)
		switch c.kind {
		case atKillChildIgnores:
			s += fmt.Sprintf(": the child ignores %s", ep.StopSignal)
		case atKillShellTrap:
			s += fmt.Sprintf(": a shell runs its %s trap only after the foreground command ends", ep.StopSignal)
		}
		return s
	case atKillEventLoop:
		s := fmt.Sprintf("%s was idle in its event loop (%s) when the SIGKILL came%s", who, m.Syscall, idle)
		if t := ep.Traffic; t != nil && t.Known(sigvocab.NetCut) && t.N(sigvocab.NetCut) > 0 {
			s += fmt.Sprintf(", with %s still open", count(t.N(sigvocab.NetCut), "connection"))
		}
		return s
	case atKillLock:
		return fmt.Sprintf("%s was waiting on a lock or another thread (%s) when the SIGKILL came, with %s%s", who, m.Syscall, count(uint64(max(a.ThreadCount, 1)), "thread"), idle)
	case atKillSleep:
		return fmt.Sprintf("%s was sleeping (%s) when the SIGKILL came%s", who, m.Syscall, idle)
	case atKillAccept:
		return fmt.Sprintf("%s was still accepting connections (%s) when the SIGKILL came%s", who, m.Syscall, idle)
	case atKillSyscallOnFd:
		return fmt.Sprintf("%s was in %s on a %s (fd %d) when the SIGKILL came%s", who, m.Syscall, strings.ReplaceAll(m.Fd, "_", " "), m.Arg, idle)
	case atKillSyscall:
		return fmt.Sprintf("%s was in %s when the SIGKILL came%s", who, m.Syscall, idle)
	case atKillUnread:
		return fmt.Sprintf("%s: what it was in when the SIGKILL came could not be read (the kernel reads it on x86_64)%s", who, idle)
	}
	return fmt.Sprintf("%s was in no system call when the SIGKILL came%s", who, idle)
}

// hookVerdict is what the exec preStop hook's process was doing when the
// SIGKILL came: "the preStop hook sleep (pid 9) was still sleeping
// (clock_nanosleep) when the SIGKILL came".
func hookVerdict(h *HookAt, c hookCause) string {
	p := &h.Process
	s := fmt.Sprintf("the preStop hook %s (pid %d) was still running when the SIGKILL came", p.Comm, p.NsPID)
	switch {
	case c.child != nil:
		s += fmt.Sprintf(", waiting for its child %s", childText(c.child))
	case p.Syscall != "":
		s += ", in " + p.Syscall
		if p.Fd != "" {
			s += fmt.Sprintf(" on a %s (fd %d)", strings.ReplaceAll(p.Fd, "_", " "), p.Arg)
		}
	case p.Unread:
		s += " (what it was in could not be read)"
	}
	if c.used != nil {
		s += fmt.Sprintf("; it used %s", cpuText(*c.used, c.since))
	}
	return s
}

// hookHint is the fix for a preStop hook the grace ran out on, from what
// held it at the SIGKILL; "" when that tells none (or was not read).
func (ep *episode) hookHint(c hookCause) string {
	b := c.task
	if b == nil {
		return ""
	}
	grace := ""
	if ep.GracePeriod > 0 {
		grace = fmt.Sprintf(" (%s)", ep.GracePeriod)
	}
	head := func(state string) string {
		return fmt.Sprintf("The preStop hook was still %s when the grace period%s ran out, so the kubelet sent %s with only its 2 s minimum left: ", state, grace, ep.StopSignal)
	}
	in := b.Comm
	if b.Syscall != "" {
		in += " in " + b.Syscall
	}
	switch c.kind {
	case hookWorking:
		return head(fmt.Sprintf("working (%s used %s)", b.Comm, cpuText(*c.used, c.since))) +
			"raise terminationGracePeriodSeconds to cover the hook and the shutdown after it, or make the hook faster."
	case hookSleeping:
		return head("sleeping ("+in+")") + fmt.Sprintf("its sleep is longer than the grace period. Sleep less than terminationGracePeriodSeconds minus the time the application needs after %s, or raise the grace period to cover both.", ep.StopSignal)
	case hookNetwork:
		return head("waiting on the network ("+in+")") +
			"what it calls did not answer. Give its request a timeout well within the grace period (curl --max-time, wget -T) and let the hook go on without the answer."
	case hookInput:
		// A poll says nothing of what it waits on: a request's answer
		// (curl polls its socket) is only the likeliest.
		return head("waiting for input ("+in+")") +
			"if it calls a service, that did not answer in time: give the request a timeout well within the grace period (curl --max-time, wget -T); whatever it waits for, bound the wait."
	case hookWaiting:
		return head("waiting ("+in+")") + "bound what it waits for with a timeout well within the grace period."
	}
	return ""
}

// atKillHint is the fix for a handler that did not finish, from why the
// process still ran; "" when the cause tells none.
func (ep *episode) atKillHint(c atKillCause) string {
	a := ep.AtKill
	who, sig := ep.who(), ep.StopSignal
	switch c.kind {
	case atKillProgress:
		return fmt.Sprintf("%s was making progress when the SIGKILL came (it used %s): give it more time (%s), or make its shutdown faster.",
			who, cpuText(c.used, a.Since), ep.graceFix())
	case atKillChildIgnores:
		return fmt.Sprintf("%s waited for its child %s, which ignores %s: signal the child with one it acts on (or SIGKILL it after a deadline) before waiting for it, or have it handle %s. More grace would not help.",
			who, c.child.Comm, sig, sig)
	case atKillShellTrap:
		return fmt.Sprintf("The %s trap of %s could not run while its foreground command %s ran: run the command in the background and wait for it (cmd & wait $!), so that wait returns on the signal and the trap runs at once, forwarding it (kill -TERM $!); or exec the command so that it receives %s itself. More grace would not help.",
			sig, who, c.child.Comm, sig)
	case atKillChild:
		return fmt.Sprintf("%s waited for its child %s, which did not end: pass %s on to it (an init such as tini does), and make the child handle it. More grace would not help while the child gets no signal.",
			who, c.child.Comm, sig)
	case atKillEventLoop:
		h := fmt.Sprintf("%s sat idle in its event loop until the SIGKILL: its shutdown waited for something that never came, not for CPU.", who)
		if ep.Main.Runtime == langrt.NodeJS {
			h += " Node.js's server.close() waits for every open connection, keep-alive ones included: close idle ones (server.closeIdleConnections()) and, after a deadline shorter than the grace period, the rest (server.closeAllConnections()), then exit."
		} else {
			h += " Close idle (keep-alive) connections, bound the wait for in-flight requests with a deadline shorter than the grace period, then exit."
		}
		return h + " More grace would not help."
	case atKillLock:
		return fmt.Sprintf("The shutdown of %s waited on a lock or another thread that never finished (a JVM shutdown hook joining a thread pool, a Python handler joining a worker, a Go program waiting on a goroutine): find what it waits for (a thread dump as it stops: jcmd PID Thread.print, py-spy dump, SIGQUIT for Go) and bound the wait. More grace would not help.", who)
	case atKillSleep:
		return fmt.Sprintf("%s was sleeping when the SIGKILL came: its shutdown sleeps longer than the grace period; sleep less, or raise the grace period (%s) to cover the sleep.", who, ep.graceFix())
	case atKillAccept:
		return fmt.Sprintf("%s was still accepting connections at the SIGKILL: on %s, close the listener, finish what is in flight and exit. More grace would not help.", who, sig)
	}
	return ""
}
