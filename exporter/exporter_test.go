package exporter

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/audit"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func generate(sig sigvocab.Signal, res sigvocab.Result, flags sigvocab.Flags) *sigvocab.Event {
	return &sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sig, Result: res, Flags: flags}
}

func deliver(sig sigvocab.Signal, flags sigvocab.Flags) *sigvocab.Event {
	return &sigvocab.Event{Kind: sigvocab.KindDeliver, Signal: sig, Flags: flags}
}

func exited(code int) *sigvocab.Event {
	return &sigvocab.Event{Kind: sigvocab.KindExit, ExitCode: code}
}

func killed(sig sigvocab.Signal) *sigvocab.Event {
	return &sigvocab.Event{Kind: sigvocab.KindExit, Signal: sig, ExitCode: -1}
}

func oom() *sigvocab.Event { return &sigvocab.Event{Kind: sigvocab.KindOOM} }

// register puts e in a pedantic registry, which checks every collected
// metric against Describe and the label values' validity.
func register(t *testing.T, e *Exporter) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(e); err != nil {
		t.Fatal(err)
	}
	return reg
}

func compare(t *testing.T, reg *prometheus.Registry, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

const (
	helpSignals  = "# HELP sigscope_signals_total Signals generated (signal_generate), by signal and the kernel's result.\n# TYPE sigscope_signals_total counter\n"
	helpPID1     = "# HELP sigscope_pid1_ignored_signals_total Signals a pid namespace's init dropped because it has no handler for them (flag pid1_ignored).\n# TYPE sigscope_pid1_ignored_signals_total counter\n"
	helpCascade  = "# HELP sigscope_pidns_cascade_kills_total SIGKILLs the kernel sent to the processes of a pid namespace because its init exited (flag ns_cascade).\n# TYPE sigscope_pidns_cascade_kills_total counter\n"
	helpExits    = "# HELP sigscope_process_exits_total Process exits the tracer reported: exited (an exit code) or signaled (killed by signal).\n# TYPE sigscope_process_exits_total counter\n"
	helpOOM      = "# HELP sigscope_oom_kills_total Processes the kernel's OOM killer chose as victims.\n# TYPE sigscope_oom_kills_total counter\n"
	helpStops    = "# HELP sigscope_container_stops_total Container stop episodes, by outcome.\n# TYPE sigscope_container_stops_total counter\n"
	helpDuration = "# HELP sigscope_container_stop_duration_seconds Seconds the stop took: from the preStop hook's start, else the stop signal, else the episode's start (no stop signal), to the main process's exit, by outcome.\n# TYPE sigscope_container_stop_duration_seconds histogram\n"
	helpAudit    = "# HELP sigscope_container_pid1_handles_stop_signal 1 when the last audit predicts the container's main process will act on its stop signal (graceful: a handler, a forwarding init, the default action of a non-init), 0 when it will not (dropped, kept blocked, SIG_IGN, or the stop signal is SIGKILL).\n# TYPE sigscope_container_pid1_handles_stop_signal gauge\n"
	helpOverflow = "# HELP sigscope_series_overflow_total Observations counted in a metric's overflow series because it had reached its series cap.\n# TYPE sigscope_series_overflow_total counter\n"
)

func TestEventCounters(t *testing.T) {
	e := New(Options{})
	reg := register(t, e)
	for _, ev := range []*sigvocab.Event{
		// A shell-form stop: SIGTERM dropped by PID 1 twice, then the SIGKILL
		// and the cascade's two SIGKILLs.
		generate(sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.FlagPID1Ignored|sigvocab.FlagCrossNS|sigvocab.FlagNSInit),
		generate(sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.FlagPID1Ignored|sigvocab.FlagCrossNS|sigvocab.FlagNSInit),
		generate(sigvocab.SIGKILL, sigvocab.ResultDelivered, sigvocab.FlagCrossNS|sigvocab.FlagNSInit),
		generate(sigvocab.SIGKILL, sigvocab.ResultDelivered, sigvocab.FlagNSCascade),
		generate(sigvocab.SIGKILL, sigvocab.ResultDelivered, sigvocab.FlagNSCascade),
		// A SIGINT queued while blocked, dequeued by a PID 1 with no handler.
		generate(sigvocab.SIGINT, sigvocab.ResultDelivered, sigvocab.FlagBlocked|sigvocab.FlagNSInit),
		deliver(sigvocab.SIGINT, sigvocab.FlagPID1Ignored),
		deliver(sigvocab.SIGUSR1, 0), // a handled delivery: counted nowhere
		generate(sigvocab.Signal(40), sigvocab.ResultAlreadyPending, 0),
		// Out-of-range values from a corrupt or future record.
		generate(sigvocab.Signal(99), sigvocab.Result(17), 0),
		exited(0), exited(3),
		killed(sigvocab.SIGKILL), killed(sigvocab.SIGKILL), killed(sigvocab.SIGKILL), killed(sigvocab.Signal(13)),
		oom(),
		{Kind: sigvocab.Kind(42)}, // unknown kind: ignored
		nil,
	} {
		e.ObserveEvent(ev, nil)
	}
	compare(t, reg, helpSignals+`
sigscope_signals_total{result="delivered",signal="SIGINT"} 1
sigscope_signals_total{result="delivered",signal="SIGKILL"} 3
sigscope_signals_total{result="ignored",signal="SIGTERM"} 2
sigscope_signals_total{result="already_pending",signal="SIGRTMIN+6"} 1
sigscope_signals_total{result="unknown",signal="unknown"} 1
`+helpPID1+`
sigscope_pid1_ignored_signals_total{signal="SIGINT"} 1
sigscope_pid1_ignored_signals_total{signal="SIGTERM"} 2
`+helpCascade+`
sigscope_pidns_cascade_kills_total 2
`+helpExits+`
sigscope_process_exits_total{reason="exited",signal=""} 2
sigscope_process_exits_total{reason="signaled",signal="SIGKILL"} 3
sigscope_process_exits_total{reason="signaled",signal="SIGPIPE"} 1
`+helpOOM+`
sigscope_oom_kills_total 1
`, "sigscope_signals_total", "sigscope_pid1_ignored_signals_total", "sigscope_pidns_cascade_kills_total",
		"sigscope_process_exits_total", "sigscope_oom_kills_total")
}

// The alerting series exist at 0 before anything happened, so that rate()
// and increase() see their first increment.
func TestSeriesPresentFromStart(t *testing.T) {
	reg := register(t, New(Options{}))
	compare(t, reg, helpPID1+`
sigscope_pid1_ignored_signals_total{signal="SIGTERM"} 0
`+helpCascade+`
sigscope_pidns_cascade_kills_total 0
`+helpOOM+`
sigscope_oom_kills_total 0
`+helpStops+`
sigscope_container_stops_total{outcome="exited"} 0
sigscope_container_stops_total{outcome="graceful"} 0
sigscope_container_stops_total{outcome="handler_timeout"} 0
sigscope_container_stops_total{outcome="ignored"} 0
sigscope_container_stops_total{outcome="ignored_by_init"} 0
sigscope_container_stops_total{outcome="killed"} 0
sigscope_container_stops_total{outcome="oom_killed"} 0
sigscope_container_stops_total{outcome="prestop_timeout"} 0
sigscope_container_stops_total{outcome="unfinished"} 0
`, "sigscope_pid1_ignored_signals_total", "sigscope_pidns_cascade_kills_total", "sigscope_oom_kills_total",
		"sigscope_container_stops_total", "sigscope_signals_total", "sigscope_process_exits_total",
		"sigscope_container_stop_duration_seconds")
}

var t0 = time.Date(2026, 11, 21, 21, 9, 21, 0, time.UTC)

func episode(o timeline.Outcome, stop, exit time.Duration) *timeline.Episode {
	ep := &timeline.Episode{Outcome: o, Start: t0, Container: timeline.Container{Identity: identity.Identity{ID: "3d3243f7f97e0123456789", Name: "web", Runtime: "docker"}}}
	if stop >= 0 {
		ep.StopAt = t0.Add(stop)
		ep.StopSignal = sigvocab.SIGTERM
	}
	if exit >= 0 {
		ep.ExitAt = t0.Add(exit)
	}
	return ep
}

// startUnseen marks ep as a stop that may have begun before tracing did.
func startUnseen(ep *timeline.Episode) *timeline.Episode {
	ep.StartUnseen, ep.TracedSince = true, ep.Start.Add(-time.Second)
	return ep
}

func TestEpisodes(t *testing.T) {
	e := New(Options{})
	reg := register(t, e)
	for _, ep := range []*timeline.Episode{
		episode(timeline.OutcomeIgnoredByInit, 0, 10010*time.Millisecond), // docker stop's 10 s
		episode(timeline.OutcomeIgnoredByInit, 0, 30002*time.Millisecond), // Kubernetes' 30 s
		episode(timeline.OutcomeGraceful, time.Second, 1200*time.Millisecond),
		episode(timeline.OutcomeGraceful, 0, 0),
		episode(timeline.OutcomeExited, -1, 5*time.Second),                        // no stop signal: start to exit
		episode(timeline.OutcomeUnfinished, 0, -1),                                // no exit: counted, no duration
		startUnseen(episode(timeline.OutcomeUnfinished, -1, 10*time.Millisecond)), // its start unknown: no duration
		episode(timeline.OutcomeKilled, 0, 200*time.Second),                       // past the last bucket
		episode(timeline.Outcome("made-up"), 0, time.Second),                      // from a foreign recording
		episode(timeline.OutcomeOOMKillSurvived, -1, -1),                          // no stop: counted apart
		nil,
	} {
		e.ObserveEpisode(ep)
	}
	compare(t, reg, `# HELP sigscope_container_oom_kills_total OOM kills in running containers whose main process lived on: not stops (outcome oom_kill_survived); the stops the OOM killer caused count as sigscope_container_stops_total{outcome="oom_killed"}.
# TYPE sigscope_container_oom_kills_total counter
sigscope_container_oom_kills_total 1
`, "sigscope_container_oom_kills_total")
	compare(t, reg, helpStops+`
sigscope_container_stops_total{outcome="exited"} 1
sigscope_container_stops_total{outcome="graceful"} 2
sigscope_container_stops_total{outcome="handler_timeout"} 0
sigscope_container_stops_total{outcome="ignored"} 0
sigscope_container_stops_total{outcome="ignored_by_init"} 2
sigscope_container_stops_total{outcome="killed"} 1
sigscope_container_stops_total{outcome="oom_killed"} 0
sigscope_container_stops_total{outcome="prestop_timeout"} 0
sigscope_container_stops_total{outcome="unfinished"} 2
sigscope_container_stops_total{outcome="unknown"} 1
`+helpDuration+`
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="0.5"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="1"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="2"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="5"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="10"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="15"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="20"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="30"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="45"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="60"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="90"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="120"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="exited",le="+Inf"} 1
sigscope_container_stop_duration_seconds_sum{outcome="exited"} 5
sigscope_container_stop_duration_seconds_count{outcome="exited"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="0.5"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="1"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="2"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="5"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="10"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="15"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="20"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="30"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="45"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="60"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="90"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="120"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="graceful",le="+Inf"} 2
sigscope_container_stop_duration_seconds_sum{outcome="graceful"} 0.2
sigscope_container_stop_duration_seconds_count{outcome="graceful"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="0.5"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="1"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="2"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="5"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="10"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="15"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="20"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="30"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="45"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="60"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="90"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="120"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="ignored_by_init",le="+Inf"} 2
sigscope_container_stop_duration_seconds_sum{outcome="ignored_by_init"} 40.012
sigscope_container_stop_duration_seconds_count{outcome="ignored_by_init"} 2
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="0.5"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="1"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="2"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="5"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="10"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="15"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="20"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="30"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="45"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="60"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="90"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="120"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="killed",le="+Inf"} 1
sigscope_container_stop_duration_seconds_sum{outcome="killed"} 200
sigscope_container_stop_duration_seconds_count{outcome="killed"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="0.5"} 0
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="1"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="2"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="5"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="10"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="15"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="20"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="30"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="45"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="60"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="90"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="120"} 1
sigscope_container_stop_duration_seconds_bucket{outcome="unknown",le="+Inf"} 1
sigscope_container_stop_duration_seconds_sum{outcome="unknown"} 1
sigscope_container_stop_duration_seconds_count{outcome="unknown"} 1
`, "sigscope_container_stops_total", "sigscope_container_stop_duration_seconds")
}

func TestTracerStatsAndBuildInfo(t *testing.T) {
	stats := tracer.Stats{
		PerKind: tracer.PerKind{
			sigvocab.KindGenerate: {Seen: 110, Emitted: 100, Dropped: 10},
			sigvocab.KindDeliver:  {Seen: 5, Emitted: 5},
			sigvocab.KindExit:     {Seen: 42, Emitted: 40, Dropped: 2},
			sigvocab.KindOOM:      {Seen: 1, Emitted: 1},
		},
		Missed: 3,
	}
	var statsErr error
	unresolved := uint64(2)
	e := New(Options{
		Stats:             func() (tracer.Stats, error) { return stats, statsErr },
		EnrichmentErrors:  func() map[string]uint64 { return map[string]uint64{"docker": 4, "proc": 1} },
		UnresolvedCgroups: func() uint64 { return unresolved },
		Version:           "v0.3.0",
		Revision:          "ee6f455",
	})
	reg := register(t, e)
	compare(t, reg, `
# HELP sigscope_events_total Events the kernel programs wrote to the ring buffer, by event kind.
# TYPE sigscope_events_total counter
sigscope_events_total{event="blocked"} 0
sigscope_events_total{event="deliver"} 5
sigscope_events_total{event="exec"} 0
sigscope_events_total{event="exit"} 40
sigscope_events_total{event="generate"} 100
sigscope_events_total{event="ns_empty"} 0
sigscope_events_total{event="oom"} 1
# HELP sigscope_events_dropped_total Events the kernel programs lost because the ring buffer was full, by event kind.
# TYPE sigscope_events_dropped_total counter
sigscope_events_dropped_total{event="blocked"} 0
sigscope_events_dropped_total{event="deliver"} 0
sigscope_events_dropped_total{event="exec"} 0
sigscope_events_dropped_total{event="exit"} 2
sigscope_events_dropped_total{event="generate"} 10
sigscope_events_dropped_total{event="ns_empty"} 0
sigscope_events_dropped_total{event="oom"} 0
# HELP sigscope_events_missed_total Program runs the kernel skipped because a sigscope program was already running on that CPU (recursion protection).
# TYPE sigscope_events_missed_total counter
sigscope_events_missed_total 3
# HELP sigscope_enrichment_errors_total Errors naming containers, by source (docker, cri, proc, cgroup).
# TYPE sigscope_enrichment_errors_total counter
sigscope_enrichment_errors_total{source="docker"} 4
sigscope_enrichment_errors_total{source="proc"} 1
# HELP sigscope_unresolved_cgroups_total Distinct container-like cgroups (not the root; a pid namespace other than the host's, or a container ID in the path) that no cgroup path pattern and no container runtime resolved to a container: their events carry no container.
# TYPE sigscope_unresolved_cgroups_total counter
sigscope_unresolved_cgroups_total 2
# HELP sigscope_build_info Always 1; the labels say which sigscope build this is.
# TYPE sigscope_build_info gauge
sigscope_build_info{goversion="`+runtime.Version()+`",revision="ee6f455",version="v0.3.0"} 1
`, "sigscope_events_total", "sigscope_events_dropped_total", "sigscope_events_missed_total",
		"sigscope_enrichment_errors_total", "sigscope_unresolved_cgroups_total", "sigscope_build_info")

	// Read at scrape time: the next scrape sees the new counts.
	stats.PerKind[sigvocab.KindGenerate].Emitted, stats.PerKind[sigvocab.KindGenerate].Dropped = 150, 12
	unresolved = 3
	compare(t, reg, `
# HELP sigscope_unresolved_cgroups_total Distinct container-like cgroups (not the root; a pid namespace other than the host's, or a container ID in the path) that no cgroup path pattern and no container runtime resolved to a container: their events carry no container.
# TYPE sigscope_unresolved_cgroups_total counter
sigscope_unresolved_cgroups_total 3
`, "sigscope_unresolved_cgroups_total")
	compare(t, reg, `
# HELP sigscope_events_dropped_total Events the kernel programs lost because the ring buffer was full, by event kind.
# TYPE sigscope_events_dropped_total counter
sigscope_events_dropped_total{event="blocked"} 0
sigscope_events_dropped_total{event="deliver"} 0
sigscope_events_dropped_total{event="exec"} 0
sigscope_events_dropped_total{event="exit"} 2
sigscope_events_dropped_total{event="generate"} 12
sigscope_events_dropped_total{event="ns_empty"} 0
sigscope_events_dropped_total{event="oom"} 0
`, "sigscope_events_dropped_total")

	// A failed read is a scrape error, not zeros that would look like a reset.
	statsErr = errors.New("reading counters: boom")
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Gather with a failing Stats: err = %v, want the stats error", err)
	}
}

