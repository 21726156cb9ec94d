// Package retry is the wait between tries: one backoff, so that what
// sigscope retries backs off alike: the agent's outputs (package sink:
// Kubernetes Events, OTLP logs, the node journal) and the container
// runtimes' endpoints. It owns the arithmetic only; the sink and the
// container resolver keep their own queues and timers.
package retry
