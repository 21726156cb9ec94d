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
// (the excess counted by [Recorder.Suppressed]) and queued, an episode's
// events together, to one worker ([Recorder.Run], in the agent's errgroup)
// that talks to the API server. The queue, the worker, the waits and the
// counts are package sink's, shared with the other outputs; this package
// owns the events, the API calls and which answers are transient
// (send.go). When Run's context ends or [Recorder.Close] is called, what
// is queued is tried once more, for a bounded time.
//
// The API server may be away (restarted, upgraded, overloaded, the node cut
// off). A request that gets no answer (connection refused or reset, a
// timeout) or a 429 or 5xx is transient: its episode goes back to the head
// of the queue and the sender waits, 1 s, 2 s, 4 s... up to 30 s, before it
// tries again. Any other answer (403, 404 for a namespace gone, 422...) is
// final: counted as failed, never retried. While the API server is away the
// queue holds at most Options.QueueSize episodes, and past that the oldest
// is dropped and counted ([Recorder.Dropped]): the newest events are about
// pods most likely still there for `kubectl describe pod` to show, the API
// server expires events after an hour (--event-ttl) anyway, and an episode
// that fails for reasons of its own (a 500 on that one object) cannot hold
// the queue for ever: unlike the journal's line, a failed episode goes
// back to the queue, where newer ones push it out. The Recorder is a
// prometheus.Collector of those counts and of the events queued
// (docs/metrics.md).
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