func TestNoStatsNoEnrichment(t *testing.T) {
	reg := register(t, New(Options{}))
	n, err := testutil.GatherAndCount(reg, "sigscope_events_total", "sigscope_events_dropped_total",
		"sigscope_events_missed_total", "sigscope_enrichment_errors_total", "sigscope_series_overflow_total",
		"sigscope_unresolved_cgroups_total")
	if err != nil || n != 0 {
		t.Errorf("without Stats/EnrichmentErrors/PodLabels: %d series (err %v), want none", n, err)
	}
}

func TestAudit(t *testing.T) {
	e := New(Options{})
	reg := register(t, e)
	res := func(ns, pod, name, id, prediction string) audit.Result {
		return audit.Result{Container: identity.Summary{Identity: identity.Identity{ID: id, Name: name, Pod: pod, Namespace: ns}}, Prediction: prediction}
	}
	e.SetAudit([]audit.Result{
		res("shop", "web-1", "app", "aaa", audit.IgnoredByInit),
		res("shop", "web-1", "sidecar", "bbb", audit.Graceful),
		res("", "", "ex-trap", "ccc", audit.Graceful),
		res("", "", "ex-kill", "ddd", audit.Killed),
		res("", "", "", "0123456789abcdef0123", audit.Graceful), // no name: its short ID
		res("", "", "unreadable", "eee", audit.Unknown),         // no series
		// Two containers with the same labels (two runtimes): one series,
		// 0 because one of them drops its stop signal.
		res("", "", "twin", "f1", audit.Graceful),
		res("", "", "twin", "f2", audit.IgnoredByInit),
	})
	compare(t, reg, helpAudit+`
sigscope_container_pid1_handles_stop_signal{container="0123456789ab",namespace="",pod=""} 1
sigscope_container_pid1_handles_stop_signal{container="app",namespace="shop",pod="web-1"} 0
sigscope_container_pid1_handles_stop_signal{container="ex-kill",namespace="",pod=""} 0
sigscope_container_pid1_handles_stop_signal{container="ex-trap",namespace="",pod=""} 1
sigscope_container_pid1_handles_stop_signal{container="sidecar",namespace="shop",pod="web-1"} 1
sigscope_container_pid1_handles_stop_signal{container="twin",namespace="",pod=""} 0
`, "sigscope_container_pid1_handles_stop_signal")

	// The next audit replaces the set: stopped containers disappear.
	e.SetAudit([]audit.Result{res("", "", "ex-trap", "ccc", audit.Graceful)})
	compare(t, reg, helpAudit+`
sigscope_container_pid1_handles_stop_signal{container="ex-trap",namespace="",pod=""} 1
`, "sigscope_container_pid1_handles_stop_signal")
}

