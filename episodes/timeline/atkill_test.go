package timeline

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// blocked is the kernel's reading of task at the signal pushed at at (the
// stop signal's or the SIGKILL's own time stamp).
func (s *sim) blocked(at time.Duration, task sigvocab.Process, role sigvocab.TaskRole, syscall int32, arg int64, cpu time.Duration, disp uint8) *sim {
	ev := sigvocab.Event{Kind: sigvocab.KindBlocked, Target: task, Task: sigvocab.TaskReading{Role: role, Process: s.init.PID,
		Syscall: syscall, Arg: uint64(uint32(int32(arg))), CPUNs: uint64(cpu), Dispositions: disp, Threads: 1}}
	return s.push(at, ev)
}

// What PID 1 was doing at the SIGKILL, from the kernel's readings at the
// stop signal and at the SIGKILL: the step, the verdict and a hint that
// follows from it, more grace only for a process making progress.
func TestAtKill(t *testing.T) {
	for _, tc := range []struct {
		name             string
		main             string
		syscall          int32
		arg              int64
		mainCPU          time.Duration
		childDisp        uint8 // the child's dispositions (SIGTERM in bits 6-7)
		verdict, hint    string
		notHint          string
		childSyscall     int32
		noChild, noStart bool
	}{
		{name: "shell trap behind a foreground command", main: "sh", syscall: 61, arg: -1, childSyscall: 230,
			verdict: "PID 1 (sh) was waiting for its child sleep (pid 7, in clock_nanosleep) when the SIGKILL came; it used 0.000s of CPU in the 3.000s since the stop signal: a shell runs its SIGTERM trap only after the foreground command ends",
			hint:    "run the command in the background and wait for it (cmd & wait $!)", notHint: "raise the grace"},
		{name: "waiting on a child that ignores the signal", main: "app", syscall: 61, arg: 7, childDisp: 1 << 6, childSyscall: 34,
			verdict: "PID 1 (app) was waiting for its child sleep (pid 7, in pause) when the SIGKILL came; it used 0.000s of CPU in the 3.000s since the stop signal: the child ignores SIGTERM",
			hint:    "which ignores SIGTERM: signal the child with one it acts on", notHint: "raise the grace"},
		{name: "event loop", main: "node", syscall: 232, arg: 13, noChild: true,
			verdict: "PID 1 (node, Node.js) was idle in its event loop (epoll_wait) when the SIGKILL came; it used 0.000s of CPU in the 3.000s since the stop signal",
			hint:    "server.closeIdleConnections()", notHint: "raise the grace"},
		{name: "lock", main: "java", syscall: 202, noChild: true,
			verdict: "PID 1 (java, the JVM) was waiting on a lock or another thread (futex) when the SIGKILL came, with 1 thread; it used 0.000s of CPU in the 3.000s since the stop signal",
			hint:    "jcmd PID Thread.print", notHint: "raise the grace"},
		{name: "making progress", main: "app", syscall: -1, mainCPU: 2900 * time.Millisecond, noChild: true,
			verdict: "PID 1 (app) was still working when the SIGKILL came: it used 2.900s of CPU in the 3.000s since the stop signal",
			hint:    "was making progress when the SIGKILL came"},
		{name: "no reading at the stop signal", main: "sh", syscall: 61, arg: -1, childSyscall: 230, noStart: true,
			verdict: "PID 1 (sh) was waiting for its child sleep (pid 7, in clock_nanosleep) when the SIGKILL came: a shell runs its SIGTERM trap only after the foreground command ends",
			hint:    "cmd & wait $!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, nsA, 5151, tc.main, dockerInfo(idA, "web", 3))
			child := s.kid(5152, 7, "sleep")
			s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false)
			if !tc.noStart {
				s.blocked(0, s.init, sigvocab.RoleMainThread, tc.syscall, tc.arg, time.Second, 0)
				if !tc.noChild {
					s.blocked(0, child, sigvocab.RoleChild, tc.childSyscall, 0, 5*time.Millisecond, tc.childDisp)
				}
			}
			s.deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).kill(3*time.Second, runc)
			s.blocked(3*time.Second, s.init, sigvocab.RoleMainThread, tc.syscall, tc.arg, time.Second+tc.mainCPU, 0)
			if !tc.noChild {
				s.blocked(3*time.Second, child, sigvocab.RoleChild, tc.childSyscall, 0, 5*time.Millisecond, tc.childDisp)
			}
			s.initExit(3*time.Second+ms, sigvocab.SIGKILL, 0)
			if tc.main == "node" {
				for i := range s.in {
					s.in[i].c.MainRuntime = "nodejs"
				}
			}
			ep := only(t, newEngine(Options{}), s.in)
			if ep.Outcome != OutcomeHandlerTimeout || ep.AtKill == nil {
				t.Fatalf("outcome %s at_kill %+v", ep.Outcome, ep.AtKill)
			}
			if ep.AtKill.Verdict != tc.verdict {
				t.Errorf("verdict\n got %q\nwant %q", ep.AtKill.Verdict, tc.verdict)
			}
			if !strings.Contains(ep.Hint, tc.hint) || tc.notHint != "" && strings.Contains(ep.Hint, tc.notHint) {
				t.Errorf("hint %q: want %q, and not %q", ep.Hint, tc.hint, tc.notHint)
			}
			var step *Step
			for i := range ep.Steps {
				if ep.Steps[i].Kind == StepAtKill {
					step = &ep.Steps[i]
				}
			}
			if step == nil || step.Text != tc.verdict || !step.Time.Equal(ep.KillAt) {
				t.Errorf("at_kill step %+v", step)
			}
			b, err := json.Marshal(ep)
			if err != nil {
				t.Fatal(err)
			}
			var back Episode
			if err := json.Unmarshal(b, &back); err != nil || back.AtKill == nil || back.AtKill.Verdict != tc.verdict || back.AtKill.Main.Syscall != ep.AtKill.Main.Syscall {
				t.Errorf("read back (%v): %+v", err, back.AtKill)
			}
			if b2, _ := json.Marshal(back); string(b2) != string(b) {
				t.Errorf("round trip changed the JSON:\n%s\n%s", b, b2)
			}
		})
	}
}

