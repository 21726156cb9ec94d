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

// How the engine waits for a stop's counts, reads them and completes
// without them (the helpers are traffic_test.go's).

// Counts that never come: the episode completes NetWait after it would
// have, and says they were not read and why; a read after that is ignored.
// Flush says the trace ended.
func TestTrafficUnread(t *testing.T) {
	stop := func() *sim {
		s := newSim(t, nsA, 5151, "app", dockerInfo(idA, "web", 10))
		return s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
			initExit(500*ms, 0, 0).nsEmpty(501 * ms)
	}
	e := newEngine(Options{})
	feedAll(t, e, stop().in)
	hard := base.Add(501*ms + NetWait)
	if got := e.Advance(hard); len(got) != 0 {
		t.Fatal("completed at the hard deadline itself")
	}
	done := e.Advance(hard.Add(time.Nanosecond))
	if len(done) != 1 {
		t.Fatalf("%d episodes after the hard deadline", len(done))
	}
	ep := done[0]
	tr := ep.Traffic
	if tr == nil || tr.Unread != "no counts arrived in time" || tr.Verdict != "not known: the connection counts were not read (no counts arrived in time)" ||
		tr.Hint != "" || !tr.Until.IsZero() || e.Stats().NetUnread != 1 {
		t.Fatalf("traffic %+v stats %+v", tr, e.Stats())
	}
	if k := stepKinds(&ep); slices.ContainsFunc(k, StepKind.traffic) {
		t.Errorf("traffic steps without counts: %v", k)
	}
	sameStop(t, ep, twin(t, stop().in))
	b, _ := json.Marshal(ep)
	if want := `"traffic":{"netns":4026532500,"accepted":null,"closed":null,"reset_sent":null,"reset_received":null,"cut":null,"refused":null,"listener_closed":null,"unanswered":null,"after_close":null,"idle_at_exit":null,"undecided":null,"out_refused":null,"out_reset":null,"self_refused":null,"lost":null,"verdict":"not known: the connection counts were not read (no counts arrived in time)","unread":"no counts arrived in time"}`; !strings.Contains(string(b), want) {
		t.Errorf("JSON %s\nlacks %s", b, want)
	}
	if got := e.Add(netEvent(5*time.Second, netA, conns(true)), nil); len(got) != 0 || e.Stats().NetIgnored != 1 {
		t.Errorf("a late read: %d episodes, stats %+v", len(got), e.Stats())
	}

	// Flush while it waits.
	e = newEngine(Options{})
	feedAll(t, e, stop().in)
	flushed := e.Flush()
	if len(flushed) != 1 || flushed[0].Traffic.Unread != "the trace ended" || flushed[0].Outcome != OutcomeGraceful {
		t.Fatalf("flushed %+v", flushed)
	}
}

// A container that shares the runtime's network namespace (--network host):
// the kernel flags its stop signal net_shared and counts nothing. The
// episode waits for no counts, and its traffic says why there are none
// instead of keeping silent or claiming the node's connections.
func TestTrafficSharedNamespace(t *testing.T) {
	stop := func() *sim {
		s := newSim(t, nsA, 5151, "app", dockerInfo(idA, "web", 10))
		s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false)
		ev := &s.in[len(s.in)-1].ev
		ev.Facts |= sigvocab.FactNetShared
		ev.Flags = sigvocab.Classify(ev)
		ev.NetNS = netA
		return s.deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).initExit(500*ms, 0, 0).nsEmpty(501 * ms)
	}
	e := newEngine(Options{})
	var done []Episode
	for _, in := range stop().in {
		done = append(done, e.Add(&in.ev, in.c)...)
		if e.Watching(netA) {
			t.Fatal("the engine waits for counts of a namespace the kernel did not count")
		}
	}
	done = append(done, e.Flush()...)
	if len(done) != 1 {
		t.Fatalf("%d episodes", len(done))
	}
	ep := done[0]
	tr := ep.Traffic
	want := "not counted: the container shares its network namespace with the runtime that stopped it (the node's: " +
		"--network host, hostNetwork), so its connections cannot be told from the node's and none were counted"
	if tr == nil || !tr.Shared() || tr.Verdict != want || tr.Hint != "" || tr.NetNS != netA || tr.Lost() != 0 {
		t.Fatalf("traffic %+v", tr)
	}
	if ep.Outcome != OutcomeGraceful {
		t.Errorf("outcome %s", ep.Outcome)
	}
	b, _ := json.Marshal(ep)
	if !strings.Contains(string(b), `"lost":null,"verdict":"`+want+`"`) || !strings.Contains(string(b), `"scope":"node"`) {
		t.Errorf("JSON %s", b)
	}
	var text bytes.Buffer
	if err := ep.WriteText(&text); err != nil || !strings.Contains(text.String(), "traffic: "+want+" (network namespace 4026532500, the node's)\n") {
		t.Errorf("text (%v):\n%s", err, text.String())
	}
	var back Episode
	if err := json.Unmarshal(b, &back); err != nil || back.Traffic == nil || !back.Traffic.Shared() {
		t.Errorf("read back (%v): %+v", err, back.Traffic)
	}
}

