package main

import (
	"bytes"
	"github.com/sigscope/sigscope/tracer"
	"math"
	"strings"
	"testing"
	"time"
)

// ph is a phase whose storm ran at nsPerKill for 1 s.
func ph(c config, nsPerKill float64) phase {
	return phase{cfg: c, storm: storm{sent: uint64(1e9 / nsPerKill), elapsed: time.Second, cpu: time.Second}}
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.5 }

func TestAddedNS(t *testing.T) {
	phases := []phase{ph(off, 500), ph(noop, 580), ph(off, 520), ph(filtered, 600), ph(off, 480), ph(emitted, 800)}
	for _, tc := range []struct {
		i    int
		want float64
		ok   bool
	}{
		{0, 0, false},
		{1, 580 - 1e9/((1e9/500+1e9/520)/2), true}, // against the mean rate of both neighbours
		{3, 600 - 1e9/((1e9/520+1e9/480)/2), true},
		{5, 800 - 480, true}, // one neighbour at the end
	} {
		got, ok := addedNS(phases, tc.i)
		if ok != tc.ok || !near(got, tc.want) {
			t.Errorf("addedNS(phase %d) = %.1f, %v; want %.1f, %v", tc.i, got, ok, tc.want, tc.ok)
		}
	}
	// Two traced phases side by side: the second has no untraced neighbour.
	if _, ok := addedNS([]phase{ph(noop, 600), ph(emitted, 900)}, 1); ok {
		t.Error("a traced phase with no untraced neighbour was compared")
	}
}

