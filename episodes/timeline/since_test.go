package timeline

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// An agent SIGKILLed during a docker stop of a shell-form container and
// started again at once sees only runc's SIGKILL at the end of the stop
// timeout and the exit: the SIGTERM that PID 1 dropped came before it
// started. The episode must not say "killed" (no stop signal before the
// SIGKILL): it says it may have begun unseen, and gives no verdict.
func TestStartUnseenAgentRestartedMidStop(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
	kid := s.kid(5152, 2, "sleep")
	s.kill(2500*ms, runc).initExit(2500*ms+100*time.Microsecond, sigvocab.SIGKILL, 0).cascade(2500*ms+200*time.Microsecond, kid)
	ep := only(t, newEngine(Options{Since: base}), s.in)
	if ep.Outcome != OutcomeUnfinished || !ep.StartUnseen || !ep.TracedSince.Equal(base) || ep.Hint != "" {
		t.Fatalf("outcome %s start_unseen %v since %v hint %q", ep.Outcome, ep.StartUnseen, ep.TracedSince, ep.Hint)
	}
	if ep.Outcome.NeedsFix() {
		t.Errorf("an episode seen in part needs no fix")
	}
	sum := ep.Summary()
	for _, want := range []string{"may have begun before tracing did", "2.500s after tracing began", "stop budget of 12s", "PID 1 (sh)", "SIGKILL from runc (4242)", "exit status 137", "cascade killed 1"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary %q lacks %q", sum, want)
		}
	}
	var text bytes.Buffer
	if err := ep.WriteText(&text); err != nil || !strings.Contains(text.String(), "outcome: unfinished — its stop may have begun before tracing did") {
		t.Errorf("text (%v):\n%s", err, text.String())
	}
	b, m := marshalMap(t, ep)
	if m["outcome"] != "unfinished" || m["start_unseen"] != true || m["traced_since"] != base.Format(sigvocab.TimeFormat) {
		t.Errorf("JSON %s", b)
	}
	var back Episode
	if err := json.Unmarshal(b, &back); err != nil || !back.StartUnseen || !back.TracedSince.Equal(base) || back.Summary() != sum {
		t.Errorf("read back (%v): start_unseen %v since %v summary %q", err, back.StartUnseen, back.TracedSince, back.Summary())
	}
}