// At the end of a trace the pipeline reads every namespace still watched
// (WatchedNets) and then Flushes: a stop still going on takes those counts,
// but not counts read before its last event.
func TestTrafficFlushTakesTheEndsRead(t *testing.T) {
	s := newSim(t, nsA, 5151, "app", dockerInfo(idA, "web", 10))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler)
	e := newEngine(Options{})
	feedAll(t, e, s.in)
	if got := e.WatchedNets(); !slices.Equal(got, []uint32{netA}) {
		t.Fatalf("watched %v", got)
	}
	if got := e.Add(netEvent(2*time.Second, netA, conns(true, netCount{sigvocab.NetAccepted, 7, 10 * ms, 1900 * ms})), nil); len(got) != 0 {
		t.Fatal("a read completed a stop still going on")
	}
	ep := e.Flush()[0]
	if ep.Outcome != OutcomeUnfinished || ep.Traffic.Unread != "" || ep.Traffic.N(sigvocab.NetAccepted) != 7 ||
		ep.Traffic.Verdict != "no client was hurt: 7 connections accepted after the stop began, all closed cleanly" {
		t.Errorf("%s traffic %+v", ep.Outcome, ep.Traffic)
	}

	// A read, then more of the stop: the counts are stale at the end.
	e = newEngine(Options{})
	feedAll(t, e, s.in[:1])
	e.Add(netEvent(0, netA, conns(true)), nil)
	feedAll(t, e, s.in[1:])
	if ep := e.Flush()[0]; ep.Traffic.Unread != "the trace ended" {
		t.Errorf("stale counts taken: %+v", ep.Traffic)
	}
}

