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
	nsA = 4026532177
	nsB = 4026532300

	idA = "3f2a1b9c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"
	idB = "b0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
)

const ms = time.Millisecond

func stepKinds(ep *Episode) []StepKind {
	var k []StepKind
	for _, s := range ep.Steps {
		k = append(k, s.Kind)
	}
	return k
}

// only returns the single episode of a run, failing otherwise.
func only(t *testing.T, e *Engine, in []input) Episode {
	t.Helper()
	done, flushed := feed(e, in)
	all := append(slices.Clone(done), flushed...)
	if len(all) != 1 {
		for _, ep := range all {
			t.Logf("episode %s pidns %d steps %v", ep.Outcome, ep.Container.PidNS, stepKinds(&ep))
		}
		t.Fatalf("%d episodes, want 1", len(all))
	}
	return all[0]
}

// The scenarios of issue 4's end-to-end tests, as the kernel records them.
func TestOutcomes(t *testing.T) {
	type want struct {
		outcome     Outcome
		stopSignal  sigvocab.Signal
		stopVerdict sigvocab.Fate
		exitStatus  int // -1: no exit
		exitSignal  sigvocab.Signal
		cascade     int
		killAfter   time.Duration // 0: none
		steps       []StepKind
		hint        string // substring; "" means no hint
	}
	cases := []struct {
		name  string
		build func(t *testing.T) *sim
		want  want
	}{
		{
			// docker stop on `sh -c 'sleep 1000 & sleep 1000 & wait'`: the
			// sequence measured in kernel-semantics.md, with docker's 10 s.
			name: "docker stop, shell-form PID 1 without a handler",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
				k1, k2 := s.kid(5152, 7, "sleep"), s.kid(5153, 8, "sleep")
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).
					kill(10003*ms, runc).
					initExit(10003*ms+28*time.Microsecond, sigvocab.SIGKILL, 0).
					cascade(10003*ms+120*time.Microsecond, k1).
					cascade(10003*ms+134*time.Microsecond, k2).
					kidExit(10003*ms+141*time.Microsecond, k1, sigvocab.SIGKILL, 0).
					kidExit(10003*ms+236*time.Microsecond, k2, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeIgnoredByInit, sigvocab.SIGTERM, sigvocab.FateDroppedInit, 137, sigvocab.SIGKILL, 2, 10003 * ms,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepSIGKILL, StepMainExit, StepCascadeKill, StepCascadeKill, StepProcessExit, StepProcessExit},
				"PID 1 (sh) has no SIGTERM handler: the kernel drops SIGTERM sent to a namespace init. Use the exec form of ENTRYPOINT/CMD, `exec` the app in the entrypoint script, or run an init such as tini (docker run --init)."},
		},
		{
			name: "TERM trap that exits 0",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
					deliver(150*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(205*ms, 0, 0)
			},
			want: want{OutcomeGraceful, sigvocab.SIGTERM, sigvocab.FateHandler, 0, 0, 0, 0,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepMainExit}, ""},
		},
		{
			// `trap 'exit 143' TERM`, or tini reporting its child's SIGTERM.
			name: "TERM trap that exits 143, child killed by the cascade",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
				k := s.kid(5152, 7, "sleep")
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
					deliver(100*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(3*ms, 0, 143).
					cascade(3*ms+100*time.Microsecond, k).
					kidExit(3*ms+200*time.Microsecond, k, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeGraceful, sigvocab.SIGTERM, sigvocab.FateHandler, 143, 0, 1, 0,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepMainExit, StepCascadeKill, StepProcessExit},
				"exited while 1 other process(es) still ran"},
		},
		{
			name: "tini forwards SIGTERM, the app handles it and exits",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "tini", dockerInfo(idA, "web", 10))
				app := s.kid(5152, 7, "app")
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
					deliver(100*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
					forward(200*time.Microsecond, sigvocab.SIGTERM, app, sigvocab.DispHandler).
					kidDeliver(300*time.Microsecond, sigvocab.SIGTERM, app).
					kidExit(1500*ms, app, 0, 0).
					initExit(1501*ms, 0, 0)
			},
			want: want{OutcomeGraceful, sigvocab.SIGTERM, sigvocab.FateHandler, 0, 0, 0, 0,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepForward, StepDeliver, StepProcessExit, StepMainExit}, ""},
		},
		{
			name: "handler slower than the grace period",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "app", dockerInfo(idA, "slow", 2))
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
					deliver(80*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
					kill(2001*ms, runc).
					initExit(2001*ms+30*time.Microsecond, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeHandlerTimeout, sigvocab.SIGTERM, sigvocab.FateHandler, 137, sigvocab.SIGKILL, 0, 2001 * ms,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepSIGKILL, StepMainExit},
				"PID 1 (app) handled SIGTERM but was still running 2.0s later, when the SIGKILL came (grace period 2s): make its shutdown faster, or raise the grace period (docker stop -t"},
		},
		{
			name: "docker kill",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
				k := s.kid(5152, 7, "sleep")
				return s.kill(0, runc).
					initExit(25*time.Microsecond, sigvocab.SIGKILL, 0).
					cascade(120*time.Microsecond, k).
					kidExit(140*time.Microsecond, k, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeKilled, 0, sigvocab.FateUnknown, 137, sigvocab.SIGKILL, 1, 0,
				[]StepKind{StepSIGKILL, StepMainExit, StepCascadeKill, StepProcessExit},
				"was SIGKILLed with no stop signal before it"},
		},
		{
			// __oom_kill_process sends SIGKILL, then mark_oom_victim fires
			// the oom:mark_victim tracepoint.
			name: "OOM kill of PID 1",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "hog", dockerInfo(idA, "hog", 10))
				return s.oomKernelKill(0, s.init, s.init).
					oom(10*time.Microsecond, s.init).
					initExit(900*time.Microsecond, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeOOMKilled, 0, sigvocab.FateUnknown, 137, sigvocab.SIGKILL, 0, 0,
				[]StepKind{StepSIGKILL, StepOOMKill, StepMainExit},
				"The kernel's OOM killer killed PID 1 hog (host 5151): the container ran out of memory"},
		},
		{
			name: "OOM kill of a child, then PID 1 exits 137",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "hog", 10))
				hog := s.kid(5152, 7, "hog")
				return s.oomKernelKill(0, hog, hog).
					oom(10*time.Microsecond, hog).
					kidExit(700*time.Microsecond, hog, sigvocab.SIGKILL, 0).
					initExit(2*ms, 0, 137)
			},
			want: want{OutcomeOOMKilled, 0, sigvocab.FateUnknown, 137, 0, 0, 0,
				[]StepKind{StepOOMKill, StepProcessExit, StepMainExit},
				"OOM killer killed hog (ns pid 7, host 5152)"},
		},
		{
			name: "PID 1 exits by itself with its children",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "job", 10))
				k := s.kid(5152, 2, "sleep")
				return s.initExit(0, 0, 7).
					cascade(93*time.Microsecond, k).
					kidExit(100*time.Microsecond, k, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeExited, 0, sigvocab.FateUnknown, 7, 0, 1, 0,
				[]StepKind{StepMainExit, StepCascadeKill, StepProcessExit},
				"exited on its own with code 7"},
		},
		{
			name: "PID 1 crashes",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "app", nil)
				return s.initExit(0, 11, 0)
			},
			want: want{OutcomeExited, 0, sigvocab.FateUnknown, 139, 11, 0, 0, []StepKind{StepMainExit}, "killed by SIGSEGV"},
		},
		{
			// dash as PID 1 blocks SIGTERM while it waits for a foreground
			// child; when the child ends, it dequeues SIGTERM with SIG_DFL
			// and the kernel drops it.
			name: "dash: blocked, dropped on dequeue, killed",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "dash", 10))
				fg := s.kid(5152, 7, "sleep")
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, true).
					kidExit(3*time.Second, fg, 0, 0).
					deliver(3*time.Second+50*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispDefault).
					kill(10002*ms, runc).
					initExit(10002*ms+20*time.Microsecond, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeIgnoredByInit, sigvocab.SIGTERM, sigvocab.FateDroppedInit, 137, sigvocab.SIGKILL, 0, 10002 * ms,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepProcessExit, StepKernelVerdict, StepSIGKILL, StepMainExit},
				"PID 1 (sh) had SIGTERM blocked and has no handler for it"},
		},
		{
			name: "blocked for the whole grace period",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "dash", 10))
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, true).
					kill(10002*ms, runc).
					initExit(10002*ms+20*time.Microsecond, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeIgnoredByInit, sigvocab.SIGTERM, sigvocab.FateBlocked, 137, sigvocab.SIGKILL, 0, 10002 * ms,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepSIGKILL, StepMainExit},
				"kept SIGTERM blocked until the SIGKILL"},
		},
		{
			name: "blocked, then handled: graceful",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "dash", 10))
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, true).
					deliver(2*time.Second, sigvocab.SIGTERM, sigvocab.DispHandler).
					initExit(2*time.Second+ms, 0, 0)
			},
			want: want{OutcomeGraceful, sigvocab.SIGTERM, sigvocab.FateHandler, 0, 0, 0, 0,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepMainExit}, ""},
		},
		{
			name: "SIG_IGN for SIGTERM",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "nohup", 10))
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispIgnore, false).
					kill(10*time.Second, runc).
					initExit(10*time.Second+ms, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeIgnoredByInit, sigvocab.SIGTERM, sigvocab.FateDroppedSigIgn, 137, sigvocab.SIGKILL, 0, 10 * time.Second,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepSIGKILL, StepMainExit}, "ignores SIGTERM (SIG_IGN: `trap '' TERM`"},
		},
		{
			// The SIGKILL reaches a PID 1 that is already exiting by itself
			// (before 6.0 the kernel still says delivered): its exit code is
			// the truth, not the SIGKILL.
			name: "SIGKILL races an exit already under way",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "app", dockerInfo(idA, "web", 10))
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).
					deliver(100*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
					kill(10*time.Second, runc).
					initExit(10*time.Second+10*time.Microsecond, 0, 0)
			},
			want: want{OutcomeGraceful, sigvocab.SIGTERM, sigvocab.FateHandler, 0, 0, 0, 10 * time.Second,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepSIGKILL, StepMainExit}, ""},
		},
		{
			// cgroup.kill or a lost record: the exit says SIGKILL, no
			// SIGKILL to PID 1 was seen.
			name: "killed with the SIGKILL not recorded",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).
					initExit(10*time.Second, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeIgnoredByInit, sigvocab.SIGTERM, sigvocab.FateDroppedInit, 137, sigvocab.SIGKILL, 0, 0,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepMainExit}, "has no SIGTERM handler"},
		},
		{
			name: "SIGTERM dropped, PID 1 exits on its own",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", nil)
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).
					initExit(4*time.Second, 0, 0)
			},
			want: want{OutcomeExited, sigvocab.SIGTERM, sigvocab.FateDroppedInit, 0, 0, 0, 0,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepMainExit}, "has no SIGTERM handler"},
		},
		{
			name: "recording ends during the grace period",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 30))
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false)
			},
			want: want{OutcomeUnfinished, sigvocab.SIGTERM, sigvocab.FateDroppedInit, -1, 0, 0, 0,
				[]StepKind{StepStopSignal, StepKernelVerdict}, "the runtime will SIGKILL it at the end of the grace period"},
		},
		{
			name: "repeated stop signal and a reload signal are steps, not episodes",
			build: func(t *testing.T) *sim {
				s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
				return s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).
					stop(time.Second, sigvocab.SIGHUP, sigvocab.DispDefault, false).
					stop(2*time.Second, sigvocab.SIGTERM, sigvocab.DispDefault, false).
					kill(10*time.Second, runc).
					initExit(10*time.Second+ms, sigvocab.SIGKILL, 0)
			},
			want: want{OutcomeIgnoredByInit, sigvocab.SIGTERM, sigvocab.FateDroppedInit, 137, sigvocab.SIGKILL, 0, 10 * time.Second,
				[]StepKind{StepStopSignal, StepKernelVerdict, StepSignal, StepStopSignal, StepKernelVerdict, StepSIGKILL, StepMainExit},
				"has no SIGTERM handler"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.build(t)
			ep := only(t, newEngine(Options{}), s.in)
			w := c.want
			if ep.Outcome != w.outcome {
				t.Errorf("outcome %s, want %s", ep.Outcome, w.outcome)
			}
			if ep.StopSignal != w.stopSignal || ep.StopVerdict != w.stopVerdict {
				t.Errorf("stop %s (%s), want %s (%s)", ep.StopSignal, ep.StopVerdict, w.stopSignal, w.stopVerdict)
			}
			if w.exitStatus < 0 {
				if !ep.ExitAt.IsZero() {
					t.Errorf("exit at %v, want none", ep.ExitAt)
				}
			} else if ep.ExitAt.IsZero() || ep.ExitStatus != w.exitStatus || ep.ExitSignal != w.exitSignal {
				t.Errorf("exit %d by %s at %v, want %d by %s", ep.ExitStatus, ep.ExitSignal, ep.ExitAt, w.exitStatus, w.exitSignal)
			}
			if len(ep.CascadeKills) != w.cascade {
				t.Errorf("%d cascade kills, want %d", len(ep.CascadeKills), w.cascade)
			}
			d, ok := ep.KillAfter()
			if d != w.killAfter || ok != (w.killAfter != 0) {
				t.Errorf("kill after %v (%v), want %v", d, ok, w.killAfter)
			}
			if got := stepKinds(&ep); !slices.Equal(got, w.steps) {
				t.Errorf("steps\n %v\nwant\n %v", got, w.steps)
			}
			if w.hint == "" && ep.Hint != "" || !strings.Contains(ep.Hint, w.hint) {
				t.Errorf("hint %q, want it to contain %q", ep.Hint, w.hint)
			}
			if ep.Main.PID != s.init.PID || ep.Main.NsPID != 1 || ep.Container.PidNS != s.pidns {
				t.Errorf("init %+v pidns %d, want PID 1 %d in %d", ep.Main, ep.Container.PidNS, s.init.PID, s.pidns)
			}
			if len(ep.Steps) == 0 || ep.Steps[0].At != 0 || !ep.Start.Equal(ep.Steps[0].Time) {
				t.Errorf("start %v, steps %v: want the first step's time and +0", ep.Start, ep.Steps)
			}
			for _, st := range ep.Steps {
				if st.Text == "" {
					t.Errorf("step %s has no text", st.Kind)
				}
			}
		})
	}
}

