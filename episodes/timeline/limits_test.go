package timeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The engine's bounds and its bookkeeping over a stream: open episodes,
// steps, reused namespaces, references it must not keep, events out of
// order, lost events, and the namespace's end (ns_empty).

// Memory is bounded: the oldest open episode goes past MaxOpen, minor
// steps past MaxSteps, and the steps that decide the outcome stay.
func TestBounds(t *testing.T) {
	e := newEngine(Options{MaxOpen: 2})
	var in []input
	for i, ns := range []uint32{nsA, nsA + 1, nsA + 2} {
		s := newSim(t, ns, 5000+uint32(i), "sh", nil)
		s.base = base.Add(time.Duration(i) * ms)
		in = append(in, s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).in...)
	}
	done, flushed := feed(e, in)
	if len(done) != 0 || len(flushed) != 2 {
		t.Fatalf("%d done, %d flushed, want 0 and 2", len(done), len(flushed))
	}
	if flushed[0].Container.PidNS != nsA+1 || flushed[1].Container.PidNS != nsA+2 {
		t.Errorf("kept %d and %d, want the two newest", flushed[0].Container.PidNS, flushed[1].Container.PidNS)
	}
	if st := e.Stats(); st.Evicted != 1 || st.Started != 3 || st.Completed != 2 || st.Open != 0 {
		t.Errorf("stats %+v", st)
	}

	s := newSim(t, nsA, 5151, "sh", nil)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false)
	for i := range 20 {
		s.kidExit(time.Duration(i+1)*ms, s.kid(6000+uint32(i), uint32(i+2), "w"), 0, 0)
	}
	s.kill(10*time.Second, runc).initExit(10*time.Second+ms, sigvocab.SIGKILL, 0)
	for i := range 20 {
		s.cascade(10*time.Second+2*ms, s.kid(7000+uint32(i), uint32(i+30), "c"))
	}
	ep := only(t, newEngine(Options{MaxSteps: 8}), s.in)
	if ep.Outcome != OutcomeIgnoredByInit || ep.KillAt.IsZero() || ep.ExitAt.IsZero() {
		t.Errorf("outcome %s kill %v exit %v: deciding steps lost", ep.Outcome, ep.KillAt, ep.ExitAt)
	}
	if len(ep.Steps) != 10 || ep.StepsOmitted != 20+20+4-10 {
		t.Errorf("%d steps, %d omitted: want 10 (8 + SIGKILL + exit) and 34", len(ep.Steps), ep.StepsOmitted)
	}
	if len(ep.CascadeKills) != 8 || ep.CascadeOmitted != 12 {
		t.Errorf("%d cascade kills, %d omitted", len(ep.CascadeKills), ep.CascadeOmitted)
	}
	if !strings.Contains(ep.Summary(), "the namespace cascade killed 20 process(es)") {
		t.Errorf("summary %q", ep.Summary())
	}
}

// A namespace inode reused by a new container while the old episode is
// still settling: the old one completes, the new one begins.
func TestPidNSReuse(t *testing.T) {
	old := newSim(t, nsA, 5151, "sh", nil)
	old.kill(0, runc).initExit(ms, sigvocab.SIGKILL, 0)
	next := newSim(t, nsA, 8181, "app", nil)
	next.base = base.Add(2 * ms)
	next.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).initExit(ms, 0, 0)
	done, flushed := feed(newEngine(Options{}), append(old.in, next.in...))
	if len(done) != 1 || len(flushed) != 1 || done[0].Main.PID != 5151 || flushed[0].Main.PID != 8181 ||
		done[0].Outcome != OutcomeKilled || flushed[0].Outcome != OutcomeGraceful {
		t.Errorf("done %+v flushed %+v", done, flushed)
	}
}

// The engine copies what it keeps: the tracer reuses its Event.
func TestAddKeepsNoReference(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).kill(time.Second, runc).initExit(time.Second+ms, sigvocab.SIGKILL, 0)
	e := newEngine(Options{})
	var ev sigvocab.Event
	info := *s.info
	for i := range s.in {
		ev = s.in[i].ev
		e.Add(&ev, &info)
		ev = sigvocab.Event{}
		info.Name = "changed"
	}
	ep := e.Flush()[0]
	if ep.Main.Comm != "sh" || ep.StopSender.Comm != "runc" || ep.Container.Name != "web" {
		t.Errorf("episode changed with the caller's values: %+v", ep)
	}
}

func BenchmarkAddNoEpisode(b *testing.B) {
	t := &testing.T{}
	s := newSim(t, nsA, 5151, "app", nil)
	kid := s.kid(5152, 5, "worker")
	s.kidExit(0, kid, 0, 0)
	e := newEngine(Options{})
	ev := s.in[0].ev
	info := &identity.Info{Identity: identity.Identity{ID: idA}}
	b.ReportAllocs()
	for b.Loop() {
		e.Add(&ev, info)
	}
}