func TestSummarizeStormAndFigures(t *testing.T) {
	// Untraced at 500 ns; every traced phase costs what the table says more.
	cost := map[config]float64{noop: 80, empty: 110, stamped: 140, filtered: 84, emitted: 160, jsonOut: 300, bpftrace: 1500}
	var phases []phase
	for _, s := range schedule(allConfigs, 3) {
		p := ph(s.cfg, 500+cost[s.cfg])
		p.cpu = 2 * time.Millisecond // the floor: spawning the sender
		switch s.cfg {
		case empty, stamped:
			p.read = p.storm.sent
		case emitted:
			p.read, p.cpu = p.storm.sent, 2*time.Millisecond+time.Duration(p.storm.sent)*300 // 300 ns per event
		case jsonOut:
			p.read, p.cpu = p.storm.sent, time.Duration(p.storm.sent)*1000
		}
		phases = append(phases, p)
	}
	untraced, sums := summarizeStorm(phases)
	if !near(untraced, 500) {
		t.Errorf("untraced = %.1f ns, want 500", untraced)
	}
	for c, want := range cost {
		s := sums[c]
		if s.phases != 3 || !near(s.addedNS, want) {
			t.Errorf("%s: %d phases, added %.1f ns; want 3, %.0f", c, s.phases, s.addedNS, want)
		}
	}
	// The floor (2 ms a phase) is taken off the in-process reader only.
	if got := sums[emitted].readerMsPer100k(); math.Abs(got-30) > 0.01 {
		t.Errorf("(b) reader = %.3f ms per 100k, want 30", got)
	}
	if got := sums[jsonOut].readerMsPer100k(); math.Abs(got-100) > 0.01 {
		t.Errorf("(j) reader = %.3f ms per 100k, want 100", got)
	}

	f := figures{}
	stormFigures(sums, f)
	for name, want := range map[string]float64{
		figFilteredOverNoop:   84.0 / 80,
		figEmittedOverFloor:   50,
		figStampedOverFloor:   30,
		figEmittedOverStamped: 20,
		figJSONAdded:          300,
		figBpftraceOverJSON:   5,
		figReaderMs:           30,
		// (b) over (t), each against the untraced kill(2).
		figEmittedOverStampedRatio: 160.0 / 140,
	} {
		if got, ok := f[name]; !ok || math.Abs(got-want) > 0.01 {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
}

func TestStormFiguresNeedBothSides(t *testing.T) {
	f := figures{}
	stormFigures(map[config]cfgSummary{filtered: {cfg: filtered, addedNS: 80}, jsonOut: {cfg: jsonOut, addedNS: 300}}, f)
	if _, ok := f[figFilteredOverNoop]; ok {
		t.Error("filtered_over_noop without a (0) phase")
	}
	if _, ok := f[figBpftraceOverJSON]; ok {
		t.Error("bpftrace_over_json without a (p) phase")
	}
	if f[figJSONAdded] != 300 {
		t.Errorf("json_added_ns = %v, want 300", f[figJSONAdded])
	}
	if _, ok := f[figEmittedOverStampedRatio]; ok {
		t.Error("emitted_over_stamped without a (b) or (t) phase")
	}
	// A floor at or below zero (noise) makes no ratio.
	stormFigures(map[config]cfgSummary{filtered: {addedNS: 5}, noop: {addedNS: -3}, emitted: {addedNS: 40}, stamped: {addedNS: 0}}, f)
	if !math.IsNaN(f[figFilteredOverNoop]) {
		t.Errorf("filtered_over_noop over a negative floor = %v, want NaN", f[figFilteredOverNoop])
	}
	if !math.IsNaN(f[figEmittedOverStampedRatio]) || f[figEmittedOverStamped] != 40 {
		t.Errorf("over a stamped floor of 0 ns: emitted_over_stamped = %v (want NaN), emitted_over_stamped_ns = %v (want 40)",
			f[figEmittedOverStampedRatio], f[figEmittedOverStamped])
	}
}

// json_keepup is the reader's ns per event over the sender's ns per kill:
// 54.8 ms per 100k events is 548 ns, against a 420 ns kill.
func TestJSONKeepup(t *testing.T) {
	if got := jsonKeepup(54.8, 420); math.Abs(got-548.0/420) > 1e-9 {
		t.Errorf("jsonKeepup(54.8 ms/100k, 420 ns) = %v, want %v", got, 548.0/420)
	}
	if got := jsonKeepup(30, 0); !math.IsNaN(got) {
		t.Errorf("jsonKeepup over a sender of 0 ns = %v, want NaN", got)
	}
}

func TestSchedule(t *testing.T) {
	s := schedule([]config{noop, emitted, jsonOut}, 2)
	var got []string
	for _, p := range s {
		got = append(got, p.cfg.String())
	}
	want := "off noop off emitted off json off emitted off json off noop off"
	if strings.Join(got, " ") != want {
		t.Errorf("schedule = %s\nwant       %s", strings.Join(got, " "), want)
	}
}

func TestPercentile(t *testing.T) {
	var xs []time.Duration
	for i := 20; i >= 1; i-- { // unsorted on purpose
		xs = append(xs, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 10 * time.Millisecond}, {99, 20 * time.Millisecond}, {95, 19 * time.Millisecond}, {100, 20 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(xs, tc.p); got != tc.want {
			t.Errorf("p%v of 1..20 ms = %v, want %v", tc.p, got, tc.want)
		}
	}
	if xs[0] != 20*time.Millisecond {
		t.Error("percentile sorted its argument in place")
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("p99 of one sample = %v", got)
	}
	if got := median([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
}

func TestResultsAndVerdicts(t *testing.T) {
	f := figures{
		figFilteredOverNoop: 1.04,
		figEmittedOverFloor: 75.4,
		figJSONAdded:        4260,
		figDropped:          0,
		figJSONKeepup:       1.3049,
		figIdleCPU:          1.6,
		figIdleRSS:          38.2,
		figTraceLatency:     9.87,
		// Issue 24's.
		figEmittedOverStamped: 161.4,
		figServeDropped:       0,
		figServeMs:            31.25,
		figServePeakRSS:       70.44,
		// Issue 37's: 473 against 312 ns added.
		figEmittedOverStampedRatio: 473.0 / 312,
	}
	sums := map[config]cfgSummary{emitted: {addedNS: 250}}
	var b bytes.Buffer
	writeResults(&b, f)
	wantResults := `RESULT filtered_over_noop=1.04
RESULT emitted_over_floor_ns=75
RESULT emitted_over_stamped_ns=161
RESULT emitted_over_stamped=1.52
RESULT json_added_ns=4260
RESULT dropped=0
RESULT json_keepup=1.30
RESULT serve_dropped=0
RESULT serve_ms_per_100k=31.2
RESULT serve_peak_rss_mb=70.4
RESULT idle_cpu_pct=1.600
RESULT idle_rss_mb=38.2
RESULT trace_latency_p99_ms=9.9
`
	if b.String() != wantResults {
		t.Errorf("RESULT lines:\n%s\nwant:\n%s", b.String(), wantResults)
	}

	v := judge(f, sums)
	wantLines := []string{
		"PASS filtered_over_noop=1.04 <= 1.20",
		"FAIL emitted_over_floor_ns=75 <= 60",
		"FAIL json_added_ns=4260 <= 500 (2 x (b) emitted's 250 ns)",
		"SKIP bpftrace_over_json: not measured in this run",
		"PASS dropped=0 <= 0",
		"FAIL json_keepup=1.30 <= 0.80",
		"FAIL idle_cpu_pct=1.600 <= 0.100",
		"PASS idle_rss_mb=38.2 <= 40.0",
		"SKIP episode_latency_p99_ms: not measured in this run",
		"PASS trace_latency_p99_ms=9.9 <= 20.0",
		"FAIL emitted_over_stamped=1.52 <= 1.25",
		"PASS serve_dropped=0 <= 0",
		"PASS serve_peak_rss_mb=70.4 <= 96.0",
		"SKIP conn_filtered_over_lookup: not measured in this run",
		"SKIP conn_watched_over_lookup: not measured in this run",
		"SKIP conn_counts_exact: not measured in this run",
		"SKIP conn_refused_exact: not measured in this run",
		"SKIP conn_flood_dropped: not measured in this run",
	}
	if strings.Join(v.lines, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("verdicts:\n%s\nwant:\n%s", strings.Join(v.lines, "\n"), strings.Join(wantLines, "\n"))
	}
	if v.passed != 6 || v.failed != 5 {
		t.Errorf("passed %d, failed %d; want 6, 5", v.passed, v.failed)
	}

	// json_added_ns has no limit without (b): skipped, not judged against 0.
	if v := judge(figures{figJSONAdded: 300}, nil); !strings.HasPrefix(v.lines[2], "SKIP json_added_ns") {
		t.Errorf("json_added_ns without (b): %q", v.lines[2])
	}
	// A ratio that could not be computed fails.
	if v := judge(figures{figFilteredOverNoop: math.NaN()}, nil); v.lines[0] != "FAIL filtered_over_noop=NaN <= 1.20" {
		t.Errorf("NaN figure: %q", v.lines[0])
	}
	// With (t), the emitted line says how much of it is the stamp.
	if v := judge(figures{figEmittedOverFloor: 148, figStampedOverFloor: 57, figEmittedOverStamped: 91}, nil); v.lines[1] !=
		"FAIL emitted_over_floor_ns=148 <= 60 (of which the time stamp and the sender, (t) - (e): 57; sigscope's own, (b) - (t): 91)" {
		t.Errorf("emitted_over_floor_ns with (t): %q", v.lines[1])
	}
	// emitted_over_stamped passes at 1.25, and judges the ratio, not the ns.
	if v := judge(figures{figEmittedOverStampedRatio: 1.25, figEmittedOverStamped: 78}, nil); v.lines[10] != "PASS emitted_over_stamped=1.25 <= 1.25" {
		t.Errorf("emitted_over_stamped at its limit: %q", v.lines[10])
	}
	// bpftrace_over_json is a floor, not a ceiling.
	if v := judge(figures{figBpftraceOverJSON: 4.8}, nil); v.lines[3] != "PASS bpftrace_over_json=4.80 >= 3.00" {
		t.Errorf("bpftrace_over_json: %q", v.lines[3])
	}
}

func TestParseProc(t *testing.T) {
	stat := []byte("4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 27 0 0 20 0 8 0 100 0 0\n")
	if got, err := parseStatCPU(stat); err != nil || got != 1770*time.Millisecond {
		t.Errorf("parseStatCPU = %v, %v; want 1.77s", got, err)
	}
	if !zombie([]byte("7 (x) Z 1")) || zombie(stat) {
		t.Error("zombie misread the state field")
	}

	status := "Name:\tsigscope\nVmHWM:\t   61000 kB\nVmRSS:\t   59000 kB\nThreads:\t8\n"
	rollup := "00400000-7ffff [rollup]\nRss:               59000 kB\nPss:               50000 kB\nAnonymous:         19000 kB\n"
	m, err := parseProcMem(status, rollup)
	if err != nil {
		t.Fatal(err)
	}
	if m.rss != 59000*1024 || m.hwm != 61000*1024 || m.anon != 19000*1024 || m.file != 40000*1024 || m.threads != 8 {
		t.Errorf("parseProcMem = %+v", m)
	}
	if _, err := parseProcMem("VmRSS:\t1 kB\n", rollup); err == nil {
		t.Error("parseProcMem accepted a status with no VmHWM or Threads")
	}

	stderr := "time=... level=WARN msg=x\nsigscope: events generate seen=10 emitted=10 dropped=0; total seen=18700000 emitted=18699000 dropped=1000 read=18699000\n"
	tot, ok := parseTraceTotals(stderr)
	if !ok || tot != (traceTotals{seen: 18700000, emitted: 18699000, dropped: 1000, read: 18699000}) {
		t.Errorf("parseTraceTotals = %+v, %v", tot, ok)
	}
	if _, ok := parseTraceTotals("sigscope: permission denied\n"); ok {
		t.Error("parseTraceTotals found totals in an error")
	}
}

func TestQuickFlags(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-idle", "0", "-configs", "noop, emitted,noop"})
	if err != nil {
		t.Fatal(err)
	}
	if o.rounds != 3 || o.phase != 500*time.Millisecond || o.drops != 10*time.Second || o.serveStorm != 10*time.Second || o.idle != 0 {
		t.Errorf("-quick gave rounds %d, phase %v, drops %v, serve %v, idle %v (an explicit -idle 0 must stay)", o.rounds, o.phase, o.drops, o.serveStorm, o.idle)
	}
	if len(o.configs) != 2 || o.configs[0] != noop || o.configs[1] != emitted {
		t.Errorf("configs = %v", o.configs)
	}
	if _, err := parseFlags([]string{"-configs", "fast"}); err == nil {
		t.Error("an unknown configuration was accepted")
	}
}

// The stamped floor (t) reserves records of sigscope's size, which
// floor.bpf.c states as a constant: the record it reserves must follow the
// tracer's, or (t) stops being the floor of what (b) does.
func TestStampedRecordIsSigscopeSize(t *testing.T) {
	spec, err := loadFloor()
	if err != nil {
		t.Fatal(err)
	}
	var size uint32
	if err := spec.Variables["stamped_size"].Get(&size); err != nil {
		t.Fatalf("floor.bpf.c's stamped_size: %v", err)
	}
	if int(size) != tracer.RecordSize {
		t.Errorf("floor.bpf.c's stamped record is %d bytes, sigscope's %d: update SIGSCOPE_RECORD_SIZE", size, tracer.RecordSize)
	}
}

// The connection storm's figures: the added costs over the untraced
// phases, the ratio to the floor, and the exact counts.
func TestConnFigures(t *testing.T) {
	r := &connsResult{exact: true, sees: true, flood: 900, refused: 900, phases: []connPhase{
		{cfg: connOff, conns: 1000, cpu: 10 * time.Millisecond},
		{cfg: connNoop, conns: 1000, cpu: 11 * time.Millisecond},
		{cfg: connFiltered, conns: 1000, cpu: 11100 * time.Microsecond},
		{cfg: connWatched, conns: 1000, cpu: 12 * time.Millisecond},
	}}
	f := figures{}
	connFigures(r, f)
	want := figures{figConnUntraced: 10000, figConnNoopAdded: 1000, figConnFilteredOverNoop: 1.1, figConnWatchedAdded: 2000,
		figConnCountsExact: 1, figConnRefusedExact: 1}
	for k, v := range want {
		if math.Abs(f[k]-v) > 1e-6 {
			t.Errorf("%s = %v, want %v", k, f[k], v)
		}
	}
	r.exact, r.refused, r.sees = false, 899, true
	f = figures{}
	connFigures(r, f)
	if f[figConnCountsExact] != 0 || f[figConnRefusedExact] != 0 {
		t.Errorf("inexact counts: %v", f)
	}
	r.sees = false
	f = figures{}
	connFigures(r, f)
	if _, ok := f[figConnRefusedExact]; ok {
		t.Errorf("refused judged on a kernel that cannot count them: %v", f)
	}
}