// The docker stop case in detail: times, senders, cascade, steps' offsets.
func TestDockerStopShellForm(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
	k1, k2 := s.kid(5152, 7, "sleep"), s.kid(5153, 8, "sleep")
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).
		kill(10003*ms, runc).
		initExit(10003*ms+28*time.Microsecond, sigvocab.SIGKILL, 0).
		cascade(10003*ms+120*time.Microsecond, k1).
		cascade(10003*ms+134*time.Microsecond, k2).
		kidExit(10003*ms+141*time.Microsecond, k1, sigvocab.SIGKILL, 0).
		kidExit(10003*ms+236*time.Microsecond, k2, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)

	if ep.Container.ID != idA || ep.Container.Name != "web" || ep.Container.Runtime != "docker" || ep.Container.Image != "sigscope/web:test" {
		t.Errorf("container %+v", ep.Container)
	}
	if ep.GracePeriod != 10*time.Second {
		t.Errorf("grace period %v, want 10s (StopTimeout)", ep.GracePeriod)
	}
	if !ep.StopAt.Equal(base) || !ep.KillAt.Equal(base.Add(10003*ms)) || !ep.ExitAt.Equal(base.Add(10003*ms+28*time.Microsecond)) {
		t.Errorf("stop %v kill %v exit %v", ep.StopAt, ep.KillAt, ep.ExitAt)
	}
	if ep.StopSender == nil || ep.StopSender.PID != runc.PID || ep.StopSender.Comm != "runc" ||
		len(ep.StopSender.Ancestors) != 2 || ep.StopSender.Ancestors[0].Comm != "containerd-shim" || ep.StopSender.Kernel {
		t.Errorf("stop sender %+v", ep.StopSender)
	}
	if ep.KillSender == nil || ep.KillSender.PID != runc.PID {
		t.Errorf("kill sender %+v", ep.KillSender)
	}
	want := []Proc{{PID: 5152, NsPID: 7, Comm: "sleep"}, {PID: 5153, NsPID: 8, Comm: "sleep"}}
	if !slices.Equal(ep.CascadeKills, want) {
		t.Errorf("cascade %+v, want %+v", ep.CascadeKills, want)
	}
	if d, _ := ep.ExitAfter(); d != 10003*ms+28*time.Microsecond {
		t.Errorf("exit after %v", d)
	}
	if got := ep.Steps[2].At; got != 10003*ms {
		t.Errorf("SIGKILL step at %v, want 10.003s", got)
	}
	if st := ep.Steps[1]; st.Verdict != sigvocab.FateDroppedInit || !st.Flags.Has(sigvocab.FlagPID1Ignored|sigvocab.FlagCrossNS|sigvocab.FlagNSInit) {
		t.Errorf("verdict step %+v", st)
	}
	if st := ep.Steps[0]; st.Text != "runc (4242) sends SIGTERM to PID 1 sh (host 5151)" {
		t.Errorf("stop step text %q", st.Text)
	}
	if st := ep.Steps[1]; st.Text != "kernel: ignored — PID 1 has no SIGTERM handler" {
		t.Errorf("verdict step text %q", st.Text)
	}
	if st := ep.Steps[3]; st.Exit == nil || *st.Exit != 137 || st.Text != "PID 1 sh (host 5151) killed by SIGKILL (exit status 137)" {
		t.Errorf("init exit step %+v", st)
	}
}

