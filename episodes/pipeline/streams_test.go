package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/episodes/pipeline/pipelinetest"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The recorded kernel streams of real docker stops (episodes/timeline/testdata/
// streams, made by test/e2e/testdata/record.sh) replayed offline through the
// engine: the verdicts the end-to-end tests see live, without root.
func TestRecordedStops(t *testing.T) {
	cases := []struct {
		file       string
		outcome    timeline.Outcome
		verdict    sigvocab.Fate
		stopSignal sigvocab.Signal
		exit       int
		mainIsInit bool
		fwdInit    string
		cascade    int
		forwards   int // forward steps
	}{
		{"docker_init_tini", timeline.OutcomeGraceful, sigvocab.FateSigwait, sigvocab.SIGTERM, 143, true, "docker-init", 0, 1},
		{"shared_pidns", timeline.OutcomeGraceful, sigvocab.FateDefault, sigvocab.SIGTERM, 143, false, "", 0, 0},
		{"shared_pidns_leftover", timeline.OutcomeGraceful, sigvocab.FateHandler, sigvocab.SIGTERM, 0, false, "", 0, 0},
		{"sigblock", timeline.OutcomeIgnoredByInit, sigvocab.FateBlocked, sigvocab.SIGTERM, 137, true, "", 0, 0},
		{"stop_signal_usr1", timeline.OutcomeIgnoredByInit, sigvocab.FateDroppedInit, sigvocab.SIGUSR1, 137, true, "", 1, 0},
		{"shell_forward", timeline.OutcomeGraceful, sigvocab.FateHandler, sigvocab.SIGTERM, 0, true, "", 0, 1},
		{"fwdinit", timeline.OutcomeGraceful, sigvocab.FateHandler, sigvocab.SIGTERM, 143, true, "", 0, 1},
		{"catatonit", timeline.OutcomeGraceful, sigvocab.FateBlocked, sigvocab.SIGTERM, 143, true, "catatonit", 0, 1},
		// Language runtimes as the main process (test/e2e/runtimes_test.go).
		{"runtime_node", timeline.OutcomeIgnoredByInit, sigvocab.FateHandler, sigvocab.SIGTERM, 137, true, "", 0, 0},
		{"runtime_node_handler", timeline.OutcomeGraceful, sigvocab.FateHandler, sigvocab.SIGTERM, 0, true, "", 0, 0},
		{"runtime_node_init", timeline.OutcomeGraceful, sigvocab.FateSigwait, sigvocab.SIGTERM, 143, true, "docker-init", 0, 1},
		{"runtime_python", timeline.OutcomeIgnoredByInit, sigvocab.FateDroppedInit, sigvocab.SIGTERM, 137, true, "", 0, 0},
		{"runtime_python_handler", timeline.OutcomeGraceful, sigvocab.FateHandler, sigvocab.SIGTERM, 0, true, "", 0, 0},
		{"runtime_python_init", timeline.OutcomeGraceful, sigvocab.FateSigwait, sigvocab.SIGTERM, 143, true, "docker-init", 0, 1},
		{"runtime_java", timeline.OutcomeGraceful, sigvocab.FateHandler, sigvocab.SIGTERM, 143, true, "", 0, 0},
		{"runtime_java_xrs", timeline.OutcomeIgnoredByInit, sigvocab.FateDroppedInit, sigvocab.SIGTERM, 137, true, "", 0, 0},
		{"runtime_java_handler", timeline.OutcomeGraceful, sigvocab.FateHandler, sigvocab.SIGTERM, 0, true, "", 0, 0},
		{"runtime_java_init", timeline.OutcomeGraceful, sigvocab.FateSigwait, sigvocab.SIGTERM, 143, true, "docker-init", 0, 1},
		{"runtime_go", timeline.OutcomeGraceful, sigvocab.FateHandler, sigvocab.SIGTERM, 2, true, "", 0, 0},
		{"runtime_go_handler", timeline.OutcomeGraceful, sigvocab.FateHandler, sigvocab.SIGTERM, 0, true, "", 0, 0},
		{"runtime_go_init", timeline.OutcomeGraceful, sigvocab.FateSigwait, sigvocab.SIGTERM, 143, true, "docker-init", 0, 1},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			ep := replay(t, c.file)
			forwards := 0
			for _, s := range ep.Steps {
				if s.Kind == timeline.StepForward {
					forwards++
				}
			}
			if ep.Outcome != c.outcome || ep.StopVerdict != c.verdict || ep.StopSignal != c.stopSignal || ep.ExitStatus != c.exit ||
				ep.MainIsInit != c.mainIsInit || ep.ForwardingInit != c.fwdInit || len(ep.CascadeKills) != c.cascade || forwards != c.forwards {
				t.Errorf("got %s verdict %s signal %s exit %d init %v fwd %q cascade %d forwards %d\nwant %s %s %s %d %v %q %d %d\nsummary: %s",
					ep.Outcome, ep.StopVerdict, ep.StopSignal, ep.ExitStatus, ep.MainIsInit, ep.ForwardingInit, len(ep.CascadeKills), forwards,
					c.outcome, c.verdict, c.stopSignal, c.exit, c.mainIsInit, c.fwdInit, len(ep.CascadeKills), c.forwards, ep.Summary())
			}
			if ep.Container.Runtime != "docker" || ep.Container.Name == "" {
				t.Errorf("container %+v", ep.Container)
			}
		})
	}
}

