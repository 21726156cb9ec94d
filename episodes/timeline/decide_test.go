package timeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Which outcome wins when several could: the OOM killer, a SIGKILL, an
// exit, in the order of decide's rules.

// A child's OOM kill in a container whose PID 1 survives completes Settle
// after the victim's death, without waiting for PID 1: not a stop, but an
// OOM kill in a running container (oom_kill_survived).
func TestOOMChildInitSurvives(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "hog", 10))
	hog := s.kid(5152, 7, "hog")
	s.oomKernelKill(0, hog, hog).
		oom(10*time.Microsecond, hog).
		kidExit(800*time.Microsecond, hog, sigvocab.SIGKILL, 0)
	e := newEngine(Options{})
	done, _ := feed(e, s.in)
	if len(done) != 0 {
		t.Fatalf("completed before Settle: %+v", done)
	}
	e = newEngine(Options{})
	for i := range s.in {
		e.Add(&s.in[i].ev, s.in[i].c)
	}
	got := e.Advance(base.Add(800*time.Microsecond + DefaultSettle + 1))
	if len(got) != 1 {
		t.Fatalf("%d episodes after Settle, want 1", len(got))
	}
	ep := got[0]
	if ep.Outcome != OutcomeOOMKillSurvived || ep.Outcome.IsStop() || !ep.ExitAt.IsZero() || len(ep.OOMVictims) != 1 || ep.OOMVictims[0].PID != hog.PID {
		t.Errorf("outcome %s exit %v victims %+v", ep.Outcome, ep.ExitAt, ep.OOMVictims)
	}
	if !strings.Contains(ep.Summary(), "PID 1 lived on and nothing stopped the container: not a stop") || !strings.Contains(ep.Hint, "Raise the memory limit") {
		t.Errorf("summary %q hint %q", ep.Summary(), ep.Hint)
	}
}

