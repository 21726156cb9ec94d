package tracer_test

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// An OOM kill of a namespace's PID 1 becomes an oom_killed episode, through
// the tracer's real records and the timeline engine. The second run reduces
// each OOM record to what the 1-argument mark_victim gives (a thread id) so
// that the /proc completion that prototype relies on is what places it.
// make test-kernels runs this on Debian's 6.1 and 6.12 too.
func TestOOMEpisode(t *testing.T) {
	for _, c := range []struct {
		name string
		opts tracer.Options
	}{
		{"task", tracer.Options{}},
		{"tid-only", tracer.WithOOMTIDOnly(tracer.Options{})},
	} {
		t.Run(c.name, func(t *testing.T) { oomEpisode(t, c.opts) })
	}
}

func oomEpisode(t *testing.T, opts tracer.Options) {
	testutil.RequirePrivileged(t)
	tr, err := tracer.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer tr.Close()
	var (
		mu   sync.Mutex
		eps  []timeline.Episode
		oomE []sigvocab.Event
	)
	engine := timeline.New(timeline.Options{Settle: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- tr.Run(ctx, func(e *sigvocab.Event) error {
			mu.Lock()
			defer mu.Unlock()
			if e.Kind == sigvocab.KindOOM {
				oomE = append(oomE, *e)
			}
			eps = append(eps, engine.Add(e, nil)...)
			return nil
		})
	}()

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=allocate")
	// PID 1 of a pid namespace of its own: a container as far as the
	// engine knows.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	pid := testutil.StartOOM(t, cmd, 48<<20)
	_ = cmd.Wait()
	var got *timeline.Episode
	testutil.Poll(50*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		eps = append(eps, engine.Advance(time.Now())...)
		for i := range eps {
			if int(eps[i].Main.PID) == pid {
				got = &eps[i]
			}
		}
		return got != nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got == nil {
		t.Fatalf("no episode for PID 1 %d; oom events %+v", pid, oomE)
	}
	if got.Outcome != timeline.OutcomeOOMKilled || !got.MainIsInit || got.ExitStatus != 137 || len(got.OOMVictims) == 0 {
		t.Errorf("episode %s main %+v init %v exit %d victims %+v", got.Outcome, got.Main, got.MainIsInit, got.ExitStatus, got.OOMVictims)
	}
	if v := got.OOMVictims; len(v) > 0 && (v[0].NsPID != 1 || int(v[0].PID) != pid || v[0].Comm == "") {
		t.Errorf("victim %+v, want PID 1 %d with its comm", v[0], pid)
	}
}
