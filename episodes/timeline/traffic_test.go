package timeline

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Network namespaces of the traffic tests.
const (
	netA = 4026532500
	netB = 4026532600
)

// watched marks the event pushed last (a stop signal or a SIGKILL from the
// host) as the kernel marks the first stop signal into netns: from it on,
// the namespace's connections are counted.
func (s *sim) watched(netns uint32) *sim {
	ev := &s.in[len(s.in)-1].ev
	ev.Facts |= sigvocab.FactNetWatched
	ev.Flags = sigvocab.Classify(ev)
	ev.NetNS = netns
	return s
}

// netCount is one kind's count, its times from base.
type netCount struct {
	kind        sigvocab.NetKind
	n           uint64
	first, last time.Duration
}

// conns is what the kernel counted from base (the stop signal).
func conns(seesRefused bool, counts ...netCount) *sigvocab.Connections {
	c := &sigvocab.Connections{Since: base, SeesRefused: seesRefused}
	for _, n := range counts {
		c.Counts[n.kind] = sigvocab.NetCount{N: n.n, First: base.Add(n.first), Last: base.Add(n.last)}
	}
	return c
}

// spoke is conns of a kernel that tells who spoke last on a connection
// (today's).
func spoke(counts ...netCount) *sigvocab.Connections {
	c := conns(true, counts...)
	c.SeesLastSpeaker = true
	return c
}

// netEvent is the pipeline's read of netns's counts at base+at.
func netEvent(at time.Duration, netns uint32, c *sigvocab.Connections) *sigvocab.Event {
	return &sigvocab.Event{Kind: sigvocab.KindNet, Time: base.Add(at), NetNS: netns, Conns: c}
}

// feedAll gives in to e and fails if an episode completes: a watched stop
// waits for its counts.
func feedAll(t *testing.T, e *Engine, in []input) {
	t.Helper()
	for i := range in {
		if got := e.Add(&in[i].ev, in[i].c); len(got) != 0 {
			t.Fatalf("an episode completed at event %d (%s) before its counts were read: %s", i, in[i].ev.Kind, got[0].Outcome)
		}
	}
}

// readWhenDue feeds in, then does what the pipeline does: it wakes at the
// engine's Deadline, Advances, asks ConnectionsDue, and reads the counts
// the engine asks for (netns's, c) lag after they were due. It returns the
// episodes that read completes.
func readWhenDue(t *testing.T, e *Engine, in []input, netns uint32, c *sigvocab.Connections, lag time.Duration) []Episode {
	t.Helper()
	feedAll(t, e, in)
	for range 4 {
		d := e.Deadline()
		if d.IsZero() {
			t.Fatal("the engine waits for no time")
		}
		now := d.Add(time.Microsecond)
		if got := e.Advance(now); len(got) != 0 {
			t.Fatalf("an episode completed without its counts: %+v", got[0].Traffic)
		}
		if due := e.ConnectionsDue(now); len(due) > 0 {
			if !slices.Equal(due, []uint32{netns}) {
				t.Fatalf("due %v, want [%d]", due, netns)
			}
			done := e.Add(netEvent(now.Add(lag).Sub(base), netns, c), nil)
			if len(done) == 0 {
				t.Fatal("the counts completed no episode")
			}
			return done
		}
	}
	t.Fatal("the counts were never due")
	return nil
}

// withoutTraffic is the episode with its traffic, its steps and the
// watched namespace of its signals taken out: what the same stop gives when
// the kernel did not count.
func withoutTraffic(ep Episode) Episode {
	ep.Traffic = nil
	ep.Steps = slices.DeleteFunc(slices.Clone(ep.Steps), func(s Step) bool { return s.Kind.traffic() })
	return ep
}

// sameStop fails unless the watched episode tells the stop as its twin
// whose stop signal the kernel did not watch: the traffic changes neither
// the outcome nor the hint nor any other step.
func sameStop(t *testing.T, watched, twin Episode) {
	t.Helper()
	if twin.Traffic != nil {
		t.Fatalf("an episode no stop signal of which was watched has traffic: %+v", twin.Traffic)
	}
	a, _ := json.Marshal(withoutTraffic(watched))
	b, _ := json.Marshal(twin)
	if !bytes.Equal(a, b) {
		t.Errorf("the traffic changed the episode:\n%s\nwant\n%s", a, b)
	}
}