// Two containers stopped at the same time: their events interleave in the
// stream and each episode gets only its own.
func TestInterleavedContainers(t *testing.T) {
	a := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "a", 10))
	ka := a.kid(5152, 7, "sleep")
	a.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).
		kill(10*time.Second, runc).
		initExit(10*time.Second+10*time.Microsecond, sigvocab.SIGKILL, 0).
		cascade(10*time.Second+20*time.Microsecond, ka).
		kidExit(10*time.Second+30*time.Microsecond, ka, sigvocab.SIGKILL, 0)

	b := newSim(t, nsB, 6161, "app", dockerInfo(idB, "b", 10))
	kb := b.kid(6162, 9, "worker")
	b.stop(5*ms, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		deliver(5*ms+40*time.Microsecond, sigvocab.SIGTERM, sigvocab.DispHandler).
		forward(6*ms, sigvocab.SIGTERM, kb, sigvocab.DispDefault).
		kidExit(7*ms, kb, sigvocab.SIGTERM, 0).
		initExit(10*time.Second+15*time.Microsecond, 0, 0)

	done, flushed := feed(newEngine(Options{}), merge(a.in, b.in))
	all := append(done, flushed...)
	if len(all) != 2 {
		t.Fatalf("%d episodes, want 2", len(all))
	}
	byID := map[string]Episode{}
	for _, ep := range all {
		byID[ep.Container.ID] = ep
	}
	epA, epB := byID[idA], byID[idB]
	if epA.Outcome != OutcomeIgnoredByInit || len(epA.CascadeKills) != 1 || epA.CascadeKills[0].PID != ka.PID || len(epA.Steps) != 6 {
		t.Errorf("a: %s cascade %+v steps %v", epA.Outcome, epA.CascadeKills, stepKinds(&epA))
	}
	if epB.Outcome != OutcomeGraceful || len(epB.CascadeKills) != 0 || epB.Main.PID != 6161 {
		t.Errorf("b: %s cascade %+v init %+v", epB.Outcome, epB.CascadeKills, epB.Main)
	}
	if got := stepKinds(&epB); !slices.Equal(got, []StepKind{StepStopSignal, StepKernelVerdict, StepDeliver, StepForward, StepProcessExit, StepMainExit}) {
		t.Errorf("b steps %v", got)
	}
	for _, st := range epB.Steps {
		if st.Target.PID != 6161 && st.Target.PID != kb.PID {
			t.Errorf("b has a step about %+v", st.Target)
		}
	}
}