// Two containers of a pod share its network namespace. Stopped together,
// both wait for its counts, which are asked for once and complete both at
// one read. One whose stop goes on past the other's is not cut short by
// the other's read: it waits for a read of its own.
func TestTrafficPodSharesANamespace(t *testing.T) {
	app := &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "containerd", Name: "app", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30}
	side := &identity.Info{Identity: identity.Identity{ID: idB, Runtime: "containerd", Name: "proxy", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30}
	pod := func(proxyExit time.Duration) []input {
		a := newSim(t, nsA, 5151, "app", app)
		a.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).initExit(time.Second, 0, 0)
		p := newSim(t, nsB, 6161, "envoy", side)
		p.stop(ms, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(2*ms, sigvocab.SIGTERM, sigvocab.DispHandler).initExit(proxyExit, 0, 0)
		return merge(a.in, p.in)
	}
	c := conns(true, netCount{sigvocab.NetAccepted, 1, 10 * ms, 10 * ms}, netCount{sigvocab.NetClosed, 1, 900 * ms, 900 * ms},
		netCount{sigvocab.NetListenerClosed, 1, 800 * ms, 800 * ms})

	e := newEngine(Options{})
	feedAll(t, e, pod(1200*ms))
	if got := e.Advance(base.Add(2300 * ms)); len(got) != 0 {
		t.Fatal("completed without the counts")
	}
	if got := e.ConnectionsDue(base.Add(2300 * ms)); !slices.Equal(got, []uint32{netA}) {
		t.Fatalf("due %v: want the shared namespace once", got)
	}
	done := e.Add(netEvent(2300*ms, netA, c), nil)
	if len(done) != 2 || done[0].Container.Name != "app" || done[1].Container.Name != "proxy" {
		t.Fatalf("%d episodes at the read", len(done))
	}
	if !slices.Equal(done[0].Traffic.Counts[:], done[1].Traffic.Counts[:]) || done[0].Traffic.Verdict != done[1].Traffic.Verdict || e.Watching(netA) {
		t.Errorf("traffic %+v and %+v, watching %v", done[0].Traffic, done[1].Traffic, e.Watching(netA))
	}
	var b bytes.Buffer
	if err := (&PodStop{Namespace: "shop", Pod: "web-0", Episodes: done}).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if n, m := strings.Count(b.String(), "traffic: "), strings.Count(b.String(), "  listener closed: the application"); n != 1 || m != 1 {
		t.Errorf("the pod's traffic shown %d times, its listener's close %d:\n%s", n, m, b.String())
	}

	// The proxy drains for 10 s: the app's read leaves it open.
	e = newEngine(Options{})
	in := pod(10 * time.Second)
	feedAll(t, e, in[:len(in)-1]) // all but the proxy's exit
	if got := e.Advance(base.Add(2100 * ms)); len(got) != 0 {
		t.Fatal("completed without the counts")
	}
	if got := e.ConnectionsDue(base.Add(2100 * ms)); !slices.Equal(got, []uint32{netA}) {
		t.Fatalf("due %v", got)
	}
	done = e.Add(netEvent(2100*ms, netA, c), nil)
	if len(done) != 1 || done[0].Container.Name != "app" || !e.Watching(netA) {
		t.Fatalf("the app's read completed %d episodes; watching %v", len(done), e.Watching(netA))
	}
	done = readWhenDue(t, e, in[len(in)-1:], netA, conns(true), 0)
	if len(done) != 1 || done[0].Container.Name != "proxy" || done[0].Outcome != OutcomeGraceful || !done[0].Traffic.Until.After(base.Add(11*time.Second)) {
		t.Fatalf("the proxy's episode: %d, %+v", len(done), done)
	}
}

// The sandbox's SIGKILL is watched too (it comes from the host into the
// pod's namespace), but it is not a signal to the container's own
// processes: an episode whose stop signal was not watched does not wait.
func TestTrafficSandboxKillWatchesNothing(t *testing.T) {
	a := newSim(t, nsA, 5151, "app", podInfo(30, nil))
	a.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).initExit(100*ms, 0, 0)
	pause := &identity.Info{Identity: identity.Identity{ID: idSandbox, Runtime: "containerd", Pod: "web-0", Namespace: "shop"}, Sandbox: true, MainPID: 4900}
	p := newSim(t, 4026532999, 4900, "pause", pause)
	p.kill(200*ms, runc).watched(netA)
	ep := only(t, newEngine(Options{}), merge(a.in, p.in))
	if ep.Traffic != nil || !slices.Contains(stepKinds(&ep), StepSandbox) {
		t.Errorf("traffic %+v steps %v", ep.Traffic, stepKinds(&ep))
	}
}