// A child's OOM kill decides the outcome only of a stop it caused: PID 1
// (the child's parent) then dies with no stop signal sent. When a stop
// signal follows, the stop is judged by its own rules and the OOM kill is
// one of its steps.
func TestOOMChildCausesOrNot(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "hog", 10))
	hog := s.kid(5152, 7, "hog")
	s.oomKernelKill(0, hog, hog).
		oom(10*time.Microsecond, hog).
		kidExit(800*time.Microsecond, hog, sigvocab.SIGKILL, 0).
		initExit(time.Millisecond, 0, 137)
	if ep := only(t, newEngine(Options{}), s.in); ep.Outcome != OutcomeOOMKilled || !ep.Outcome.IsStop() {
		t.Errorf("PID 1 ended after its child's OOM kill, no stop signal: %s, want oom_killed", ep.Outcome)
	}

	s = newSim(t, nsA, 5151, "app", dockerInfo(idA, "hog", 10))
	hog = s.kid(5152, 7, "hog")
	s.oomKernelKill(0, hog, hog).
		oom(10*time.Microsecond, hog).
		kidExit(800*time.Microsecond, hog, sigvocab.SIGKILL, 0).
		stop(100*ms, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(101*ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		initExit(200*ms, 0, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeGraceful || !slices.Contains(stepKinds(&ep), StepOOMKill) {
		t.Errorf("a stop after a child's OOM kill: %s steps %v, want graceful with the OOM kill a step", ep.Outcome, stepKinds(&ep))
	}
}

// OOM while a stop is under way: the OOM of PID 1 decides, the OOM of a
// child after the stop signal does not.
func TestOOMPrecedence(t *testing.T) {
	s := newSim(t, nsA, 5151, "app", dockerInfo(idA, "hog", 10))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		oomKernelKill(2*ms, s.init, s.init).
		oom(2*ms+10*time.Microsecond, s.init).
		initExit(3*ms, sigvocab.SIGKILL, 0)
	if ep := only(t, newEngine(Options{}), s.in); ep.Outcome != OutcomeOOMKilled {
		t.Errorf("PID 1 OOM-killed during its shutdown: %s, want oom_killed", ep.Outcome)
	}

	s = newSim(t, nsA, 5151, "tini", dockerInfo(idA, "hog", 10))
	kid := s.kid(5152, 7, "app")
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		oom(2*ms, kid).
		kidExit(3*ms, kid, sigvocab.SIGKILL, 0).
		initExit(4*ms, 0, 137)
	if ep := only(t, newEngine(Options{}), s.in); ep.Outcome != OutcomeGraceful || len(ep.OOMVictims) != 1 {
		t.Errorf("child OOM-killed after the stop: %s victims %d, want graceful with the victim recorded", ep.Outcome, len(ep.OOMVictims))
	}
}

// The precedence of decide over mixed facts.
func TestDecidePrecedence(t *testing.T) {
	K, T, S := sigvocab.SIGKILL, sigvocab.SIGTERM, sigvocab.Signal(11)
	H, D, W, B, F := sigvocab.FateHandler, sigvocab.FateDroppedInit, sigvocab.FateSigwait, sigvocab.FateBlocked, sigvocab.FateDefault
	cases := []struct {
		name string
		f    facts
		want Outcome
	}{
		{"OOM of PID 1 beats a handled stop and a kill", facts{stop: true, stopSignal: T, stopFate: H, acted: true, kill: true, exit: true, exitSignal: K, oomMain: true}, OutcomeOOMKilled},
		{"OOM first beats a later kill", facts{kill: true, exit: true, exitSignal: K, oomFirst: true}, OutcomeOOMKilled},
		{"kill, no stop", facts{kill: true, exit: true, exitSignal: K}, OutcomeKilled},
		{"exit by SIGKILL, no kill event, no stop", facts{exit: true, exitSignal: K}, OutcomeKilled},
		{"kill, no exit (Flush)", facts{kill: true}, OutcomeKilled},
		{"handled then killed", facts{stop: true, stopSignal: T, stopFate: H, acted: true, kill: true, exit: true, exitSignal: K}, OutcomeHandlerTimeout},
		{"handled then killed, no exit", facts{stop: true, stopSignal: T, stopFate: H, acted: true, kill: true}, OutcomeHandlerTimeout},
		{"dropped then killed", facts{stop: true, stopSignal: T, stopFate: D, mainIsInit: true, kill: true, exit: true, exitSignal: K}, OutcomeIgnoredByInit},
		{"handled, SIGKILL raced an exit with a code", facts{stop: true, stopSignal: T, stopFate: H, acted: true, kill: true, exit: true}, OutcomeGraceful},
		{"handled, exit code", facts{stop: true, stopSignal: T, stopFate: H, acted: true, exit: true}, OutcomeGraceful},
		{"handled, died by the stop signal", facts{stop: true, stopSignal: T, stopFate: H, acted: true, exit: true, exitSignal: T}, OutcomeGraceful},
		{"handled, crashed", facts{stop: true, stopSignal: T, stopFate: H, acted: true, exit: true, exitSignal: S}, OutcomeExited},
		{"dropped, exited on its own", facts{stop: true, stopSignal: T, stopFate: D, exit: true}, OutcomeExited},
		{"nothing but an exit", facts{exit: true}, OutcomeExited},
		{"dropped, nothing else", facts{stop: true, stopSignal: T, stopFate: D}, OutcomeUnfinished},
		{"handled, nothing else", facts{stop: true, stopSignal: T, stopFate: H, acted: true}, OutcomeUnfinished},
		{"sigwaited (tini), exit 143", facts{stop: true, stopSignal: T, stopFate: W, mainIsInit: true, exit: true}, OutcomeGraceful},
		{"sigwaited and forwarded, killed", facts{stop: true, stopSignal: T, stopFate: W, acted: true, mainIsInit: true, kill: true, exit: true, exitSignal: K}, OutcomeHandlerTimeout},
		{"kept blocked, nothing forwarded, killed", facts{stop: true, stopSignal: T, stopFate: B, mainIsInit: true, kill: true, exit: true, exitSignal: K}, OutcomeIgnoredByInit},
		{"blocked then read (signalfd), exit code", facts{stop: true, stopSignal: T, stopFate: B, mainIsInit: true, exit: true}, OutcomeGraceful},
		{"blocked, forwarded, exit code", facts{stop: true, stopSignal: T, stopFate: B, acted: true, mainIsInit: true, exit: true}, OutcomeGraceful},
		{"non-init main, default action", facts{stop: true, stopSignal: T, stopFate: F, exit: true, exitSignal: T}, OutcomeGraceful},
		{"non-init main, SIG_IGN, killed", facts{stop: true, stopSignal: T, stopFate: sigvocab.FateDroppedSigIgn, kill: true, exit: true, exitSignal: K}, OutcomeIgnored},
	}
	for _, c := range cases {
		if got := decide(c.f); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
