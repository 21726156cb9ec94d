// Package otlplog sends one OpenTelemetry log record per completed stop
// episode to an OTLP endpoint (sigscope serve --otlp-endpoint, or the
// standard OTEL_EXPORTER_OTLP_* variables), over OTLP/HTTP (protobuf) or
// gRPC. It owns the mapping episode → record ([Record]) and the
// OpenTelemetry Go SDK: the SDK's log API is beta, so no other package
// imports it, and a change of its API stays here. The SDK is pinned in
// go.mod (sdk/log v1.47.0, the otlplog exporters v0.23.0).
//
// The record: EventName sigscope.container.stop; the body is the outcome
// line of `sigscope timeline` with the container named ([Body]);
// severity WARN for the outcomes that need a fix
// (timeline.Outcome.NeedsFix), INFO for the others ([Severity]); the
// timestamp is the episode's start, the observed timestamp when the agent
// completed it. Attributes follow the semantic conventions (v1.43) where
// they have a name: k8s.node.name, k8s.namespace.name, k8s.pod.name,
// k8s.pod.uid, k8s.container.name, k8s.<workload>.name, container.name, container.id,
// container.runtime.name (the conventions' name since container.runtime
// was deprecated), container.image.name and container.image.tags,
// process.pid (the main process, host pid), process.exit.code (the status
// as a runtime reports it: 137 for SIGKILL); the rest is sigscope.*
// ([Attributes]; docs/otlp.md lists them). Only what the episode knows is
// set. Strings are made
// valid UTF-8 (textsafe.UTF8: invalid bytes as \xNN).
//
// Counting exactly. The SDK's BatchProcessor keeps its own queue and drops
// records silently when it is full, and its exporters retry inside Export
// where nothing counts. So the LoggerProvider has one processor, the
// [Sender]'s own bounded queue (a sink.Sink, the one every output shares:
// OnEmit queues a copy and returns, the tracer never waits), the
// exporter's retries are off, and one worker ([Sender.Run], in the agent's
// errgroup) calls the exporter's Export with up to Options.BatchSize
// records and counts what it returned: nil is sent; a final refusal is failed; a
// transient failure ([Transient]: no answer, HTTP 429/502/503/504, gRPC
// Unavailable...) puts the batch back at the queue's head and the sender
// waits 1 s, 2 s, 4 s... up to 30 s. While the collector is away the queue
// holds Options.QueueSize records, and past that the oldest is dropped and
// counted: the newest stops are the ones someone is looking for. So every
// episode observed is sent, failed, dropped, or still queued:
// sigscope_otlp_log_records_{sent,failed,dropped}_total and
// sigscope_otlp_log_records_queued (the Sender is a prometheus.Collector).
// A collector's partial success (some records of an accepted export
// rejected) is counted as sent: the OTLP exporters do not return it.
//
// When Run's context ends or [Sender.Close] is called, what is queued is
// tried once more, for at most Options.DrainTimeout (3 s), and the rest
// dropped; Close then closes the exporter.
//
// It does not decide whether OTLP is wanted or parse flags: cmd/sigscope
// does, and cmd/sigscope/agent appends the Sender to its outputs.
package otlplog
