// Package tracer loads sigscope's eBPF programs, attaches them to the
// signal_generate, signal_deliver and sched_process_exit tracepoints, and
// turns the records they emit into typed [sigvocab.Event] values.
//
// It owns the kernel side: the bpf2go bindings generated from ../bpf, the
// ring-buffer reader, decoding a binary record (decode.go), the kernel's
// per-kind loss counters ([Stats], indexed by [sigvocab.Kind]), and the task
// iterator behind the audit ([ReadTaskStates]). vocab_test.go holds the
// hand-written numbers of tracer/sigvocab to the bpf2go enums.
//
// The vocabulary is not its own: the event, signal, fate, flag and kind
// types, the JSON form of an event, and the rules that classify a signal
// (Classify, PredictFate) are tracer/sigvocab's, which links no loader.
// Every caller, inside this module or outside it, names them sigvocab.X
// and imports tracer/sigvocab (no internal package: any program may): the
// type Run and Decode take is [sigvocab.Event], and this package
// re-exports none of the vocabulary. It does not know about containers,
// stop timelines or output formats.
//
// Lifecycle: [New] loads and attaches, [Tracer.Run] blocks and delivers
// events until its context ends, [Tracer.Stats] reports the per-CPU loss
// counters, and [Tracer.Close] detaches everything and may be called twice.
package tracer