// twin replays in with no watched namespace: the same stop on a kernel
// that did not count.
func twin(t *testing.T, in []input) Episode {
	t.Helper()
	plain := slices.Clone(in)
	for i := range plain {
		plain[i].ev.Facts &^= sigvocab.FactNetWatched
		plain[i].ev.NetNS = 0
	}
	return only(t, newEngine(Options{}), plain)
}

// A server that handles SIGTERM, stops accepting, finishes its requests
// and exits: the episode waits for its counts until NetLinger after the
// exit (not at ns_empty, as an unwatched one would), asks for them once,
// and completes at the read with a verdict that no client was hurt.
func TestTrafficClean(t *testing.T) {
	s := newSim(t, nsA, 5151, "app", dockerInfo(idA, "web", 10))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).
		deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		initExit(500*ms, 0, 0).
		nsEmpty(501 * ms)
	e := newEngine(Options{})
	feedAll(t, e, s.in)
	if !e.Watching(netA) || e.Watching(netB) || e.Watching(0) || !slices.Equal(e.WatchedNets(), []uint32{netA}) {
		t.Fatalf("watching %v %v, watched %v", e.Watching(netA), e.Watching(netB), e.WatchedNets())
	}
	// Due NetLinger after the exit, later than ns_empty; the hard deadline
	// NetWait after ns_empty.
	due, hard := base.Add(1500*ms), base.Add(501*ms+NetWait)
	if d := e.Deadline(); !d.Equal(due) {
		t.Fatalf("deadline %v, want the read's due time %v", d.Sub(base), due.Sub(base))
	}
	// Events lost now were none of its own: they are over.
	e.NoteDropped(3)
	if got := e.ConnectionsDue(due.Add(-time.Nanosecond)); len(got) != 0 {
		t.Fatalf("due before their time: %v", got)
	}
	if got := e.ConnectionsDue(due); !slices.Equal(got, []uint32{netA}) {
		t.Fatalf("due %v at their time", got)
	}
	if got := e.ConnectionsDue(due.Add(ms)); len(got) != 0 {
		t.Fatalf("asked twice before the read: %v", got)
	}
	if d := e.Deadline(); !d.Equal(hard) {
		t.Fatalf("deadline once asked %v, want the hard deadline %v", d.Sub(base), hard.Sub(base))
	}
	if got := e.Advance(hard); len(got) != 0 {
		t.Fatal("completed at the hard deadline itself: a read at that instant still counts")
	}
	c := conns(true, netCount{sigvocab.NetAccepted, 12, 100 * ms, 400 * ms}, netCount{sigvocab.NetClosed, 12, 150 * ms, 490 * ms},
		netCount{sigvocab.NetListenerClosed, 1, 450 * ms, 450 * ms})
	done := e.Add(netEvent(1600*ms, netA, c), nil)
	if len(done) != 1 {
		t.Fatalf("%d episodes at the read", len(done))
	}
	ep := done[0]
	tr := ep.Traffic
	if tr == nil || tr.NetNS != netA || !tr.Since.Equal(base) || !tr.Until.Equal(base.Add(1600*ms)) || tr.Unread != "" {
		t.Fatalf("traffic %+v", tr)
	}
	if ep.EventsDropped != 0 {
		t.Errorf("%d events dropped while it waited counted as its own", ep.EventsDropped)
	}
	if want := "no client was hurt: 12 connections accepted after the stop began, all closed cleanly"; tr.Verdict != want || tr.Hint != "" || tr.Lost() != 0 {
		t.Errorf("verdict %q hint %q lost %d, want %q and no hint", tr.Verdict, tr.Hint, tr.Lost(), want)
	}
	if e.Watching(netA) || len(e.WatchedNets()) != 0 || e.Stats().Open != 0 {
		t.Errorf("still watching after the read: %v %+v", e.WatchedNets(), e.Stats())
	}
	var lc *Step
	for i := range ep.Steps {
		if ep.Steps[i].Kind == StepListenerClosed {
			lc = &ep.Steps[i]
		}
	}
	if lc == nil || lc.At != 450*ms || lc.Text != "listener closed: the application stopped accepting connections" {
		t.Errorf("listener step %+v in %v", lc, stepKinds(&ep))
	}
	if k := stepKinds(&ep); k[len(k)-1] != StepMainExit {
		t.Errorf("steps %v: the listener closed before the exit", k)
	}
	sameStop(t, ep, twin(t, s.in))
	// Nothing is due any more, and asking allocates nothing.
	if n := testing.AllocsPerRun(100, func() { e.ConnectionsDue(base.Add(time.Hour)) }); n != 0 {
		t.Errorf("ConnectionsDue allocates %v times when nothing is due", n)
	}
	if got := e.Add(netEvent(1700*ms, netA, c), nil); len(got) != 0 || e.Stats().NetIgnored != 1 {
		t.Errorf("a read nobody waits for: %d episodes, stats %+v", len(got), e.Stats())
	}
}

