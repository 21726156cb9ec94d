// Package kube holds the end-to-end tests that need a real Kubernetes node:
// the one `make cluster` starts on this machine (docs/cluster.md), driven
// through its kubectl. They skip when no such cluster runs, and fail instead
// when SIGSCOPE_REQUIRE_CLUSTER=1. It has no code outside its tests.
package kube
