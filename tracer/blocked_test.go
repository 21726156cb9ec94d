package tracer

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A stop signal and then a SIGKILL from the host to a namespace init whose
// SIGTERM trap waits behind a foreground command: after each signal's
// record come blocked records with the same time stamp, for the shell's
// main thread (in wait4 for its child, using no CPU in between) and for
// its child sleep (in a sleep call, SIGTERM at its default); a signal to
// a process that is no namespace init reads nothing.
func TestBlockedReadings(t *testing.T) {
	c := startCollector(t, Options{})
	ns := testutil.StartNSInit(t, "trap 'echo bye' TERM; echo ready; sleep 1000")
	// The foreground sleep has started: the shell waits for it.
	testutil.WaitInSyscall(t, ns.PID, "wait4")
	testutil.WaitInSyscall(t, testutil.WaitChildren(t, ns.PID, 1)[0], "nanosleep", "clock_nanosleep")
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(ns.PID))
	term := c.waitFor(t, "SIGTERM", isGenerate(sigvocab.SIGTERM, ns.PID))
	// The shell took the SIGTERM (its trap waits behind the sleep) and waits
	// again.
	testutil.WaitFor(t, "the shell to take the SIGTERM", func() bool {
		pending, err := testutil.SigMask(ns.PID, "ShdPnd")
		return err == nil && !testutil.HasSig(pending, syscall.SIGTERM)
	})
	testutil.WaitInSyscall(t, ns.PID, "wait4")
	testutil.Run(t, "kill", "-KILL", strconv.Itoa(ns.PID))
	kill := c.waitFor(t, "SIGKILL", isGenerate(sigvocab.SIGKILL, ns.PID))
	readings := func(at uint64) (main, child *sigvocab.Event) {
		t.Helper()
		testutil.Poll(20*time.Millisecond, func() bool {
			for _, e := range c.all(func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindBlocked && e.BootNS == at }) {
				e := e
				if e.Task.Process != uint32(ns.PID) {
					t.Errorf("a reading of process %d, want %d", e.Task.Process, ns.PID)
				}
				switch e.Task.Role {
				case sigvocab.RoleMainThread:
					main = &e
				case sigvocab.RoleChild:
					child = &e
				}
			}
			return main != nil && child != nil
		})
		if main == nil || child == nil {
			t.Fatalf("readings at %d: main %v child %v", at, main, child)
		}
		return main, child
	}
	m0, _ := readings(term.BootNS)
	m1, c1 := readings(kill.BootNS)
	if sigvocab.SyscallName(m1.Task.Syscall) != "wait4" || int32(uint32(m1.Task.Arg)) != -1 || m1.Target.PID != uint32(ns.PID) ||
		m1.Target.NsPID != 1 || m1.Target.Comm.String() != "sh" || m1.Task.Threads != 1 {
		t.Errorf("main thread at the SIGKILL: %s %+v", m1.Target.Comm, m1.Task)
	}
	if n := sigvocab.SyscallName(c1.Task.Syscall); (n != "nanosleep" && n != "clock_nanosleep") || c1.Target.Comm.String() != "sleep" ||
		c1.Task.Disposition(sigvocab.SIGTERM) != sigvocab.DispDefault {
		t.Errorf("child at the SIGKILL: %s in %s, %+v", c1.Target.Comm, n, c1.Task)
	}
	if used := time.Duration(m1.Task.CPUNs - m0.Task.CPUNs); m1.Task.CPUNs < m0.Task.CPUNs || used > 50*time.Millisecond {
		t.Errorf("the waiting shell used %v of CPU between the readings", used)
	}
	// No reading for a signal to a process that is no namespace init.
	plain := testutil.StartReady(t, exec.Command("sh", "-c", "trap '' TERM; echo ready; exec sleep 1000"))
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(plain))
	gen := c.waitFor(t, "plain", isGenerate(sigvocab.SIGTERM, plain))
	time.Sleep(200 * time.Millisecond)
	if got := c.all(func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindBlocked && e.BootNS == gen.BootNS }); len(got) != 0 {
		t.Errorf("%d readings of a process that is no namespace init", len(got))
	}
}

// A process that entered the init's namespace from outside (as runc exec
// starts a preStop exec hook) and still runs when the stop signal comes is
// read with the init at the SIGKILL, with its children; one that already
// ended is not.
func TestExecReadings(t *testing.T) {
	c := startCollector(t, Options{})
	ns := testutil.StartNSInit(t, "echo ready; sleep 1000")
	pid := strconv.Itoa(ns.PID)
	testutil.Run(t, "nsenter", "-t", pid, "-p", "--", "true") // ended before the stop
	hook := testutil.StartReady(t, exec.Command("nsenter", "-t", pid, "-p", "--", "sh", "-c", "echo ready; sleep 1000; true"))
	// The sleep has started: nsenter's child, the shell, waits for it.
	sh := testutil.WaitChildren(t, hook, 1)[0]
	testutil.WaitInSyscall(t, sh, "wait4")
	testutil.WaitInSyscall(t, testutil.WaitChildren(t, sh, 1)[0], "nanosleep", "clock_nanosleep")
	// The init has no handler: the kernel drops SIGTERM (no reading for a
	// signal that was not delivered), and the SIGKILL reads.
	testutil.Run(t, "kill", "-TERM", pid)
	c.waitFor(t, "SIGTERM", isGenerate(sigvocab.SIGTERM, ns.PID))
	testutil.Run(t, "kill", "-KILL", pid)
	term := c.waitFor(t, "SIGKILL", isGenerate(sigvocab.SIGKILL, ns.PID))
	var execs, kids []sigvocab.Event
	testutil.Poll(50*time.Millisecond, func() bool {
		execs = c.all(func(e *sigvocab.Event) bool {
			return e.Kind == sigvocab.KindBlocked && e.BootNS == term.BootNS && e.Task.Role == sigvocab.RoleExec
		})
		kids = c.all(func(e *sigvocab.Event) bool {
			return e.Kind == sigvocab.KindBlocked && e.BootNS == term.BootNS && e.Task.Role == sigvocab.RoleExecChild
		})
		return len(execs) > 0 && len(kids) > 0
	})
	if len(execs) != 1 || len(kids) != 1 {
		t.Fatalf("exec readings %+v, children %+v: want the running one and its child", execs, kids)
	}
	x, k := execs[0], kids[0]
	// nsenter forks and waits: the process in the namespace is its child.
	if x.Target.Comm.String() != "sh" || x.Target.NsPID == 1 || x.Task.Process != uint32(ns.PID) || sigvocab.SyscallName(x.Task.Syscall) != "wait4" {
		t.Errorf("exec reading: %s (ns pid %d) of %d in %s; nsenter %d", x.Target.Comm, x.Target.NsPID, x.Task.Process, sigvocab.SyscallName(x.Task.Syscall), hook)
	}
	if n := sigvocab.SyscallName(k.Task.Syscall); k.Target.Comm.String() != "sleep" || (n != "nanosleep" && n != "clock_nanosleep") || k.Task.Slot != x.Task.Slot {
		t.Errorf("exec child reading: %s in %s, slot %d (the exec's %d)", k.Target.Comm, n, k.Task.Slot, x.Task.Slot)
	}
}