// Settle: the cascade and the exits after PID 1's exit join the episode up
// to Settle later; the episode completes with the first event past that, an
// event of its namespace past that joins nothing and starts nothing.
func TestSettle(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", nil)
	k1, k2, k3 := s.kid(5152, 2, "sleep"), s.kid(5153, 3, "sleep"), s.kid(5154, 4, "slow")
	s.kill(0, kubectl).
		initExit(10*time.Microsecond, sigvocab.SIGKILL, 0).
		cascade(20*time.Microsecond, k1).
		cascade(30*time.Microsecond, k2).
		cascade(40*time.Microsecond, k3).
		kidExit(50*time.Microsecond, k1, sigvocab.SIGKILL, 0).
		kidExit(400*ms, k2, sigvocab.SIGKILL, 0). // within Settle
		kidExit(501*ms, k3, sigvocab.SIGKILL, 0)  // past it

	e := newEngine(Options{Settle: 500 * ms})
	var done []Episode
	for i := range s.in {
		got := e.Add(&s.in[i].ev, s.in[i].c)
		if i < len(s.in)-1 && len(got) != 0 {
			t.Fatalf("episode completed at event %d, before Settle ran out", i)
		}
		done = append(done, got...)
	}
	if len(done) != 1 {
		t.Fatalf("%d episodes completed by the late exit, want 1", len(done))
	}
	ep := done[0]
	if ep.Outcome != OutcomeKilled || len(ep.CascadeKills) != 3 {
		t.Errorf("outcome %s cascade %d", ep.Outcome, len(ep.CascadeKills))
	}
	exits := 0
	for _, st := range ep.Steps {
		if st.Kind == StepProcessExit {
			exits++
			if st.Target.PID == k3.PID {
				t.Errorf("the exit after Settle joined the episode")
			}
		}
	}
	if exits != 2 {
		t.Errorf("%d process exits, want the 2 within Settle", exits)
	}
	if st := e.Stats(); st.Open != 0 || st.Started != 1 || st.Completed != 1 {
		t.Errorf("stats %+v: the late exit started something", st)
	}
	if left := e.Flush(); len(left) != 0 {
		t.Errorf("Flush returned %d episodes", len(left))
	}

	// Advance completes a settled episode with no further event.
	e = newEngine(Options{Settle: 500 * ms})
	for i := range s.in[:3] {
		e.Add(&s.in[i].ev, s.in[i].c)
	}
	if got := e.Advance(base.Add(400 * ms)); len(got) != 0 {
		t.Errorf("Advance before the deadline completed %d", len(got))
	}
	if got := e.Advance(base.Add(time.Second)); len(got) != 1 || got[0].Outcome != OutcomeKilled {
		t.Errorf("Advance past the deadline: %+v", got)
	}
}

