package tracer

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The reader's tests: it sleeps with no timer while nothing happens, the
// first event wakes it, a storm does not wake it per record, records that
// wrap around the ring's end decode, and the counters reconcile.

// ignoringTarget starts a process that ignores SIGUSR1 (a storm target that
// survives its storm) and returns its pid.
func ignoringTarget(t testing.TB) int {
	t.Helper()
	pid := testutil.StartReady(t, exec.Command("sh", "-c", `trap '' USR1; echo ready; exec sleep 120`))
	testutil.WaitSigMask(t, pid, "SigIgn", syscall.SIGUSR1)
	return pid
}

// sendStorm sends n SIGUSR1 to pid from a child process (the tracer never
// records its own process's signals) and waits for it to end.
func sendStorm(t *testing.T, pid, n int) {
	t.Helper()
	storm := exec.Command(os.Args[0])
	storm.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=storm",
		"STORM_PID="+strconv.Itoa(pid), "STORM_N="+strconv.Itoa(n), "STORM_SIG=10")
	if out, err := storm.CombinedOutput(); err != nil {
		t.Fatalf("storm: %v\n%s", err, out)
	}
}

// liveRun runs tr in the background, counting the SIGUSR1 records to pid
// and failing on any other record; stop cancels it and waits for Run.
type liveRun struct {
	tr     *Tracer
	read   atomic.Uint64
	cancel context.CancelFunc
	done   chan error
}

func startLive(t *testing.T, tr *Tracer, pid int) *liveRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &liveRun{tr: tr, cancel: cancel, done: make(chan error, 1)}
	go func() {
		l.done <- tr.Run(ctx, func(e *sigvocab.Event) error {
			if e.Kind != sigvocab.KindGenerate || e.Signal != sigvocab.SIGUSR1 || e.Target.PID != uint32(pid) || e.Result != sigvocab.ResultIgnored {
				t.Errorf("unexpected event %s %s to %d %s", e.Kind, e.Signal, e.Target.PID, e.Result)
			}
			l.read.Add(1)
			return nil
		})
	}()
	t.Cleanup(func() { l.stop(t) })
	return l
}

func (l *liveRun) stop(t *testing.T) {
	t.Helper()
	if l.cancel == nil {
		return
	}
	l.cancel()
	l.cancel = nil
	if err := <-l.done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// reconcile checks the counters after Run returned: every signal seen,
// seen == emitted + dropped, and every emitted record read.
func reconcile(t *testing.T, tr *Tracer, sent int, read uint64) Stats {
	t.Helper()
	s, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	g := s.PerKind[sigvocab.KindGenerate]
	t.Logf("sent %d: seen %d emitted %d dropped %d read %d missed %d; reader wakeups %d, polls %d, wrapped records %d",
		sent, g.Seen, g.Emitted, g.Dropped, read, s.Missed, s.Wakeups, tr.rd.polls.Load(), tr.rd.wrapped.Load())
	if g.Seen+s.Missed != uint64(sent) {
		t.Errorf("seen %d + missed %d, want the %d signals sent", g.Seen, s.Missed, sent)
	}
	if g.Seen != g.Emitted+g.Dropped {
		t.Errorf("seen %d != emitted %d + dropped %d", g.Seen, g.Emitted, g.Dropped)
	}
	if read != g.Emitted || s.Read != read {
		t.Errorf("read %d (stats %d), want every emitted record (%d)", read, s.Read, g.Emitted)
	}
	if s.DecodeErrors != 0 {
		t.Errorf("%d undecodable records", s.DecodeErrors)
	}
	return s
}

// TestReaderSleepsThenWakes: with nothing to trace the reader sleeps without
// a timer (no epoll return at all over two seconds, where a 10 ms poll made
// 200), and the first signal after that wakes it through the doorbell.
func TestReaderSleepsThenWakes(t *testing.T) {
	testutil.RequirePrivileged(t)
	pid := ignoringTarget(t)
	// Filtered to our own target: other processes' signals on the host
	// never reach the ring.
	tr, err := New(Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGUSR1), PID: uint32(pid)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	l := startLive(t, tr, pid)

	time.Sleep(200 * time.Millisecond) // Run reaches its first sleep
	polls0 := tr.rd.polls.Load()
	time.Sleep(2 * time.Second)
	polls := tr.rd.polls.Load() - polls0
	s, _ := tr.Stats()
	t.Logf("idle 2 s: %d epoll returns, %d wakeups", polls, s.Wakeups)
	if polls > 1 || s.Wakeups > 1 {
		t.Errorf("idle reader: %d epoll returns and %d wakeups in 2 s, want it asleep (at most 1)", polls, s.Wakeups)
	}

	sendStorm(t, pid, 1)
	// No timer runs: only the doorbell can make the reader see it.
	testutil.WaitFor(t, "the signal sent after idle is read", func() bool { return l.read.Load() == 1 })
	if s, _ := tr.Stats(); s.Wakeups < 1 {
		t.Errorf("the signal was read with %d doorbell wakeups, want 1", s.Wakeups)
	}
	l.stop(t)
	reconcile(t, tr, 1, l.read.Load())
}

// TestReaderStormFewWakeups: a storm to one process is read in batches by a
// reader that stays awake while it lasts: far fewer wakeups than records,
// and every record read.
func TestReaderStormFewWakeups(t *testing.T) {
	testutil.RequirePrivileged(t)
	pid := ignoringTarget(t)
	tr, err := New(Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGUSR1), PID: uint32(pid)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	l := startLive(t, tr, pid)

	const sent = 20000 // ~5 MB of records: fits the default ring, no drop
	sendStorm(t, pid, sent)
	// Cancel at once: Run detaches, then reads what was written.
	l.stop(t)
	s := reconcile(t, tr, sent, l.read.Load())
	if s.PerKind[sigvocab.KindGenerate].Dropped != 0 {
		t.Errorf("%d records dropped with the default ring", s.PerKind[sigvocab.KindGenerate].Dropped)
	}
	if s.Wakeups > sent/100 {
		t.Errorf("%d wakeups for %d records, want at most %d", s.Wakeups, sent, sent/100)
	}
}

// TestReaderWrapAround: with a small ring most batches end with a record
// that wraps around the ring's end; each must decode as the signal sent.
// A reader starved of CPU during a storm (a loaded 2-core machine) reads
// one ring-full and counts the rest dropped, with nothing wrapped: the
// storm is sent again, up to 10 times, until a record has wrapped, and
// every one of them is reconciled.
func TestReaderWrapAround(t *testing.T) {
	testutil.RequirePrivileged(t)
	pid := ignoringTarget(t)
	for _, size := range []int{os.Getpagesize(), 64 << 10} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			tr, err := New(Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGUSR1), PID: uint32(pid), RingSize: size})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			l := startLive(t, tr, pid)
			const sent = 5000
			storms := 0
			for storms < 10 && (storms == 0 || tr.rd.wrapped.Load() == 0) {
				sendStorm(t, pid, sent)
				storms++
			}
			l.stop(t)
			reconcile(t, tr, storms*sent, l.read.Load())
			if tr.rd.wrapped.Load() == 0 {
				t.Errorf("no record wrapped around the end of a %d-byte ring in %d storms", size, storms)
			}
			t.Logf("%d storms of %d signals, %d records wrapped", storms, sent, tr.rd.wrapped.Load())
		})
	}
}

