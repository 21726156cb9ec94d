// Package kubeevents reports bad container stops as Kubernetes Events on the
// Pod, where `kubectl describe pod` and event-based alerting see them:
//
//   - Warning StopSignalIgnored: the container's PID 1 dropped its stop
//     signal (outcome ignored_by_init), with the fix.
//   - Warning ContainerKilledAfterGracePeriod: the container was SIGKILLed
//     at the end of its grace period (ignored_by_init, or handler_timeout),
//     with the episode's one-line summary.
//
// A [Recorder] takes finished [timeline.Episode] values from the agent's
// event loop and never blocks it: events are rate-limited with a token bucket
// (the excess counted by [Recorder.Suppressed]) and queued to one goroutine
// that talks to the API server; a full queue drops and counts
// ([Recorder.Dropped]). [Recorder.Close] sends what is queued and stops.
//
// Episodes only name the pod; the Pod's UID (which `kubectl describe`
// matches events on) is read from the API server with one GET, unless
// [Options.NoPodLookup]. That GET also keeps sigscope from writing on a pod
// that is not this node's: the pod name comes from container labels, which
// anyone able to start a container on the node can set. RBAC: create on
// events; get on pods for the lookup.
//
// Messages quote process and container names, so they are escaped with
// textsafe.Terminal (valid UTF-8, no control characters) and bounded to
// [MaxMessageBytes].
//
// It does not watch the API server, build the client or decide whether
// events are wanted: cmd/sigscope does (--kube-events).
package kubeevents