// A pod whose app handles SIGTERM but outlives its 2 s grace period: clients
// were refused after it stopped listening, and connections were cut at the
// SIGKILL. The traffic counts them lost, tells the steps at their times,
// and names both fixes from what was measured; the outcome and the hint
// stay the kernel's.
func TestTrafficRefusedAndCut(t *testing.T) {
	s := newSim(t, nsA, 5151, "app", podInfo(2, nil))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).
		deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		kill(2*time.Second, runc).watched(netA).
		initExit(2*time.Second+30*time.Microsecond, sigvocab.SIGKILL, 0)
	c := conns(true,
		netCount{sigvocab.NetAccepted, 3, 50 * ms, 150 * ms},
		netCount{sigvocab.NetClosed, 1, 120 * ms, 120 * ms},
		netCount{sigvocab.NetListenerClosed, 1, 200 * ms, 200 * ms},
		netCount{sigvocab.NetRefused, 5, 300 * ms, 1400 * ms},
		netCount{sigvocab.NetCut, 2, 2*time.Second + 40*time.Microsecond, 2*time.Second + 45*time.Microsecond})
	done := readWhenDue(t, newEngine(Options{}), s.in, netA, c, 0)
	ep := done[0]
	if len(done) != 1 || ep.Outcome != OutcomeHandlerTimeout {
		t.Fatalf("%d episodes, outcome %s", len(done), ep.Outcome)
	}
	tr := ep.Traffic
	if want := "7 connections lost: 5 refused, 2 cut"; tr.Verdict != want || tr.Lost() != 7 {
		t.Errorf("verdict %q lost %d, want %q", tr.Verdict, tr.Lost(), want)
	}
	for _, want := range []string{
		"5 connection attempts were refused after the application stopped listening, the last 1.4s after SIGTERM: clients were still sent to it.",
		"a preStop sleep of 2 s (lifecycle.preStop) delays SIGTERM that long; keep terminationGracePeriodSeconds above the sleep plus the shutdown.",
		"2 connections were still open at the SIGKILL, 2.0s after SIGTERM: requests were still in flight. Finish in-flight requests within the grace period, or lengthen it (terminationGracePeriodSeconds).",
	} {
		if !strings.Contains(tr.Hint, want) {
			t.Errorf("traffic hint\n %q\nlacks\n %q", tr.Hint, want)
		}
	}
	if strings.Contains(tr.Hint, "at least") {
		t.Errorf("the last refusal came well before the read: %q", tr.Hint)
	}
	wantSteps := []StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepListenerClosed, StepRefused, StepSIGKILL, StepMainExit, StepCut}
	if got := stepKinds(&ep); !slices.Equal(got, wantSteps) {
		t.Fatalf("steps %v, want %v", got, wantSteps)
	}
	if s := ep.Steps[4]; s.At != 300*ms || s.Text != "first refused connection attempt: nothing listened (5 in all, the last at +1.400s)" {
		t.Errorf("refused step at %v: %q", s.At, s.Text)
	}
	if s := ep.Steps[7]; s.Text != "2 connections cut: still open when PID 1 app (host 5151) died" || s.Target.PID != 5151 {
		t.Errorf("cut step %+v", s)
	}
	sameStop(t, ep, twin(t, s.in))

	var b bytes.Buffer
	if err := ep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		"\n+0.300s  first refused connection attempt: nothing listened (5 in all, the last at +1.400s)\n",
		"\ntraffic: 7 connections lost: 5 refused, 2 cut (the pod's network namespace 4026532500, shared by its containers, counted +0.000s to +3.000s: 3 accepted, 1 closed, 0 reset by the application, 0 reset by the client, 2 cut, 5 refused; listener closed at +0.200s; whose each connection was cannot be told: the counts carry no split by socket cgroup (the kernel keeps none))\n",
		"\ntraffic hint: 5 connection attempts were refused",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if i, j := strings.Index(text, "\nhint: "), strings.Index(text, "\ntraffic: "); i < 0 || j < i {
		t.Errorf("the traffic comes after the outcome and its hint:\n%s", text)
	}

	// The kubelet began this stop 1.4 s after the pod's deletion (busy
	// with the pod): what sent to it followed the deletion, and the next
	// stop may begin at once, so the sleep that covers counts from the
	// deletion: 1.4 + 1.4 s, 3 s.
	late := readWhenDue(t, newEngine(Options{Settled: true}), s.in, netA, c, 0)[0]
	c1 := EndpointChange{Service: "shop/web", TerminatingAt: late.StopAt.Add(-1350 * ms)}
	c1.SetLags(late.StopAt.Add(-1400*ms), late.StopAt)
	Finish(&late, Facts{Kube: &KubeFacts{EndpointsRead: true, Endpoints: []EndpointChange{c1}}})
	if want := "a preStop sleep of 3 s (lifecycle.preStop), counted from the pod's deletion (this stop began 1.4s after it, and the next may begin at once), delays SIGTERM that long"; !strings.Contains(late.Traffic.Hint, want) {
		t.Errorf("traffic hint after a late kubelet\n %q\nlacks\n %q", late.Traffic.Hint, want)
	}
}

