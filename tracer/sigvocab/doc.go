// Package sigvocab is the vocabulary of sigscope's kernel events: what a
// signal is ([Signal], [SignalSet]), which tracepoint saw it ([Kind]), what
// the kernel answered ([Result]) and had installed ([Disposition]), the
// verdict words ([Flags]), the signal's [Fate], and the decoded [Event]
// with its documented JSON form (docs/events.md): one writer, by hand,
// [Encoder.AppendEvent] (json.go), which writes the object's parts and, in
// a stream, copies those that repeat from event to event
// ([Event.AppendJSON] is it with no Encoder, so with no copies), and one
// reading type, [EventJSON] (jsonread.go), which reads recordings back.
//
// It decides, and is the only place that decides, what the kernel did with
// a signal: [Classify] reads an event's fate (fate.go) and flags
// (classify.go) from the raw facts the BPF programs record, and
// [PredictFate] applies the same prepare_signal() rules to a live task's
// state ([TaskState], [TaskSnapshot]) for the audit. docs/kernel.md
// explains each rule.
//
// It links no BPF loader, so that the packages that only read events (the
// timeline engine, container resolution, the audit's predictions, and the
// kubectl plugin, built for macOS too) do not carry cilium/ebpf and the
// embedded BPF objects. Its numbers are those of bpf/sigscope.h (enum
// event_type, enum fact, the array sizes), written by hand: package tracer
// holds them to its bpf2go output in vocab_test.go.
//
// It does not load, attach or read anything, and does not decode the
// kernel's binary records: that is package tracer, which also keeps the
// kernel's per-kind counters. Containers, stop episodes and output formats
// other than an event's JSON are other packages'.
package sigvocab