// Without identity.Info: an unshare-made namespace is keyed by its pid
// namespace; host processes and the host's own PID 1 make nothing.
func TestIdentity(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", nil)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).kill(time.Second, kubectl).initExit(time.Second+ms, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Container != (Container{PidNS: nsA}) || ep.Outcome != OutcomeIgnoredByInit {
		t.Errorf("container %+v outcome %s", ep.Container, ep.Outcome)
	}

	e := newEngine(Options{})
	plain := record(t, "TestSigIgnPlainProcess__sig_ign") // a host process
	e.Add(&plain, nil)
	hostInit := newSim(t, sigvocab.HostPidNS, 1, "systemd", nil)
	hostInit.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).initExit(ms, 0, 0)
	for i := range hostInit.in {
		e.Add(&hostInit.in[i].ev, nil)
	}
	// Events of a container with no episode: a child's exit, a signal
	// between its processes, a non-stop signal to its PID 1.
	c := newSim(t, nsB, 6161, "app", dockerInfo(idB, "b", 10))
	kid := c.kid(6162, 5, "worker")
	c.kidExit(0, kid, 0, 0).forward(ms, sigvocab.SIGUSR1, kid, sigvocab.DispHandler).stop(2*ms, sigvocab.SIGHUP, sigvocab.DispHandler, false)
	for i := range c.in {
		e.Add(&c.in[i].ev, c.in[i].c)
	}
	if st := e.Stats(); st.Started != 0 || st.Open != 0 {
		t.Errorf("stats %+v: host processes or non-stop events began episodes", st)
	}

	// Info learnt late joins the same episode, named by the later Info.
	s = newSim(t, nsA, 5151, "sh", nil)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false)
	s.info = dockerInfo(idA, "web", 10)
	s.kill(10*time.Second, runc).initExit(10*time.Second+ms, sigvocab.SIGKILL, 0)
	ep = only(t, newEngine(Options{}), s.in)
	if ep.Container.ID != idA || ep.Container.PidNS != nsA || len(ep.Steps) != 4 {
		t.Errorf("container %+v steps %v", ep.Container, stepKinds(&ep))
	}
}