// The hint's delay for refused attempts, by runtime and hook: measured from
// the stop signal to the last refused attempt, rounded up, and "at least"
// when attempts were still refused within NetLinger of the read.
func TestTrafficRefusedHints(t *testing.T) {
	hook := &identity.Hook{Kind: "exec", Command: []string{"sleep", "3"}}
	cases := []struct {
		name string
		info *identity.Info
		last time.Duration // the last refused attempt
		want string
		not  string
	}{
		{"pod, still refused at the read", podInfo(30, nil), 2500 * ms,
			"a preStop sleep of at least 3 s (lifecycle.preStop)", ""},
		{"pod with a preStop hook", podInfo(30, hook), 1100 * ms,
			"lengthen the preStop hook (exec) by 2 s, which delays SIGTERM that long", "at least"},
		{"docker", dockerInfo(idA, "web", 10), 1100 * ms,
			"Keep serving after SIGTERM until the load balancer has stopped sending to it (2 s here), then close the listener; keep the grace period (StopTimeout) above that plus the shutdown.", "preStop"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t, nsA, 5151, "app", c.info)
			s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).
				deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
				initExit(2*time.Second, 0, 0)
			counts := conns(true, netCount{sigvocab.NetListenerClosed, 1, 100 * ms, 100 * ms}, netCount{sigvocab.NetRefused, 4, 200 * ms, c.last})
			ep := readWhenDue(t, newEngine(Options{}), s.in, netA, counts, 0)[0]
			h := ep.Traffic.Hint
			if !strings.Contains(h, c.want) || c.not != "" && strings.Contains(h, c.not) {
				t.Errorf("hint %q\nwant %q, not %q", h, c.want, c.not)
			}
			if ep.Outcome != OutcomeGraceful || ep.Hint != "" {
				t.Errorf("outcome %s hint %q: the traffic changed them", ep.Outcome, ep.Hint)
			}
		})
	}
	// Refusals before any listener closed are not tied to the stop: no fix.
	s := newSim(t, nsA, 5151, "app", podInfo(30, nil))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).initExit(2*time.Second, 0, 0)
	ep := readWhenDue(t, newEngine(Options{}), s.in, netA, conns(true, netCount{sigvocab.NetRefused, 2, 200 * ms, 300 * ms}), 0)[0]
	if h := ep.Traffic.Hint; strings.Contains(h, "preStop sleep") || !strings.Contains(h, "before any listening socket of the namespace closed") {
		t.Errorf("hint %q", h)
	}
}