// A pod's container whose sockets the kernel split by cgroup: its own
// connections (its main process's cgroup v2, the listener's for accepted
// ones) are told from a sidecar's in the same namespace, in the JSON and
// the text; where the container is in the root cgroup (a cgroup v1 node)
// the episode says the split cannot be told.
func TestTrafficSplitByCgroup(t *testing.T) {
	run := func(mainCgroup uint64) Episode {
		s := newSim(t, nsA, 5151, "app", podInfo(2, nil))
		s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).
			deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
			kill(2*time.Second, runc).
			initExit(2*time.Second+30*time.Microsecond, sigvocab.SIGKILL, 0)
		for i := range s.in {
			if s.in[i].ev.Target.PID == 5151 {
				s.in[i].ev.Target.CgroupID = mainCgroup
			}
		}
		c := conns(true, netCount{sigvocab.NetAccepted, 7, 100 * ms, 1900 * ms}, netCount{sigvocab.NetClosed, 5, 150 * ms, 1950 * ms},
			netCount{sigvocab.NetCut, 1, 2*time.Second + 40*time.Microsecond, 2*time.Second + 40*time.Microsecond})
		c.SeesCgroups = true
		c.ByCgroup = []sigvocab.CgroupCounts{{CgroupID: 777, N: [sigvocab.NumNetKinds]uint64{2, 0, 0, 0, 1}}, {CgroupID: 888, N: [sigvocab.NumNetKinds]uint64{5, 5}}}
		return readWhenDue(t, newEngine(Options{}), s.in, netA, c, 0)[0]
	}
	ep := run(777)
	tr := ep.Traffic
	if tr.Own == nil || *tr.Own != [sigvocab.NumNetKinds]uint64{2, 0, 0, 0, 1} || *tr.Others != [sigvocab.NumNetKinds]uint64{5, 5} || tr.OwnUnknown != "" || !tr.Split(true) {
		t.Fatalf("split %v %v %q", tr.Own, tr.Others, tr.OwnUnknown)
	}
	var text bytes.Buffer
	if err := ep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if want := "; this container's own sockets: 2 accepted, 0 closed, 0 reset by the application, 0 reset by the client, 1 cut)\n"; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, text.String())
	}
	b, _ := json.Marshal(ep)
	if want := `"own":{"accepted":2,"closed":0,"reset_sent":0,"reset_received":0,"cut":1,"listener_closed":0},"others":{"accepted":5,"closed":5,"reset_sent":0,"reset_received":0,"cut":0,"listener_closed":0}`; !strings.Contains(string(b), want) {
		t.Errorf("JSON %s\nlacks %s", b, want)
	}
	var back Episode
	if err := json.Unmarshal(b, &back); err != nil || back.Traffic.Own == nil || *back.Traffic.Own != *tr.Own || *back.Traffic.Others != *tr.Others {
		t.Errorf("read back (%v): %+v", err, back.Traffic)
	}
	if b2, _ := json.Marshal(back); !bytes.Equal(b, b2) {
		t.Errorf("round trip changed the JSON:\n%s\n%s", b, b2)
	}

	// A cgroup v1 node: every process in the root cgroup v2.
	tr = run(1).Traffic
	if tr.Own != nil || tr.OwnUnknown != "the container's processes are in the root cgroup v2 (a cgroup v1 node), so a socket's container cannot be told" {
		t.Errorf("root cgroup: split %v, %q", tr.Own, tr.OwnUnknown)
	}
}

