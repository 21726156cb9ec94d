// Package container maps the processes in sigscope's events to containers
// and pods: the container ID and runtime from the cgroup path (cgroup v1 and
// v2, cgroupfs and systemd drivers; docker, containerd, CRI-O, podman), and
// metadata from the runtime's API where one is reachable (the Docker Engine
// API; the CRI API of containerd and CRI-O for Kubernetes pods).
//
// Identities are cached by the keys events carry (pid-namespace inode and
// cgroup ids), so the hot path does no /proc read and short-lived processes
// still resolve. The cache is bounded. A runtime that is unreachable only
// degrades enrichment.
//
// It does not read kernel events or build timelines.
package container
