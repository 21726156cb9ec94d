package exporter

import (
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/audit"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// DefaultMaxSeries is the per-metric series cap when Options.MaxSeries is 0.
const DefaultMaxSeries = 1000

// Overflow is the value of every label of the overflow series.
const Overflow = "_overflow"

// stopBuckets are the upper bounds, in seconds, of
// sigscope_container_stop_duration_seconds: around the grace periods people
// configure (docker's 10 s, Kubernetes' 30 s, and the usual raised values),
// so that "killed at the deadline" lands in a bucket of its own.
var stopBuckets = [...]float64{0.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120}

// endpointLagBuckets are the upper bounds, in seconds, of
// sigscope_stop_endpoint_lag_seconds: the controller's own delay is well
// under a second; a loaded control plane's runs to seconds.
var endpointLagBuckets = [...]float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30}

// StopDurationBuckets returns the bucket bounds of
// sigscope_container_stop_duration_seconds, in seconds.
func StopDurationBuckets() []float64 { return append([]float64(nil), stopBuckets[:]...) }

// maxLabelLen bounds a name-derived label value in bytes. Kubernetes names
// are at most 253; other runtimes' names are not bounded at all.
const maxLabelLen = 256

// Options configures an [Exporter].
type Options struct {
	// PodLabels adds namespace, pod and container labels to the counters
	// (signals, pid1_ignored, cascade, stops, stop duration, exits, oom).
	PodLabels bool
	// MaxSeries caps the series of each of those metrics when PodLabels is
	// set; past it, observations go to one overflow series. 0 means
	// DefaultMaxSeries.
	MaxSeries int
	// Stats returns the tracer's kernel counters; read at each scrape. Nil:
	// the events metrics are not exported.
	Stats func() (tracer.Stats, error)
	// EnrichmentErrors returns the container resolver's error counts per
	// source (container.Resolver.Errors); read at each scrape. Nil: not exported.
	EnrichmentErrors func() map[string]uint64
	// UnresolvedCgroups returns how many distinct container-like cgroups
	// nothing resolved to a container (container.Resolver.UnresolvedCgroups);
	// read at each scrape. Nil: not exported.
	UnresolvedCgroups func() uint64
	// Caches returns how full the agent's bounded caches and queues are;
	// read at each scrape, as sigscope_cache_entries and
	// sigscope_cache_capacity. Nil: only the exporter's own series (with
	// PodLabels) are reported.
	Caches func() []Cache
	// Version and Revision label sigscope_build_info.
	Version, Revision string
}

// Cache is one bounded cache or queue of the agent: how many entries it
// holds now and how many it may hold.
type Cache struct {
	Name              string
	Entries, Capacity int
}

// Exporter is a prometheus.Collector for sigscope. ObserveEvent,
// ObserveEpisode and SetAudit may be called from any goroutine, concurrently
// with scrapes.
type Exporter struct {
	opts      Options
	podLabels bool

	signals      *counterFamily
	pid1Ignored  *counterFamily
	cascade      *counterFamily
	stops        *counterFamily
	exits        *counterFamily
	oom          *counterFamily
	runningOOM   *counterFamily // OOM kills a container lived through: not stops
	stopDuration *histFamily
	endpointLag  *histFamily
	connections  *counterFamily
	probeConns   *counterFamily // the kubelet's probes' connections, apart from connections

	// countedNets are the connection counts already added, by the kernel's
	// count they were read from (timeline.Watch): a pod's containers share one
	// namespace, and each of their episodes carries its counts, from the
	// same read or (a container whose stop went on past the others', a
	// sidecar draining) from a later read of the same watch, whose counts
	// include the earlier read's. Each adds only what the watch counted
	// since, so a pod's connections are counted once. A later read comes
	// as late as a grace period after the first: 128 stops are kept (about
	// 40 KiB), more than a node's pods (110 by default) stopping at once
	// in a drain.
	netMu       sync.Mutex
	countedNets [128]countedNet
	countedNext int

	eventsDesc, droppedDesc, missedDesc, wakeupsDesc, enrichDesc, buildDesc, auditDesc, overflowDesc *prometheus.Desc
	cacheDesc, cacheCapDesc, unresolvedDesc                                                          *prometheus.Desc
	buildInfo                                                                                        prometheus.Metric

	auditMu     sync.Mutex
	auditSeries []auditSeries
}