var (
	webApp  = &identity.Info{Identity: identity.Identity{ID: "aaaa", Name: "app", Pod: "web-1", Namespace: "shop", Runtime: "containerd", PodUID: "u1"}}
	webSide = &identity.Info{Identity: identity.Identity{ID: "bbbb", Name: "sidecar", Pod: "web-1", Namespace: "shop", Runtime: "containerd"}}
	plain   = &identity.Info{Identity: identity.Identity{ID: "3d3243f7f97e0123456789", Name: "ex-shell", Runtime: "docker"}}
	bare    = &identity.Info{Identity: identity.Identity{ID: "905c652eaf05ffffffffffff", Runtime: "docker"}} // runtime unreachable: no name
)

func TestPodLabels(t *testing.T) {
	e := New(Options{PodLabels: true})
	reg := register(t, e)
	term := generate(sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.FlagPID1Ignored)
	e.ObserveEvent(term, webApp)
	e.ObserveEvent(term, webApp)
	e.ObserveEvent(term, plain)
	e.ObserveEvent(generate(sigvocab.SIGTERM, sigvocab.ResultDelivered, 0), webSide)
	e.ObserveEvent(generate(sigvocab.SIGKILL, sigvocab.ResultDelivered, sigvocab.FlagNSCascade), bare)
	e.ObserveEvent(generate(sigvocab.SIGHUP, sigvocab.ResultDelivered, 0), nil) // a host process
	e.ObserveEvent(killed(sigvocab.SIGKILL), webApp)
	e.ObserveEvent(oom(), plain)
	ep := episode(timeline.OutcomeIgnoredByInit, 0, 3*time.Second)
	ep.Container = timeline.Container{Identity: identity.Identity{Name: "app", Pod: "web-1", Namespace: "shop"}}
	e.ObserveEpisode(ep)

	compare(t, reg, helpSignals+`
sigscope_signals_total{container="",namespace="",pod="",result="delivered",signal="SIGHUP"} 1
sigscope_signals_total{container="905c652eaf05",namespace="",pod="",result="delivered",signal="SIGKILL"} 1
sigscope_signals_total{container="sidecar",namespace="shop",pod="web-1",result="delivered",signal="SIGTERM"} 1
sigscope_signals_total{container="app",namespace="shop",pod="web-1",result="ignored",signal="SIGTERM"} 2
sigscope_signals_total{container="ex-shell",namespace="",pod="",result="ignored",signal="SIGTERM"} 1
`+helpPID1+`
sigscope_pid1_ignored_signals_total{container="app",namespace="shop",pod="web-1",signal="SIGTERM"} 2
sigscope_pid1_ignored_signals_total{container="ex-shell",namespace="",pod="",signal="SIGTERM"} 1
`+helpCascade+`
sigscope_pidns_cascade_kills_total{container="905c652eaf05",namespace="",pod=""} 1
`+helpExits+`
sigscope_process_exits_total{container="app",namespace="shop",pod="web-1",reason="signaled",signal="SIGKILL"} 1
`+helpOOM+`
sigscope_oom_kills_total{container="ex-shell",namespace="",pod=""} 1
`+helpStops+`
sigscope_container_stops_total{container="app",namespace="shop",outcome="ignored_by_init",pod="web-1"} 1
`+helpOverflow+`
sigscope_series_overflow_total{metric="sigscope_container_oom_kills_total"} 0
sigscope_series_overflow_total{metric="sigscope_container_stop_duration_seconds"} 0
sigscope_series_overflow_total{metric="sigscope_container_stops_total"} 0
sigscope_series_overflow_total{metric="sigscope_pidns_cascade_kills_total"} 0
sigscope_series_overflow_total{metric="sigscope_oom_kills_total"} 0
sigscope_series_overflow_total{metric="sigscope_pid1_ignored_signals_total"} 0
sigscope_series_overflow_total{metric="sigscope_process_exits_total"} 0
sigscope_series_overflow_total{metric="sigscope_signals_total"} 0
sigscope_series_overflow_total{metric="sigscope_stop_connections_total"} 0
sigscope_series_overflow_total{metric="sigscope_stop_endpoint_lag_seconds"} 0
sigscope_series_overflow_total{metric="sigscope_stop_probe_connections_total"} 0
`, "sigscope_signals_total", "sigscope_pid1_ignored_signals_total", "sigscope_pidns_cascade_kills_total",
		"sigscope_process_exits_total", "sigscope_oom_kills_total", "sigscope_container_stops_total",
		"sigscope_series_overflow_total")
	if n, _ := testutil.GatherAndCount(reg, "sigscope_container_stop_duration_seconds"); n != 1 {
		t.Errorf("stop duration series: %d, want 1", n)
	}
}

