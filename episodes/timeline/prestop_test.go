package timeline

import (
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/events/sigvocab"
)

// execIn is runc exec starting p in the container (a preStop hook).
func (s *sim) execIn(at time.Duration, p sigvocab.Process) *sim {
	ev := sigvocab.Event{Kind: sigvocab.KindExec, Target: p, Sender: runc, Flags: 0}
	ev.Ancestors, ev.AncestorsCount = ancestors("containerd-shim", "systemd")
	return s.push(at, ev)
}

func podInfo(grace int, hook *identity.Hook) *identity.Info {
	return &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "containerd", Name: "app", Pod: "web-0", Namespace: "shop"}, GracePeriod: grace, PreStop: hook}
}

// The kubelet's stop of a pod with grace 6 and preStop `exec: sleep 3`,
// whose PID 1 is a shell: the hook runs 3 s, then runc's SIGTERM is dropped
// and the SIGKILL comes 3 s later. The episode starts at the hook and says
// how the grace period was spent.
func TestPreStopExec(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", podInfo(6, &identity.Hook{Kind: "exec", Command: []string{"sleep", "3"}}))
	hook := s.kid(5160, 10, "sleep")
	s.execIn(0, hook).
		kidExit(3002*ms, hook, 0, 0).
		stop(3017*ms, sigvocab.SIGTERM, sigvocab.DispDefault, false).
		kill(6025*ms, runc).
		initExit(6025*ms+30*time.Microsecond, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeIgnoredByInit || ep.PreStop == nil || ep.PreStop.Kind != "exec" {
		t.Fatalf("%s prestop %+v", ep.Outcome, ep.PreStop)
	}
	if d, _ := ep.PreStop.Duration(ep.StopAt); d != 3002*ms || ep.PreStop.ExitStatus == nil || *ep.PreStop.ExitStatus != 0 {
		t.Errorf("hook %v exit %v", d, ep.PreStop.ExitStatus)
	}
	if !ep.Start.Equal(base) || ep.Steps[0].Kind != StepExec || !strings.Contains(ep.Steps[0].Text, "the preStop hook") {
		t.Errorf("start %v first step %+v", ep.Start, ep.Steps[0])
	}
	if sum := ep.Summary(); !strings.Contains(sum, "grace 6s = preStop exec 3.0s + 3.0s after SIGTERM") {
		t.Errorf("summary %q", sum)
	}
	// The stop took what the user waited for: from the hook's start, not
	// from the stop signal after it, to the main process's exit. The
	// histogram, `kubectl sigscope top` and the API read this one figure.
	if d, ok := ep.StopDuration(); !ok || d != 6025*ms+30*time.Microsecond {
		t.Errorf("stop duration %v (%v), want 6.02503s from the hook's start", d, ok)
	}
	if b, _ := ep.MarshalJSON(); !strings.Contains(string(b), `"stop_duration_s":6.02503`) {
		t.Errorf("JSON %s", b)
	}
	ep.StartUnseen = true
	if _, ok := ep.StopDuration(); ok {
		t.Error("a stop that may have begun unseen has no duration")
	}
}

// Grace 4 and preStop `sleep 20`: the hook is still running when the grace
// runs out, the kubelet gives SIGTERM its 2 s minimum, then SIGKILL.
func TestPreStopTimeout(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", podInfo(4, &identity.Hook{Kind: "exec", Command: []string{"/bin/sleep", "20"}}))
	hook := s.kid(5160, 10, "sleep")
	s.execIn(0, hook).
		stop(4010*ms, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(4011*ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		kill(6020*ms, runc).
		initExit(6020*ms+30*time.Microsecond, sigvocab.SIGKILL, 0).
		cascade(6020*ms+50*time.Microsecond, hook).
		kidExit(6020*ms+90*time.Microsecond, hook, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomePreStopTimeout || !ep.PreStop.EndAt.IsZero() {
		t.Fatalf("%s prestop %+v", ep.Outcome, ep.PreStop)
	}
	if !strings.Contains(ep.Hint, "terminationGracePeriodSeconds") || !strings.Contains(ep.Hint, "preStop hook (exec) was still running") {
		t.Errorf("hint %q", ep.Hint)
	}

	// A sleep hook is not a process: a SIGKILL at the 2 s minimum after
	// the stop signal, with a longer grace, tells the same story.
	s = newSim(t, nsA, 5151, "app", podInfo(4, &identity.Hook{Kind: "sleep", Seconds: 20}))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		kill(2010*ms, runc).initExit(2010*ms+30*time.Microsecond, sigvocab.SIGKILL, 0)
	ep = only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomePreStopTimeout || !ep.PreStop.Estimated || !strings.Contains(ep.Summary(), "preStop sleep 2.0s (estimated)") {
		t.Errorf("sleep hook: %s %+v %q", ep.Outcome, ep.PreStop, ep.Summary())
	}
}

// Exec sessions long before a stop (an exec probe an hour ago) are not
// part of it, and a container's own first process is no exec session.
func TestExecSessionsWindow(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", podInfo(30, nil))
	probe := s.kid(5170, 20, "cat")
	s.execIn(0, s.init).
		execIn(time.Second, probe).kidExit(time.Second+5*ms, probe, 0, 0).
		stop(time.Hour, sigvocab.SIGTERM, sigvocab.DispHandler, false).deliver(time.Hour+ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		initExit(time.Hour+2*ms, 0, 0)
	ep := only(t, newEngine(Options{}), s.in)
	for _, st := range ep.Steps {
		if st.Kind == StepExec {
			t.Errorf("old exec session in the stop: %+v", st)
		}
	}
	if ep.PreStop != nil || ep.Outcome != OutcomeGraceful {
		t.Errorf("%s prestop %+v", ep.Outcome, ep.PreStop)
	}
}
