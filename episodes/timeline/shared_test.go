package timeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

const (
	factInfoNoinfo = 1 << 0
	factSigwaited  = 1 << 10
	idSandbox      = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"
)

// toMain is runc's stop signal (or SIGKILL) to a main process that is no
// namespace init, with disposition disp. The kernel's state at the event is
// what it would be: a fatal signal has set SIGNAL_GROUP_EXIT by the time the
// tracepoint fires.
func (s *sim) toMain(at time.Duration, sig sigvocab.Signal, main sigvocab.Process, disp sigvocab.Disposition) *sim {
	ev := record(s.t, "TestPID1HandlerDelivery__generate")
	ev.Signal, ev.Handler, ev.Target = sig, disp, main
	ev.Facts &^= factTargetNSInit | factBlocked
	ev.SigFlags = 0
	if disp == sigvocab.DispDefault {
		ev.SigFlags = 0x4
	}
	fromHost(&ev, runc, "containerd-shim", "systemd")
	ev.Flags = sigvocab.Classify(&ev)
	return s.push(at, ev)
}

// cgroupKill is runc writing cgroup.kill: the kernel's thread-directed
// SIGKILL with SEND_SIG_NOINFO to p.
func (s *sim) cgroupKill(at time.Duration, p sigvocab.Process) *sim {
	ev := record(s.t, "TestHostSIGKILLToInit__kill")
	ev.Target, ev.Group = p, false
	ev.Facts = (ev.Facts | factInfoNoinfo) &^ (factTargetNSInit | factInfoPriv)
	fromHost(&ev, runc, "containerd-shim", "systemd")
	ev.Flags = sigvocab.Classify(&ev)
	return s.push(at, ev)
}

// A container in another's pid namespace (docker --pid container:X): its
// main process is no init, SIGTERM's default action ends it, and the
// namespace's init (the other container) gets no episode.
func TestSharedPidNamespace(t *testing.T) {
	owner := newSim(t, nsA, 5151, "sleep", dockerInfo(idA, "owner", 10))
	joiner := dockerInfo(idB, "joiner", 10)
	joiner.MainPID = 7001
	s := newSim(t, nsA, 5151, "sleep", joiner)
	main := s.kid(7001, 2, "sleep")
	other := s.kid(7002, 3, "worker")
	s.toMain(0, sigvocab.SIGTERM, main, sigvocab.DispDefault).
		kidExit(200*time.Microsecond, main, sigvocab.SIGTERM, 0).
		cgroupKill(3*ms, other).
		kidExit(3*ms+100*time.Microsecond, other, sigvocab.SIGKILL, 0)
	in := merge(owner.in, s.in)
	ep := only(t, newEngine(Options{}), in)
	if ep.Container.ID != idB || ep.Outcome != OutcomeGraceful || ep.ExitStatus != 143 || ep.MainIsInit || ep.Main.PID != 7001 {
		t.Fatalf("episode %s %s exit %d main %+v init %v", ep.Container.ID[:4], ep.Outcome, ep.ExitStatus, ep.Main, ep.MainIsInit)
	}
	if ep.StopVerdict != sigvocab.FateDefault || !strings.Contains(ep.Summary(), "ended by SIGTERM's default action") {
		t.Errorf("verdict %s summary %q", ep.StopVerdict, ep.Summary())
	}
	want := []StepKind{StepStopSignal, StepKernelVerdict, StepMainExit, StepSIGKILL, StepProcessExit}
	if got := stepKinds(&ep); !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	if st := ep.Steps[3]; !st.Flags.Has(sigvocab.FlagCgroupKill) || !strings.Contains(st.Text, "cgroup.kill") {
		t.Errorf("cgroup.kill step %+v", st)
	}
	if strings.Contains(ep.Steps[1].Text, "PID 1") || !strings.Contains(ep.Steps[1].Text, "default action ends the main process") {
		t.Errorf("verdict text %q", ep.Steps[1].Text)
	}

	// The same, with SIG_IGN at the main process: the stop is ignored
	// (not ignored_by_init: it is no init), then killed.
	s = newSim(t, nsA, 5151, "sleep", joiner)
	s.toMain(0, sigvocab.SIGTERM, main, sigvocab.DispIgnore)
	s.in[0].ev.Result = sigvocab.ResultIgnored
	s.in[0].ev.Flags = sigvocab.Classify(&s.in[0].ev)
	s.push(10*time.Second, func() sigvocab.Event {
		ev := record(t, "TestHostSIGKILLToInit__kill")
		ev.Target = main
		ev.Facts &^= factTargetNSInit
		fromHost(&ev, runc, "containerd-shim")
		ev.Flags = sigvocab.Classify(&ev)
		return ev
	}()).kidExit(10*time.Second+ms, main, sigvocab.SIGKILL, 0)
	ep = only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeIgnored || ep.StopVerdict != sigvocab.FateDroppedSigIgn || !strings.Contains(ep.Hint, "The main process (sleep) ignores SIGTERM") {
		t.Errorf("SIG_IGN: %s %s hint %q", ep.Outcome, ep.StopVerdict, ep.Hint)
	}
}