// A workload that makes containers (or renames itself) without end cannot
// grow the exporter past MaxSeries per metric.
func TestSeriesCap(t *testing.T) {
	e := New(Options{PodLabels: true, MaxSeries: 3})
	reg := register(t, e)
	infos := make([]*identity.Info, 10)
	for i := range infos {
		infos[i] = &identity.Info{Identity: identity.Identity{ID: fmt.Sprintf("id%d", i), Name: "c", Pod: fmt.Sprintf("p%d", i), Namespace: "hostile"}}
	}
	term := generate(sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.FlagPID1Ignored)
	for _, c := range infos {
		e.ObserveEvent(term, c)
		ep := episode(timeline.OutcomeIgnoredByInit, 0, 30*time.Second)
		ep.Container = timeline.Container{Identity: identity.Identity{Name: c.Name, Pod: c.Pod, Namespace: c.Namespace}}
		e.ObserveEpisode(ep)
	}
	// Series made before the cap keep counting.
	e.ObserveEvent(term, infos[0])
	compare(t, reg, helpPID1+`
sigscope_pid1_ignored_signals_total{container="_overflow",namespace="_overflow",pod="_overflow",signal="_overflow"} 7
sigscope_pid1_ignored_signals_total{container="c",namespace="hostile",pod="p0",signal="SIGTERM"} 2
sigscope_pid1_ignored_signals_total{container="c",namespace="hostile",pod="p1",signal="SIGTERM"} 1
sigscope_pid1_ignored_signals_total{container="c",namespace="hostile",pod="p2",signal="SIGTERM"} 1
`+helpOverflow+`
sigscope_series_overflow_total{metric="sigscope_container_oom_kills_total"} 0
sigscope_series_overflow_total{metric="sigscope_container_stop_duration_seconds"} 7
sigscope_series_overflow_total{metric="sigscope_container_stops_total"} 7
sigscope_series_overflow_total{metric="sigscope_pidns_cascade_kills_total"} 0
sigscope_series_overflow_total{metric="sigscope_oom_kills_total"} 0
sigscope_series_overflow_total{metric="sigscope_pid1_ignored_signals_total"} 7
sigscope_series_overflow_total{metric="sigscope_process_exits_total"} 0
sigscope_series_overflow_total{metric="sigscope_signals_total"} 7
sigscope_series_overflow_total{metric="sigscope_stop_connections_total"} 0
sigscope_series_overflow_total{metric="sigscope_stop_endpoint_lag_seconds"} 0
sigscope_series_overflow_total{metric="sigscope_stop_probe_connections_total"} 0
`, "sigscope_pid1_ignored_signals_total", "sigscope_series_overflow_total")
	for _, name := range []string{"sigscope_signals_total", "sigscope_pid1_ignored_signals_total", "sigscope_container_stops_total", "sigscope_container_stop_duration_seconds"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 4 {
			t.Errorf("%s: %d series (err %v), want 3 and the overflow", name, n, err)
		}
	}
	if got := testutil.ToFloat64(collectorFor(e, "sigscope_container_stops_total", "_overflow")); got != 7 {
		t.Errorf("stops overflow = %v, want 7", got)
	}
}

// collectorFor narrows e to one series of one metric, for testutil.ToFloat64.
func collectorFor(e *Exporter, name string, labelValues ...string) prometheus.Collector {
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		all := make(chan prometheus.Metric, 256)
		go func() { e.Collect(all); close(all) }()
		for m := range all {
			if !strings.Contains(m.Desc().String(), `"`+name+`"`) {
				continue
			}
			if containsAll(metricLabels(m), labelValues) {
				ch <- m
			}
		}
	})
}