type countedNet struct {
	watch  timeline.Watch
	counts [sigvocab.NumNetKinds]uint64 // added so far, by kind
	probes [sigvocab.NumNetKinds]uint64
}

// more is what n adds to what *added holds, which it then holds: 0 for a
// count that went down (a refusal the kernel moved to the probes or to the
// namespace's own calls after an earlier read: a counter cannot take it
// back, so that earlier read's refusal stays counted).
func more(added *uint64, n uint64) uint64 {
	if n <= *added {
		return 0
	}
	d := n - *added
	*added = n
	return d
}

type auditSeries struct {
	labels [3]string // namespace, pod, container
	value  float64
}

// Fixed label tables. Indexes, not strings, are what the hot path handles:
// every value a label can take is one of these or a cleaned name.
var (
	// netKindNames are sigvocab's net kinds, indexed by them; the
	// listener's close is a moment, not a connection, and is not counted.
	netKindNames    [sigvocab.NumNetKinds]string
	countedNetKinds = []sigvocab.NetKind{sigvocab.NetAccepted, sigvocab.NetClosed, sigvocab.NetResetSent,
		sigvocab.NetResetReceived, sigvocab.NetCut, sigvocab.NetRefused, sigvocab.NetUnanswered, sigvocab.NetAfterClose,
		sigvocab.NetIdleAtExit, sigvocab.NetUndecided, sigvocab.NetOutRefused, sigvocab.NetOutReset, sigvocab.NetSelfRefused}
	signalNames  [sigvocab.MaxSignal + 1]string // 0: "unknown"
	resultNames  []string                       // sigvocab.Result values, then "unknown"
	outcomeNames = append(outcomeStrings(), "unknown")
)

func outcomeStrings() []string {
	out := make([]string, len(timeline.Outcomes))
	for i, o := range timeline.Outcomes {
		out[i] = string(o)
	}
	return out
}

const (
	reasonExited   = 0
	reasonSignaled = 1
)

func init() {
	for k := range netKindNames {
		netKindNames[k] = sigvocab.NetKind(k).String()
	}
	signalNames[0] = "unknown"
	for s := sigvocab.Signal(1); s <= sigvocab.MaxSignal; s++ {
		signalNames[s] = s.String()
	}
	for r := sigvocab.ResultDelivered; r <= sigvocab.ResultLoseInfo; r++ {
		resultNames = append(resultNames, r.String())
	}
	resultNames = append(resultNames, "unknown")
}

func signalIndex(s sigvocab.Signal) uint8 {
	if s >= 1 && s <= sigvocab.MaxSignal {
		return uint8(s)
	}
	return 0
}

func resultIndex(r sigvocab.Result) uint8 {
	if int(r) < len(resultNames)-1 {
		return uint8(r)
	}
	return uint8(len(resultNames) - 1)
}

func outcomeIndex(o timeline.Outcome) uint8 {
	for i, n := range outcomeNames[:len(outcomeNames)-1] {
		if string(o) == n {
			return uint8(i)
		}
	}
	return uint8(len(outcomeNames) - 1)
}

