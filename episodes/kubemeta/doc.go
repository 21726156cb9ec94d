// Package kubemeta learns from the API server why the kubelet stopped a
// container and with what grace period: the Pod's deletionTimestamp and
// deletionGracePeriodSeconds, its DisruptionTarget condition (eviction,
// preemption), and the kubelet's Killing events (a failed liveness or
// startup probe, a changed container spec). It follows pods and those
// events with informers and keeps what it saw of recently deleted pods,
// bounded, so that an episode completed after its pod is gone is still
// explained.
//
// A third informer follows the EndpointSlices: when the pod's endpoint in
// each Service turned not ready, not serving, terminating, and when it was
// removed, as this agent saw each change (the network's side of a pod's
// stop; endpoints.go).
//
// It decides the stop reason of an episode and adds its endpoints; it does
// not change its outcome, which is the kernel's (timeline).
package kubemeta
