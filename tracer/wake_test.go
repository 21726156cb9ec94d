package tracer

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Wake has a sleeping reader call Idle with no event and no deadline due,
// once per Wake: another goroutine's work reaches the reader without a
// timer (the pipeline's preStop hooks seen by the API server).
func TestWakeCallsIdle(t *testing.T) {
	testutil.RequirePrivileged(t)
	var idles atomic.Int64
	// Only this process's events, which the tracer drops: none come.
	tr, err := New(Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGTERM), PID: uint32(os.Getpid()),
		Idle: func() time.Time { idles.Add(1); return time.Time{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, func(*sigvocab.Event) error { return nil }) }()
	// Asleep: no traced signal, no deadline asked for.
	time.Sleep(300 * time.Millisecond)
	before := idles.Load()
	time.Sleep(300 * time.Millisecond)
	if n := idles.Load(); n != before {
		t.Fatalf("Idle called %d times while nothing happened", n-before)
	}
	for i := range 3 {
		tr.Wake()
		testutil.Poll(5*time.Millisecond, func() bool { return idles.Load() != before+int64(i) })
		if n := idles.Load(); n != before+int64(i)+1 {
			t.Fatalf("after Wake %d: Idle called %d times since, want %d", i+1, n-before, i+1)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := idles.Load(); n != before+3 {
		t.Errorf("Idle called %d times after 3 wakes, want 3: a wake is taken once", n-before)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	tr.Wake() // after Run: no effect, no fault
}
