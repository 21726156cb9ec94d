package container

// Info identifies the container a process belongs to, with what the runtime
// said about it. Fields the resolver could not learn are empty: with no
// runtime reachable, ID and Runtime still come from the cgroup path.
type Info struct {
	ID      string // full container ID (64 hex for docker/containerd/CRI-O/podman)
	Runtime string // "docker", "containerd", "cri-o", "podman"
	Name    string // runtime name (docker: without the leading "/"); Kubernetes: the container name
	Image   string

	// Kubernetes, from the io.kubernetes.* labels and annotations.
	Pod       string
	Namespace string
	PodUID    string

	// Stop configuration, when the runtime reports it.
	StopSignal  string // e.g. "SIGTERM"; empty means the runtime default (SIGTERM)
	StopTimeout int    // seconds the runtime waits before SIGKILL (docker StopTimeout, 0: unknown)
	GracePeriod int    // Kubernetes terminationGracePeriodSeconds (0: unknown)

	Labels      map[string]string
	Annotations map[string]string // CRI only; Docker has no annotations
}

// Key is what events carry that identifies a container without a /proc
// read: the pid-namespace inode and the cgroup ids.
type Key struct {
	PidNS      uint32
	CgroupID   uint64 // cgroup v2 id; <= 1 means none
	CgroupV1ID uint64 // cgroup v1 memory controller id; 0 means none
}

// bare reports whether the runtime told nothing about the container: only
// what its cgroup path gives is known.
func (i *Info) bare() bool {
	return i.Name == "" && i.Image == "" && i.Pod == "" && len(i.Labels) == 0
}
