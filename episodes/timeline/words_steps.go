package timeline

import (
	"fmt"
	"strings"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The steps' texts: each step told in a sentence, from the facts it
// recorded ([stepText]), and the names of its processes.

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
	case StepUnanswered:
		return fmt.Sprintf("first connection closed under its client: its request was read and never answered (%d in all, the last at %s)", f.n, offset(s.At+f.last.Sub(s.Time)))
	case StepAfterClose:
		return fmt.Sprintf("first request sent on a connection the application had closed, answered with a reset (%d in all, the last at %s)", f.n, offset(s.At+f.last.Sub(s.Time)))
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

// procList names processes: "sleep (ns pid 7, host 12687), ...".
func procList(ps []Proc) string {
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, procText(p))
	}
	return strings.Join(names, ", ")
}
