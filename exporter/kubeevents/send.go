package kubeevents

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sigscope/sigscope/exporter/sink"
	"github.com/sigscope/sigscope/internal/textsafe"
)

// The sender: what the sink's worker does with a job, and which of the API
// server's answers are worth another try.

// send writes a job's events (the sink's batch is one job). An error is
// transient, with the events not yet sent left in the job; the events sent
// or refused for good are counted in the Done.
func (r *Recorder) send(ctx context.Context, batch []*job) (sink.Done, error) {
	var done sink.Done
	j := batch[0]
	if !r.opts.NoPodLookup && !j.lookedUp {
		uid, ok, err := r.lookup(ctx, j)
		if err != nil {
			return done, err
		}
		if !ok {
			done.Failed = len(j.events)
			j.events = nil
			return done, nil
		}
		for _, ev := range j.events {
			ev.InvolvedObject.UID = uid
		}
		j.lookedUp = true
	}
	for len(j.events) > 0 {
		ev := j.events[0]
		rctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
		_, err := r.client.CreateEvent(rctx, ev)
		cancel()
		switch {
		case err == nil:
			done.Sent++
		case apierrors.IsAlreadyExists(err) && j.retried:
			// A try that timed out had reached the API server: names are
			// unique to this Recorder, so the event is ours.
			done.Sent++
		case transient(err):
			j.retried = true
			return done, err
		default:
			done.Failed++
			r.log.Warn("kube events: creating event", "namespace", textsafe.Terminal(ev.Namespace),
				"pod", textsafe.Terminal(ev.InvolvedObject.Name), "reason", ev.Reason, "error", err)
		}
		j.events, j.retried = j.events[1:], false
	}
	return done, nil
}

// retryAfter is the wait a 429 or 5xx answer asks for (Retry-After); 0
// for none.
func retryAfter(err error) time.Duration {
	if s, ok := apierrors.SuggestsClientDelay(err); ok {
		return time.Duration(s) * time.Second
	}
	return 0
}

// transient reports whether a request may succeed when tried again: the API
// server did not answer (connection refused or reset, a timeout, no route,
// a TLS handshake cut short), or answered that it cannot now (429, 5xx:
// unavailable, overloaded, timed out, an internal error). Any other answer
// (403, 404, 409, 422...) is final.
func transient(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true
	}
	code := st.Status().Code
	return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
}

// lookup reads the pod's UID. It refuses (false) a pod the API server places
// on another node. The UID is left empty when the pod is gone, or when its
// status does not list the episode's container: a pod recreated under the
// same name (a StatefulSet's) is not the one that stopped. An error is
// transient: the lookup is to be tried again.
func (r *Recorder) lookup(ctx context.Context, j *job) (types.UID, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	pod, err := r.client.GetPod(ctx, j.namespace, j.pod)
	if err != nil {
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err):
			r.forbidden.Do(func() {
				r.log.Warn("kube events: may not get pods (RBAC): events carry no pod UID, so kubectl describe pod will not list them", "error", err)
			})
		case transient(err):
			return "", false, err
		default:
			r.log.Debug("kube events: reading pod", "namespace", textsafe.Terminal(j.namespace),
				"pod", textsafe.Terminal(j.pod), "error", err)
		}
		return "", true, nil
	}
	if r.node != "" && pod.Spec.NodeName != "" && pod.Spec.NodeName != r.node {
		r.log.Warn("kube events: pod runs on another node; not writing events on it",
			"namespace", textsafe.Terminal(j.namespace), "pod", textsafe.Terminal(j.pod), "pod_node", pod.Spec.NodeName)
		return "", false, nil
	}
	if j.containerID == "" || hasContainer(pod, j.containerID) {
		return pod.UID, true, nil
	}
	return "", true, nil
}

// hasContainer reports whether the pod's status names the container (IDs
// there read "containerd://<id>", "cri-o://<id>", "docker://<id>").
func hasContainer(pod *corev1.Pod, id string) bool {
	match := func(cid string) bool {
		if cid == "" {
			return false
		}
		if i := strings.Index(cid, "://"); i >= 0 {
			cid = cid[i+3:]
		}
		return cid == id
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, s := range list {
			if match(s.ContainerID) ||
				s.State.Terminated != nil && match(s.State.Terminated.ContainerID) ||
				s.LastTerminationState.Terminated != nil && match(s.LastTerminationState.Terminated.ContainerID) {
				return true
			}
		}
	}
	return false
}
