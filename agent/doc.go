// Package agent is sigscope's node agent, behind `sigscope serve`: it runs
// the tracer, resolves containers, builds stop timelines and audits PID 1s
// continuously, and serves the results over HTTP: Prometheus metrics
// (package exporter), recent episodes and audits as JSON, health and
// readiness, optionally behind TLS and basic auth (exporter-toolkit's web
// configuration). It can also post Kubernetes Events (package kubeevents).
//
// It owns the wiring and the HTTP surface, not the pieces it wires.
package agent