// TestReaderCancelMidStorm: a ctx that ends while records flow still
// delivers every record the programs wrote before they were detached.
func TestReaderCancelMidStorm(t *testing.T) {
	testutil.RequirePrivileged(t)
	pid := ignoringTarget(t)
	tr, err := New(Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGUSR1), PID: uint32(pid)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	l := startLive(t, tr, pid)

	const sent = 200000
	storm := exec.Command(os.Args[0])
	storm.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=storm",
		"STORM_PID="+strconv.Itoa(pid), "STORM_N="+strconv.Itoa(sent), "STORM_SIG=10")
	if err := storm.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = storm.Process.Kill(); _ = storm.Wait() }()
	testutil.WaitFor(t, "the storm's first records are read", func() bool { return l.read.Load() > 0 })
	l.stop(t)
	if err := storm.Process.Signal(syscall.SIGKILL); err == nil {
		_ = storm.Wait()
	}
	s, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	g := s.PerKind[sigvocab.KindGenerate]
	t.Logf("seen %d emitted %d dropped %d read %d; wakeups %d", g.Seen, g.Emitted, g.Dropped, l.read.Load(), s.Wakeups)
	if g.Seen != g.Emitted+g.Dropped {
		t.Errorf("seen %d != emitted %d + dropped %d", g.Seen, g.Emitted, g.Dropped)
	}
	if r := l.read.Load(); r != g.Emitted || s.Read != r {
		t.Errorf("read %d (stats %d), want every emitted record (%d)", r, s.Read, g.Emitted)
	}
}

// TestCloseDuringRun: Close while Run sleeps makes Run return nil, and
// the ring is released after it (no fault from a reader on unmapped memory).
func TestCloseDuringRun(t *testing.T) {
	testutil.RequirePrivileged(t)
	pid := ignoringTarget(t)
	tr, err := New(Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGUSR1), PID: uint32(pid)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Run(context.Background(), func(*sigvocab.Event) error { return nil }) }()
	time.Sleep(100 * time.Millisecond)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run after Close: %v", err)
	}
	if err := tr.Run(context.Background(), func(*sigvocab.Event) error { return nil }); err == nil {
		t.Error("Run on a closed tracer returned nil")
	}
}