// New returns an Exporter. It registers nothing: the caller registers it.
func New(opts Options) *Exporter {
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = DefaultMaxSeries
	}
	e := &Exporter{opts: opts, podLabels: opts.PodLabels}
	max := 0 // uncapped: without pod labels every label comes from a fixed table
	var pod []string
	if opts.PodLabels {
		max = opts.MaxSeries
		pod = []string{"namespace", "pod", "container"}
	}
	newCounter := func(name, help string, labels []string, values func(a, b uint8) []string) *counterFamily {
		return &counterFamily{
			name:   name,
			desc:   prometheus.NewDesc(name, help, append(append([]string(nil), labels...), pod...), nil),
			values: values,
			pod:    opts.PodLabels,
			max:    max,
			series: make(map[seriesKey]*counter),
		}
	}
	none := func(a, b uint8) []string { return nil }
	e.signals = newCounter("sigscope_signals_total",
		"Signals generated (signal_generate), by signal and the kernel's result.",
		[]string{"signal", "result"},
		func(a, b uint8) []string { return []string{signalNames[a], resultNames[b]} })
	e.pid1Ignored = newCounter("sigscope_pid1_ignored_signals_total",
		"Signals a pid namespace's init dropped because it has no handler for them (flag pid1_ignored).",
		[]string{"signal"},
		func(a, b uint8) []string { return []string{signalNames[a]} })
	e.cascade = newCounter("sigscope_pidns_cascade_kills_total",
		"SIGKILLs the kernel sent to the processes of a pid namespace because its init exited (flag ns_cascade).",
		nil, none)
	e.stops = newCounter("sigscope_container_stops_total",
		"Container stop episodes, by outcome.",
		[]string{"outcome"},
		func(a, b uint8) []string { return []string{outcomeNames[a]} })
	e.runningOOM = newCounter("sigscope_container_oom_kills_total",
		"OOM kills in running containers whose main process lived on: not stops (outcome oom_kill_survived); the stops the OOM killer caused count as sigscope_container_stops_total{outcome=\"oom_killed\"}.",
		nil, none)
	e.exits = newCounter("sigscope_process_exits_total",
		"Process exits the tracer reported: exited (an exit code) or signaled (killed by signal).",
		[]string{"reason", "signal"},
		func(a, b uint8) []string {
			if a == reasonExited {
				return []string{"exited", ""}
			}
			return []string{"signaled", signalNames[b]}
		})
	e.oom = newCounter("sigscope_oom_kills_total",
		"Processes the kernel's OOM killer chose as victims.",
		nil, none)
	e.connections = newCounter("sigscope_stop_connections_total",
		"TCP connections of stopping containers, by fate (accepted, closed, reset_sent, reset_received, cut, refused, unanswered, after_close, idle_at_exit, undecided; the namespace's own calls: out_refused, out_reset, self_refused; lost requests: refused, reset_sent, cut, unanswered, after_close) and the stop's outcome, as the kernel counted them from the stop signal until the stop was over; a pod's namespace is counted once per stop, whichever of its containers' episodes carry it.",
		[]string{"kind", "outcome"},
		func(a, b uint8) []string { return []string{netKindNames[a], outcomeNames[b]} })
	e.probeConns = newCounter("sigscope_stop_probe_connections_total",
		"TCP connections the kubelet's probes made to stopping containers, by fate (the kinds of sigscope_stop_connections_total) and the stop's outcome: counted apart from the clients' and in none of sigscope_stop_connections_total, where the agent told them apart; a pod's namespace is counted once per stop, whichever of its containers' episodes carry it.",
		[]string{"kind", "outcome"},
		func(a, b uint8) []string { return []string{netKindNames[a], outcomeNames[b]} })
	e.stopDuration = &histFamily{
		name: "sigscope_container_stop_duration_seconds",
		desc: prometheus.NewDesc("sigscope_container_stop_duration_seconds",
			"Seconds the stop took: from the preStop hook's start, else the stop signal, else the episode's start (no stop signal), to the main process's exit, by outcome.",
			append([]string{"outcome"}, pod...), nil),
		values: func(a, b uint8) []string { return []string{outcomeNames[a]} },
		pod:    opts.PodLabels,
		max:    max,
		series: make(map[seriesKey]*histogram),
		bounds: stopBuckets[:],
	}
	e.endpointLag = &histFamily{
		name: "sigscope_stop_endpoint_lag_seconds",
		desc: prometheus.NewDesc("sigscope_stop_endpoint_lag_seconds",
			"Seconds from a pod's deletion to its endpoint's first change (not ready, not serving, terminating, removed) in the EndpointSlices of the Services that list it, as the agent saw them, one observation per stop; negative lags are observed as 0.",
			pod, nil),
		values: func(a, b uint8) []string { return nil },
		pod:    opts.PodLabels,
		max:    max,
		series: make(map[seriesKey]*histogram),
		bounds: endpointLagBuckets[:],
	}
	if !opts.PodLabels {
		// Series that exist from the start, so that rate() and increase()
		// see their first increment: the alerting ones.
		e.cascade.get(seriesKey{})
		e.oom.get(seriesKey{})
		e.runningOOM.get(seriesKey{})
		e.pid1Ignored.get(seriesKey{a: signalIndex(sigvocab.SIGTERM)})
		for i := range outcomeNames[:len(outcomeNames)-1] {
			e.stops.get(seriesKey{a: uint8(i)})
		}
	}

	e.eventsDesc = prometheus.NewDesc("sigscope_events_total",
		"Events the kernel programs wrote to the ring buffer, by event kind.", []string{"event"}, nil)
	e.droppedDesc = prometheus.NewDesc("sigscope_events_dropped_total",
		"Events the kernel programs lost because the ring buffer was full, by event kind.", []string{"event"}, nil)
	e.missedDesc = prometheus.NewDesc("sigscope_events_missed_total",
		"Program runs the kernel skipped because a sigscope program was already running on that CPU (recursion protection).", nil, nil)
	e.wakeupsDesc = prometheus.NewDesc("sigscope_reader_wakeups_total",
		"Times the kernel woke the sleeping ring-buffer reader because events came: about one per burst after a quiet time.", nil, nil)
	e.enrichDesc = prometheus.NewDesc("sigscope_enrichment_errors_total",
		"Errors naming containers, by source (docker, cri, proc, cgroup).", []string{"source"}, nil)
	e.unresolvedDesc = prometheus.NewDesc("sigscope_unresolved_cgroups_total",
		"Distinct container-like cgroups (not the root; a pid namespace other than the host's, or a container ID in the path) that no cgroup path pattern and no container runtime resolved to a container: their events carry no container.", nil, nil)
	e.buildDesc = prometheus.NewDesc("sigscope_build_info",
		"Always 1; the labels say which sigscope build this is.", []string{"version", "revision", "goversion"}, nil)
	e.auditDesc = prometheus.NewDesc("sigscope_container_pid1_handles_stop_signal",
		"1 when the last audit predicts the container's main process will act on its stop signal (graceful: a handler, a forwarding init, the default action of a non-init), 0 when it will not (dropped, kept blocked, SIG_IGN, or the stop signal is SIGKILL).",
		[]string{"namespace", "pod", "container"}, nil)
	e.overflowDesc = prometheus.NewDesc("sigscope_series_overflow_total",
		"Observations counted in a metric's overflow series because it had reached its series cap.", []string{"metric"}, nil)
	e.cacheDesc = prometheus.NewDesc("sigscope_cache_entries",
		"Entries held now by one of the agent's bounded caches and queues (cache): never above sigscope_cache_capacity.", []string{"cache"}, nil)
	e.cacheCapDesc = prometheus.NewDesc("sigscope_cache_capacity",
		"The most entries one of the agent's bounded caches and queues (cache) holds.", []string{"cache"}, nil)
	e.buildInfo = constMetric(e.buildDesc, prometheus.GaugeValue, 1,
		clean(opts.Version), clean(opts.Revision), clean(runtime.Version()))
	return e
}

