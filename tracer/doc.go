// Package tracer loads sigscope's eBPF programs, attaches them to the
// signal_generate, signal_deliver and sched_process_exit tracepoints, and
// turns the records they emit into typed [Event] values.
//
// It owns the kernel side: the bpf2go bindings generated from ../bpf, the
// ring-buffer reader, decoding a binary record (decode.go), the kernel's
// per-kind loss counters ([Stats], indexed by [Kind]), and the task
// iterator behind the audit ([ReadTaskStates]). vocab_test.go holds the
// hand-written numbers of internal/sigvocab to the bpf2go enums.
//
// The vocabulary is not its own: [Event], [Signal], [Fate], [Flags] and
// [Kind], the JSON form of an event, and the rules that classify a signal
// (Classify, PredictFate) are internal/sigvocab's, which links no loader;
// the names here are aliases of those. It does not know about containers,
// stop timelines or output formats.
//
// Lifecycle: [New] loads and attaches, [Tracer.Run] blocks and delivers
// events until its context ends, [Tracer.Stats] reports the per-CPU loss
// counters, and [Tracer.Close] detaches everything and may be called twice.
package tracer
