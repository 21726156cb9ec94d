package tracer

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// retained keeps allocate's memory reachable, so the collector cannot free it.
var retained [][]byte

// allocate waits for a line on stdin (so the test can move it into a
// memory-limited cgroup first), then touches memory until the OOM killer
// ends it.
func allocate() {
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	for {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = byte(i)
		}
		retained = append(retained, b)
	}
}

// The OOM killer's choice is reported: its SIGKILL (kernel-generated, not a
// cascade), then the oom event (__oom_kill_process sends the signal before
// mark_oom_victim), then the death.
func TestOOMKill(t *testing.T) {
	c := startCollector(t, Options{})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=allocate")
	pid := testutil.StartOOM(t, cmd, 48<<20)
	oom := c.waitFor(t, "oom", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindOOM && int(e.Target.PID) == pid })
	if oom.Target.TID == 0 {
		t.Errorf("oom event without a victim: %+v", oom.Target)
	}
	kill := c.waitFor(t, "oom-kill", isGenerate(sigvocab.SIGKILL, pid))
	if kill.Code != sigvocab.CodeKernel || kill.Flags.Has(sigvocab.FlagNSCascade) {
		t.Errorf("OOM SIGKILL: code %s flags [%s], want kernel, not ns_cascade", kill.Code, kill.Flags)
	}
	exit := c.waitFor(t, "oom-exit", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindExit && int(e.Target.PID) == pid })
	if exit.Signal != sigvocab.SIGKILL {
		t.Errorf("victim ended by %s, want SIGKILL", exit.Signal)
	}
	if c.index(oom) < c.index(kill) {
		t.Errorf("oom event before its SIGKILL: the kernel marks the victim after signalling it")
	}
}
