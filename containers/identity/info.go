package identity

import (
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/events/sigvocab"
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
