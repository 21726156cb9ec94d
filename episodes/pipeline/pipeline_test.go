package pipeline

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
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
	testutil.Poll(20*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range eps {
			if int(eps[i].Main.PID) == ns.PID {
				ep = &eps[i]
			}
		}
		return ep != nil
	})
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

// A count begun at a hook-like exec is let go when no stop signal follows
// within timeline.HookGrace of the exec's end (a kubectl exec of the hook's program,
// say), and so is one begun at a sleep hook's start (HookStarted) past the
// hook's end; a stop signal takes a count up. Through the real tracer's
// table of watched namespaces.
func TestHookCountLetGo(t *testing.T) {
	testutil.RequirePrivileged(t)
	p, err := New(Options{Tracer: tracer.Options{Signals: sigvocab.DefaultSignals}, Timeline: &timeline.Options{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !p.t.CountsConnections() {
		t.Fatal("the tracer does not count connections on this kernel")
	}
	watched := func(netns uint32) bool {
		t.Helper()
		w, err := p.t.Watched()
		if err != nil {
			t.Fatal(err)
		}
		_, ok := w[netns]
		return ok
	}
	info := &identity.Info{PreStop: &identity.Hook{Kind: "exec", Command: []string{"/bin/sleep", "2"}}}
	base := time.Now()
	exec := func(netns, pid uint32, comm string, at time.Time) {
		e := sigvocab.Event{Kind: sigvocab.KindExec, Time: at, NetNS: netns, Target: sigvocab.Process{PID: pid}}
		copy(e.Target.Comm[:], comm)
		p.watchHook(&e, info)
	}
	exit := func(pid uint32, at time.Time) {
		p.watchHook(&sigvocab.Event{Kind: sigvocab.KindExit, Time: at, Target: sigvocab.Process{PID: pid}}, info)
	}
	const lone, stopped, other, slept = 4000000101, 4000000102, 4000000103, 4000000104
	t.Cleanup(func() {
		for _, n := range []uint32{lone, stopped, other, slept} {
			_ = p.t.Unwatch(n)
		}
	})

	// An exec of the hook's program that no stop signal follows.
	exec(lone, 4101, "sleep", base)
	exec(other, 4103, "curl", base) // not the hook's program: no count
	if !watched(lone) || watched(other) {
		t.Fatalf("after the execs: hook's %v, another program's %v", watched(lone), watched(other))
	}
	exit(4101, base.Add(time.Second))
	p.endHooks(base.Add(time.Second + timeline.HookGrace))
	if !watched(lone) {
		t.Fatal("let go within timeline.HookGrace of the exec's end")
	}
	p.endHooks(base.Add(time.Second + timeline.HookGrace + time.Millisecond))
	if watched(lone) {
		t.Error("a count no stop signal took up is still watched past timeline.HookGrace")
	}

	// A real hook: the stop signal follows and takes the count up.
	exec(stopped, 4102, "sleep", base)
	exit(4102, base.Add(2*time.Second))
	p.watchHook(&sigvocab.Event{Kind: sigvocab.KindGenerate, Time: base.Add(2 * time.Second), NetNS: stopped, Signal: sigvocab.SIGTERM}, info)
	p.endHooks(base.Add(time.Minute))
	if p.hooks.Counting(stopped) {
		t.Error("the stop signal did not take the count up")
	}

	// A sleep hook, from the API server's report of the deletion.
	p.hookStarts = []hookStart{{netns: slept, at: base, until: base.Add(5 * time.Second)}}
	p.takeHookStarts()
	if w, _ := p.t.Watched(); w[slept].Sub(base).Abs() > time.Millisecond {
		t.Fatalf("sleep hook: watched since %v, want %v", w[slept], base)
	}
	p.endHooks(base.Add(5*time.Second + timeline.HookGrace))
	if !watched(slept) {
		t.Fatal("a sleep hook's count let go before its end and timeline.HookGrace")
	}
	p.endHooks(base.Add(5*time.Second + timeline.HookGrace + time.Millisecond))
	if watched(slept) {
		t.Error("a sleep hook's count no stop signal took up is still watched")
	}
}
