package tracer

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A process that enters a pid namespace from outside and runs a program
// there (nsenter, as runc exec does for a preStop hook or kubectl exec) is
// reported with the parent that started it; a program the namespace's own
// processes start is not.
func TestExecFromOutside(t *testing.T) {
	c := startCollector(t, Options{})
	ns := testutil.StartNSInit(t, "echo ready; read x; sleep 0.2; echo inside; read x")
	pidns := ns.PidNS(t)
	nsenter := exec.Command("nsenter", "-t", strconv.Itoa(ns.PID), "-p", "--", "sh", "-c", "exit 3")
	if out, err := nsenter.CombinedOutput(); err == nil || nsenter.ProcessState.ExitCode() != 3 {
		t.Fatalf("nsenter: %v %s", err, out)
	}
	_, _ = ns.Stdin.Write([]byte("\n"))
	ns.WaitLine(t, "inside")

	ev := c.waitFor(t, "exec", func(e *sigvocab.Event) bool {
		return e.Kind == sigvocab.KindExec && e.Target.PidNS == pidns && int(e.Sender.PID) == nsenter.Process.Pid
	})
	if ev.Target.PidNS != pidns || ev.Target.NsPID < 2 || int(ev.Sender.PID) != nsenter.Process.Pid || ev.Sender.PidNS == pidns {
		t.Errorf("exec %+v by %+v, want a process of pid ns %d started by nsenter %d", ev.Target, ev.Sender, pidns, nsenter.Process.Pid)
	}
	exit := c.waitFor(t, "exec-exit", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindExit && e.Target.PID == ev.Target.PID })
	if exit.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", exit.ExitCode)
	}
	// The init's own child (sleep) ran a program too, from inside.
	time.Sleep(100 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.events {
		if e.Kind == sigvocab.KindExec && e.Target.Comm.String() == "sleep" && e.Target.PidNS == pidns {
			t.Errorf("exec from inside the namespace reported: %+v by %+v", e.Target, e.Sender)
		}
	}
}
