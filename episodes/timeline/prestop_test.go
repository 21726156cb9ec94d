package timeline

import (
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
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

// An exec hook the grace ran out on, read by the kernel at the SIGKILL
// (a blocked record of role exec, and one of its child): the step and the
// hint say what held it, a sleep or a peer that did not answer.
func TestPreStopTimeoutHookAt(t *testing.T) {
	for _, tc := range []struct {
		name, hookComm string
		cmd            []string
		syscall        int32 // the hook process's
		fd             sigvocab.FdKind
		child          string // its child, "" for none
		childSyscall   int32
		step, hint     string
	}{
		{name: "sleep", hookComm: "sleep", cmd: []string{"/bin/sleep", "20"}, syscall: 230,
			step: "the preStop hook sleep (pid 10) was still running when the SIGKILL came, in clock_nanosleep",
			hint: "its sleep is longer than the grace period"},
		{name: "shell waiting on curl", hookComm: "sh", cmd: []string{"sh", "-c", "curl http://drain/; sleep 1"}, syscall: 61,
			child: "curl", childSyscall: 7,
			step: "the preStop hook sh (pid 10) was still running when the SIGKILL came, waiting for its child curl (pid 11, in poll)",
			hint: "waiting for input (curl in poll) when the grace period (4s) ran out, so the kubelet sent SIGTERM with only its 2 s minimum left: if it calls a service, that did not answer in time: give the request a timeout well within the grace period (curl --max-time"},
		{name: "request on a socket", hookComm: "wget", cmd: []string{"wget", "http://drain/"}, syscall: 0, fd: sigvocab.FdSocket,
			step: "the preStop hook wget (pid 10) was still running when the SIGKILL came, in read on a socket (fd -1)",
			hint: "waiting on the network (wget in read)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, nsA, 5151, "sh", podInfo(4, &identity.Hook{Kind: "exec", Command: tc.cmd}))
			hook := s.kid(5160, 10, tc.hookComm)
			s.execIn(0, hook).
				stop(4010*ms, sigvocab.SIGTERM, sigvocab.DispHandler, false).
				deliver(4011*ms, sigvocab.SIGTERM, sigvocab.DispHandler).
				kill(6020*ms, runc)
			s.blocked(6020*ms, s.init, sigvocab.RoleMainThread, 61, -1, time.Second, 0)
			read := func(p sigvocab.Process, role sigvocab.TaskRole, syscall int32) {
				s.push(6020*ms, sigvocab.Event{Kind: sigvocab.KindBlocked, Target: p, Task: sigvocab.TaskReading{Role: role, Process: s.init.PID,
					Syscall: syscall, Arg: ^uint64(0), FdKind: tc.fd, Slot: 2}})
			}
			read(hook, sigvocab.RoleExec, tc.syscall)
			if tc.child != "" {
				read(s.kid(5161, 11, tc.child), sigvocab.RoleExecChild, tc.childSyscall)
			}
			s.initExit(6020*ms+30*time.Microsecond, sigvocab.SIGKILL, 0).
				cascade(6020*ms+50*time.Microsecond, hook).
				kidExit(6020*ms+90*time.Microsecond, hook, sigvocab.SIGKILL, 0)
			ep := only(t, newEngine(Options{}), s.in)
			if ep.Outcome != OutcomePreStopTimeout || ep.PreStop == nil || ep.PreStop.AtKill == nil {
				t.Fatalf("%s prestop %+v", ep.Outcome, ep.PreStop)
			}
			if ep.PreStop.AtKill.Verdict != tc.step {
				t.Errorf("verdict\n got %q\nwant %q", ep.PreStop.AtKill.Verdict, tc.step)
			}
			found := false
			for _, st := range ep.Steps {
				found = found || st.Kind == StepHookAtKill && st.Text == tc.step
			}
			if !found {
				t.Errorf("no hook_at_kill step %q in %+v", tc.step, ep.Steps)
			}
			if !strings.Contains(ep.Hint, tc.hint) {
				t.Errorf("hint %q: want %q", ep.Hint, tc.hint)
			}
			b, err := ep.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var back Episode
			if err := back.UnmarshalJSON(b); err != nil || back.PreStop == nil || back.PreStop.AtKill == nil || back.PreStop.AtKill.Verdict != tc.step {
				t.Errorf("read back (%v): %+v", err, back.PreStop)
			}
			if b2, _ := back.MarshalJSON(); string(b2) != string(b) {
				t.Errorf("round trip changed the JSON:\n%s\n%s", b, b2)
			}
		})
	}
}
