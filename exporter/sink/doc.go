// Package sink is the one shape of the agent's asynchronous outputs
// (Kubernetes Events, OTLP logs, the node journal): a [Sink] takes items
// from the tracer's goroutine without ever blocking it, and one worker
// hands them to the output's send function.
//
// It owns what the outputs have in common, so that they lose, retry and
// count alike:
//
//   - a bounded queue: past [Options.QueueSize] the oldest item waiting is
//     dropped and counted (the newest stops are the ones someone is
//     looking for), never the batch being sent, which is outside the
//     queue from the moment it is added to an empty sink;
//   - one worker ([Sink.Run], under the agent's errgroup), which sends up
//     to [Options.BatchSize] items at a time, oldest first;
//   - after a transient failure, a wait from internal/retry's backoff
//     (doubling, a Retry-After floor, jitter), the items tried again in
//     order: back at the queue's head, where newer items push them out,
//     or, with [Options.KeepFailed], kept by the worker;
//   - the end: once Run's context ends or [Sink.Close] is called, what is
//     queued is tried once more within [Options.DrainTimeout], and the
//     rest is dropped and counted;
//   - the counts: every unit (an item counts for [Options.Size] units, an
//     episode's Events two) taken is sent, failed (refused for good),
//     dropped, or still queued; transient failures are counted apart;
//   - the log of an outage: its start at warn, the tries during it at
//     debug, its end, and what shutdown dropped;
//   - one [Collector] that exports those counts under each output's own
//     metric names (docs/metrics.md).
//
// It does not own what an item is, how it is sent, which failures are
// transient, or the outputs' metric names: the outputs do.
package sink