// A configured stop signal other than TERM/INT/QUIT starts an episode;
// Kubernetes grace period wins over StopTimeout.
func TestConfiguredStopSignalAndGrace(t *testing.T) {
	info := &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "containerd", Name: "httpd", Pod: "web-0", Namespace: "shop"}, StopSignal: sigvocab.SIGWINCH, StopTimeout: 10, GracePeriod: 30}
	s := newSim(t, nsA, 5151, "httpd", info)
	s.stop(0, sigvocab.SIGWINCH, sigvocab.DispHandler, false).
		deliver(ms, sigvocab.SIGWINCH, sigvocab.DispHandler).
		kill(30*time.Second, runc).
		initExit(30*time.Second+ms, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)
	if ep.Outcome != OutcomeHandlerTimeout || ep.StopSignal != sigvocab.SIGWINCH || ep.GracePeriod != 30*time.Second {
		t.Errorf("outcome %s stop %s grace %v", ep.Outcome, ep.StopSignal, ep.GracePeriod)
	}
	if !strings.Contains(ep.Hint, "terminationGracePeriodSeconds") {
		t.Errorf("hint %q does not name the Kubernetes knob", ep.Hint)
	}
	if ep.Container.Pod != "web-0" || ep.Container.Namespace != "shop" {
		t.Errorf("container %+v", ep.Container)
	}
}
