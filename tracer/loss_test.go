package tracer

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// TestLossAccounting overruns a one-page ring with a signal storm while
// nothing reads, then checks that the kernel's counters account for every
// signal exactly: seen == sent, seen == emitted + dropped, and every emitted
// record reaches user space.
func TestLossAccounting(t *testing.T) {
	testutil.RequirePrivileged(t)
	targetPID := testutil.StartReady(t, exec.Command("sh", "-c", `trap '' USR1; echo ready; exec sleep 60`))
	testutil.WaitSigMask(t, targetPID, "SigIgn", syscall.SIGUSR1)

	tr, err := New(Options{
		Signals:  sigvocab.NewSignalSet(sigvocab.SIGUSR1),
		PID:      uint32(targetPID),
		RingSize: os.Getpagesize(), // ~18 records: a storm must overflow it
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	const sent = 20000
	storm := exec.Command(os.Args[0])
	storm.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=storm",
		"STORM_PID="+strconv.Itoa(targetPID), "STORM_N="+strconv.Itoa(sent), "STORM_SIG=10")
	if out, err := storm.CombinedOutput(); err != nil {
		t.Fatalf("storm: %v\n%s", err, out)
	}

	// Read only now: Run with a finished context detaches, drains and returns.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var read uint64
	if err := tr.Run(ctx, func(e *sigvocab.Event) error {
		if e.Kind != sigvocab.KindGenerate || e.Signal != sigvocab.SIGUSR1 || e.Result != sigvocab.ResultIgnored || !e.Flags.Has(sigvocab.FlagSigIgn) {
			t.Errorf("unexpected event %s %s %s [%s]", e.Kind, e.Signal, e.Result, e.Flags)
		}
		read++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	g := s.PerKind[sigvocab.KindGenerate]
	t.Logf("sent %d: seen %d emitted %d dropped %d read %d missed %d", sent, g.Seen, g.Emitted, g.Dropped, read, s.Missed)
	if g.Seen+s.Missed != sent {
		t.Errorf("seen %d + missed %d, want %d signals sent", g.Seen, s.Missed, sent)
	}
	if g.Seen != g.Emitted+g.Dropped {
		t.Errorf("seen %d != emitted %d + dropped %d", g.Seen, g.Emitted, g.Dropped)
	}
	if g.Dropped == 0 {
		t.Errorf("no drops with a one-page ring: the test did not overflow it")
	}
	if read != g.Emitted || s.Read != read {
		t.Errorf("read %d (stats %d), want every emitted record (%d)", read, s.Read, g.Emitted)
	}
	if s.PerKind[sigvocab.KindDeliver].Seen != 0 || s.PerKind[sigvocab.KindExit].Seen != 0 {
		t.Errorf("unexpected deliver/exit events: %+v %+v", s.PerKind[sigvocab.KindDeliver], s.PerKind[sigvocab.KindExit])
	}
}
