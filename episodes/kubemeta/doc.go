// Package kubemeta learns from the API server why the kubelet stopped a
// container and with what grace period: the Pod's deletionTimestamp and
// deletionGracePeriodSeconds, its DisruptionTarget condition (eviction,
// preemption), and the kubelet's Killing events (a failed liveness or
// startup probe, a changed container spec). It follows pods and those
// events with informers and keeps what it saw of recently deleted pods,
// bounded, so that an episode completed after its pod is gone is still
// explained.
//
// It decides the stop reason of an episode; it does not change its
// outcome, which is the kernel's (timeline).
package kubemeta
