package pipeline

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/events/sigvocab"
	"github.com/sigscope/sigscope/events/tracer"
	"github.com/sigscope/sigscope/internal/testutil"
)

// A real stop of a namespace init that drops SIGTERM goes through the real
// tracer and engine: every event is seen by OnEvent, and the episode comes
// out of OnEpisodes when the ring goes quiet, without waiting for the end.
func TestPipelineStop(t *testing.T) {
	testutil.RequirePrivileged(t)
	var (
		mu     sync.Mutex
		events int
		eps    []timeline.Episode
	)
	p, err := New(Options{
		Tracer:   tracer.Options{Signals: sigvocab.DefaultSignals},
		Timeline: &timeline.Options{Settle: 100 * time.Millisecond},
		OnEvent: func(e *sigvocab.Event, target, sender *identity.Info) error {
			mu.Lock()
			events++
			mu.Unlock()
			return nil
		},
		OnEpisodes: func(got []timeline.Episode) error {
			mu.Lock()
			eps = append(eps, got...)
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	ns := testutil.StartNSInit(t, "sleep 1000 & echo ready; wait")
	// Sent by another process: the tracer drops its own process's signals.
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(ns.PID))
	time.Sleep(50 * time.Millisecond)
	testutil.Run(t, "kill", "-KILL", strconv.Itoa(ns.PID))
	var ep *timeline.Episode
	for deadline := time.Now().Add(5 * time.Second); ep == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		for i := range eps {
			if int(eps[i].Main.PID) == ns.PID {
				ep = &eps[i]
			}
		}
		mu.Unlock()
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if ep == nil {
		t.Fatal("no episode before the end of the run")
	}
	if ep.Outcome != timeline.OutcomeIgnoredByInit || ep.StopVerdict != sigvocab.FateDroppedInit || len(ep.CascadeKills) != 1 {
		t.Errorf("episode %s %s cascade %d", ep.Outcome, ep.StopVerdict, len(ep.CascadeKills))
	}
	mu.Lock()
	defer mu.Unlock()
	if events < 4 {
		t.Errorf("OnEvent saw %d events", events)
	}
}

// An episode completes at its settle deadline even when no event follows:
// the tracer is filtered to the namespace init, so after its exit and the
// cascade nothing reaches the ring, and the reader, which has no timer of
// its own, must be called back at the deadline that Idle returned.
func TestPipelineEpisodeAtDeadline(t *testing.T) {
	testutil.RequirePrivileged(t)
	// No ns_empty may end this episode at once: its init's parent ignores
	// SIGCHLD, so the kernel notifies nobody of its exit.
	ns := testutil.StartNSInitUnnotified(t, "sleep 1000 & echo ready; wait")
	var (
		mu      sync.Mutex
		eps     []timeline.Episode
		nsEmpty int
	)
	p, err := New(Options{
		Tracer:   tracer.Options{Signals: sigvocab.DefaultSignals, PID: uint32(ns.PID)},
		Timeline: &timeline.Options{Settle: 200 * time.Millisecond},
		OnEvent: func(e *sigvocab.Event, _, _ *identity.Info) error {
			if e.Kind == sigvocab.KindNSEmpty {
				mu.Lock()
				nsEmpty++
				mu.Unlock()
			}
			return nil
		},
		OnEpisodes: func(got []timeline.Episode) error {
			mu.Lock()
			eps = append(eps, got...)
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	testutil.Run(t, "kill", "-KILL", strconv.Itoa(ns.PID))
	testutil.WaitFor(t, "the episode, completed with no event after it", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(eps) > 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if nsEmpty != 0 {
		t.Fatalf("%d ns_empty records: the init's exit was notified, and the episode did not need its deadline", nsEmpty)
	}
	if len(eps) != 1 || int(eps[0].Main.PID) != ns.PID || eps[0].Outcome != timeline.OutcomeKilled {
		t.Errorf("episodes %+v, want the init's, killed", eps)
	}
}
