// Package agent is sigscope's node agent, behind `sigscope serve`: it runs
// the tracer, resolves containers, builds stop timelines and audits PID 1s
// continuously, and serves the results over HTTP: Prometheus metrics
// (package exporter), recent episodes and audits as JSON, health and
// readiness, optionally behind TLS and basic auth (exporter-toolkit's web
// configuration). Each completed episode also goes, one way, to its
// outputs: Kubernetes Events (package kubeevents), the node journal
// (journal) and OpenTelemetry logs (otlplog), each a sink.Sink.
//
// It owns the wiring and the HTTP surface, not the pieces it wires, and
// the lifecycle of what it starts: one errgroup under Run (agent.go), the
// outputs' workers included, so that every goroutine stops on every way
// out and Run returns after them. Files by concern: http.go (servers and
// handlers), ring.go (the episode ring), filter.go (matching
// /api/v1/episodes), audit.go (the audit loop and /api/v1/audit). The
// API's query syntax and its episode encoding are package apiv1's.
package agent
