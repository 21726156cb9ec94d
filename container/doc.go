// Package container maps the processes in sigscope's events to containers
// and pods: the container ID and runtime from the cgroup path (cgroup v1 and
// v2, cgroupfs and systemd drivers; docker, containerd, CRI-O, podman), and
// metadata from the runtime's API where one is reachable (the Docker Engine
// API; the CRI API of containerd and CRI-O for Kubernetes pods).
//
// Identities are cached by the keys events carry (pid-namespace inode and
// cgroup ids), so the hot path does no /proc read and short-lived processes
// still resolve: a process that is gone is found through its cgroup id, and
// a container that has ended is remembered for a TTL. The cache is bounded.
// A runtime that is unreachable only degrades enrichment; errors are counted
// per source ([Resolver.Errors]) and logged once per outage.
//
// For `sigscope audit` it lists the running containers with their PID 1
// ([Resolver.ListRunning]) and reads how a PID 1 handles signals
// ([PID1Signals]).
//
// Names, labels and annotations are stored as the runtime gave them:
// escaping them is each output's job (internal/textsafe). It does not read
// kernel events or build timelines, and it never runs a runtime's CLI.
package container