// replay replays a recorded stream (pipeline.Replay, through a fresh
// engine) and returns its only episode.
func replay(t *testing.T, file string) timeline.Episode {
	t.Helper()
	eps := pipelinetest.StreamEpisodes(t, file+".jsonl")
	if len(eps) != 1 {
		t.Fatalf("%s: %d episodes, want 1: %+v", file, len(eps), eps)
	}
	return eps[0]
}

// The handlers that re-raise, as the kernel recorded them: Node.js's
// one-shot handler (queued while blocked in the handler, dropped when it
// returned) and the Go runtime's (dropped at once, then exit 2); JVM's
// handler and a Node.js listener do not re-raise.
func TestRecordedReraise(t *testing.T) {
	for file, want := range map[string]sigvocab.Fate{
		"runtime_node":         sigvocab.FateDroppedInit,
		"runtime_go":           sigvocab.FateDroppedInit,
		"runtime_node_handler": sigvocab.FateUnknown,
		"runtime_java":         sigvocab.FateUnknown,
	} {
		if ep := replay(t, file); ep.ReraiseVerdict != want {
			t.Errorf("%s: reraise_verdict %s, want %s; %s", file, ep.ReraiseVerdict, want, ep.Summary())
		}
	}
	// The Go binary's runtime comes from the recording's main_runtime (the
	// resolver read its executable); Node.js's from its command name.
	for file, want := range map[string]langrt.Runtime{"runtime_go": langrt.Go, "runtime_node": langrt.NodeJS, "runtime_java": langrt.JVM, "runtime_python": langrt.CPython} {
		if ep := replay(t, file); ep.Main.Runtime != want {
			t.Errorf("%s: main runtime %q, want %q", file, ep.Main.Runtime, want)
		}
	}
	if ep := replay(t, "runtime_go"); !strings.Contains(ep.Hint, "signal.NotifyContext") {
		t.Errorf("runtime_go: hint %q does not name signal.NotifyContext", ep.Hint)
	}
}

// docker stop -t 3 of a container whose StopTimeout is 10 was given 3 s,
// not its StopTimeout; docker stop of one with --stop-timeout 2 was given
// its StopTimeout.
func TestRecordedAppliedGrace(t *testing.T) {
	if ep := replay(t, "docker_stop_t3"); ep.GracePeriod != 0 || ep.StopTimeout != 10*time.Second {
		t.Errorf("docker stop -t 3: grace %v stop timeout %v, want none and 10s; %s", ep.GracePeriod, ep.StopTimeout, ep.Summary())
	}
	if ep := replay(t, "docker_stop_timeout2"); ep.GracePeriod != 2*time.Second || ep.StopTimeout != 2*time.Second {
		t.Errorf("--stop-timeout 2: grace %v stop timeout %v, want 2s 2s; %s", ep.GracePeriod, ep.StopTimeout, ep.Summary())
	}
}
