package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
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
	bin         string
	quick       bool
	rounds      int
	phase       time.Duration
	warmup      time.Duration
	settle      time.Duration
	childSettle time.Duration
	ringSize    int
	senderCPU   int
	readerCPU   int
	configs     []config
	bpftrace    string
	drops       time.Duration
	serveStorm  time.Duration
	idle        time.Duration
	traceN      int
	episodeN    int
	gap         time.Duration
	serveArgs   []string
	cpuProfile  string
	bpfStats    bool
	strict      bool
	connRounds  int
	connPhase   time.Duration
}

// quickDefaults are -quick's values for the flags not given: every section
// runs, in about 2 minutes in all, as a smoke test.
var quickDefaults = map[string]string{
	"rounds":      "3",
	"phase":       "500ms",
	"warmup":      "500ms",
	"drops":       "10s",
	"serve":       "10s",
	"idle":        "10s",
	"conn-rounds": "2",
	"conn-phase":  "500ms",
}

func parseFlags(args []string) (options, error) {
	var o options
	var configs, serveArgs string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.bin, "bin", "bin/sigscope", "the sigscope binary for (j), the drops, the idle agent and the latencies (`make build`)")
	fs.BoolVar(&o.quick, "quick", false, "every section, shortened (-rounds 3 -phase 500ms -warmup 500ms -drops 10s -serve 10s -idle 10s) unless given")
	fs.IntVar(&o.rounds, "rounds", 7, "storm rounds; each runs every configuration once, between untraced phases; 0 skips the storm")
	fs.DurationVar(&o.phase, "phase", time.Second, "length of one storm phase")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "untimed untraced storm before the first round; 0 skips it")
	fs.DurationVar(&o.settle, "settle", 100*time.Millisecond, "idle time before each phase's storm (after attaching, in traced phases)")
	fs.DurationVar(&o.childSettle, "child-settle", 500*time.Millisecond, "the same for the child-process configurations, (j) and (p), once their program is attached")
	fs.IntVar(&o.ringSize, "ring", tracer.DefaultRingSize, "ring buffer size in bytes, for sigscope and the (e) floor (power of two)")
	fs.IntVar(&o.senderCPU, "sender-cpu", 0, "pin the sender to this CPU; -1 leaves placement to the scheduler")
	fs.IntVar(&o.readerCPU, "reader-cpu", 1, "pin this process and every reader (sigscope, bpftrace, the agent) to this CPU; -1: not pinned")
	fs.StringVar(&configs, "configs", "noop,empty,stamped,filtered,emitted,json,bpftrace", "storm configurations, comma-separated: noop (0), empty (e), stamped (t), filtered (a), emitted (b), json (j), bpftrace (p)")
	fs.StringVar(&o.bpftrace, "bpftrace", "bpftrace", "the bpftrace binary for (p); (p) is skipped when it is not found")
	fs.DurationVar(&o.drops, "drops", 60*time.Second, "length of the storm through (j) that counts drops at the ring; 0 skips it")
	fs.DurationVar(&o.serveStorm, "serve", 60*time.Second, "length of the storm through `sigscope serve` (default signals, /metrics scraped every second); 0 skips it")
	fs.DurationVar(&o.idle, "idle", 60*time.Second, "how long the idle agent is watched; 0 skips it")
	fs.IntVar(&o.traceN, "trace-samples", 20, "signal -> `trace -o json` line samples; 0 skips them")
	fs.IntVar(&o.episodeN, "episode-samples", 20, "exit -> /api/v1/episodes samples; 0 skips them")
	fs.DurationVar(&o.gap, "latency-gap", 200*time.Millisecond, "the least time between two latency samples")
	fs.StringVar(&serveArgs, "serve-args", "", "more flags for `sigscope serve`, space-separated (e.g. --docker-socket /none)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process for each (b) phase to FILE.<round>")
	fs.BoolVar(&o.bpfStats, "bpf-stats", false, "measure each in-process program's run time per invocation, (0) (e) (t) (a) (b) (BPF_ENABLE_STATS; slows those phases)")
	fs.BoolVar(&o.strict, "strict", false, "exit with status 2 when a target is missed")
	fs.IntVar(&o.connRounds, "conn-rounds", 5, "connection storm rounds (conns.go): off, the noop and lookup floors, sigscope filtered and watched; 0 skips the section")
	fs.DurationVar(&o.connPhase, "conn-phase", time.Second, "length of one connection storm phase, and of the refused flood")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range quickDefaults {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return o, err
				}
			}
		}
	}
	if o.rounds < 0 || o.phase < 10*time.Millisecond {
		return o, errors.New("need -rounds >= 0 and -phase >= 10ms")
	}
	for name := range strings.SplitSeq(configs, ",") {
		c, ok := parseConfig(strings.TrimSpace(name))
		if !ok {
			return o, fmt.Errorf("-configs: unknown configuration %q", name)
		}
		if !slices.Contains(o.configs, c) {
			o.configs = append(o.configs, c)
		}
	}
	o.serveArgs = strings.Fields(serveArgs)
	return o, nil
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
	rep := report{o: o, started: time.Now()}

	if o.senderCPU >= runtime.NumCPU() || o.readerCPU >= runtime.NumCPU() || o.senderCPU >= 0 && o.senderCPU == o.readerCPU {
		rep.notes = append(rep.notes, fmt.Sprintf("not pinned: -sender-cpu %d and -reader-cpu %d on %d CPUs", o.senderCPU, o.readerCPU, runtime.NumCPU()))
		o.senderCPU, o.readerCPU = -1, -1
	}
	if o.readerCPU >= 0 {
		if err := pinProcess(o.readerCPU); err != nil {
			return err
		}
	}

	// Load and attach once before anything runs, so that a missing privilege
	// fails at once with the tracer's own explanation.
	probe, err := tracer.New(tracer.Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGTERM), RingSize: o.ringSize})
	if err != nil {
		return fmt.Errorf("the benchmark attaches BPF programs: %w", err)
	}
	if err := probe.Close(); err != nil {
		return fmt.Errorf("closing the probe tracer: %w", err)
	}

	haveBin := true
	if _, err := os.Stat(o.bin); err != nil {
		haveBin = false
		rep.notes = append(rep.notes, fmt.Sprintf("no sigscope binary at %s (make build; -bin): (j), drops, idle and latencies skipped", o.bin))
		o.configs = configsWithout(o.configs, jsonOut)
	}
	env := stormEnv{o: o}
	if slices.Contains(o.configs, bpftrace) {
		env.bpftrace, err = exec.LookPath(o.bpftrace)
		if err != nil {
			rep.notes = append(rep.notes, fmt.Sprintf("(p) skipped: bpftrace not found (%v); Debian: apt-get install bpftrace", err))
			o.configs = configsWithout(o.configs, bpftrace)
		} else if note, err := ensureTracefs(); err != nil {
			rep.notes = append(rep.notes, fmt.Sprintf("(p) skipped: %v", err))
			o.configs = configsWithout(o.configs, bpftrace)
		} else if note != "" {
			rep.notes = append(rep.notes, note)
		}
	}
	env.o = o
	rep.o = o

	tgt, err := startTarget()
	if err != nil {
		return err
	}
	defer tgt.stop()
	env.target = tgt.pid()
	slog.Info("target ready", "pid", env.target)

	if o.rounds > 0 && len(o.configs) > 0 {
		if o.warmup > 0 {
			if _, err := runSender(ctx, env.target, o.warmup, o.senderCPU); err != nil {
				return interrupted(ctx, fmt.Errorf("warm-up: %w", err))
			}
		}
		rep.phases, err = runStorm(ctx, env)
		if err != nil {
			return err
		}
	}
	if o.connRounds > 0 {
		slog.Info("connection storm", "rounds", o.connRounds, "phase", o.connPhase)
		rep.conns, err = runConns(ctx, o.connRounds, o.connPhase, o.senderCPU)
		if err != nil {
			return interrupted(ctx, fmt.Errorf("connection storm: %w", err))
		}
	}
	if haveBin && o.drops > 0 {
		slog.Info("drops: a long storm through sigscope trace -o json", "for", o.drops)
		d, err := runDrops(ctx, env, o.drops)
		if err != nil {
			return interrupted(ctx, fmt.Errorf("drops: %w", err))
		}
		rep.drops = &d
	}
	if haveBin && o.serveStorm > 0 {
		if err := serveStormSection(ctx, env, &rep); err != nil {
			return interrupted(ctx, err)
		}
	}
	if haveBin && (o.idle > 0 || o.episodeN > 0) {
		if err := serveSections(ctx, o, &rep); err != nil {
			return interrupted(ctx, err)
		}
	}
	if haveBin && o.traceN > 0 {
		slog.Info("latency: signal -> sigscope trace -o json line", "samples", o.traceN)
		rep.traceLat, err = traceLatency(ctx, o.bin, env.target, o.traceN, o.gap)
		if err != nil {
			return interrupted(ctx, fmt.Errorf("trace latency: %w", err))
		}
	}

	v := rep.print(out)
	if o.strict && v.failed > 0 {
		return fmt.Errorf("%w: %d of %d", errTargetsMissed, v.failed, v.failed+v.passed)
	}
	return nil
}