// ObserveEvent counts one tracer event; c is the container of ev.Target (nil
// when none or unknown). It does not allocate once the series exists.
func (e *Exporter) ObserveEvent(ev *sigvocab.Event, c *identity.Info) {
	if ev == nil {
		return
	}
	var k seriesKey
	if e.podLabels {
		k.namespace, k.pod, k.container = infoLabels(c)
	}
	switch ev.Kind {
	case sigvocab.KindGenerate:
		sig := signalIndex(ev.Signal)
		k.a, k.b = sig, resultIndex(ev.Result)
		e.signals.inc(k)
		if ev.Flags.Has(sigvocab.FlagPID1Ignored) {
			k.a, k.b = sig, 0
			e.pid1Ignored.inc(k)
		}
		if ev.Flags.Has(sigvocab.FlagNSCascade) {
			k.a, k.b = 0, 0
			e.cascade.inc(k)
		}
	case sigvocab.KindDeliver:
		if ev.Flags.Has(sigvocab.FlagPID1Ignored) {
			k.a = signalIndex(ev.Signal)
			e.pid1Ignored.inc(k)
		}
	case sigvocab.KindExit:
		if ev.Signaled() {
			k.a, k.b = reasonSignaled, signalIndex(ev.Signal)
		} else {
			k.a = reasonExited
		}
		e.exits.inc(k)
	case sigvocab.KindOOM:
		e.oom.inc(k)
	}
}