// The other losses, and a kernel that cannot see refused attempts.
func TestTrafficVerdicts(t *testing.T) {
	cases := []struct {
		name     string
		build    func(s *sim)
		conns    *sigvocab.Connections
		verdict  string
		hint     string // substring; "" means none
		outcome  Outcome
		lost     uint64
		jsonPart string
	}{
		{
			name: "the application reset its connections",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(300*ms, 0, 0).nsEmpty(301 * ms)
			},
			conns:   conns(true, netCount{sigvocab.NetAccepted, 2, 10 * ms, 20 * ms}, netCount{sigvocab.NetResetSent, 4, 250 * ms, 260 * ms}),
			verdict: "4 connections lost: 4 reset by the application",
			hint:    "The application aborted 4 connections with a reset while it ran: drain keep-alive connections after their in-flight request, and let queued connections be accepted before closing the listener.",
			outcome: OutcomeGraceful, lost: 4,
			jsonPart: `"reset_sent":{"n":4,"first":"2026-11-21T20:16:59.345361713Z","last":"2026-11-21T20:16:59.355361713Z"}`,
		},
		{
			name: "old kernel, nothing lost that it sees",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(300*ms, 0, 0).nsEmpty(301 * ms)
			},
			conns: conns(false, netCount{sigvocab.NetAccepted, 2, 10 * ms, 20 * ms}, netCount{sigvocab.NetClosed, 3, 30 * ms, 290 * ms},
				netCount{sigvocab.NetResetReceived, 1, 40 * ms, 40 * ms}),
			verdict:  "no connection lost that this kernel reports: 2 connections accepted after the stop began, all closed cleanly (1 reset by the client); refused attempts unknown: this kernel (before Linux 6.10) does not report them",
			outcome:  OutcomeGraceful,
			jsonPart: `"refused":null,"listener_closed":{"n":0},"unanswered":null,"after_close":null,"idle_at_exit":null,"undecided":null,"out_refused":null,"out_reset":null,"self_refused":null,"lost":0,`,
		},
		{
			name: "old kernel, cut by a handler-less PID 1's SIGKILL",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).watched(netA).kill(10*time.Second, runc).
					initExit(10*time.Second+30*time.Microsecond, sigvocab.SIGKILL, 0).nsEmpty(10*time.Second + ms)
			},
			conns:   conns(false, netCount{sigvocab.NetCut, 1, 10*time.Second + 50*time.Microsecond, 10*time.Second + 50*time.Microsecond}),
			verdict: "1 connection lost: 1 cut; refused attempts unknown: this kernel (before Linux 6.10) does not report them",
			hint:    "1 connection was still open at the SIGKILL: PID 1 (app) never acted on SIGTERM (the hint above), so nothing finished a request in flight on them. Once it does, have it close its listener and finish in-flight requests within the grace period (StopTimeout).",
			outcome: OutcomeIgnoredByInit, lost: 1,
			jsonPart: `"refused":null`,
		},
		{
			name: "docker kill",
			build: func(s *sim) {
				s.kill(0, runc).watched(netA).initExit(30*time.Microsecond, sigvocab.SIGKILL, 0).nsEmpty(ms)
			},
			conns:   conns(true, netCount{sigvocab.NetCut, 3, 40 * time.Microsecond, 60 * time.Microsecond}, netCount{sigvocab.NetListenerClosed, 1, 40 * time.Microsecond, 40 * time.Microsecond}),
			verdict: "3 connections lost: 3 cut",
			hint:    "3 connections were still open at the SIGKILL, which came with no stop signal before it: a request in flight on any of them was lost. Stop it with its stop signal first (docker stop, a normal pod deletion), so that it can finish them.",
			outcome: OutcomeKilled, lost: 3,
		},
		{
			name: "the keep-alive race: idle connections closed under their clients",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(2*time.Second, 0, 0).nsEmpty(2*time.Second + ms)
			},
			conns: spoke(netCount{sigvocab.NetAccepted, 8, 10 * ms, 900 * ms}, netCount{sigvocab.NetClosed, 12, 5 * ms, 1900 * ms},
				netCount{sigvocab.NetUnanswered, 9, 5 * ms, 6 * ms}, netCount{sigvocab.NetAfterClose, 2, 7 * ms, 9 * ms}),
			verdict: "11 requests lost: 9 read and never answered, 2 sent after the close; the keep-alive race: the application closed connections its clients were still sending requests on",
			hint:    "The application closed keep-alive connections while their clients were still sending requests on them (9 read and never answered, 2 sent after the close): a proxy turns each into a 502. Drain them instead: answer the next request on each with `Connection: close` (HTTP/2: send GOAWAY) and keep serving until the clients have moved, rather than closing idle connections under them.",
			outcome: OutcomeGraceful, lost: 11,
			jsonPart: `"unanswered":{"n":9,`,
		},
		{
			name: "idle keep-alive connections at the exit: nobody hurt",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(300*ms, 0, 0).nsEmpty(301 * ms)
			},
			conns:    spoke(netCount{sigvocab.NetAccepted, 2, 10 * ms, 20 * ms}, netCount{sigvocab.NetClosed, 2, 30 * ms, 40 * ms}, netCount{sigvocab.NetIdleAtExit, 3, 300 * ms, 300 * ms}),
			verdict:  "no client was hurt: 2 connections accepted after the stop began, all closed cleanly; 3 keep-alive connections open but idle when the process ended, and not sent on after",
			outcome:  OutcomeGraceful,
			jsonPart: `"idle_at_exit":{"n":3,`,
		},
		{
			name: "a kernel before 6.10 tells who spoke last, not every reset",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(300*ms, 0, 0).nsEmpty(301 * ms)
			},
			conns: func() *sigvocab.Connections {
				c := spoke(netCount{sigvocab.NetClosed, 4, 30 * ms, 40 * ms})
				c.SeesRefused = false
				return c
			}(),
			verdict:  "no connection lost that this kernel reports: no connection was accepted after the stop began, and every one that ended was closed cleanly; refused attempts and requests sent after a close unknown: this kernel (before Linux 6.10) does not report them",
			outcome:  OutcomeGraceful,
			jsonPart: `"refused":null,"listener_closed":{"n":0},"unanswered":{"n":0},"after_close":null,`,
		},
		{
			name: "the kubelet's readiness probe refused: no client hurt, no fix",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(300*ms, 0, 0).nsEmpty(301 * ms)
			},
			conns: func() *sigvocab.Connections {
				c := spoke(netCount{sigvocab.NetListenerClosed, 1, 100 * ms, 100 * ms})
				c.SeesProbes = true
				c.Probes[sigvocab.NetAccepted], c.Probes[sigvocab.NetClosed], c.Probes[sigvocab.NetRefused] = 3, 3, 1
				return c
			}(),
			verdict:  "no client was hurt: no connection was accepted or ended after the stop began; the kubelet's probes, counted apart: 3 accepted, 3 closed, 1 refused",
			outcome:  OutcomeGraceful,
			jsonPart: `"lost":0,"probes":{"accepted":3,"closed":3,"refused":1},`,
		},
		{
			name: "probes told apart, none came",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(300*ms, 0, 0).nsEmpty(301 * ms)
			},
			conns: func() *sigvocab.Connections {
				c := spoke()
				c.SeesProbes = true
				return c
			}(),
			verdict:  "no client was hurt: no connection was accepted or ended after the stop began",
			outcome:  OutcomeGraceful,
			jsonPart: `"lost":0,"probes":{},`,
		},
		{
			name: "who spoke last cannot be told: possibly lost, never clean",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(300*ms, 0, 0).nsEmpty(301 * ms)
			},
			conns:    spoke(netCount{sigvocab.NetUndecided, 2, 30 * ms, 40 * ms}),
			verdict:  "possibly 2 requests lost: " + undecidedWhy,
			outcome:  OutcomeGraceful,
			jsonPart: `"lost":0,"maybe_lost":2,`,
		},
		{
			name: "exited at the stop signal with connections open",
			build: func(s *sim) {
				s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(2*ms, 0, 0).nsEmpty(3 * ms)
			},
			conns:   conns(true, netCount{sigvocab.NetCut, 2, 2 * ms, 2 * ms}),
			verdict: "2 connections lost: 2 cut",
			hint:    "2 connections were still open when PID 1 (app) ended after SIGTERM: a request in flight on any of them was lost. On SIGTERM, close the listener, finish in-flight requests, then exit.",
			outcome: OutcomeGraceful, lost: 2,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t, nsA, 5151, "app", dockerInfo(idA, "web", 10))
			c.build(s)
			ep := readWhenDue(t, newEngine(Options{}), s.in, netA, c.conns, 0)[0]
			tr := ep.Traffic
			if tr.Verdict != c.verdict || ep.Outcome != c.outcome || tr.Lost() != c.lost {
				t.Errorf("verdict %q outcome %s lost %d\nwant %q %s %d", tr.Verdict, ep.Outcome, tr.Lost(), c.verdict, c.outcome, c.lost)
			}
			if c.hint == "" && tr.Hint != "" || !strings.Contains(tr.Hint, c.hint) {
				t.Errorf("hint %q\nwant %q", tr.Hint, c.hint)
			}
			sameStop(t, ep, twin(t, s.in))
			b, _ := json.Marshal(ep)
			if !strings.Contains(string(b), c.jsonPart) {
				t.Errorf("JSON lacks %s:\n%s", c.jsonPart, b)
			}
		})
	}
}

