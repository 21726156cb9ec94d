// Package container maps the processes in sigscope's events to containers
// and pods: the container ID and runtime from the cgroup path (cgroup v1 and
// v2, cgroupfs and systemd drivers; docker, containerd, CRI-O, podman), and
// metadata from the runtime's own files first (files.go: Docker's container
// records, containerd's and CRI-O's OCI bundles, read through each daemon's
// /proc/PID/root at a container's start, so that no name waits for an
// API), then from the runtime's API where one is reachable (the Docker Engine
// API; the CRI API of containerd, CRI-O, k3s/RKE2 and cri-dockerd for
// Kubernetes pods), whose answer replaces the files'. The runtime endpoints are options (sigscope's
// --docker-socket and --cri-socket), with the usual locations as defaults.
//
// Besides names and stop settings, the runtime says which process is the
// container's main one (MainPID of [identity.Info], the one it sends the
// stop signal to) and whether a pod's cgroup holds its sandbox (Sandbox:
// the pause container, asked with PodSandboxStatus under CRI, labelled
// io.kubernetes.docker.type=podsandbox by cri-dockerd), whose end is not
// a container stop. Containers are enriched in the background as soon as
// their cgroup appears, often before the runtime has started them; the
// runtime is then asked again, a bounded number of times, until it gives
// the main pid.
//
// Identities are cached by the keys events carry (pid-namespace inode and
// cgroup ids), so the hot path does no /proc read and short-lived processes
// still resolve: a process that is gone is found through its cgroup id, and
// a container that has ended is remembered for a TTL. Pids and pid
// namespace inodes are reused as soon as they are free; cgroup ids never
// are. So a /proc/PID read is trusted only when its cgroup is the event's,
// and an answer keyed by a pid namespace alone is dropped when the
// namespace ends ([Resolver.NamespaceEnded]).
//
// A runtime that fails (slow under load, restarting) is left alone for a
// second, doubling up to 30 s; the containers it could not be asked about
// are asked again until it answers, and [Resolver.Known] says, at an
// episode's end, what is known of a container and why it has no name. The caches and the
// background queues are bounded. A runtime that is missing or unreachable
// only degrades enrichment; errors are counted per source
// ([Resolver.Errors]) and logged once per endpoint and outage.
//
// For `sigscope audit` it lists the running containers with their PID 1
// ([Resolver.ListRunning], never pod sandboxes); how a PID 1 handles
// signals is read by tracer/procsig.
//
// What it finds is package [identity]'s: the one identity type
// ([identity.Identity]), [identity.Info], its JSON [identity.Summary], and
// the [identity.Filter] users pick containers with. That package holds no
// runtime client, so that the packages which only read identities (the
// timeline, the audit, the kubectl plugin) link neither gRPC nor the CRI
// API, which this one does.
//
// Names, labels and annotations are stored as the runtime gave them:
// escaping them is each output's job (internal/textsafe). It does not read
// kernel events or build timelines, and it never runs a runtime's CLI.
package container
