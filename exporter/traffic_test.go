package exporter

import (
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

const helpConnections = `# HELP sigscope_stop_connections_total TCP connections of stopping containers, by fate (accepted, closed, reset_sent, reset_received, cut, refused, unanswered, after_close, idle_at_exit, undecided; the namespace's own calls: out_refused, out_reset, self_refused; lost requests: refused, reset_sent, cut, unanswered, after_close) and the stop's outcome, as the kernel counted them from the stop signal until the stop was over; a pod's namespace is counted once per stop, whichever of its containers' episodes carry it.
# TYPE sigscope_stop_connections_total counter`

// An episode's connection counts are added by kind and outcome; the same
// read on a second container of the pod is not added again; a kind the
// kernel could not count and counts never read add nothing.
func TestStopConnections(t *testing.T) {
	e := New(Options{})
	reg := register(t, e)
	read := time.Unix(1700000000, 0)
	traffic := func(netns uint32, until time.Time, seesRefused bool, n ...uint64) *timeline.Traffic {
		tr := &timeline.Traffic{NetNS: netns, Since: until.Add(-3 * time.Second), Until: until, SeesRefused: seesRefused}
		for k, v := range n {
			tr.Counts[k].N = v
		}
		return tr
	}
	// accepted, closed, reset_sent, reset_received, cut, refused, listener_closed,
	// unanswered, after_close, idle_at_exit, undecided
	a := episode(timeline.OutcomeHandlerTimeout, 0, 30*time.Second)
	a.Traffic = traffic(7, read, true, 12, 9, 1, 2, 3, 40, 1)
	e.ObserveEpisode(a)
	sidecar := episode(timeline.OutcomeGraceful, 0, time.Second)
	sidecar.Traffic = traffic(7, read, true, 12, 9, 1, 2, 3, 40, 1) // the same pod's read
	e.ObserveEpisode(sidecar)
	old := episode(timeline.OutcomeGraceful, 0, time.Second)
	old.Traffic = traffic(8, read, false, 5, 5, 0, 0, 0, 0, 0) // refused unknown
	e.ObserveEpisode(old)
	// A kernel that tells who spoke last: its kinds too.
	race := episode(timeline.OutcomeGraceful, 0, time.Second)
	race.Traffic = traffic(10, read, true, 3, 1, 0, 0, 0, 0, 1, 9, 2, 4, 1)
	race.Traffic.SeesLastSpeaker = true
	e.ObserveEpisode(race)
	unread := episode(timeline.OutcomeKilled, 0, time.Second)
	unread.Traffic = &timeline.Traffic{NetNS: 9, Unread: "the trace ended"}
	e.ObserveEpisode(unread)
	compare(t, reg, helpConnections+`
sigscope_stop_connections_total{kind="accepted",outcome="graceful"} 8
sigscope_stop_connections_total{kind="accepted",outcome="handler_timeout"} 12
sigscope_stop_connections_total{kind="after_close",outcome="graceful"} 2
sigscope_stop_connections_total{kind="closed",outcome="graceful"} 6
sigscope_stop_connections_total{kind="closed",outcome="handler_timeout"} 9
sigscope_stop_connections_total{kind="cut",outcome="graceful"} 0
sigscope_stop_connections_total{kind="cut",outcome="handler_timeout"} 3
sigscope_stop_connections_total{kind="idle_at_exit",outcome="graceful"} 4
sigscope_stop_connections_total{kind="out_refused",outcome="graceful"} 0
sigscope_stop_connections_total{kind="out_reset",outcome="graceful"} 0
sigscope_stop_connections_total{kind="refused",outcome="graceful"} 0
sigscope_stop_connections_total{kind="refused",outcome="handler_timeout"} 40
sigscope_stop_connections_total{kind="reset_received",outcome="graceful"} 0
sigscope_stop_connections_total{kind="reset_received",outcome="handler_timeout"} 2
sigscope_stop_connections_total{kind="reset_sent",outcome="graceful"} 0
sigscope_stop_connections_total{kind="reset_sent",outcome="handler_timeout"} 1
sigscope_stop_connections_total{kind="self_refused",outcome="graceful"} 0
sigscope_stop_connections_total{kind="unanswered",outcome="graceful"} 9
sigscope_stop_connections_total{kind="undecided",outcome="graceful"} 1
`, "sigscope_stop_connections_total")
}

// The endpoint lag: one observation per stop, the earliest change over its
// Services after the deletion; a stop without endpoints observes nothing.
func TestEndpointLag(t *testing.T) {
	e := New(Options{})
	reg := register(t, e)
	at := func(d time.Duration) *time.Duration { return &d }
	ep := episode(timeline.OutcomeGraceful, 0, time.Second)
	ep.Endpoints = []timeline.EndpointChange{{Service: "shop/web", AfterDeletion: at(300 * time.Millisecond)}, {Service: "shop/admin", AfterDeletion: at(80 * time.Millisecond)}}
	e.ObserveEpisode(ep)
	e.ObserveEpisode(episode(timeline.OutcomeGraceful, 0, time.Second))
	compare(t, reg, `# HELP sigscope_stop_endpoint_lag_seconds Seconds from a pod's deletion to its endpoint's first change (not ready, not serving, terminating, removed) in the EndpointSlices of the Services that list it, as the agent saw them, one observation per stop; negative lags are observed as 0.
# TYPE sigscope_stop_endpoint_lag_seconds histogram
sigscope_stop_endpoint_lag_seconds_bucket{le="0.05"} 0
sigscope_stop_endpoint_lag_seconds_bucket{le="0.1"} 1
sigscope_stop_endpoint_lag_seconds_bucket{le="0.25"} 1
sigscope_stop_endpoint_lag_seconds_bucket{le="0.5"} 1
sigscope_stop_endpoint_lag_seconds_bucket{le="1"} 1
sigscope_stop_endpoint_lag_seconds_bucket{le="2"} 1
sigscope_stop_endpoint_lag_seconds_bucket{le="5"} 1
sigscope_stop_endpoint_lag_seconds_bucket{le="10"} 1
sigscope_stop_endpoint_lag_seconds_bucket{le="30"} 1
sigscope_stop_endpoint_lag_seconds_bucket{le="+Inf"} 1
sigscope_stop_endpoint_lag_seconds_sum 0.08
sigscope_stop_endpoint_lag_seconds_count 1
`, "sigscope_stop_endpoint_lag_seconds")
}

const helpProbeConnections = `# HELP sigscope_stop_probe_connections_total TCP connections the kubelet's probes made to stopping containers, by fate (the kinds of sigscope_stop_connections_total) and the stop's outcome: counted apart from the clients' and in none of sigscope_stop_connections_total, where the agent told them apart; a pod's namespace is counted once per stop, whichever of its containers' episodes carry it.
# TYPE sigscope_stop_probe_connections_total counter`

// The kubelet's probes' connections are added apart, by kind and outcome,
// by the clients' counter's rules: once per namespace and read (the pod's
// second container adds nothing), only the kinds the kernel could count,
// nothing when the counts were not read; and nothing at all when they were
// not told apart (Probes nil). The clients' counter never has them.
func TestStopProbeConnections(t *testing.T) {
	e := New(Options{})
	reg := register(t, e)
	read := time.Unix(1700000000, 0)
	probes := func(n ...uint64) *[sigvocab.NumNetKinds]uint64 {
		var p [sigvocab.NumNetKinds]uint64
		copy(p[:], n)
		return &p
	}
	// A pod's two containers, one read: the clients reset, the probes
	// refused (accepted, closed, reset_sent, reset_received, cut, refused).
	app := episode(timeline.OutcomeHandlerTimeout, 0, 30*time.Second)
	app.Traffic = &timeline.Traffic{NetNS: 7, Since: read.Add(-3 * time.Second), Until: read, SeesRefused: true, SeesLastSpeaker: true,
		Probes: probes(4, 3, 0, 0, 0, 2)}
	app.Traffic.Counts[sigvocab.NetAccepted].N = 10
	app.Traffic.Counts[sigvocab.NetResetSent].N = 1
	e.ObserveEpisode(app)
	side := episode(timeline.OutcomeHandlerTimeout, 0, time.Second)
	side.Traffic = &timeline.Traffic{NetNS: 7, Since: read.Add(-3 * time.Second), Until: read, SeesRefused: true, SeesLastSpeaker: true,
		Probes: probes(4, 3, 0, 0, 0, 2)}
	e.ObserveEpisode(side)
	// Not told apart: the clients' counter only.
	noKubelet := episode(timeline.OutcomeKilled, 0, time.Second)
	noKubelet.Traffic = &timeline.Traffic{NetNS: 8, Until: read, SeesRefused: true, SeesLastSpeaker: true}
	noKubelet.Traffic.Counts[sigvocab.NetAccepted].N = 5
	e.ObserveEpisode(noKubelet)
	// A kernel that reports no refused attempt and no last speaker: those
	// kinds are not added, whatever the array holds.
	old := episode(timeline.OutcomeIgnoredByInit, 0, time.Second)
	old.Traffic = &timeline.Traffic{NetNS: 9, Until: read, Probes: probes(1, 1, 0, 0, 0, 6, 0, 7)}
	e.ObserveEpisode(old)
	// Counts never read.
	unread := episode(timeline.OutcomeGraceful, 0, time.Second)
	unread.Traffic = &timeline.Traffic{NetNS: 10, Unread: "the trace ended", Probes: probes(9)}
	e.ObserveEpisode(unread)
	compare(t, reg, helpProbeConnections+`
sigscope_stop_probe_connections_total{kind="accepted",outcome="handler_timeout"} 4
sigscope_stop_probe_connections_total{kind="accepted",outcome="ignored_by_init"} 1
sigscope_stop_probe_connections_total{kind="after_close",outcome="handler_timeout"} 0
sigscope_stop_probe_connections_total{kind="closed",outcome="handler_timeout"} 3
sigscope_stop_probe_connections_total{kind="closed",outcome="ignored_by_init"} 1
sigscope_stop_probe_connections_total{kind="cut",outcome="handler_timeout"} 0
sigscope_stop_probe_connections_total{kind="cut",outcome="ignored_by_init"} 0
sigscope_stop_probe_connections_total{kind="idle_at_exit",outcome="handler_timeout"} 0
sigscope_stop_probe_connections_total{kind="out_refused",outcome="handler_timeout"} 0
sigscope_stop_probe_connections_total{kind="out_reset",outcome="handler_timeout"} 0
sigscope_stop_probe_connections_total{kind="refused",outcome="handler_timeout"} 2
sigscope_stop_probe_connections_total{kind="reset_received",outcome="handler_timeout"} 0
sigscope_stop_probe_connections_total{kind="reset_received",outcome="ignored_by_init"} 0
sigscope_stop_probe_connections_total{kind="reset_sent",outcome="handler_timeout"} 0
sigscope_stop_probe_connections_total{kind="reset_sent",outcome="ignored_by_init"} 0
sigscope_stop_probe_connections_total{kind="self_refused",outcome="handler_timeout"} 0
sigscope_stop_probe_connections_total{kind="unanswered",outcome="handler_timeout"} 0
sigscope_stop_probe_connections_total{kind="undecided",outcome="handler_timeout"} 0
`, "sigscope_stop_probe_connections_total")
	// The clients' counter holds the clients alone: 10 + 1 + 5, no probe.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var clients float64
	for _, mf := range mfs {
		if mf.GetName() == "sigscope_stop_connections_total" {
			for _, m := range mf.GetMetric() {
				clients += m.GetCounter().GetValue()
			}
		}
	}
	if clients != 16 {
		t.Errorf("sigscope_stop_connections_total sums to %v, want 16: the clients' alone", clients)
	}
}

// A pod's containers share its network namespace: a container whose stop
// went on past the others' (a sidecar draining) takes a later read of the
// same watch, whose counts include the earlier read's. Only what the watch
// counted since is added: the pod's connections are counted once. A later
// watch of the same namespace (another stop) counts whole.
func TestConnectionsCountedOncePerWatch(t *testing.T) {
	e := New(Options{})
	reg := register(t, e)
	since := time.Unix(1700000000, 0)
	traffic := func(since time.Time, until time.Duration, accepted, refused, unanswered uint64) *timeline.Traffic {
		tr := &timeline.Traffic{NetNS: 7, Since: since, Until: since.Add(until), SeesRefused: true, SeesLastSpeaker: true}
		tr.Counts[sigvocab.NetAccepted].N, tr.Counts[sigvocab.NetRefused].N, tr.Counts[sigvocab.NetUnanswered].N = accepted, refused, unanswered
		return tr
	}
	app := episode(timeline.OutcomeHandlerTimeout, 0, 30*time.Second)
	app.Traffic = traffic(since, 2*time.Second, 10, 4, 2)
	e.ObserveEpisode(app)
	proxy := episode(timeline.OutcomeGraceful, 0, time.Second)
	// The same watch, read later: each read turns the kernel's beginning
	// into wall-clock time anew, a few microseconds apart.
	proxy.Traffic = traffic(since.Add(3*time.Microsecond), 11*time.Second, 12, 6, 2)
	e.ObserveEpisode(proxy)
	again := episode(timeline.OutcomeGraceful, 0, time.Second)
	again.Traffic = traffic(since, 11*time.Second, 12, 6, 2) // that read again: nothing new
	e.ObserveEpisode(again)
	next := episode(timeline.OutcomeKilled, 0, time.Second)
	next.Traffic = traffic(since.Add(time.Minute), time.Second, 1, 0, 0) // the namespace's next stop
	e.ObserveEpisode(next)
	compare(t, reg, helpConnections+`
sigscope_stop_connections_total{kind="accepted",outcome="graceful"} 2
sigscope_stop_connections_total{kind="accepted",outcome="handler_timeout"} 10
sigscope_stop_connections_total{kind="accepted",outcome="killed"} 1
sigscope_stop_connections_total{kind="after_close",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="after_close",outcome="killed"} 0
sigscope_stop_connections_total{kind="closed",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="closed",outcome="killed"} 0
sigscope_stop_connections_total{kind="cut",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="cut",outcome="killed"} 0
sigscope_stop_connections_total{kind="idle_at_exit",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="idle_at_exit",outcome="killed"} 0
sigscope_stop_connections_total{kind="out_refused",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="out_refused",outcome="killed"} 0
sigscope_stop_connections_total{kind="out_reset",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="out_reset",outcome="killed"} 0
sigscope_stop_connections_total{kind="refused",outcome="graceful"} 2
sigscope_stop_connections_total{kind="refused",outcome="handler_timeout"} 4
sigscope_stop_connections_total{kind="refused",outcome="killed"} 0
sigscope_stop_connections_total{kind="reset_received",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="reset_received",outcome="killed"} 0
sigscope_stop_connections_total{kind="reset_sent",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="reset_sent",outcome="killed"} 0
sigscope_stop_connections_total{kind="self_refused",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="self_refused",outcome="killed"} 0
sigscope_stop_connections_total{kind="unanswered",outcome="handler_timeout"} 2
sigscope_stop_connections_total{kind="unanswered",outcome="killed"} 0
sigscope_stop_connections_total{kind="undecided",outcome="handler_timeout"} 0
sigscope_stop_connections_total{kind="undecided",outcome="killed"} 0
`, "sigscope_stop_connections_total")
}