// The figure over many stops: the longest of a few, the 95th percentile
// of many, whatever their order.
func TestCoveringOverStops(t *testing.T) {
	if _, _, ok := CoveringOverStops(nil); ok {
		t.Error("no stops: a figure")
	}
	if got, how, ok := CoveringOverStops([]int{2, 9, 3}); !ok || got != 9 || how != "the longest of 3 stops" {
		t.Errorf("3 stops: %d %q %v", got, how, ok)
	}
	many := make([]int, 40)
	for i := range many {
		many[i] = 40 - i // 1..40, reversed
	}
	many[0] = 600 // one stop waited 10 minutes
	// 39 stops of 1 to 39 s and one of 600 s: the 38th of the 40 sorted
	// (the nearest rank of 0.95) is 38, not the outlier.
	if got, how, ok := CoveringOverStops(many); !ok || got != 38 || how != "the 95th percentile of 40 stops" {
		t.Errorf("40 stops: %d %q %v", got, how, ok)
	}
	if many[0] != 600 {
		t.Error("the stops' slice was sorted in place")
	}
}

// One kernel count, read twice (each read's wall-clock beginning a little
// apart), is one Watch; another namespace, another stop of the same one, or
// (without a beginning) another read are not.
func TestWatchSame(t *testing.T) {
	since := time.Unix(1700000000, 0)
	w := Watch{NetNS: 7, Since: since, Until: since.Add(2 * time.Second)}
	for _, tc := range []struct {
		o    Watch
		want bool
	}{
		{Watch{NetNS: 7, Since: since.Add(3 * time.Microsecond), Until: since.Add(11 * time.Second)}, true},
		{Watch{NetNS: 7, Since: since.Add(-999 * time.Microsecond), Until: since.Add(time.Second)}, true},
		{Watch{NetNS: 8, Since: since, Until: w.Until}, false},
		{Watch{NetNS: 7, Since: since.Add(40 * time.Second), Until: since.Add(41 * time.Second)}, false},
		{Watch{NetNS: 7, Until: w.Until}, false},
	} {
		if got := w.Same(tc.o); got != tc.want || tc.o.Same(w) != tc.want {
			t.Errorf("%+v Same %+v = %v, want %v (both ways)", w, tc.o, got, tc.want)
		}
	}
	unread := Watch{NetNS: 7, Until: since}
	if !unread.Same(Watch{NetNS: 7, Until: since}) || unread.Same(Watch{NetNS: 7, Until: since.Add(time.Second)}) {
		t.Error("without a beginning: the same read only")
	}
}
