package timeline

import (
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// reraise is PID 1 sending sig to itself after its handler ran, with the
// default action restored (a one-shot handler): the kernel's verdict follows
// from that, dropped for a namespace init.
func (s *sim) reraise(at time.Duration, sig sigvocab.Signal) *sim {
	ev := record(s.t, "TestPID1IgnoresSIGTERM__inside")
	ev.Signal, ev.Sender, ev.Target, ev.Handler = sig, s.init, s.init, sigvocab.DispDefault
	ev.Ancestors, ev.AncestorsCount = ancestors("containerd-shim", "systemd")
	ev.Flags = sigvocab.Classify(&ev)
	return s.push(at, ev)
}

// reraiseBlocked is the re-raise as the kernel showed it for Node.js: the
// handler raises while the kernel keeps the signal blocked in it, so it is
// queued (blocked), and dropped at dequeue when the handler returns.
func (s *sim) reraiseBlocked(at, handlerReturns time.Duration, sig sigvocab.Signal) *sim {
	ev := record(s.t, "TestPID1HandlerDelivery__generate")
	ev.Facts |= factBlocked
	ev.Signal, ev.Sender, ev.Target, ev.Handler = sig, s.init, s.init, sigvocab.DispDefault
	ev.Facts |= factSenderInTargetNS
	ev.Ancestors, ev.AncestorsCount = ancestors("containerd-shim", "systemd")
	ev.Flags = sigvocab.Classify(&ev)
	s.push(at, ev)
	return s.deliver(handlerReturns, sig, sigvocab.DispDefault)
}

// Node.js as PID 1 with no process.on('SIGTERM'): its one-shot handler
// resets the terminal and re-raises SIGTERM; the kernel drops that for a
// namespace init, and runc's SIGKILL ends it after the timeout. The
// handler ran, yet the stop is the init's drop, not a slow handler.
func TestReraiseDroppedByInit(t *testing.T) {
	s := newSim(t, nsA, 5151, "node", dockerInfo(idA, "web", 2))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(1885*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
		reraiseBlocked(1911*time.Microsecond, 1914*time.Microsecond, sigvocab.SIGTERM).
		kill(2012*ms, runc).
		initExit(2012*ms+260*time.Microsecond, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeIgnoredByInit || ep.StopVerdict != sigvocab.FateHandler || ep.ReraiseVerdict != sigvocab.FateDroppedInit {
		t.Fatalf("outcome %s stop verdict %s reraise %s, want ignored_by_init, handler, pid1_ignored", ep.Outcome, ep.StopVerdict, ep.ReraiseVerdict)
	}
	if ep.Main.Runtime != langrt.NodeJS {
		t.Errorf("main runtime %q, want nodejs", ep.Main.Runtime)
	}
	var kinds []StepKind
	for _, st := range ep.Steps {
		kinds = append(kinds, st.Kind)
	}
	want := []StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepReraise, StepKernelVerdict, StepKernelVerdict, StepSIGKILL, StepMainExit}
	if strings.Join(stepWords(kinds), " ") != strings.Join(stepWords(want), " ") {
		t.Errorf("steps %v, want %v", kinds, want)
	}
	for _, w := range []string{"PID 1 (node, Node.js) ran its SIGTERM handler", "raised SIGTERM again", "process.on('SIGTERM'", "docker run --init"} {
		if !strings.Contains(ep.Hint, w) {
			t.Errorf("hint %q lacks %q", ep.Hint, w)
		}
	}
	if sum := ep.Summary(); !strings.Contains(sum, "re-raised SIGTERM with the default action, and the kernel dropped that (pid1_ignored)") {
		t.Errorf("summary %q", sum)
	}
	b, err := ep.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"reraise_verdict":"pid1_ignored"`, `"runtime":"nodejs"`, `"kind":"reraise"`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("JSON lacks %s: %s", w, b)
		}
	}
	var back Episode
	if err := back.UnmarshalJSON(b); err != nil || back.ReraiseVerdict != sigvocab.FateDroppedInit || back.Main.Runtime != langrt.NodeJS {
		t.Errorf("read back: %v reraise %s runtime %q", err, back.ReraiseVerdict, back.Main.Runtime)
	}
}

// The Go runtime as PID 1 without signal.Notify: its re-raise is dropped
// and it exits 2 at once: a graceful stop whose code is not 143, and the
// runtime is known from the resolver's reading of the executable.
func TestReraiseThenExit(t *testing.T) {
	info := dockerInfo(idA, "api", 10)
	info.MainRuntime = langrt.Go
	s := newSim(t, nsA, 5151, "api-server", info)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(60*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
		reraise(200*time.Microsecond, sigvocab.SIGTERM).
		initExit(300*time.Microsecond, 0, 2)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeGraceful || ep.ExitStatus != 2 || ep.ReraiseVerdict != sigvocab.FateDroppedInit {
		t.Fatalf("outcome %s exit %d reraise %s, want graceful 2 pid1_ignored", ep.Outcome, ep.ExitStatus, ep.ReraiseVerdict)
	}
	if ep.Main.Runtime != langrt.Go {
		t.Errorf("main runtime %q, want go (from the resolver's reading of the executable)", ep.Main.Runtime)
	}
	if sum := ep.Summary(); !strings.Contains(sum, "exited by itself with code 2 (not 143") {
		t.Errorf("summary %q", sum)
	}
	if !strings.Contains(ep.Hint, "signal.NotifyContext") || ep.Outcome.NeedsFix() {
		t.Errorf("hint %q", ep.Hint)
	}
}

// A handler with SA_NODEFER re-raises with the signal unblocked: the
// kernel drops it at once.
func TestReraiseDroppedAtOnce(t *testing.T) {
	s := newSim(t, nsA, 5151, "node", dockerInfo(idA, "web", 2))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(90*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
		reraise(400*time.Microsecond, sigvocab.SIGTERM).
		kill(2004*ms, runc).
		initExit(2004*ms+30*time.Microsecond, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeIgnoredByInit || ep.ReraiseVerdict != sigvocab.FateDroppedInit {
		t.Fatalf("outcome %s reraise %s, want ignored_by_init, pid1_ignored", ep.Outcome, ep.ReraiseVerdict)
	}
}

// A shell's stale reading (the resolver saw sh before `exec app`) does not
// name the runtime of the process that was stopped.
func TestMainRuntimeStale(t *testing.T) {
	info := dockerInfo(idA, "web", 10)
	info.MainRuntime = langrt.Shell
	s := newSim(t, nsA, 5151, "app", info)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(60*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
		initExit(300*time.Microsecond, 0, 0)
	if ep := only(t, newEngine(Options{}), s.in); ep.Main.Runtime != langrt.Unknown {
		t.Errorf("main runtime %q, want unknown", ep.Main.Runtime)
	}
}

// A one-shot handler at a process that is no init: the re-raise kills it.
func TestReraiseKillsNonInit(t *testing.T) {
	s := newSim(t, nsA, 5151, "node", &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "docker", Name: "web"}, MainPID: 5151})
	s.init.NsPID = 7 // a main process in another container's namespace
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false)
	s.in[0].ev.Facts &^= factTargetNSInit
	s.in[0].ev.Flags = sigvocab.Classify(&s.in[0].ev)
	s.deliver(60*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
		initExit(300*time.Microsecond, sigvocab.SIGTERM, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeGraceful || ep.MainIsInit || ep.ExitStatus != 143 {
		t.Errorf("outcome %s init %v exit %d, want graceful, no init, 143", ep.Outcome, ep.MainIsInit, ep.ExitStatus)
	}
}

// `docker stop -t 3` of a container whose StopTimeout is 10: the stop was
// given 3 s, and the episode must not call 10 s its grace period; without
// -t the SIGKILL comes at StopTimeout, and that was the grace.
func TestAppliedGrace(t *testing.T) {
	for _, c := range []struct {
		name     string
		killAt   time.Duration
		grace    time.Duration
		contains string
	}{
		{"docker stop -t 3", 3004 * ms, 0, "SIGKILL 3.004s after SIGTERM (the container's StopTimeout is 10s: the stop was given 3.0s)"},
		{"docker stop", 10003 * ms, 10 * time.Second, "SIGKILL 10.003s after SIGTERM (grace period 10s)"},
		{"docker stop -t 30", 30002 * ms, 0, "the stop was given 30.0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
			s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).
				kill(c.killAt, runc).
				initExit(c.killAt+30*time.Microsecond, sigvocab.SIGKILL, 0)
			ep := only(t, newEngine(Options{}), s.in)
			if ep.GracePeriod != c.grace || ep.StopTimeout != 10*time.Second {
				t.Errorf("grace %v stop timeout %v, want %v 10s", ep.GracePeriod, ep.StopTimeout, c.grace)
			}
			if sum := ep.Summary(); !strings.Contains(sum, c.contains) {
				t.Errorf("summary %q lacks %q", sum, c.contains)
			}
			b, _ := ep.MarshalJSON()
			if has := strings.Contains(string(b), `"grace_period_s"`); has != (c.grace > 0) || !strings.Contains(string(b), `"stop_timeout_s":10`) {
				t.Errorf("JSON %s", b)
			}
		})
	}
}

func stepWords(ks []StepKind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}
