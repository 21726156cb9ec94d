package e2e

import (
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// Stops whose verdict depends on how PID 1 handles the stop signal: real
// inits (tini, catatonit), a handler init that forwards (fwdinit), a shell
// that forwards, an init that blocks SIGTERM, a stop signal PID 1 does not
// handle, and a container whose main process is not a namespace init
// (--pid container:...). Each reads the audit's prediction before the stop,
// runs `sigscope timeline` during it, and records the kernel's stream of
// that stop (`sigscope trace`), written to episodes/timeline/testdata/streams/ when
// SIGSCOPE_RECORD_STREAMS names that directory (test/e2e/testdata/record.sh).

// stopCase is one scenario.
type stopCase struct {
	name   string   // the container's name
	stream string   // the recording's file name, without .jsonl
	args   []string // docker run arguments after the name
	// ready waits until PID 1 is set up (its handlers, masks, child), given
	// the main process's host pid.
	ready   func(t *testing.T, name string, pid int)
	timeout string // docker stop -t

	prediction string // the audit's, before the stop
	signal     string // the stop signal, in the audit and the episode
	source     string // the audit's source of PID 1's masks, when checked
	outcome    string
	exitStatus int  // docker's exit code, and the episode's exit_status
	killed     bool // the episode has a SIGKILL to PID 1 (kill_at)
	cascade    int  // the episode's cascade kills

	// Checked when set:
	runtime string   // the episode's main.runtime
	hint    []string // what the episode's hint says (substrings)
	// summary are substrings of the outcome line of `sigscope timeline`'s
	// text output, run beside the JSON one during the stop.
	summary []string

	// engine runs the scenario; nil: the host's Docker.
	engine *engine
}

// stopResult is what runStopResult saw.
type stopResult struct {
	eps   []episode // every episode the timeline printed
	ep    episode   // the container's
	audit auditLine // before the stop
	code  string    // docker's exit code
	text  []string  // the container's episode in the text output (with summary)
}

// runStop runs the scenario and returns every episode the timeline printed.
func runStop(t *testing.T, c stopCase) []episode {
	t.Helper()
	return runStopResult(t, c).eps
}

// runStopResult runs the scenario and returns what it saw.
func runStopResult(t *testing.T, c stopCase) stopResult {
	t.Helper()
	e := c.engine
	if e == nil {
		e = hostEngine
	}
	id := e.runContainer(t, c.name, c.args...)
	pid := e.mainPID(t, c.name)
	if c.ready != nil {
		c.ready(t, c.name, pid)
	}
	pidns := pidNSOf(t, pid)

	a := e.auditOf(t, id)
	if a.Prediction != c.prediction || a.StopSignal != c.signal {
		t.Errorf("audit before the stop: prediction %s stop_signal %s, want %s %s; %+v", a.Prediction, a.StopSignal, c.prediction, c.signal, a)
	}
	if c.source != "" && a.Source != c.source {
		t.Errorf("audit before the stop: source %q, want %q (%s sleeps in sigtimedwait: only the kernel's real_blocked shows it waits for SIGTERM); %+v",
			a.Source, c.source, a.PID1.Cmdline, a)
	}

	l := e.startTimeline(t)
	var lt live
	if len(c.summary) > 0 {
		lt = e.startTimelineText(t)
	}
	rec := e.startTrace(t, "--signals", "default")
	stop := []string{"stop"}
	if c.timeout != "" {
		stop = append(stop, "-t", c.timeout)
	}
	start := time.Now()
	e.docker(t, append(stop, c.name)...)
	took := time.Since(start)
	code := e.exitCode(t, c.name)
	eps := l.stop(t, id)
	var text []string
	if len(c.summary) > 0 {
		text = lt.stopText(t, c.name)
	}
	lines := rec.stop(t)

	stream := streamOf(t, lines, pidns, id)
	var described []string
	dropped := 0 // lines `trace --container NAME` would not show
	for _, line := range stream {
		described = append(described, describe(t, line))
		tl := parseTraceLine(t, line)
		if (tl.Container == nil || tl.Container.ID != id) && (tl.SenderContainer == nil || tl.SenderContainer.ID != id) {
			dropped++
			described[len(described)-1] += "   [not " + c.name + "'s: --container drops it]"
		}
	}
	t.Logf("%s took %v, exit %s; kernel stream (pid ns %d, %d of %d lines, %d not the container's):\n%s",
		strings.Join(append([]string{"docker"}, stop...), " "), took.Round(time.Millisecond), code, pidns, len(stream), len(lines), dropped, strings.Join(described, "\n"))
	if e != hostEngine {
		c.stream += "_" + strings.ReplaceAll(e.name, "-", "_")
	}
	saveStream(t, c.stream, stream)

	if code != strconv.Itoa(c.exitStatus) {
		t.Errorf("docker reports exit %s, want %d", code, c.exitStatus)
	}
	ep := episodeOf(t, eps, id)
	t.Logf("episode: %s", ep.raw)
	if ep.Outcome != c.outcome || ep.StopSignal != c.signal {
		t.Errorf("episode: outcome %q stop_signal %q, want %q %q", ep.Outcome, ep.StopSignal, c.outcome, c.signal)
	}
	if ep.ExitStatus == nil || *ep.ExitStatus != c.exitStatus {
		t.Errorf("episode exit_status %v, want %d", deref(ep.ExitStatus), c.exitStatus)
	}
	if got := ep.KillAt != ""; got != c.killed {
		t.Errorf("episode kill_at %q, want a SIGKILL to PID 1: %v", ep.KillAt, c.killed)
	}
	if c.killed {
		within(t, "kill_after_s", ep.KillAfter, 1.8, 6)
	}
	if len(ep.CascadeKills) != c.cascade {
		t.Errorf("episode cascade_kills %+v, want %d", ep.CascadeKills, c.cascade)
	}
	if docker, err := strconv.Atoi(code); err == nil && ep.ExitStatus != nil && *ep.ExitStatus != docker {
		t.Errorf("episode exit_status %d, but docker reports %d", *ep.ExitStatus, docker)
	}
	if c.runtime != "" && ep.Main.Runtime != c.runtime {
		t.Errorf("episode main.runtime %q, want %q (main %+v)", ep.Main.Runtime, c.runtime, ep.Main)
	}
	for _, h := range c.hint {
		if !strings.Contains(ep.Hint, h) {
			t.Errorf("episode hint %q does not say %q", ep.Hint, h)
		}
	}
	if len(c.summary) > 0 {
		t.Logf("text timeline:\n%s", strings.Join(text, "\n"))
		outcome := outcomeLine(text)
		for _, s := range c.summary {
			if !strings.Contains(outcome, s) {
				t.Errorf("text timeline's outcome line %q does not say %q", outcome, s)
			}
		}
	}
	return stopResult{eps: eps, ep: ep, audit: a, code: code, text: text}
}

func deref(p *int) any {
	if p == nil {
		return "absent"
	}
	return *p
}

func childReady(t *testing.T, _ string, pid int) { testutil.WaitChildren(t, pid, 1) }

// docker run --init: PID 1 is docker-init (tini). It blocks every signal
// and waits for them with sigtimedwait, so it has no handler, yet the
// kernel queues the SIGTERM for it (sig_ignored() is false for a signal in
// real_blocked); tini forwards it to sleep, which dies of it, and exits 143.
func TestInitDockerInit(t *testing.T) {
	img := initsImage(t)
	runStop(t, stopCase{
		name: "e2e-init-tini", stream: "docker_init_tini",
		args:  []string{"--init", img, "sleep", "1000"},
		ready: childReady, timeout: "2",
		prediction: "graceful", signal: "SIGTERM", source: "kernel",
		outcome: "graceful", exitStatus: 143,
	})
}

// A container that joins another's pid namespace (--pid container:...):
// its main process is not PID 1 of the namespace, so SIGTERM's default
// action kills it (143), and the stop is that container's own episode, not
// one of the namespace's owner. On every engine.
func TestInitSharedPidNS(t *testing.T) {
	forEngine(t, func(t *testing.T, e *engine) {
		img := e.image(t, initsImage(t))
		owner := e.runContainer(t, "e2e-init-pidowner", img, "sleep", "1000")
		eps := runStop(t, stopCase{
			name: "e2e-init-pidsharer", stream: "shared_pidns", engine: e,
			args:    []string{"--pid", "container:e2e-init-pidowner", img, "sleep", "1000"},
			timeout: "2",
			// The main process is not a namespace init: SIGTERM's default
			// action applies.
			prediction: "graceful", signal: "SIGTERM",
			outcome: "graceful", exitStatus: 143,
		})
		if st := e.docker(t, "inspect", "-f", "{{.State.Running}}", "e2e-init-pidowner"); st != "true" {
			t.Errorf("the pid namespace's owner is no longer running (%s)", st)
		}
		for _, ep := range eps {
			if ep.Container.ID == owner {
				t.Errorf("an episode for the namespace's owner, which was not stopped: %s", ep.raw)
			}
		}
	})
}

// The same with a main process that leaves children behind: a shell that
// traps TERM and exits 0 while its two sleeps live on. With no pid
// namespace of its own there is no cascade; the runtime SIGKILLs what is
// left in the container's cgroup after the main process exits: runc 1.1
// on cgroup v1 with kill(2), one per process (measured: a few ms later);
// runc 1.2 and later by writing cgroup.kill, which the kernel turns into
// one SIGKILL per process, flagged cgroup_kill. The verdict is the main
// process's: graceful, exit 0, and those kills are neither a kill of the
// main process nor cascade kills; on every engine.
func TestInitSharedPidNSLeftover(t *testing.T) {
	forEngine(t, func(t *testing.T, e *engine) {
		img := e.image(t, initsImage(t))
		owner := e.runContainer(t, "e2e-init-pidowner", img, "sleep", "1000")
		r := runStopResult(t, stopCase{
			name: "e2e-init-pidsharer", stream: "shared_pidns_leftover", engine: e,
			args: []string{"--pid", "container:e2e-init-pidowner", img, "sh", "-c", `trap "exit 0" TERM; sleep 1000 & sleep 1000 & wait`},
			ready: func(t *testing.T, _ string, pid int) {
				testutil.WaitSigMask(t, pid, "SigCgt", syscall.SIGTERM)
			},
			timeout:    "2",
			prediction: "graceful", signal: "SIGTERM",
			outcome: "graceful", exitStatus: 0,
		})
		for _, ep := range r.eps {
			if ep.Container.ID == owner {
				t.Errorf("an episode for the namespace's owner, which was not stopped: %s", ep.raw)
			}
		}
		// The two sleeps' SIGKILLs are steps of the episode, each flagged
		// cgroup_kill exactly when the runtime used cgroup.kill.
		var kills []string
		for _, st := range r.ep.Steps {
			if st.Kind != "sigkill" {
				continue
			}
			kills = append(kills, st.Text)
			if got := slices.Contains(st.Flags, "cgroup_kill"); got != e.cgroupKill {
				t.Errorf("sigkill step %q flags %v: cgroup_kill %v, want %v (runc of %s)", st.Text, st.Flags, got, e.cgroupKill, e.name)
			}
		}
		if len(kills) != 2 {
			t.Errorf("%d sigkill steps %q, want the runtime's SIGKILL to each of the 2 sleeps", len(kills), kills)
		}
	})
}

// PID 1 blocks SIGTERM and has no handler: the kernel queues runc's
// SIGTERM and it is never acted on; SIGKILL after the timeout.
func TestInitSigblock(t *testing.T) {
	img := initsImage(t)
	runStop(t, stopCase{
		name: "e2e-init-sigblock", stream: "sigblock",
		args: []string{img, "/sigblock"},
		ready: func(t *testing.T, _ string, pid int) {
			testutil.WaitSigMask(t, pid, "SigBlk", syscall.SIGTERM)
		},
		timeout:    "2",
		prediction: "ignored_by_init", signal: "SIGTERM",
		outcome: "ignored_by_init", exitStatus: 137, killed: true,
	})
}

// The stop signal is SIGUSR1 and PID 1 (a shell) traps only TERM: the
// kernel drops the SIGUSR1, SIGKILL after the timeout, the cascade kills
// sleep.
func TestInitStopSignalUSR1(t *testing.T) {
	img := initsImage(t)
	runStop(t, stopCase{
		name: "e2e-init-usr1", stream: "stop_signal_usr1",
		args:    []string{"--stop-signal", "SIGUSR1", img, "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"},
		timeout: "2",
		// runContainer waits for the child; the trap comes before it.
		prediction: "ignored_by_init", signal: "SIGUSR1",
		outcome: "ignored_by_init", exitStatus: 137, killed: true, cascade: 1,
	})
}

// A shell PID 1 that traps TERM, forwards it to its child, waits for it
// and exits 0: graceful, and nothing left for the cascade.
func TestInitShellForward(t *testing.T) {
	img := initsImage(t)
	runStop(t, stopCase{
		name: "e2e-init-shfwd", stream: "shell_forward",
		args: []string{img, "sh", "-c", `sleep 1000 & c=$!; trap "kill -TERM \$c; wait \$c; exit 0" TERM; wait`},
		ready: func(t *testing.T, _ string, pid int) {
			// The trap comes after the child: wait for the trap itself.
			testutil.WaitSigMask(t, pid, "SigCgt", syscall.SIGTERM)
		},
		timeout:    "2",
		prediction: "graceful", signal: "SIGTERM",
		outcome: "graceful", exitStatus: 0,
	})
}

// fwdinit: a handler init that forwards SIGTERM to its child with kill()
// and exits 128 + the child's signal.
func TestInitFwdinit(t *testing.T) {
	img := initsImage(t)
	runStop(t, stopCase{
		name: "e2e-init-fwdinit", stream: "fwdinit",
		args:  []string{img, "/fwdinit", "sleep", "1000"},
		ready: childReady, timeout: "2",
		prediction: "graceful", signal: "SIGTERM",
		outcome: "graceful", exitStatus: 143,
	})
}

// catatonit: blocks every signal and reads them from a signalfd, forwards
// SIGTERM to its child and exits when the child has.
func TestInitCatatonit(t *testing.T) {
	img := initsImage(t)
	runStop(t, stopCase{
		name: "e2e-init-catatonit", stream: "catatonit",
		args:  []string{img, "/usr/bin/catatonit", "--", "sleep", "1000"},
		ready: childReady, timeout: "2",
		prediction: "graceful", signal: "SIGTERM",
		outcome: "graceful", exitStatus: 143,
	})
}
