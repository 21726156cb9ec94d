package identity

import (
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Info identifies the container a process belongs to, with what the runtime
// said about it. Fields the resolver could not learn are empty: with no
// runtime reachable, ID and Runtime still come from the cgroup path.
type Info struct {
	Identity

	// MainPID is the host pid of the container's main process, the one the
	// runtime started and sends the stop signal to: the pid-namespace init
	// when the container has its own namespace, another process when it
	// shares one (docker --pid container:X, a pod's shareProcessNamespace).
	// 0 when the runtime did not say (not started yet, or not asked).
	MainPID int
	// MainRuntime is the language runtime of the main process
	// (langrt.Detect on MainPID when the runtime named it): what the
	// kernel's events cannot tell by a command name, such as a Go binary.
	// Unknown ("") when not read.
	MainRuntime langrt.Runtime
	// Sandbox is true for a pod's sandbox (pause) container: its end is
	// the last step of a pod's teardown, never a container stop. Its Name
	// is the kubelet's "POD" (container.SandboxName).
	Sandbox bool
	// FromFiles: what is here was read from the runtime's own files (its
	// container record, its OCI bundle), the runtime's API not having
	// answered (yet). The API's answer replaces it, and adds what the
	// files do not carry (a containerd container's grace period).
	FromFiles bool

	// Stop configuration, when the runtime reports it.
	StopSignal  sigvocab.Signal // 0 means the runtime default (SIGTERM)
	StopTimeout int             // seconds the runtime waits before SIGKILL (docker StopTimeout, 0: unknown)
	GracePeriod int             // Kubernetes terminationGracePeriodSeconds (0: unknown)
	PreStop     *Hook           // Kubernetes preStop hook, from the kubelet's annotation; nil: none

	Labels      map[string]string
	Annotations map[string]string // CRI only; Docker has no annotations
}

// StopSignalOrDefault is the signal the runtime sends to stop the container.
func (i *Info) StopSignalOrDefault() sigvocab.Signal {
	if i.StopSignal != 0 {
		return i.StopSignal
	}
	return sigvocab.SIGTERM
}

// Lacks names what of the container's identity i does not give: its name,
// its image (a pod's sandbox has none), and for a pod's container (any but
// Docker's, or one that names its pod) its pod and namespace. What an
// episode named from the runtime's files says those files did not carry.
func (i *Info) Lacks() []string {
	var miss []string
	if i.Name == "" {
		miss = append(miss, "name")
	}
	if i.Image == "" && !i.Sandbox {
		miss = append(miss, "image")
	}
	if i.Runtime != "docker" || i.Pod != "" || i.Namespace != "" {
		if i.Pod == "" {
			miss = append(miss, "pod")
		}
		if i.Namespace == "" {
			miss = append(miss, "namespace")
		}
	}
	return miss
}