// serveSections runs the idle agent and then the episode latency on it.
func serveSections(ctx context.Context, o options, rep *report) error {
	slog.Info("starting sigscope serve", "args", o.serveArgs)
	s, err := startServe(ctx, o.bin, o.serveArgs)
	if err != nil {
		return err
	}
	defer s.stop()
	if o.idle > 0 {
		// Past its start-up (BTF, the first audit, runtimes asked once).
		if err := sleepCtx(ctx, 2*time.Second); err != nil {
			return err
		}
		slog.Info("idle: watching sigscope serve", "for", o.idle, "pid", s.pid())
		r, err := measureIdle(ctx, s, o.idle, o.bin)
		if err != nil {
			return fmt.Errorf("idle: %w", err)
		}
		rep.idle = &r
	}
	if o.episodeN > 0 {
		slog.Info("latency: exit -> /api/v1/episodes", "samples", o.episodeN)
		rep.episodeLat, rep.episodeMissing, err = episodeLatency(ctx, s, o.episodeN, o.gap, 2*time.Millisecond, 10*time.Second)
		if err != nil {
			return fmt.Errorf("episode latency: %w", err)
		}
	}
	return nil
}

// pinProcess pins every thread of this process to cpu; threads and
// children created later inherit it (the sender re-pins itself).
func pinProcess(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		var tid int
		if _, err := fmt.Sscan(t.Name(), &tid); err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pinning thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return nil
}

// ensureTracefs mounts tracefs where bpftrace looks for tracepoint formats
// when it is not mounted; the note says so, since it stays mounted.
func ensureTracefs() (string, error) {
	const dir = "/sys/kernel/tracing"
	if _, err := os.Stat(dir + "/events/signal/signal_generate/format"); err == nil {
		return "", nil
	}
	if err := unix.Mount("tracefs", dir, "tracefs", 0, ""); err != nil {
		return "", fmt.Errorf("mounting tracefs at %s for bpftrace: %w", dir, err)
	}
	if _, err := os.Stat(dir + "/events/signal/signal_generate/format"); err != nil {
		return "", fmt.Errorf("tracefs mounted at %s, but %w", dir, err)
	}
	return "mounted tracefs at " + dir + " for bpftrace (it was not mounted; left mounted)", nil
}
