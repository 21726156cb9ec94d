package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sigscope/sigscope/tracer"
)

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(childMain(role))
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err := run(os.Args[1:], os.Stdout); err != nil {
		slog.Error("bench failed", "error", err)
		if errors.Is(err, errTargetsMissed) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// errTargetsMissed is returned only with -strict.
var errTargetsMissed = errors.New("targets missed")

type options struct {
	rounds     int
	phase      time.Duration
	warmup     time.Duration
	settle     time.Duration
	ringSize   int
	linger     time.Duration
	senderCPU  int
	configs    []config
	cpuProfile string
	bpfStats   bool
	strict     bool
	minFilt    float64
	minEmit    float64
}

func parseFlags(args []string) (options, error) {
	var o options
	var configs string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", 5, "A/B rounds; each runs an untraced and a traced phase per configuration")
	fs.DurationVar(&o.phase, "phase", time.Second, "length of one phase (one sender run)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "untimed untraced storm before the first round; 0 skips it")
	fs.DurationVar(&o.settle, "settle", 100*time.Millisecond, "idle time before each phase's storm (after attaching, in traced phases)")
	fs.IntVar(&o.ringSize, "ring", tracer.DefaultRingSize, "ring buffer size in bytes for the tracer (power of two)")
	fs.DurationVar(&o.linger, "linger", 0, "the reader's wait between batches while events flow (tracer.Options.Linger); 0: the tracer's default")
	fs.IntVar(&o.senderCPU, "sender-cpu", -1, "pin the sender to this CPU; -1 leaves placement to the scheduler")
	fs.StringVar(&configs, "configs", "filtered,emitted", "tracer configurations to measure, comma-separated: filtered, emitted")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the bench process for each emitted phase to FILE.<round>")
	fs.BoolVar(&o.bpfStats, "bpf-stats", false, "measure the signal_generate program's run time per invocation (BPF_ENABLE_STATS; slows the traced phases)")
	fs.BoolVar(&o.strict, "strict", false, "exit with status 2 when a target is missed")
	fs.Float64Var(&o.minFilt, "target-filtered", 0.90, "target: minimum throughput ratio with signals filtered in the kernel")
	fs.Float64Var(&o.minEmit, "target-emitted", 0.60, "target: minimum throughput ratio with every signal emitted to the reader")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.rounds < 1 || o.phase < 10*time.Millisecond {
		return o, errors.New("need -rounds >= 1 and -phase >= 10ms")
	}
	for _, name := range strings.Split(configs, ",") {
		c, ok := parseConfig(strings.TrimSpace(name))
		if !ok {
			return o, fmt.Errorf("-configs: unknown configuration %q (want filtered, emitted)", name)
		}
		if !slices.Contains(o.configs, c) {
			o.configs = append(o.configs, c)
		}
	}
	return o, nil
}

// config is what is attached during a phase.
type config int

const (
	off      config = iota // no tracer
	filtered               // attached, SIGUSR1 not in the signal set: dropped in BPF
	emitted                // SIGUSR1 traced: every signal is a record the reader consumes
)

var configNames = [...]string{off: "off", filtered: "filtered", emitted: "emitted"}

func (c config) String() string { return configNames[c] }

func parseConfig(s string) (config, bool) {
	for i, n := range configNames {
		if n == s && config(i) != off {
			return config(i), true
		}
	}
	return 0, false
}

// phase is one sender run and what the bench process observed meanwhile.
type phase struct {
	round int
	cfg   config
	storm storm
	// cpu is the bench process's user+sys time from just before the sender
	// started until the reader had drained the ring (traced phases).
	cpu     time.Duration
	stats   tracer.Stats // counters after Close (traced phases)
	counted uint64       // events the Run callback saw
	other   [4]uint64    // of those, by kind: not an IGNORED SIGUSR1 generate event
	// With -bpf-stats: the signal_generate program's total run time and runs.
	bpfTime time.Duration
	bpfRuns uint64
}

func run(args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rss rssMarks
	rss.start = peakRSS()

	// Load and attach once before anything runs, so that a missing privilege
	// fails at once with the tracer's own explanation. This also caches the
	// kernel BTF, as it would be in a long-running tracer.
	probe, err := tracer.New(tracer.Options{Signals: tracer.NewSignalSet(tracer.SIGTERM), RingSize: o.ringSize})
	if err != nil {
		// The tracer names what is missing (CAP_BPF, CAP_PERFMON, BTF...).
		return fmt.Errorf("the benchmark attaches BPF programs: %w", err)
	}
	if err := probe.Close(); err != nil {
		return fmt.Errorf("closing the probe tracer: %w", err)
	}
	rss.loaded = peakRSS()

	tgt, err := startTarget()
	if err != nil {
		return err
	}
	defer tgt.stop()
	slog.Info("target ready", "pid", tgt.pid())

	if o.warmup > 0 {
		if _, err := runSender(ctx, tgt.pid(), o.warmup, o.senderCPU); err != nil {
			return interrupted(ctx, fmt.Errorf("warm-up: %w", err))
		}
	}

	var phases []phase
	for i, s := range schedule(o) {
		p, err := runPhase(ctx, o, tgt.pid(), s.round, s.cfg)
		if err != nil {
			return interrupted(ctx, fmt.Errorf("phase %d (round %d, %s): %w", i+1, s.round, s.cfg, err))
		}
		slog.Info("phase", "round", s.round, "config", s.cfg.String(), "signals_per_s", int64(p.storm.rate()),
			"events_read", p.stats.Read, "bench_cpu", p.cpu.Round(time.Microsecond))
		phases = append(phases, p)
	}
	rss.peak, rss.maxrss = peakRSS(), maxRSS()
	rep := summarize(o, phases, rss)
	rep.print(out, o, phases)
	if rep.accountingErr != nil {
		return rep.accountingErr
	}
	if o.strict && rep.missed > 0 {
		return fmt.Errorf("%w: %d of %d", errTargetsMissed, rep.missed, rep.targets)
	}
	return nil
}

// schedule interleaves the phases: off, traced, off, traced, ..., off, so
// that every traced phase has an untraced one on each side; the order of the
// traced configurations is swapped every other round.
func schedule(o options) []phase {
	var s []phase
	for r := 1; r <= o.rounds; r++ {
		cfgs := slices.Clone(o.configs)
		if r%2 == 0 {
			slices.Reverse(cfgs)
		}
		for _, c := range cfgs {
			s = append(s, phase{round: r, cfg: off}, phase{round: r, cfg: c})
		}
	}
	return append(s, phase{round: o.rounds, cfg: off})
}

// interrupted says so when err comes from the bench being interrupted, rather
// than what the interruption broke.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	return err
}

// runPhase runs one storm with the given configuration attached.
func runPhase(ctx context.Context, o options, target, round int, c config) (phase, error) {
	p := phase{round: round, cfg: c}
	// Let the kernel finish what attaching (or the previous phase's detach)
	// deferred: RCU callbacks and workqueue items freeing programs and maps.
	settle := func() error {
		select {
		case <-time.After(o.settle):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c == off {
		if err := settle(); err != nil {
			return p, err
		}
		before := cpuTime()
		s, err := runSender(ctx, target, o.phase, o.senderCPU)
		p.storm, p.cpu = s, cpuTime()-before
		return p, err
	}

	set := tracer.NewSignalSet(tracer.SIGUSR1)
	if c == filtered {
		set = tracer.NewSignalSet(tracer.SIGTERM)
	}
	var progStats *progRunStats
	if o.bpfStats {
		var err error
		if progStats, err = startProgRunStats(); err != nil {
			return p, err
		}
		defer progStats.close()
	}
	tr, err := tracer.New(tracer.Options{Signals: set, RingSize: o.ringSize, Linger: o.linger})
	if err != nil {
		return p, err
	}
	defer tr.Close()
	if progStats != nil {
		if err := progStats.attach(); err != nil {
			return p, err
		}
	}

	if o.cpuProfile != "" && c == emitted {
		f, err := os.Create(fmt.Sprintf("%s.%d", o.cpuProfile, round))
		if err != nil {
			return p, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return p, err
		}
		defer pprof.StopCPUProfile()
	}

	if err := settle(); err != nil {
		return p, err
	}

	// The callback only counts: the *Event is reused by Run, nothing here
	// allocates, and the closure is built once per phase.
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- tr.Run(runCtx, func(e *tracer.Event) error {
			p.counted++
			if e.Kind != tracer.KindGenerate || e.Signal != tracer.SIGUSR1 || e.Result != tracer.ResultIgnored {
				p.other[e.Kind&3]++ // another process's signal or exit
			}
			return nil
		})
	}()

	before := cpuTime()
	s, serr := runSender(ctx, target, o.phase, o.senderCPU)
	cancel() // Run detaches, drains what the kernel wrote, and returns
	rerr := <-done
	p.storm, p.cpu = s, cpuTime()-before
	cerr := tr.Close()
	if err := errors.Join(serr, rerr, cerr); err != nil {
		return p, err
	}
	if progStats != nil {
		if p.bpfTime, p.bpfRuns, err = progStats.read(); err != nil {
			return p, err
		}
	}
	p.stats, err = tr.Stats()
	return p, err
}

// cpuTime is the bench process's user+sys CPU time so far, all threads.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssMarks are the bench process's peak RSS (VmHWM) at three points: at
// start, after the first tracer was loaded and closed, and at the end; and
// ru_maxrss at the end.
type rssMarks struct{ start, loaded, peak, maxrss int64 }

// peakRSS is the high-water mark of this process's resident set in bytes
// (VmHWM). It belongs to the address space, which execve replaces, whereas
// ru_maxrss carries over the peak of the exec'ing process: under `go run`
// that is the go command's own.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// maxRSS is getrusage's ru_maxrss in bytes.
func maxRSS() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

// cfgResult is the summary of one traced configuration against the
// untraced phases.
type cfgResult struct {
	cfg      config
	baseline float64 // median signals/s, all untraced phases
	traced   float64 // median signals/s, this configuration's phases
	// ratio and addedNS compare each traced phase with the mean of the
	// untraced phases just before and after it, and take the median over
	// the phases: the machine's speed drifts (a VM shares its host), and a
	// drift slower than a phase cancels out of a bracketed comparison.
	ratio      float64 // median of traced/s / bracketing untraced/s
	addedNS    float64 // median of 1e9/traced/s - 1e9/bracketing untraced/s
	phases     int
	cpu        time.Duration // bench CPU summed over this configuration's phases
	sent       uint64
	total      tracer.KindStats
	genSeen    uint64 // generate events that passed the in-kernel filters
	read       uint64
	counted    uint64
	other      [4]uint64
	decodeErrs uint64
	missed     uint64
	bpfTime    time.Duration
	bpfRuns    uint64
}

// ratioOfMedians is the cross-check that ignores the bracketing.
func (r cfgResult) ratioOfMedians() float64 { return r.traced / r.baseline }

// cpuPer100k is the reader's CPU time per 100,000 events read.
func (r cfgResult) cpuPer100k() time.Duration {
	if r.read == 0 {
		return 0
	}
	return time.Duration(float64(r.cpu) / float64(r.read) * 1e5)
}

type report struct {
	offRate       float64
	offCPU        time.Duration // median bench CPU of an untraced phase: the floor
	results       []cfgResult
	rss           rssMarks
	lines         []string // PASS/FAIL lines
	targets       int
	missed        int
	accountingErr error
}

func summarize(o options, phases []phase, rss rssMarks) report {
	rep := report{rss: rss}
	var offRates []float64
	var offCPU []time.Duration
	for _, p := range phases {
		if p.cfg == off {
			offRates = append(offRates, p.storm.rate())
			offCPU = append(offCPU, p.cpu)
		}
	}
	rep.offRate = median(offRates)
	rep.offCPU = median(offCPU)

	for _, c := range o.configs {
		r := cfgResult{cfg: c, baseline: rep.offRate}
		var rates, ratios, added []float64
		for i, p := range phases {
			if p.cfg != c {
				continue
			}
			traced := p.storm.rate()
			rates = append(rates, traced)
			if base := bracket(phases, i); base > 0 {
				ratios = append(ratios, traced/base)
				added = append(added, 1e9/traced-1e9/base)
			}
			r.phases++
			r.cpu += p.cpu
			r.sent += p.storm.sent
			t := p.stats.Total()
			r.total.Seen += t.Seen
			r.total.Emitted += t.Emitted
			r.total.Dropped += t.Dropped
			r.genSeen += p.stats.Generate.Seen
			r.read += p.stats.Read
			r.counted += p.counted
			for k := range p.other {
				r.other[k] += p.other[k]
			}
			r.decodeErrs += p.stats.DecodeErrors
			r.bpfTime += p.bpfTime
			r.bpfRuns += p.bpfRuns
			r.missed += p.stats.Missed
		}
		r.traced = median(rates)
		r.ratio = median(ratios)
		r.addedNS = median(added)
		rep.results = append(rep.results, r)

		atLeast := func(v, min float64) string {
			if v >= min {
				return fmt.Sprintf("%.4f >= %.2f", v, min)
			}
			return fmt.Sprintf("%.4f < %.2f", v, min)
		}
		check := func(ok bool, format string, a ...any) {
			rep.targets++
			verdict := "PASS"
			if !ok {
				verdict = "FAIL"
				rep.missed++
			}
			rep.lines = append(rep.lines, verdict+" "+fmt.Sprintf(format, a...))
		}
		switch c {
		case filtered:
			check(r.ratio >= o.minFilt, "(a) filtered in kernel: throughput ratio %s", atLeast(r.ratio, o.minFilt))
		case emitted:
			check(r.ratio >= o.minEmit, "(b) emitted to user space: throughput ratio %s", atLeast(r.ratio, o.minEmit))
			check(r.total.Dropped == 0, "(b) zero drops at a %d-byte ring: %d dropped", o.ringSize, r.total.Dropped)
			// These are not targets but invariants of the tracer: a failure is an error.
			ok := r.read == r.total.Emitted && r.read == r.counted && r.decodeErrs == 0
			verdict := "PASS"
			if !ok {
				verdict = "FAIL"
				rep.accountingErr = fmt.Errorf("accounting: read %d, callback saw %d, emitted %d, decode errors %d",
					r.read, r.counted, r.total.Emitted, r.decodeErrs)
			}
			rep.lines = append(rep.lines, fmt.Sprintf("%s (b) accounting after Close: read %d == emitted %d, decode errors %d",
				verdict, r.read, r.total.Emitted, r.decodeErrs))
		}
	}
	return rep
}

// bracket is the mean rate of the untraced phases on either side of phase i.
func bracket(phases []phase, i int) float64 {
	var sum float64
	var n int
	for _, j := range []int{i - 1, i + 1} {
		if j >= 0 && j < len(phases) && phases[j].cfg == off {
			sum += phases[j].storm.rate()
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func (rep report) print(w io.Writer, o options, phases []phase) {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	fmt.Fprintf(w, "sigscope signal storm: kernel %s, %d CPUs, GOMAXPROCS %d, %d rounds x %v per phase, ring %d bytes, linger %v\n",
		unix.ByteSliceToString(uts.Release[:]), runtime.NumCPU(), runtime.GOMAXPROCS(0), o.rounds, o.phase, o.ringSize, o.linger)

	fmt.Fprintln(w, "\nphases in run order:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tconfig\tsent\tsignals/s\tvs. bracket\tsender on CPU\tevents read\tbench CPU\t")
	for i, p := range phases {
		read, vs := "-", "-"
		if p.cfg != off {
			read = fmt.Sprint(p.stats.Read)
			vs = fmt.Sprintf("%.3f", p.storm.rate()/bracket(phases, i))
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%s\t%.1f%%\t%s\t%v\t\n", p.round, p.cfg, p.storm.sent, p.storm.rate(),
			vs, 100*p.storm.busy(), read, p.cpu.Round(10*time.Microsecond))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nmedians:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tbaseline/s\ttraced/s\tratio\tadded ns/signal\tratio of medians\t")
	for _, r := range rep.results {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.3f\t%+.0f\t%.3f\t\n", label(r.cfg), r.baseline, r.traced, r.ratio, r.addedNS, r.ratioOfMedians())
	}
	tw.Flush()
	fmt.Fprintf(w, "ratio and added ns: medians over the traced phases, each against the mean of the untraced phases beside it\n")
	fmt.Fprintf(w, "untraced: %.0f ns per kill(2); bench process CPU in an untraced phase (the floor): %v\n",
		1e9/rep.offRate, rep.offCPU.Round(10*time.Microsecond))

	for _, r := range rep.results {
		if r.bpfRuns > 0 {
			fmt.Fprintf(w, "%s: %s runs %.0f ns per invocation (%d runs; measured with BPF_ENABLE_STATS, which slows these phases)\n",
				label(r.cfg), genProgName, float64(r.bpfTime.Nanoseconds())/float64(r.bpfRuns), r.bpfRuns)
		}
	}
	for _, r := range rep.results {
		switch r.cfg {
		case filtered:
			fmt.Fprintf(w, "(a) kernel counters: %d seen, %d emitted (SIGUSR1 is filtered before counting); missed %d\n",
				r.total.Seen, r.total.Emitted, r.missed)
		case emitted:
			fmt.Fprintf(w, "(b) reader CPU: %v per 100k events (%v over %d phases, %d events; floor %v per phase)\n",
				r.cpuPer100k().Round(10*time.Microsecond), r.cpu.Round(time.Millisecond), r.phases, r.read, rep.offCPU.Round(10*time.Microsecond))
			fmt.Fprintf(w, "(b) events: emitted %d, read %d, dropped %d, missed (recursion) %d, decode errors %d\n",
				r.total.Emitted, r.read, r.total.Dropped, r.missed, r.decodeErrs)
			fmt.Fprintf(w, "(b) signals sent %d, generate events seen %d; other processes' events: %d generate, %d deliver, %d exit\n",
				r.sent, r.genSeen, r.other[tracer.KindGenerate], r.other[tracer.KindDeliver], r.other[tracer.KindExit])
		}
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(w, "peak RSS of the bench process: %.1f MiB (VmHWM; %.1f MiB at start, %.1f MiB after loading the tracer once); ru_maxrss %.1f MiB\n",
		mib(rep.rss.peak), mib(rep.rss.start), mib(rep.rss.loaded), mib(rep.rss.maxrss))

	fmt.Fprintln(w, "\ntargets:")
	for _, l := range rep.lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintf(w, "%d of %d targets met\n", rep.targets-rep.missed, rep.targets)
}

func label(c config) string {
	switch c {
	case filtered:
		return "(a) filtered in kernel"
	case emitted:
		return "(b) emitted to reader"
	}
	return c.String()
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
