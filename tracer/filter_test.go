package tracer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// startIgnorer runs this test binary as exe (a path, possibly a symlink that
// gives the process another comm) with SIGTERM, SIGUSR1 and SIGUSR2 ignored,
// so that signals leave it alive.
func startIgnorer(t *testing.T, exe string) int {
	t.Helper()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=ignore")
	pid := testutil.StartReady(t, cmd)
	testutil.WaitSigMask(t, pid, "SigIgn", syscall.SIGUSR2)
	return pid
}

// Each in-kernel filter passes what it should and nothing else.
func TestKernelFilters(t *testing.T) {
	testutil.RequirePrivileged(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(t.TempDir(), "sigscope-cm")
	if err := os.Symlink(self, named); err != nil {
		t.Fatal(err)
	}
	a := startIgnorer(t, self)
	b := startIgnorer(t, named) // comm "sigscope-cm", the name this test chose
	// Wait for b's exec so that its comm is the new one.
	var comm []byte
	if !testutil.Poll(5*time.Millisecond, func() bool {
		comm, _ = os.ReadFile("/proc/" + strconv.Itoa(b) + "/comm")
		return string(comm) == "sigscope-cm\n"
	}) {
		t.Fatalf("comm of %d is %q", b, comm)
	}

	for _, c := range []struct {
		name string
		opts Options
		want func(e *sigvocab.Event) bool
	}{
		{"pid", Options{PID: uint32(a)}, func(e *sigvocab.Event) bool { return int(e.Target.PID) == a }},
		{"comm", Options{Comm: "sigscope-cm"}, func(e *sigvocab.Event) bool { return int(e.Target.PID) == b }},
		{"signals", Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGUSR2)}, func(e *sigvocab.Event) bool { return e.Signal == sigvocab.SIGUSR2 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			col := startCollector(t, c.opts)
			for _, pid := range []int{a, b} {
				for _, sig := range []string{"-TERM", "-USR1", "-USR2"} {
					testutil.Run(t, "kill", sig, strconv.Itoa(pid))
				}
			}
			// The last signal sent passes every filter but pid's and comm's; send
			// one that passes each filter last, then wait for it.
			testutil.Run(t, "kill", "-USR2", strconv.Itoa(a))
			testutil.Run(t, "kill", "-USR2", strconv.Itoa(b))
			col.waitFor(t, "marker", func(e *sigvocab.Event) bool {
				return e.Kind == sigvocab.KindGenerate && e.Signal == sigvocab.SIGUSR2 && c.want(e)
			})
			time.Sleep(50 * time.Millisecond) // past one poll interval
			mine := func(e *sigvocab.Event) bool {
				return e.Kind == sigvocab.KindGenerate && (int(e.Target.PID) == a || int(e.Target.PID) == b)
			}
			got := col.all(mine)
			if len(got) == 0 {
				t.Fatal("no events")
			}
			for _, e := range got {
				if !c.want(&e) {
					t.Errorf("filter %s let through %s to %d", c.name, e.Signal, e.Target.PID)
				}
			}
			wantN := map[string]int{"pid": 4, "comm": 4, "signals": 4}[c.name]
			if len(got) != wantN {
				t.Errorf("filter %s: %d events, want %d", c.name, len(got), wantN)
			}
		})
	}
}

// Exits are reported only for processes that matter.
func TestExitFilter(t *testing.T) {
	c := startCollector(t, Options{})

	plain := exec.Command("sh", "-c", "exit 5")
	if err := plain.Run(); err == nil {
		t.Fatal("exit 5 reported success")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	targeted := startIgnorer(t, self)
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(targeted)) // ignored, but now a target
	testutil.Run(t, "kill", "-INT", strconv.Itoa(targeted))  // kills it
	ns := testutil.StartNSInit(t, "echo ready; read x; exit 4")
	_, _ = ns.Stdin.Write([]byte("\n"))

	c.waitFor(t, "targeted", func(e *sigvocab.Event) bool {
		return e.Kind == sigvocab.KindExit && int(e.Target.PID) == targeted && e.Signal == sigvocab.SIGINT
	})
	c.waitFor(t, "in-namespace", func(e *sigvocab.Event) bool {
		return e.Kind == sigvocab.KindExit && int(e.Target.PID) == ns.PID && e.ExitCode == 4
	})
	if got := c.all(func(e *sigvocab.Event) bool {
		return e.Kind == sigvocab.KindExit && int(e.Target.PID) == plain.Process.Pid
	}); len(got) != 0 {
		t.Errorf("exit of a plain host process that no traced signal targeted was reported: %+v", got[0])
	}
}