// tini as docker run --init: it waits for the stop signal in sigtimedwait
// (queued, not dropped, though it has no handler), forwards it, and exits
// 143 when its child dies by it.
func TestForwardingInitSigwait(t *testing.T) {
	s := newSim(t, nsA, 5151, "docker-init", dockerInfo(idA, "web", 10))
	app := s.kid(5152, 7, "sleep")
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false)
	ev := &s.in[0].ev
	ev.Result = sigvocab.ResultDelivered
	ev.Facts |= factSigwaited
	ev.Flags = sigvocab.Classify(ev)
	s.forward(300*time.Microsecond, sigvocab.SIGTERM, app, sigvocab.DispDefault).
		kidExit(400*time.Microsecond, app, sigvocab.SIGTERM, 0).
		initExit(600*time.Microsecond, 0, 143)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeGraceful || ep.StopVerdict != sigvocab.FateSigwait || ep.ExitStatus != 143 || ep.ForwardingInit != "docker-init" || ep.Hint != "" {
		t.Fatalf("%s verdict %s exit %d init %q hint %q", ep.Outcome, ep.StopVerdict, ep.ExitStatus, ep.ForwardingInit, ep.Hint)
	}
	want := []StepKind{StepStopSignal, StepKernelVerdict, StepForward, StepProcessExit, StepMainExit}
	if got := stepKinds(&ep); !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	if !strings.Contains(ep.Steps[1].Text, "waits for SIGTERM") || !strings.Contains(ep.Steps[2].Text, "forwards SIGTERM to sleep") {
		t.Errorf("texts %q / %q", ep.Steps[1].Text, ep.Steps[2].Text)
	}

	// The same init whose child outlives the grace period: it took the
	// signal and passed it on, so the SIGKILL ends a handler_timeout.
	s = newSim(t, nsA, 5151, "tini", dockerInfo(idA, "web", 10))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false)
	ev = &s.in[0].ev
	ev.Result, ev.Facts = sigvocab.ResultDelivered, ev.Facts|factSigwaited
	ev.Flags = sigvocab.Classify(ev)
	s.forward(ms, sigvocab.SIGTERM, app, sigvocab.DispHandler).kill(10*time.Second, runc).initExit(10*time.Second+ms, sigvocab.SIGKILL, 0)
	if ep := only(t, newEngine(Options{}), s.in); ep.Outcome != OutcomeHandlerTimeout || !strings.Contains(ep.Hint, "passed on SIGTERM") {
		t.Errorf("slow child: %s hint %q", ep.Outcome, ep.Hint)
	}

	// A PID 1 that keeps SIGTERM blocked (sigprocmask) with no handler and
	// never reads it: queued, never acted on: ignored_by_init.
	s = newSim(t, nsA, 5151, "sigblock", dockerInfo(idA, "web", 2))
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, true).kill(2*time.Second, runc).initExit(2*time.Second+ms, sigvocab.SIGKILL, 0)
	if ep := only(t, newEngine(Options{}), s.in); ep.Outcome != OutcomeIgnoredByInit || ep.StopVerdict != sigvocab.FateBlocked ||
		!strings.Contains(ep.Hint, "kept SIGTERM blocked until the SIGKILL") {
		t.Errorf("blocked: %s %s hint %q", ep.Outcome, ep.StopVerdict, ep.Hint)
	}
}