// An episode with traffic reads back from its JSON and writes the same
// bytes again; the traffic's fields read back as they were.
func TestTrafficJSONRoundTrip(t *testing.T) {
	for _, seesRefused := range []bool{true, false} {
		s := newSim(t, nsA, 5151, "app", podInfo(2, nil))
		s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).
			deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
			kill(2*time.Second, runc).
			initExit(2*time.Second+30*time.Microsecond, sigvocab.SIGKILL, 0)
		c := conns(seesRefused, netCount{sigvocab.NetListenerClosed, 1, 200 * ms, 200 * ms}, netCount{sigvocab.NetRefused, 5, 300 * ms, 1400 * ms},
			netCount{sigvocab.NetCut, 2, 2*time.Second + 40*time.Microsecond, 2*time.Second + 45*time.Microsecond})
		ep := readWhenDue(t, newEngine(Options{}), s.in, netA, c, 0)[0]
		b, m := marshalMap(t, ep)
		tj, _ := m["traffic"].(map[string]any)
		// A pod's stop: its counts are the pod's (scope).
		// Counts of a kernel before who spoke last was told (conns):
		// those kinds null.
		wantKeys := []string{"accepted", "after_close", "closed", "cut", "hint", "idle_at_exit", "listener_closed", "lost", "netns", "out_refused", "out_reset", "own_unknown", "refused", "reset_received", "reset_sent", "scope", "self_refused", "since", "unanswered", "undecided", "until", "verdict"}
		if seesRefused {
			// The last refused attempt is the last request (Episode.Lag).
			wantKeys = slices.Insert(wantKeys, slices.Index(wantKeys, "listener_closed"), "last_request")
		}
		if got := keys(tj); !slices.Equal(got, wantKeys) {
			t.Errorf("traffic keys %v, want %v", got, wantKeys)
		}
		if tj["scope"] != "pod" {
			t.Errorf("scope %v, want pod", tj["scope"])
		}
		if (tj["refused"] == nil) == seesRefused || tj["lost"] != map[bool]float64{true: 7, false: 2}[seesRefused] {
			t.Errorf("sees refused %v: refused %v lost %v", seesRefused, tj["refused"], tj["lost"])
		}
		var back Episode
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		b2, _ := json.Marshal(back)
		if !bytes.Equal(b, b2) {
			t.Errorf("round trip changed the JSON:\n%s\n%s", b, b2)
		}
		bt, et := back.Traffic, ep.Traffic
		if bt == nil || bt.NetNS != et.NetNS || !bt.Since.Equal(et.Since) || !bt.Until.Equal(et.Until) || bt.SeesRefused != seesRefused ||
			bt.Verdict != et.Verdict || bt.Hint != et.Hint || bt.Lost() != et.Lost() {
			t.Errorf("read back %+v\nwant %+v", bt, et)
		}
		for k := range sigvocab.NumNetKinds {
			if et.Known(sigvocab.NetKind(k)) && (bt.Counts[k].N != et.Counts[k].N || !bt.Counts[k].First.Equal(et.Counts[k].First) || !bt.Counts[k].Last.Equal(et.Counts[k].Last)) {
				t.Errorf("%s read back %+v, want %+v", sigvocab.NetKind(k), bt.Counts[k], et.Counts[k])
			}
		}
	}
}

// A container restarted while its last stop waits for its counts: the new
// main process's events begin another episode, and the old one still takes
// its counts when they are read. Restarted before the old stop's settle
// time (a pod's container: the namespace is the pod's), the old one
// does not complete there without them either.
func TestTrafficRestart(t *testing.T) {
	// docker: the old stop waits from ns_empty on; the new container is
	// killed in a namespace of its own.
	old := newSim(t, nsA, 5151, "app", dockerInfo(idA, "web", 10))
	old.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		initExit(500*ms, 0, 0).nsEmpty(501 * ms)
	again := newSim(t, nsB, 7171, "app", dockerInfo(idA, "web", 10))
	again.kill(700*ms, runc).watched(netB)
	e := newEngine(Options{})
	feedAll(t, e, merge(old.in, again.in))
	if got := e.WatchedNets(); !slices.Equal(got, []uint32{netA, netB}) {
		t.Fatalf("watched %v", got)
	}
	if got := e.ConnectionsDue(base.Add(1500 * ms)); !slices.Equal(got, []uint32{netA}) {
		t.Fatalf("due %v", got)
	}
	done := e.Add(netEvent(1500*ms, netA, conns(true)), nil)
	if len(done) != 1 || done[0].Main.PID != 5151 || done[0].Outcome != OutcomeGraceful || done[0].Traffic.Unread != "" || done[0].Traffic.NetNS != netA {
		t.Fatalf("the old stop at its read: %+v", done)
	}
	flushed := e.Flush()
	if len(flushed) != 1 || flushed[0].Main.PID != 7171 || flushed[0].Traffic.NetNS != netB {
		t.Fatalf("the new one: %+v", flushed)
	}

	// A pod's container restarted 300 ms after its exit.
	old = newSim(t, nsA, 5151, "app", podInfo(30, nil))
	old.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		initExit(500*ms, 0, 0)
	again = newSim(t, nsB, 7171, "app", podInfo(30, nil))
	again.stop(800*ms, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA)
	e = newEngine(Options{})
	feedAll(t, e, merge(old.in, again.in))
	if got := e.ConnectionsDue(base.Add(1499 * ms)); len(got) != 0 {
		t.Fatalf("due %v before NetLinger after the exit", got)
	}
	if got := e.ConnectionsDue(base.Add(1500 * ms)); !slices.Equal(got, []uint32{netA}) {
		t.Fatalf("due %v", got)
	}
	done = e.Add(netEvent(1500*ms, netA, conns(true)), nil)
	if len(done) != 1 || done[0].Main.PID != 5151 || done[0].Traffic.Unread != "" || !e.Watching(netA) {
		t.Fatalf("the old stop at its read: %+v; watching %v", done, e.Watching(netA))
	}
}