// The SIGKILL's record arrives after the exit it caused (two CPUs): the
// outcome is the same and the steps are told in time order.
func TestOutOfOrderArrival(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", nil)
	s.initExit(20*time.Microsecond, sigvocab.SIGKILL, 0).kill(0, runc)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeKilled || ep.KillSender == nil || !ep.Start.Equal(base) {
		t.Errorf("outcome %s kill sender %+v start %v", ep.Outcome, ep.KillSender, ep.Start)
	}
	if got := stepKinds(&ep); !slices.Equal(got, []StepKind{StepSIGKILL, StepMainExit}) || ep.Steps[1].At != 20*time.Microsecond {
		t.Errorf("steps %v, exit at %v", got, ep.Steps[1].At)
	}
}

// An OOM victim the tracer could not place (no pid namespace) is skipped.
func TestOOMVictimWithoutNamespace(t *testing.T) {
	e := newEngine(Options{})
	ev := sigvocab.Event{Kind: sigvocab.KindOOM, Time: base, Target: sigvocab.Process{PID: 4243, TID: 4243}}
	if got := e.Add(&ev, nil); len(got) != 0 || e.Stats().Started != 0 {
		t.Errorf("episode from an unplaced victim: %+v %+v", got, e.Stats())
	}
}

// The recorded kernel records themselves, unmodified, in the order the
// privileged tests saw them: each scenario makes its episode.
func TestRecordedStreams(t *testing.T) {
	cases := []struct {
		records []string
		outcome Outcome
		exit    int
		cascade int
	}{
		{[]string{"TestPID1HandlerDelivery__generate", "TestPID1HandlerDelivery__deliver", "TestPID1HandlerDelivery__exit"}, OutcomeGraceful, 0, 0},
		{[]string{"TestHostSIGKILLToInit__kill", "TestHostSIGKILLToInit__exit"}, OutcomeKilled, 137, 0},
		{[]string{"TestNamespaceCascade__init-exit", "TestNamespaceCascade__cascade-3", "TestNamespaceCascade__child-exit"}, OutcomeExited, 7, 1},
		{[]string{"TestPID1IgnoresSIGTERM__host"}, OutcomeUnfinished, -1, 0},
	}
	for _, c := range cases {
		t.Run(c.records[0], func(t *testing.T) {
			var in []input
			for _, r := range c.records {
				in = append(in, input{ev: record(t, r)})
			}
			ep := only(t, newEngine(Options{}), in)
			if ep.Outcome != c.outcome || len(ep.CascadeKills) != c.cascade || c.exit >= 0 && ep.ExitStatus != c.exit {
				t.Errorf("outcome %s exit %d cascade %d, want %s %d %d", ep.Outcome, ep.ExitStatus, len(ep.CascadeKills), c.outcome, c.exit, c.cascade)
			}
			if ep.Container != (Container{PidNS: in[0].ev.Target.PidNS}) || ep.Main.Comm != "sh" {
				t.Errorf("container %+v init %+v", ep.Container, ep.Main)
			}
		})
	}

	// A SIGTERM to PID 1 from inside its namespace (docker exec kill 1) and
	// a host process's SIGTERM begin nothing.
	e := newEngine(Options{})
	for _, r := range []string{"TestPID1IgnoresSIGTERM__inside", "TestSigIgnPlainProcess__sig_ign"} {
		ev := record(t, r)
		e.Add(&ev, nil)
	}
	if st := e.Stats(); st.Started != 0 {
		t.Errorf("%d episodes begun", st.Started)
	}
}

// Events lost while an episode is open mark it, and only it: the episode
// that completed before the loss and the one that began after stay clean.
func TestNoteDroppedMarksOpenEpisodes(t *testing.T) {
	e := newEngine(Options{})
	e.NoteDropped(5) // lost before anything was open: no episode's
	before := newSim(t, nsA, 100, "sh", dockerInfo(idA, "before", 10)).
		stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).initExit(10*ms, sigvocab.SIGTERM, 0)
	var done []Episode
	for i := range before.in {
		done = append(done, e.Add(&before.in[i].ev, before.in[i].c)...)
	}
	done = append(done, e.Advance(base.Add(5*time.Second))...)
	open := newSim(t, nsB, 200, "sh", dockerInfo(idB, "open", 10))
	open.base = base.Add(6 * time.Second)
	open.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false)
	for i := range open.in {
		done = append(done, e.Add(&open.in[i].ev, open.in[i].c)...)
	}
	e.NoteDropped(12) // 7 lost while "open" is open
	e.NoteDropped(12) // no change
	open.in = nil
	open.initExit(100*ms, sigvocab.SIGTERM, 0)
	for i := range open.in {
		done = append(done, e.Add(&open.in[i].ev, open.in[i].c)...)
	}
	done = append(done, e.Flush()...)
	got := map[string]uint64{}
	for _, ep := range done {
		got[ep.Container.Name] = ep.EventsDropped
	}
	if len(got) != 2 || got["before"] != 0 || got["open"] != 7 {
		t.Fatalf("events_dropped by episode %v, want before 0, open 7", got)
	}
	for _, ep := range done {
		if ep.Container.Name == "open" && !strings.Contains(ep.Summary(), "MAY BE INCOMPLETE: the kernel dropped 7 event(s)") {
			t.Errorf("summary %q does not say it may be incomplete", ep.Summary())
		}
	}
}