// A pod's sandbox (pause) container: its SIGKILL and exit at the end of the
// pod's teardown make no episode and are a step of the pod's open episodes.
func TestSandboxIsNoEpisode(t *testing.T) {
	app := &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "containerd", Name: "app", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30}
	s := newSim(t, nsA, 5151, "app", app)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).initExit(2*ms, 0, 0)
	pause := &identity.Info{Identity: identity.Identity{ID: idSandbox, Runtime: "containerd", Pod: "web-0", Namespace: "shop"}, Sandbox: true, MainPID: 4900}
	p := newSim(t, nsB, 4900, "pause", pause)
	p.kill(50*ms, runc).initExit(50*ms+100*time.Microsecond, sigvocab.SIGKILL, 0)
	e := newEngine(Options{})
	done, flushed := feed(e, merge(s.in, p.in))
	all := append(done, flushed...)
	if len(all) != 1 {
		t.Fatalf("%d episodes, want 1 (the app's)", len(all))
	}
	ep := all[0]
	if ep.Container.ID != idA || ep.Outcome != OutcomeGraceful {
		t.Errorf("episode %s %s", ep.Container.Name, ep.Outcome)
	}
	if got := stepKinds(&ep); !slices.Equal(got, []StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepMainExit, StepSandbox, StepSandbox}) {
		t.Errorf("steps %v", got)
	}
	if st := e.Stats(); st.Started != 1 || st.SandboxStops != 2 {
		t.Errorf("stats %+v", st)
	}
}

// An episode begun before its container was resolved takes the container's
// ID when a later event names it; events whose lookup failed still join.
func TestLateIdentityRekeys(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", nil)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false)
	s.info = dockerInfo(idA, "web", 10)
	s.kill(10*time.Second, runc)
	s.info = nil
	s.initExit(10*time.Second+ms, sigvocab.SIGKILL, 0)
	e := newEngine(Options{})
	ep := only(t, e, s.in)
	if ep.Container.ID != idA || ep.Outcome != OutcomeIgnoredByInit || len(ep.Steps) != 4 || e.Stats().Started != 1 {
		t.Errorf("%+v %s %v", ep.Container, ep.Outcome, stepKinds(&ep))
	}
}

// A pid namespace nested in a container (docker-in-docker, unshare in an
// entrypoint) has an init of its own: its exit is a step of the
// container's episode, not the end of it nor an episode of its own.
func TestNestedNamespaceInit(t *testing.T) {
	info := dockerInfo(idA, "dind", 10)
	info.MainPID = 5151
	s := newSim(t, nsA, 5151, "sh", info)
	nested := sigvocab.Process{PID: 9000, TID: 9000, NsPID: 1, PidNS: nsB, CgroupID: 1, CgroupV1ID: 2595, Comm: comm("inner")}
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).
		kidExit(2*ms, nested, sigvocab.SIGKILL, 0).
		initExit(3*ms, 0, 0)
	e := newEngine(Options{})
	ep := only(t, e, s.in)
	if ep.Outcome != OutcomeGraceful || ep.Main.PID != 5151 || e.Stats().Started != 1 {
		t.Errorf("%s main %+v started %d steps %v", ep.Outcome, ep.Main, e.Stats().Started, stepKinds(&ep))
	}
}
