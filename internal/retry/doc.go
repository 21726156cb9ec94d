// Package retry is the wait between tries: one backoff, so that what
// sigscope retries backs off alike: the agent's outputs (package sink:
// Kubernetes Events, OTLP logs, the node journal) and the container
// runtimes' endpoints. It owns the arithmetic only; the sink and the
// container resolver keep their own queues and timers.
//
// It is written here, not taken from a backoff library: jpillora/backoff's
// Duration and cenkalti/backoff's NextBackOff take no floor, and a
// Retry-After must be one under the jitter; a wrapper doing that around
// either would be longer than these ten lines.
package retry