// ObserveEpisode counts a finished stop episode and, when PID 1's exit was
// seen, observes its duration; an episode that is no stop (an OOM kill the
// container lived through) counts as that alone.
func (e *Exporter) ObserveEpisode(ep *timeline.Episode) {
	if ep == nil {
		return
	}
	k := seriesKey{a: outcomeIndex(ep.Outcome)}
	if e.podLabels {
		k.namespace, k.pod, k.container = episodeLabels(&ep.Container)
	}
	if !ep.Outcome.IsStop() {
		k.a = 0
		e.runningOOM.inc(k)
		return
	}
	e.stops.inc(k)
	if d, ok := ep.StopDuration(); ok {
		e.stopDuration.observe(k, d.Seconds())
	}
	e.observeTraffic(ep, k)
	if lag, ok := endpointLag(ep); ok {
		lk := k
		lk.a = 0
		e.endpointLag.observe(lk, max(0, lag.Seconds()))
	}
}

// endpointLag is the earliest endpoint change of the stop after the pod's
// deletion, over its Services.
func endpointLag(ep *timeline.Episode) (time.Duration, bool) {
	var lag time.Duration
	ok := false
	for _, c := range ep.Endpoints {
		if c.AfterDeletion != nil && (!ok || *c.AfterDeletion < lag) {
			lag, ok = *c.AfterDeletion, true
		}
	}
	return lag, ok
}

// observeTraffic adds an episode's connection counts, each kind the kernel
// counted, once per namespace and watch (countedNets); and by the same
// rules the kubelet's probes' connections, apart, when they were told apart
// (Traffic.Probes).
func (e *Exporter) observeTraffic(ep *timeline.Episode, k seriesKey) {
	t := ep.Traffic
	if t == nil || t.Unread != "" {
		return
	}
	e.netMu.Lock()
	defer e.netMu.Unlock()
	var c *countedNet
	w := t.Watch()
	for i := range e.countedNets {
		if e.countedNets[i].watch.Same(w) {
			c = &e.countedNets[i]
			break
		}
	}
	again := c != nil // the watch's counts were added before: only what is new, no series for nothing
	if c == nil {
		c = &e.countedNets[e.countedNext]
		*c = countedNet{watch: w}
		e.countedNext = (e.countedNext + 1) % len(e.countedNets)
	}
	for _, kind := range countedNetKinds {
		if !t.Known(kind) {
			continue
		}
		ck := k
		ck.a, ck.b = uint8(kind), k.a
		if n := more(&c.counts[kind], t.N(kind)); n > 0 || !again {
			e.connections.add(ck, n)
		}
		if t.Probes != nil {
			if n := more(&c.probes[kind], t.Probes[kind]); n > 0 || !again {
				e.probeConns.add(ck, n)
			}
		}
	}
}

// SetAudit replaces the sigscope_container_pid1_handles_stop_signal series
// with one per audited container. Containers whose PID 1 could not be read
// (prediction unknown) get no series. Containers that end up with the same
// labels share one series, 0 if any of them does not handle its stop signal.
func (e *Exporter) SetAudit(results []audit.Result) {
	idx := make(map[[3]string]int, len(results))
	series := make([]auditSeries, 0, len(results))
	for i := range results {
		r := &results[i]
		if r.Prediction == audit.Unknown || r.Prediction == "" {
			continue
		}
		var s auditSeries
		c := &r.Container
		s.labels[0], s.labels[1], s.labels[2] = containerLabels(c.Identity)
		if r.Prediction == audit.Graceful {
			s.value = 1
		}
		if j, ok := idx[s.labels]; ok {
			series[j].value = min(series[j].value, s.value)
			continue
		}
		idx[s.labels] = len(series)
		series = append(series, s)
	}
	e.auditMu.Lock()
	e.auditSeries = series
	e.auditMu.Unlock()
}