// A pod's counts begin at its first stop signal: a container stopped later
// (a native sidecar) shows what came before its own stop at negative
// offsets, and its start stays its own.
func TestTrafficBeforeTheEpisode(t *testing.T) {
	side := &identity.Info{Identity: identity.Identity{ID: idB, Runtime: "containerd", Name: "proxy", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30}
	p := newSim(t, nsB, 6161, "envoy", side)
	p.stop(5*time.Second, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).
		deliver(5*time.Second+ms, sigvocab.SIGTERM, sigvocab.DispHandler).initExit(5*time.Second+2*ms, 0, 0)
	c := conns(true, netCount{sigvocab.NetListenerClosed, 1, 200 * ms, 200 * ms})
	ep := readWhenDue(t, newEngine(Options{}), p.in, netA, c, 0)[0]
	if !ep.Start.Equal(base.Add(5*time.Second)) || ep.Steps[0].Kind != StepListenerClosed || ep.Steps[0].At != -4800*ms {
		t.Errorf("start %v, first step %s at %v", ep.Start.Sub(base), ep.Steps[0].Kind, ep.Steps[0].At)
	}
	var b bytes.Buffer
	if err := ep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\n-4.800s  listener closed") || !strings.Contains(b.String(), "counted -5.000s to ") {
		t.Errorf("text:\n%s", b.String())
	}
}

// Episodes waiting for their counts count against MaxOpen: the oldest goes
// first, as an open one would.
func TestTrafficWaitingIsBounded(t *testing.T) {
	a := newSim(t, nsA, 5151, "app", dockerInfo(idA, "web", 10))
	a.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).initExit(100*ms, 0, 0).nsEmpty(101 * ms)
	b := newSim(t, nsB, 6161, "app", dockerInfo(idB, "api", 10))
	b.stop(200*ms, sigvocab.SIGTERM, sigvocab.DispHandler, false)
	e := newEngine(Options{MaxOpen: 1})
	feedAll(t, e, merge(a.in, b.in))
	if st := e.Stats(); st.Open != 1 || st.Evicted != 1 || e.Watching(netA) {
		t.Errorf("stats %+v, watching %v", st, e.Watching(netA))
	}
}

