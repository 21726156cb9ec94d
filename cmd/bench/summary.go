package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// This file is the bench's arithmetic and its final lines, kept apart from
// anything that needs the kernel so that summary_test.go can check them.

// addedNS compares traced phase i with the untraced phases beside it: the
// nanoseconds the attachment added to one kill(2), 1e9/traced - 1e9/untraced,
// the untraced rate being the mean of the neighbours' (one at the ends).
// The machine's speed drifts (a VM shares its host), and a drift slower
// than a phase cancels out of a bracketed comparison. false when phase i is
// untraced or has no untraced neighbour.
func addedNS(phases []phase, i int) (float64, bool) {
	if phases[i].cfg == off || phases[i].storm.sent == 0 {
		return 0, false
	}
	var sum float64
	var n int
	for _, j := range []int{i - 1, i + 1} {
		if j >= 0 && j < len(phases) && phases[j].cfg == off && phases[j].storm.sent > 0 {
			sum += phases[j].storm.rate()
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return 1e9/phases[i].storm.rate() - 1e9/(sum/float64(n)), true
}

// cfgSummary is one configuration's phases taken together.
type cfgSummary struct {
	cfg     config
	phases  int
	addedNS float64 // median over the phases of addedNS
	rate    float64 // median signals/s while attached
	sent    uint64
	read    uint64        // records the reader consumed
	dropped uint64        // records the kernel could not reserve
	cpu     time.Duration // the reader's CPU time over all the phases (floor subtracted for in-process readers)
}

// readerMsPer100k is the reader's CPU time in ms per 100,000 records read;
// NaN when it read nothing.
func (s cfgSummary) readerMsPer100k() float64 {
	if s.read == 0 {
		return math.NaN()
	}
	return float64(s.cpu) / float64(time.Millisecond) / float64(s.read) * 1e5
}

// summarizeStorm takes the phases in run order. The untraced phases' own
// bench CPU (spawning and waiting for the sender) is the floor subtracted
// from in-process readers' CPU: it is not reading.
func summarizeStorm(phases []phase) (untracedNS float64, sums map[config]cfgSummary) {
	var offRates []float64
	var offCPU []time.Duration
	for _, p := range phases {
		if p.cfg == off && p.storm.sent > 0 {
			offRates = append(offRates, p.storm.rate())
			offCPU = append(offCPU, p.cpu)
		}
	}
	if len(offRates) > 0 {
		untracedNS = 1e9 / median(offRates)
	}
	floor := median(offCPU)
	sums = map[config]cfgSummary{}
	added := map[config][]float64{}
	rates := map[config][]float64{}
	for i, p := range phases {
		if p.cfg == off {
			continue
		}
		s := sums[p.cfg]
		s.cfg = p.cfg
		s.phases++
		s.sent += p.storm.sent
		s.read += p.read
		s.dropped += p.dropped
		cpu := p.cpu
		if p.cfg.inProcess() {
			cpu = max(0, cpu-floor)
		}
		s.cpu += cpu
		sums[p.cfg] = s
		if a, ok := addedNS(phases, i); ok {
			added[p.cfg] = append(added[p.cfg], a)
			rates[p.cfg] = append(rates[p.cfg], p.storm.rate())
		}
	}
	for c, s := range sums {
		s.addedNS = median(added[c])
		s.rate = median(rates[c])
		if len(added[c]) == 0 {
			s.addedNS = math.NaN()
		}
		sums[c] = s
	}
	return untracedNS, sums
}

func median[T float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile is the nearest-rank percentile (the smallest sample with at
// least p% of the samples at or below it): an observed value, never an
// interpolation. With 20 samples p50 is the 10th and p99 the largest.
func percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(k, 1), len(s))-1]
}

// ms is a duration in milliseconds, for figures.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// figures are the RESULT values by name; a figure that was not measured is
// absent, and one that could not be computed (a ratio over zero) is NaN.
type figures map[string]float64

// Figure names, in the order of the RESULT lines.
const (
	figFilteredOverNoop = "filtered_over_noop"
	figEmittedOverFloor = "emitted_over_floor_ns"
	// The stamped floor (t) splits emitted_over_floor_ns in two: what the
	// clock and the current task cost on this host (t - e), and what
	// sigscope adds to a timestamped record of its size (b - t).
	figStampedOverFloor   = "stamped_over_floor_ns"
	figEmittedOverStamped = "emitted_over_stamped_ns"

	// (b)'s added ns over (t)'s: sigscope's whole emitted signal against
	// the least a tracer that says when and who pays on the same host, a
	// ratio that does not move with the host's price of a helper call or
	// a kill(2) as the ns above do (issue 37).
	figEmittedOverStampedRatio = "emitted_over_stamped"

	figJSONAdded        = "json_added_ns"
	figBpftraceOverJSON = "bpftrace_over_json"
	figDropped          = "dropped"
	figReaderMs         = "reader_ms_per_100k"
	figJSONReaderMs     = "json_reader_ms_per_100k"
	figJSONKeepup       = "json_keepup"
	figIdleCPU          = "idle_cpu_pct"
	figIdleRSS          = "idle_rss_mb"
	figBinary           = "binary_mb"
	figTraceLatency     = "trace_latency_p99_ms"
	figEpisodeLatency   = "episode_latency_p99_ms"
	// The agent under the storm (serve.go).
	figServeDropped = "serve_dropped"
	figServeMs      = "serve_ms_per_100k"
	figServePeakRSS = "serve_peak_rss_mb"
	// The connection storm (conns.go): ns per connection untraced, what
	// the noop floor and sigscope add, and whether the counts were exact.
	figConnUntraced         = "conn_untraced_ns"
	figConnNoopAdded        = "conn_noop_added_ns"
	figConnFilteredOverNoop = "conn_filtered_over_noop"
	figConnWatchedAdded     = "conn_watched_added_ns"
	// The TCP programs' own run time per invocation (BPF_ENABLE_STATS, its
	// two clock reads included): the noop floor's, the lookup floor's (the
	// namespace read and one hash look-up), sigscope's outside a stop and
	// during one, and filtered over lookup in the same round. A
	// connection's whole path varies from phase to phase by more than the
	// programs add (conn_filtered_over_noop has come out from 0.86 to 4.07
	// and NaN); the kernel's counters time the programs alone.
	figConnNoopRun            = "conn_noop_run_ns"
	figConnLookupRun          = "conn_lookup_run_ns"
	figConnFilteredRun        = "conn_filtered_run_ns"
	figConnWatchedRun         = "conn_watched_run_ns"
	figConnFilteredOverLookup = "conn_filtered_over_lookup"
	// A watched connection's programs against the lookup floor: every
	// fate counted, who spoke last read, each close remembered.
	figConnWatchedOverLookup = "conn_watched_over_lookup"
	figConnCountsExact       = "conn_counts_exact"
	figConnRefusedExact      = "conn_refused_exact"
	// Events the ring lost while the refused flood ran (the signals'
	// records, and every other kind's): the flood must cost it nothing.
	figConnFloodDropped = "conn_flood_dropped"
)

var figureOrder = []string{
	figFilteredOverNoop, figEmittedOverFloor, figStampedOverFloor, figEmittedOverStamped, figEmittedOverStampedRatio, figJSONAdded,
	figBpftraceOverJSON, figDropped,
	figReaderMs, figJSONReaderMs, figJSONKeepup, figServeDropped, figServeMs, figServePeakRSS, figIdleCPU, figIdleRSS,
	figBinary, figTraceLatency, figEpisodeLatency,
	figConnUntraced, figConnNoopAdded, figConnFilteredOverNoop, figConnWatchedAdded,
	figConnNoopRun, figConnLookupRun, figConnFilteredRun, figConnWatchedRun, figConnFilteredOverLookup, figConnWatchedOverLookup, figConnCountsExact, figConnRefusedExact, figConnFloodDropped,
}

// stormFigures derives the storm's figures from the configurations measured.
func stormFigures(sums map[config]cfgSummary, f figures) {
	added := func(c config) (float64, bool) {
		s, ok := sums[c]
		return s.addedNS, ok && !math.IsNaN(s.addedNS)
	}
	if a, ok := added(filtered); ok {
		if n, ok := added(noop); ok {
			f[figFilteredOverNoop] = ratio(a, n)
		}
	}
	if b, ok := added(emitted); ok {
		if e, ok := added(empty); ok {
			f[figEmittedOverFloor] = b - e
		}
		if t, ok := added(stamped); ok {
			f[figEmittedOverStamped] = b - t
			f[figEmittedOverStampedRatio] = ratio(b, t)
		}
	}
	if t, ok := added(stamped); ok {
		if e, ok := added(empty); ok {
			f[figStampedOverFloor] = t - e
		}
	}
	if j, ok := added(jsonOut); ok {
		f[figJSONAdded] = j
		if p, ok := added(bpftrace); ok {
			f[figBpftraceOverJSON] = ratio(p, j)
		}
	}
	if s, ok := sums[emitted]; ok && s.read > 0 {
		f[figReaderMs] = s.readerMsPer100k()
	}
}

// jsonKeepup is `trace -o json`'s reader CPU per event over what the
// sender it traced spent per kill(2), from the same phases: above 1 the
// reader falls behind a sender on one core and the ring fills (issue 24).
func jsonKeepup(readerMsPer100k, senderNSPerKill float64) float64 {
	return ratio(readerMsPer100k*1e6/1e5, senderNSPerKill)
}

// ratio is a/b, NaN when b is not positive: a cost at or below the noise
// floor makes no meaningful denominator.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// formatFigure prints a figure with the precision it deserves.
func formatFigure(name string, v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	switch name {
	case figDropped, figServeDropped:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case figConnCountsExact, figConnRefusedExact, figConnFloodDropped:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case figConnUntraced, figConnNoopAdded, figConnWatchedAdded:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case figFilteredOverNoop, figEmittedOverStampedRatio, figBpftraceOverJSON, figJSONKeepup, figConnFilteredOverNoop, figConnFilteredOverLookup,
		figConnWatchedOverLookup:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case figIdleCPU:
		return strconv.FormatFloat(v, 'f', 3, 64)
	case figEmittedOverFloor, figStampedOverFloor, figEmittedOverStamped, figJSONAdded:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// writeResults prints one `RESULT name=value` line per figure measured, in
// figureOrder.
func writeResults(w io.Writer, f figures) {
	for _, name := range figureOrder {
		if v, ok := f[name]; ok {
			fmt.Fprintf(w, "RESULT %s=%s\n", name, formatFigure(name, v))
		}
	}
}

// goal is one of issue 13's targets: a figure against a limit.
type goal struct {
	figure string
	atMost bool    // the figure must be <= limit; else >= limit
	limit  float64 // ignored when limitOf is set
	// limitOf derives the limit from other figures of the same run; the
	// string says how, for the PASS/FAIL line. ok false: not measured.
	limitOf func(sums map[config]cfgSummary) (limit float64, how string, ok bool)
	// note, when set, adds to the PASS/FAIL line what other figures of
	// the run say of this one ("" for nothing).
	note func(f figures) string
}

// goals are the targets of issues 13, 24, 30 and 37, in the order of the
// PASS/FAIL lines.
var goals = []goal{
	{figure: figFilteredOverNoop, atMost: true, limit: 1.2},
	{figure: figEmittedOverFloor, atMost: true, limit: 60, note: func(f figures) string {
		// Against the 8-byte floor, the clock and the current task are
		// counted as sigscope's: say how much of the figure they are.
		t, ok1 := f[figStampedOverFloor]
		s, ok2 := f[figEmittedOverStamped]
		if !ok1 || !ok2 {
			return ""
		}
		return fmt.Sprintf("of which the time stamp and the sender, (t) - (e): %s; sigscope's own, (b) - (t): %s",
			formatFigure(figStampedOverFloor, t), formatFigure(figEmittedOverStamped, s))
	}},
	{figure: figJSONAdded, atMost: true, limitOf: func(sums map[config]cfgSummary) (float64, string, bool) {
		b, ok := sums[emitted]
		if !ok || math.IsNaN(b.addedNS) {
			return 0, "", false
		}
		return 2 * b.addedNS, fmt.Sprintf("2 x (b) emitted's %.0f ns", b.addedNS), true
	}},
	{figure: figBpftraceOverJSON, limit: 3},
	{figure: figDropped, atMost: true, limit: 0},
	{figure: figJSONKeepup, atMost: true, limit: 0.8},
	{figure: figIdleCPU, atMost: true, limit: 0.1},
	{figure: figIdleRSS, atMost: true, limit: 40},
	{figure: figEpisodeLatency, atMost: true, limit: 100},
	{figure: figTraceLatency, atMost: true, limit: 20},
	// Issue 37: sigscope's emitted signal within 1.25 times a stamped
	// record of its size, since the clock and the current task are a
	// floor every tracer pays. (Issue 24 had it as (b) - (t) <= 60 ns,
	// which moved with the host: emitted_over_stamped_ns, now shown
	// without a target.)
	{figure: figEmittedOverStampedRatio, atMost: true, limit: 1.25},
	// Issue 24: the agent keeps every event of the one-core storm, within
	// the peak RSS e2e's TestLoad allows it with 50 clients besides.
	{figure: figServeDropped, atMost: true, limit: 0},
	{figure: figServePeakRSS, atMost: true, limit: 96},
	// Issue 30: outside a stop a TCP event costs one map look-up: the
	// programs run no longer than the lookup floor's, within 20 %; during
	// a stop every connection is counted, exactly, refused attempts too.
	// (conn_filtered_over_noop, the whole path's, is shown without a
	// target: this machine's noise is larger than what it measures.)
	{figure: figConnFilteredOverLookup, atMost: true, limit: 1.2},
	// Issue 37: during a stop, a connection's programs (who spoke last,
	// each close remembered for a request after it) within 2.5 times the
	// lookup floor's.
	{figure: figConnWatchedOverLookup, atMost: true, limit: 2.5},
	{figure: figConnCountsExact, limit: 1},
	{figure: figConnRefusedExact, limit: 1},
	{figure: figConnFloodDropped, atMost: true, limit: 0},
}

// verdicts are the PASS/FAIL lines: SKIP for a figure not measured (its
// section skipped, bpftrace missing); a NaN figure fails.
type verdicts struct {
	lines          []string
	passed, failed int
}

func judge(f figures, sums map[config]cfgSummary) verdicts {
	var v verdicts
	for _, g := range goals {
		val, ok := f[g.figure]
		limit, how := g.limit, ""
		if ok && g.limitOf != nil {
			limit, how, ok = g.limitOf(sums)
		}
		if !ok {
			v.lines = append(v.lines, fmt.Sprintf("SKIP %s: not measured in this run", g.figure))
			continue
		}
		op := ">="
		pass := val >= limit
		if g.atMost {
			op, pass = "<=", val <= limit
		}
		if math.IsNaN(val) {
			pass = false
		}
		verdict := "PASS"
		if pass {
			v.passed++
		} else {
			verdict = "FAIL"
			v.failed++
		}
		line := fmt.Sprintf("%s %s=%s %s %s", verdict, g.figure, formatFigure(g.figure, val), op, formatFigure(g.figure, limit))
		if how != "" {
			line += " (" + how + ")"
		}
		if g.note != nil {
			if n := g.note(f); n != "" {
				line += " (" + n + ")"
			}
		}
		v.lines = append(v.lines, line)
	}
	return v
}
