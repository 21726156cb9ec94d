// Command bench is sigscope's signal-storm benchmark: `go run ./bench` (or
// `make bench ARGS="-rounds 7"`), as root.
//
// It owns one question: what does attaching the tracer cost a process that
// sends signals as fast as one CPU can, and does the reader keep up? A sender
// process calls kill(target, SIGUSR1) in a tight loop on one OS thread; the
// target ignores SIGUSR1 (SIG_IGN), so every send is pure kernel work that
// ends at the signal_generate tracepoint. Phases with no tracer and with a
// tracer alternate within one run (A/B interleaved, medians reported), in two
// configurations:
//
//   - filtered: the tracer is attached but its signal set excludes SIGUSR1,
//     so every signal is dropped in BPF before the ring buffer;
//   - emitted: SIGUSR1 is traced, every signal becomes a ring-buffer record,
//     and this process runs the reader ([tracer.Tracer.Run]) counting them.
//
// It prints ratios (traced/untraced throughput) and derived costs, not
// absolute times, checks the tracer's counters reconcile (read == emitted,
// nothing dropped) and says whether the targets in docs/benchmarks.md are
// met. It is not a Go benchmark (testing.B): the cost being measured is in
// another process and in the kernel.
//
// The sender must be a separate process because the BPF programs drop every
// event whose sender or target is the tracer's own process. The bench
// re-executes its own binary (/proc/self/exe) with roleEnv set to run it.
//
// It does not own the tracer (package tracer) or decide what the targets
// should be; docs/benchmarks.md records them with the figures measured.
package main