// A sleep hook, which the kubelet runs itself: the count began when the
// agent saw the pod's deletion (pipeline.HookStarted), 2 s before the stop
// signal. The episode's preStop starts there, the stop's duration counts
// from it, and the covering sleep is counted from it too (the existing
// hook is part of it, not added to it).
func TestTrafficSleepHookStart(t *testing.T) {
	s := newSim(t, nsA, 5151, "app", podInfo(30, &identity.Hook{Kind: "sleep", Seconds: 2}))
	s.stop(2*time.Second, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).
		deliver(2*time.Second+ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		initExit(2*time.Second+100*ms, 0, 0)
	c := conns(true, netCount{sigvocab.NetAccepted, 40, 10 * ms, 1990 * ms}, netCount{sigvocab.NetListenerClosed, 1, 2050 * ms, 2050 * ms},
		netCount{sigvocab.NetRefused, 3, 2060 * ms, 2400 * ms})
	ep := readWhenDue(t, newEngine(Options{}), s.in, netA, c, 0)[0]
	p := ep.PreStop
	if p == nil || p.Kind != "sleep" || p.Estimated || !p.FromAPI || !p.StartAt.Equal(base) || !p.EndAt.Equal(ep.StopAt) {
		t.Fatalf("preStop %+v, want from the count's beginning to the stop signal", p)
	}
	if d, ok := ep.StopDuration(); !ok || d != 2100*time.Millisecond {
		t.Errorf("stop duration %v, %v: want from the hook's start", d, ok)
	}
	if b, _ := json.Marshal(ep); !strings.Contains(string(b), `"start_from_api":true`) {
		t.Errorf("JSON does not say where the hook's start came from: %s", b)
	}
	if secs, ok := ep.CoveringPreStopSleep(); !ok || secs != 3 {
		t.Errorf("covering sleep %d, %v: want 3 (the last refused attempt 2.4 s after the hook began)", secs, ok)
	}
}

// A pod on the node's network has no count (net_shared): its http hook's
// start is not taken from one (TestKubeletPreStopHTTP met this).
func TestTrafficSharedHookStart(t *testing.T) {
	s := newSim(t, nsA, 5151, "app", podInfo(4, &identity.Hook{Kind: "http", URL: "/quit:1"}))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false)
	ev := &s.in[len(s.in)-1].ev
	ev.Facts |= sigvocab.FactNetShared
	ev.Flags = sigvocab.Classify(ev)
	ev.NetNS = netA
	s.kill(4*time.Second, runc).initExit(4*time.Second+ms, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Traffic == nil || !ep.Traffic.Shared() {
		t.Fatalf("traffic %+v", ep.Traffic)
	}
	if p := ep.PreStop; p == nil || p.StartAt.IsZero() && !p.EndAt.IsZero() {
		t.Errorf("preStop %+v: a start of zero from no count", p)
	}
}

// The namespace's own calls refused on its localhost: the container's own
// (its sidecar stopped first) are apart from its clients, a sidecar
// proxy's calls to it are its clients' requests, and where the split
// cannot tell they count as the clients' (never "nobody hurt" on a guess).
func TestTrafficOwnCalls(t *testing.T) {
	run := func(split bool, byCgroup ...sigvocab.CgroupCounts) Episode {
		s := newSim(t, nsA, 5151, "app", podInfo(2, nil))
		s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).watched(netA).
			deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
			initExit(time.Second, 0, 0)
		for i := range s.in {
			if s.in[i].ev.Target.PID == 5151 {
				s.in[i].ev.Target.CgroupID = 777
			}
		}
		c := spoke(netCount{sigvocab.NetSelfRefused, 20, 100 * ms, 900 * ms}, netCount{sigvocab.NetOutReset, 2, 200 * ms, 300 * ms})
		c.SeesCgroups = split
		c.ByCgroup = byCgroup
		return readWhenDue(t, newEngine(Options{}), s.in, netA, c, 0)[0]
	}
	var ownN, proxyN [sigvocab.NumNetKinds]uint64
	ownN[sigvocab.NetSelfRefused], ownN[sigvocab.NetOutReset] = 20, 2
	proxyN[sigvocab.NetSelfRefused] = 20

	// The application's SIGTERM handler called its sidecar, which had
	// stopped: no client at all.
	tr := run(true, sigvocab.CgroupCounts{CgroupID: 777, N: ownN}).Traffic
	if tr.Lost() != 0 || tr.Hint != "" || tr.Verdict != "no client was hurt: no connection was accepted or ended after the stop began; its own calls failed, apart from its clients: 20 refused, 2 reset by the peer (a peer it called, a sidecar perhaps, had stopped first)" {
		t.Errorf("own calls: lost %d, verdict %q, hint %q", tr.Lost(), tr.Verdict, tr.Hint)
	}
	// A sidecar proxy's calls to the stopped application: its clients'.
	tr = run(true, sigvocab.CgroupCounts{CgroupID: 888, N: proxyN}).Traffic
	if tr.Lost() != 20 || tr.N(sigvocab.NetRefused) != 20 || !strings.HasPrefix(tr.Verdict, "20 requests lost: 20 refused") {
		t.Errorf("a proxy's calls: lost %d, verdict %q", tr.Lost(), tr.Verdict)
	}
	// Whose they were cannot be told: the clients'.
	tr = run(false).Traffic
	if tr.Lost() != 20 || strings.Contains(tr.Verdict, "its own calls") {
		t.Errorf("unknown split: lost %d, verdict %q", tr.Lost(), tr.Verdict)
	}
}