// The end of the namespace (PID 1 notifying its parent after the cascade)
// completes the episode at once, with every exit in it; a runtime's late
// stop signal to the zombie begins nothing; an ns_empty without the main
// process's exit (lost) completes nothing.
func TestNSEmptyCompletesAtOnce(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
	k1, k2 := s.kid(5152, 7, "sleep"), s.kid(5153, 8, "sleep")
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).
		kill(10003*ms, runc).
		initExit(10003*ms+28*time.Microsecond, sigvocab.SIGKILL, 0).
		cascade(10003*ms+120*time.Microsecond, k1).
		cascade(10003*ms+134*time.Microsecond, k2).
		kidExit(10003*ms+141*time.Microsecond, k1, sigvocab.SIGKILL, 0).
		kidExit(10003*ms+236*time.Microsecond, k2, sigvocab.SIGKILL, 0).
		nsEmpty(10003*ms + 300*time.Microsecond)
	late := s.in[1].ev // the SIGTERM again, now to a process that is gone
	late.Facts |= factTargetGone
	late.Flags = sigvocab.Classify(&late)
	if !late.Flags.Has(sigvocab.FlagTargetGone) {
		t.Fatalf("flags %s: no target_gone", late.Flags)
	}
	s.push(10003*ms+400*time.Microsecond, late)

	e := newEngine(Options{})
	var done []Episode
	for i := range s.in {
		got := e.Add(&s.in[i].ev, s.in[i].c)
		if len(got) != 0 && s.in[i].ev.Kind != sigvocab.KindNSEmpty {
			t.Fatalf("episode completed at event %d (%s), want at the ns_empty", i, s.in[i].ev.Kind)
		}
		done = append(done, got...)
	}
	if len(done) != 1 {
		t.Fatalf("%d episodes completed by the ns_empty record, want 1", len(done))
	}
	ep := done[0]
	if ep.Outcome != OutcomeIgnoredByInit || len(ep.CascadeKills) != 2 {
		t.Errorf("outcome %s cascade %d", ep.Outcome, len(ep.CascadeKills))
	}
	exits := 0
	for _, st := range ep.Steps {
		if st.Kind == StepProcessExit {
			exits++
		}
	}
	if exits != 2 {
		t.Errorf("%d process exits in the episode, want 2", exits)
	}
	if st := e.Stats(); st.Open != 0 || st.Started != 1 || st.Completed != 1 {
		t.Errorf("stats %+v: the late signal to the zombie began an episode", st)
	}

	// Without the main process's exit, the namespace's end completes
	// nothing: the episode waits for its settle as before.
	e = newEngine(Options{})
	for i, in := range s.in {
		if in.ev.Kind == sigvocab.KindExit && in.ev.Target.PID == 5151 {
			continue
		}
		if got := e.Add(&s.in[i].ev, s.in[i].c); len(got) != 0 {
			t.Fatalf("episode completed at event %d without the main process's exit", i)
		}
	}
	if st := e.Stats(); st.Open != 1 {
		t.Errorf("stats %+v, want the episode open", st)
	}
}

// A pod's container waits for its settle even after ns_empty: the API
// server's word on why it stopped can come after the exit.
func TestNSEmptyPodWaitsForSettle(t *testing.T) {
	pod := &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "containerd", Name: "app", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30}
	s := newSim(t, nsA, 5151, "sh", pod)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		initExit(2*ms, 0, 0).
		nsEmpty(3 * ms)
	e := newEngine(Options{Settle: 500 * ms})
	for i := range s.in {
		if got := e.Add(&s.in[i].ev, s.in[i].c); len(got) != 0 {
			t.Fatalf("a pod's episode completed at event %d (%s), before its settle", i, s.in[i].ev.Kind)
		}
	}
	if got := e.Advance(base.Add(600 * ms)); len(got) != 1 || got[0].Outcome != OutcomeGraceful {
		t.Errorf("Advance past the settle: %+v", got)
	}
}