// A JVM's main thread only waits (futex) while its other threads hold the
// shutdown: the verdict summarises the threads the kernel read besides the
// main one, and says how many were not read.
func TestAtKillOtherThreads(t *testing.T) {
	s := newSim(t, nsA, 5151, "java", dockerInfo(idA, "web", 3))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false)
	s.deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).kill(3*time.Second, runc)
	read := func(tid uint32, role sigvocab.TaskRole, syscall int32, cpu time.Duration) {
		p := s.init
		p.TID = tid
		s.push(3*time.Second, sigvocab.Event{Kind: sigvocab.KindBlocked, Target: p, Task: sigvocab.TaskReading{Role: role, Process: s.init.PID,
			Syscall: syscall, CPUNs: uint64(cpu), Threads: 22}})
	}
	read(s.init.PID, sigvocab.RoleMainThread, 202, time.Second)
	read(5160, sigvocab.RoleThread, 202, 0)
	read(5161, sigvocab.RoleThread, 202, 0)
	read(5162, sigvocab.RoleThread, 232, 0)
	s.initExit(3*time.Second+ms, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.AtKill == nil || len(ep.AtKill.Threads) != 3 || ep.AtKill.ThreadCount != 22 {
		t.Fatalf("at_kill %+v", ep.AtKill)
	}
	want := "PID 1 (java, the JVM) was waiting on a lock or another thread (futex) when the SIGKILL came, with 22 threads; its other threads: 2 in futex, 1 in epoll_wait (3 of 21 read)"
	if ep.AtKill.Verdict != want {
		t.Errorf("verdict\n got %q\nwant %q", ep.AtKill.Verdict, want)
	}
}
