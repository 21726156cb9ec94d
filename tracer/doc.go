// Package tracer loads sigscope's eBPF programs, attaches them to the
// signal_generate, signal_deliver and sched_process_exit tracepoints, and
// turns what they emit into typed [Event] values.
//
// It owns the kernel side (the bpf2go bindings generated from ../bpf), the
// ring-buffer reader, decoding, and the classification of each signal into
// verdict flags such as [FlagPID1Ignored] and [FlagNSCascade] (classify.go is
// the only place those rules live). It does not know about containers, stop
// timelines or output formats beyond the documented JSON form of an event.
//
// Lifecycle: [New] loads and attaches, [Tracer.Run] blocks and delivers
// events until its context ends, [Tracer.Stats] reports the per-CPU loss
// counters, and [Tracer.Close] detaches everything and may be called twice.
package tracer
