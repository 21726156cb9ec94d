package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// config is what is attached to signal_generate during a phase.
type config int

const (
	off      config = iota // nothing: the untraced kill(2)
	noop                   // (0) floor.bpf.c's no-op program
	empty                  // (e) floor.bpf.c's empty record per signal, drained here
	stamped                // (t) floor.bpf.c's stamped record of sigscope's size, drained here
	filtered               // (a) sigscope's tracer, the storm's signal not traced
	emitted                // (b) sigscope's tracer, every signal a record, counted here
	jsonOut                // (j) `sigscope trace -o json > /dev/null`, another process
	bpftrace               // (p) the bpftrace one-liner > /dev/null, another process
)

var configNames = [...]string{off: "off", noop: "noop", empty: "empty", stamped: "stamped", filtered: "filtered",
	emitted: "emitted", jsonOut: "json", bpftrace: "bpftrace"}

var configLabels = [...]string{off: "untraced", noop: "(0) no-op program", empty: "(e) empty record", stamped: "(t) stamped record",
	filtered: "(a) sigscope, filtered", emitted: "(b) sigscope, emitted", jsonOut: "(j) sigscope trace -o json",
	bpftrace: "(p) bpftrace printf"}

func (c config) String() string { return configNames[c] }

func (c config) label() string { return configLabels[c] }

// progName is the name of the configuration's program on signal_generate,
// for the -bpf-stats lines: floor.bpf.c's are named after their
// configuration.
func (c config) progName() string {
	if c == filtered || c == emitted {
		return genProgName
	}
	return c.String()
}

// inProcess: the reader is this process, so its CPU time is the bench's.
func (c config) inProcess() bool { return c >= noop && c <= emitted }

func parseConfig(s string) (config, bool) {
	for i, n := range configNames {
		if n == s && config(i) != off {
			return config(i), true
		}
	}
	return 0, false
}

// allConfigs is every traced configuration, in the order of the report.
var allConfigs = []config{noop, empty, stamped, filtered, emitted, jsonOut, bpftrace}

// phase is one sender run and what the reader did meanwhile.
type phase struct {
	round int
	cfg   config
	storm storm
	// cpu is the reader's user+sys time from just before the sender
	// started until it had drained what the storm wrote: this process's
	// for in-process configurations (and untraced phases: the floor of
	// spawning the sender), the child's for (j) and (p).
	cpu     time.Duration
	read    uint64 // records the reader consumed
	dropped uint64 // records lost: failed reserves (sigscope's counters, the floor's)
	// With -bpf-stats, (a) and (b): handle_generate's run time and runs.
	bpfTime time.Duration
	bpfRuns uint64
}

// attachment is a traced configuration while it runs.
type attachment interface {
	// cpu is the reader's CPU time so far.
	cpu() (time.Duration, error)
	// stop detaches, waits until the reader drained the ring, fills in the
	// phase's counters and returns the reader's CPU time at the end.
	stop(p *phase) (time.Duration, error)
}

// schedule interleaves the phases: off, traced, off, traced, ..., off, so
// that every traced phase has an untraced one on each side; the order of
// the traced configurations rotates by one every round, so that none
// always follows the same one.
func schedule(configs []config, rounds int) []phase {
	var s []phase
	for r := 1; r <= rounds; r++ {
		n := len(configs)
		for i := range n {
			c := configs[(i+r-1)%n]
			s = append(s, phase{round: r, cfg: off}, phase{round: r, cfg: c})
		}
	}
	return append(s, phase{round: rounds, cfg: off})
}

// stormEnv is what every phase needs.
type stormEnv struct {
	o        options
	target   int
	bpftrace string // path, "" when not installed
}

func runStorm(ctx context.Context, env stormEnv) ([]phase, error) {
	var phases []phase
	for i, s := range schedule(env.o.configs, env.o.rounds) {
		p, err := runPhase(ctx, env, s.round, s.cfg)
		if err != nil {
			return phases, interrupted(ctx, fmt.Errorf("phase %d (round %d, %s): %w", i+1, s.round, s.cfg, err))
		}
		phases = append(phases, p)
		added := "-"
		if a, ok := addedNS(phases, len(phases)-1); ok {
			added = fmt.Sprintf("%+.0f", a)
		}
		if p.cfg == off && len(phases) >= 2 {
			// The traced phase before this one now has both neighbours.
			if a, ok := addedNS(phases, len(phases)-2); ok {
				added = fmt.Sprintf("(previous %+.0f)", a)
			}
		}
		slog.Info("phase", "round", s.round, "config", s.cfg.String(), "ns_per_kill", int64(1e9/p.storm.rate()),
			"added_ns", added, "read", p.read, "dropped", p.dropped, "reader_cpu", p.cpu.Round(time.Millisecond))
	}
	return phases, nil
}

// runPhase runs one storm with the given configuration attached.
func runPhase(ctx context.Context, env stormEnv, round int, c config) (phase, error) {
	o := env.o
	p := phase{round: round, cfg: c}
	if c == off {
		if err := sleepCtx(ctx, o.settle); err != nil {
			return p, err
		}
		before := cpuTime()
		s, err := runSender(ctx, env.target, o.phase, o.senderCPU)
		p.storm, p.cpu = s, cpuTime()-before
		return p, err
	}

	var a attachment
	var err error
	settle := o.settle
	switch c {
	case noop, empty, stamped:
		a, err = attachFloor(c, o.ringSize, o.bpfStats)
	case filtered, emitted:
		a, err = attachTracer(c, o.ringSize, o.bpfStats)
	case jsonOut:
		a, err = startTraceJSON(ctx, o.bin, o.ringSize)
		settle = o.childSettle
	case bpftrace:
		a, err = startBpftrace(ctx, env.bpftrace)
		settle = o.childSettle
	}
	if err != nil {
		return p, err
	}
	if o.cpuProfile != "" && c == emitted {
		f, err := os.Create(fmt.Sprintf("%s.%d", o.cpuProfile, round))
		if err != nil {
			_, _ = a.stop(&p)
			return p, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			_, _ = a.stop(&p)
			return p, err
		}
		defer pprof.StopCPUProfile()
	}
	// Let the kernel finish what attaching (or the previous detach)
	// deferred, and a child finish starting.
	if err := sleepCtx(ctx, settle); err != nil {
		_, _ = a.stop(&p)
		return p, err
	}
	before, err := a.cpu()
	if err != nil {
		_, _ = a.stop(&p)
		return p, err
	}
	s, serr := runSender(ctx, env.target, o.phase, o.senderCPU)
	after, aerr := a.stop(&p)
	p.storm, p.cpu = s, after-before
	return p, errors.Join(serr, aerr)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// interrupted says so when err comes from the bench being interrupted,
// rather than what the interruption broke.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	return err
}

// cpuTime is the bench process's user+sys CPU time so far, all threads.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// configsWithout drops c from cs.
func configsWithout(cs []config, c config) []config {
	return slices.DeleteFunc(slices.Clone(cs), func(x config) bool { return x == c })
}