// What decides "may have begun unseen": a stop signal seen, the container's
// start seen, or a first event past the stop budget each make the episode
// whole, and its verdict stands.
func TestStartUnseenRule(t *testing.T) {
	kill := func(s *sim, at time.Duration) *sim {
		return s.kill(at, runc).initExit(at+ms, sigvocab.SIGKILL, 0)
	}
	cases := []struct {
		name   string
		info   *identity.Info
		events func(s *sim)
		want   Outcome
		unseen bool
	}{
		{"SIGKILL within the docker stop timeout (10 s + 2 s slack)", dockerInfo(idA, "web", 10),
			func(s *sim) { kill(s, 11*time.Second) }, OutcomeUnfinished, true},
		{"SIGKILL past it: docker kill, long after tracing began", dockerInfo(idA, "web", 10),
			func(s *sim) { kill(s, 13*time.Second) }, OutcomeKilled, false},
		{"a longer stop timeout widens the window", dockerInfo(idA, "web", 60),
			func(s *sim) { kill(s, 40*time.Second) }, OutcomeUnfinished, true},
		{"the runtime did not answer: the default budget (30 s + 2 s)", bareInfo(idA),
			func(s *sim) { kill(s, 31*time.Second) }, OutcomeUnfinished, true},
		{"the runtime did not answer, past the default budget", bareInfo(idA),
			func(s *sim) { kill(s, 33*time.Second) }, OutcomeKilled, false},
		{"a pid namespace no runtime made: no stop budget, taken as whole", nil,
			func(s *sim) { kill(s, time.Second) }, OutcomeKilled, false},
		{"a Kubernetes grace period", podInfo(45, nil),
			func(s *sim) { kill(s, 46*time.Second) }, OutcomeUnfinished, true},
		{"docker kill of a container started after tracing began", dockerInfo(idA, "web", 10),
			func(s *sim) { kill(s.execIn(100*ms, s.init), time.Second) }, OutcomeKilled, false},
		{"PID 1 exits on its own soon after tracing began", dockerInfo(idA, "web", 10),
			func(s *sim) { s.initExit(time.Second, 0, 3) }, OutcomeUnfinished, true},
		{"PID 1 exits on its own, started after tracing began", dockerInfo(idA, "web", 10),
			func(s *sim) { s.execIn(100*ms, s.init).initExit(time.Second, 0, 3) }, OutcomeExited, false},
		{"a stop signal seen: the stop is whole", dockerInfo(idA, "web", 10),
			func(s *sim) { kill(s.stop(100*ms, sigvocab.SIGTERM, sigvocab.DispDefault, false), 4100*ms) }, OutcomeIgnoredByInit, false},
		{"OOM kill of PID 1 stands", dockerInfo(idA, "web", 10),
			func(s *sim) { s.oom(time.Second, s.init).initExit(time.Second+ms, sigvocab.SIGKILL, 0) }, OutcomeOOMKilled, true},
		{"OOM kill of another process may follow an unseen stop", dockerInfo(idA, "web", 10),
			func(s *sim) {
				hog := s.kid(5152, 7, "hog")
				s.oom(time.Second, hog).kidExit(time.Second+ms, hog, sigvocab.SIGKILL, 0)
			}, OutcomeUnfinished, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t, nsA, 5151, "sh", c.info)
			c.events(s)
			ep := only(t, newEngine(Options{Since: base}), s.in)
			if ep.Outcome != c.want || ep.StartUnseen != c.unseen {
				t.Errorf("outcome %s start_unseen %v, want %s %v; summary %q", ep.Outcome, ep.StartUnseen, c.want, c.unseen, ep.Summary())
			}
		})
	}
}

// bareInfo is a container known by its cgroup path only: its runtime did not
// answer.
func bareInfo(id string) *identity.Info {
	return &identity.Info{Identity: identity.Identity{ID: id, Runtime: "docker"}}
}

// Offline, tracing began at the recording's first event, the earliest it
// shows: a replayed recording gives what the live trace gave.
func TestStartUnseenOffline(t *testing.T) {
	other := newSim(t, nsB, 6161, "app", dockerInfo(idB, "other", 10))
	other.execIn(0, other.init)
	early := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
	early.kill(5*time.Second, runc).initExit(5*time.Second+ms, sigvocab.SIGKILL, 0)
	ep := only(t, New(Options{}), merge(other.in, early.in))
	if ep.Outcome != OutcomeUnfinished || !ep.StartUnseen || !ep.TracedSince.Equal(base) {
		t.Errorf("5 s into the recording: outcome %s start_unseen %v since %v", ep.Outcome, ep.StartUnseen, ep.TracedSince)
	}
	late := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
	late.kill(20*time.Second, runc).initExit(20*time.Second+ms, sigvocab.SIGKILL, 0)
	if ep := only(t, New(Options{}), merge(other.in, late.in)); ep.Outcome != OutcomeKilled || ep.StartUnseen {
		t.Errorf("20 s into the recording: outcome %s start_unseen %v", ep.Outcome, ep.StartUnseen)
	}
}

