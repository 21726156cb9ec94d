// Command bench is sigscope's benchmark: `make bench` (or `make bench
// ARGS=-quick` for a 2-minute smoke run), as root. docs/benchmarks.md says
// how to read it and records the figures.
//
// It owns one question, asked so that the answer does not depend on the
// machine: what does sigscope cost, against what any BPF tracer of signals
// must cost on this kernel (the floor) and against what people use today
// (the peer, bpftrace)? Every figure is a difference or a ratio within one
// run.
//
// The storm: a sender process calls kill(target, SIGUSR1) in a tight loop on
// one CPU; the target ignores SIGUSR1, so every send is pure kernel work that
// passes the signal_generate tracepoint. Untraced phases alternate with
// traced ones, and each traced phase is compared with the untraced phases
// beside it (added ns per signal). The traced configurations:
//
//	(0) noop      a tp_btf program that returns (cmd/bench/bpf/floor.bpf.c)
//	(e) empty     an 8-byte ring record per signal, no wakeup, drained here
//	(t) stamped   (e) with a record of sigscope's size, stamped with the
//	              time and the sender's and target's ids: the least a
//	              tracer that says when and who must pay (its clock read
//	              and current-task call cost what the host makes a helper
//	              call cost)
//	(a) filtered  sigscope's tracer, the storm's signal not traced
//	(b) emitted   sigscope's tracer, every signal read by a counting callback
//	(j) json      `sigscope trace -o json > /dev/null`, the real output path
//	(p) bpftrace  a bpftrace one-liner printing each signal to /dev/null
//
// Then, each with its own flag to shorten or skip it: a long storm through
// (j) at the default ring (drops), a long storm through `sigscope serve`
// (drops, the agent's CPU per event, its peak RSS; serve.go), `sigscope
// serve` left idle (CPU, memory, threads, binary size), and two latencies
// (a signal to its line from `sigscope trace`; a pid namespace's exit to
// its episode in the agent's API). It ends with `RESULT name=value` lines
// and one PASS, FAIL or SKIP line per target of issues 13, 24, 30 and 37, and exits 0 whatever the figures (2 with
// -strict when a target is missed; 1 when it could not measure).
//
// The sender must be a separate process because sigscope's programs drop
// every event whose sender or target is the tracer's own process: the bench
// re-executes its own binary (/proc/self/exe) with roleEnv set. It is not a
// Go benchmark (testing.B): the cost measured is in another process and in
// the kernel. summary_test.go checks the arithmetic and the final lines.
// With -bpf-stats the kernel's own run time of each in-process program,
// (0) (e) (t) (a) (b), is printed too: the steadiest split of a cost.
//
// It does not own the tracer (package tracer) or the agent; it runs them as
// a user would.
package main