// The starts remembered are bounded by MaxOpen, oldest out first: a
// container whose start was forgotten is only said to be maybe incomplete.
func TestStartsBounded(t *testing.T) {
	var in []input
	pids := []uint32{5151, 6161, 7171}
	for i, pid := range pids {
		s := newSim(t, nsA+uint32(i), pid, "sh", bareInfo(strings.Repeat(string("abc"[i]), 64)))
		s.execIn(time.Duration(i)*ms, s.init)
		// One after the other: MaxOpen bounds the open episodes too.
		at := time.Second + time.Duration(i)*3*time.Second
		s.kill(at, runc).initExit(at+100*time.Microsecond, sigvocab.SIGKILL, 0)
		in = append(in, s.in...)
	}
	done, flushed := feed(newEngine(Options{Since: base, MaxOpen: 2}), merge(in))
	eps := append(done, flushed...)
	if len(eps) != 3 {
		t.Fatalf("%d episodes, want 3", len(eps))
	}
	for _, ep := range eps {
		want := OutcomeKilled
		if ep.Main.PID == pids[0] {
			want = OutcomeUnfinished // its start was pushed out by the third
		}
		if ep.Outcome != want {
			t.Errorf("PID 1 %d: outcome %s, want %s", ep.Main.PID, ep.Outcome, want)
		}
	}
}

// With the runtime's record of what it sent before tracing began, a
// SIGKILL soon after is a kill unless the runtime had asked the container
// to stop within its stop budget: `docker kill` 1 s after tracing began is
// killed; an agent restarted mid `docker stop` (Docker's record holds the
// SIGTERM) stays unfinished; a record that is not complete, or a runtime
// that keeps none (CRI), leaves the cautious rule.
func TestStartUnseenHistory(t *testing.T) {
	complete := map[string]time.Time{"docker": {}}
	cases := []struct {
		name    string
		info    *identity.Info
		history *identity.StopHistory
		want    Outcome
	}{
		{"docker kill, no stop asked", dockerInfo(idA, "web", 10),
			&identity.StopHistory{From: base.Add(-10 * time.Minute), CompleteSince: complete}, OutcomeKilled},
		{"docker stop before tracing began", dockerInfo(idA, "web", 10),
			&identity.StopHistory{From: base.Add(-10 * time.Minute), CompleteSince: complete, Requests: []identity.StopRequest{{ID: idA, At: base.Add(-8 * time.Second), Signal: sigvocab.SIGTERM}}}, OutcomeUnfinished},
		{"another container's stop", dockerInfo(idA, "web", 10),
			&identity.StopHistory{From: base.Add(-10 * time.Minute), CompleteSince: complete, Requests: []identity.StopRequest{{ID: "other", At: base.Add(-8 * time.Second), Signal: sigvocab.SIGTERM}}}, OutcomeKilled},
		{"a stop long over (outside its budget)", dockerInfo(idA, "web", 10),
			&identity.StopHistory{From: base.Add(-10 * time.Minute), CompleteSince: complete, Requests: []identity.StopRequest{{ID: idA, At: base.Add(-5 * time.Minute), Signal: sigvocab.SIGTERM}}}, OutcomeKilled},
		{"Docker's record starts within the budget (it kept too few events)", dockerInfo(idA, "web", 10),
			&identity.StopHistory{From: base.Add(-10 * time.Minute), CompleteSince: map[string]time.Time{"docker": base.Add(-5 * time.Second)}}, OutcomeUnfinished},
		{"Docker's record reaches back far enough", dockerInfo(idA, "web", 10),
			&identity.StopHistory{From: base.Add(-10 * time.Minute), CompleteSince: map[string]time.Time{"docker": base.Add(-time.Minute)}}, OutcomeKilled},
		{"a CRI runtime keeps no record", &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "containerd", Name: "app", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30},
			&identity.StopHistory{From: base.Add(-10 * time.Minute), CompleteSince: complete}, OutcomeUnfinished},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t, nsA, 5151, "sh", c.info)
			s.kill(time.Second, runc).initExit(time.Second+ms, sigvocab.SIGKILL, 0)
			ep := only(t, newEngine(Options{Since: base, History: c.history}), s.in)
			if ep.Outcome != c.want || ep.StartUnseen != (c.want == OutcomeUnfinished) {
				t.Errorf("outcome %s start_unseen %v, want %s", ep.Outcome, ep.StartUnseen, c.want)
			}
		})
	}
}
