package kubeevents

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/timeline"
	"github.com/sigscope/sigscope/tracer"
)

// Event reasons.
const (
	ReasonStopSignalIgnored      = "StopSignalIgnored"
	ReasonKilledAfterGracePeriod = "ContainerKilledAfterGracePeriod"
)

// Component is the events' source component and reporting controller.
const Component = "sigscope"

// MaxMessageBytes bounds an event's message (the events.k8s.io API's limit
// for a note).
const MaxMessageBytes = 1024

// Defaults for [Options].
const (
	DefaultBurst     = 20
	DefaultEvery     = 5 * time.Second
	DefaultQueueSize = 100
	DefaultTimeout   = 10 * time.Second
)

// Options configures a [Recorder]. The zero value is usable.
type Options struct {
	// Burst and Every make the token bucket: up to Burst events at once, then
	// one per Every. 0 means DefaultBurst and DefaultEvery.
	Burst int
	Every time.Duration
	// QueueSize bounds the episodes waiting for the API server; past it they
	// are dropped. 0 means DefaultQueueSize.
	QueueSize int
	// Timeout bounds each API request. 0 means DefaultTimeout.
	Timeout time.Duration
	// NoPodLookup skips the GET of the Pod: events then carry no Pod UID, so
	// `kubectl describe pod` does not list them (`kubectl get events` does),
	// and nothing checks that the pod runs on this node. For RBAC without
	// get on pods.
	NoPodLookup bool
	Logger      *slog.Logger
}

// Recorder turns episodes into Kubernetes Events. Its methods are safe for
// concurrent use.
type Recorder struct {
	client kubernetes.Interface
	node   string
	opts   Options
	log    *slog.Logger
	now    func() time.Time // tests replace it

	limitMu sync.Mutex
	tokens  float64
	last    time.Time

	mu     sync.Mutex // guards closed and sends on queue
	closed bool
	queue  chan job
	done   chan struct{}

	suppressed, dropped, sent, failed atomic.Uint64
	seq                               atomic.Uint64 // makes event names unique
	forbidden                         sync.Once     // warn once about RBAC
}

// job is one episode's events for one pod.
type job struct {
	namespace, pod, containerID string
	events                      []*corev1.Event
}

// New starts a Recorder writing with client as the agent of node nodeName
// (the events' source host; from the downward API's spec.nodeName).
func New(client kubernetes.Interface, nodeName string, opts Options) *Recorder {
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{
		client: client,
		node:   nodeName,
		opts:   opts,
		log:    opts.Logger,
		now:    time.Now,
		tokens: float64(opts.Burst),
		queue:  make(chan job, opts.QueueSize),
		done:   make(chan struct{}),
	}
	go r.run()
	return r
}

// Suppressed counts events the rate limit held back.
func (r *Recorder) Suppressed() uint64 { return r.suppressed.Load() }

// Dropped counts events lost because the queue was full or the Recorder closed.
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// Sent counts events the API server accepted.
func (r *Recorder) Sent() uint64 { return r.sent.Load() }

// Failed counts events the API server refused or that could not be sent,
// and events not written because the pod is another node's.
func (r *Recorder) Failed() uint64 { return r.failed.Load() }

// ObserveEpisode queues the events ep calls for, if any, and returns at once.
// Only Kubernetes containers (Pod and Namespace known) get events.
func (r *Recorder) ObserveEpisode(ep *timeline.Episode) {
	if ep == nil || ep.Container.Pod == "" || ep.Container.Namespace == "" {
		return
	}
	var evs []*corev1.Event
	now := r.now()
	if (ep.Outcome == timeline.OutcomeIgnoredByInit || ep.Outcome == timeline.OutcomeIgnored) && ep.StopSignal != 0 {
		evs = append(evs, r.event(ep, now, ReasonStopSignalIgnored, ignoredMessage(ep)))
	}
	if killedAfterGrace(ep) {
		evs = append(evs, r.event(ep, now, ReasonKilledAfterGracePeriod, containerPrefix(ep)+ep.Summary()))
	}
	if len(evs) == 0 {
		return
	}
	allowed := evs[:0]
	for _, ev := range evs {
		if r.allow(now) {
			allowed = append(allowed, ev)
		} else {
			r.suppressed.Add(1)
		}
	}
	if len(allowed) == 0 {
		return
	}
	j := job{namespace: ep.Container.Namespace, pod: ep.Container.Pod, containerID: ep.Container.ID, events: allowed}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.dropped.Add(uint64(len(allowed)))
		return
	}
	select {
	case r.queue <- j:
	default:
		r.dropped.Add(uint64(len(allowed)))
	}
}

// killedAfterGrace: a stop signal, then the SIGKILL that ends a grace period.
func killedAfterGrace(ep *timeline.Episode) bool {
	switch ep.Outcome {
	case timeline.OutcomeIgnoredByInit, timeline.OutcomeIgnored, timeline.OutcomeHandlerTimeout:
		return !ep.KillAt.IsZero() || ep.ExitSignal == tracer.SIGKILL
	}
	return false
}

func containerPrefix(ep *timeline.Episode) string {
	if ep.Container.Name == "" {
		return ""
	}
	return "container " + ep.Container.Name + ": "
}

func ignoredMessage(ep *timeline.Episode) string {
	if ep.Hint != "" {
		return containerPrefix(ep) + ep.Hint
	}
	return containerPrefix(ep) + ep.Summary()
}

// allow takes a token from the bucket.
func (r *Recorder) allow(now time.Time) bool {
	r.limitMu.Lock()
	defer r.limitMu.Unlock()
	if !r.last.IsZero() && now.After(r.last) {
		r.tokens += float64(now.Sub(r.last)) / float64(r.opts.Every)
		if r.tokens > float64(r.opts.Burst) {
			r.tokens = float64(r.opts.Burst)
		}
	}
	if r.last.IsZero() || now.After(r.last) {
		r.last = now
	}
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}

func (r *Recorder) event(ep *timeline.Episode, now time.Time, reason, message string) *corev1.Event {
	at := ep.ExitAt
	if at.IsZero() {
		at = now
	}
	ref := corev1.ObjectReference{
		Kind:       "Pod",
		APIVersion: "v1",
		Namespace:  ep.Container.Namespace,
		Name:       ep.Container.Pod,
	}
	if ep.Container.Name != "" {
		// As the kubelet writes it for a container's events.
		ref.FieldPath = fmt.Sprintf("spec.containers{%s}", ep.Container.Name)
	}
	t := metav1.NewTime(at)
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      r.eventName(ep.Container.Pod, now),
			Namespace: ep.Container.Namespace,
		},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             Message(message),
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: Component, Host: r.node},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		ReportingController: Component,
		ReportingInstance:   r.node,
	}
}

// eventName is the pod's name and a unique hex suffix, as client-go's
// recorder names events, kept within a DNS subdomain's 253 characters.
func (r *Recorder) eventName(pod string, now time.Time) string {
	const maxBase = 253 - 1 - 16 - 4
	if len(pod) > maxBase {
		pod = strings.TrimRight(pod[:maxBase], "-.")
	}
	return fmt.Sprintf("%s.%x%04x", pod, now.UnixNano(), r.seq.Add(1)&0xffff)
}

// Message makes s fit for an event message: escaped for a terminal (valid
// UTF-8, no control characters: kubectl prints it raw) and at most
// MaxMessageBytes, cut at a character boundary with "..." when longer.
func Message(s string) string {
	s = textsafe.Terminal(s)
	if len(s) <= MaxMessageBytes {
		return s
	}
	const ellipsis = "..."
	i := MaxMessageBytes - len(ellipsis)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + ellipsis
}

// Close sends the queued events, each request bounded by Options.Timeout,
// and stops the Recorder. Later episodes are dropped. It is idempotent.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.queue)
	}
	r.mu.Unlock()
	<-r.done
	return nil
}

func (r *Recorder) run() {
	defer close(r.done)
	for j := range r.queue {
		r.send(j)
	}
}

func (r *Recorder) send(j job) {
	if !r.opts.NoPodLookup {
		uid, ok := r.lookup(j)
		if !ok {
			r.failed.Add(uint64(len(j.events)))
			return
		}
		for _, ev := range j.events {
			ev.InvolvedObject.UID = uid
		}
	}
	for _, ev := range j.events {
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
		_, err := r.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		cancel()
		if err != nil {
			r.failed.Add(1)
			r.log.Warn("kube events: creating event", "namespace", textsafe.Terminal(ev.Namespace),
				"pod", textsafe.Terminal(ev.InvolvedObject.Name), "reason", ev.Reason, "error", err)
			continue
		}
		r.sent.Add(1)
	}
}

// lookup reads the pod's UID. It refuses (false) a pod the API server places
// on another node. The UID is left empty when the pod is gone, or when its
// status does not list the episode's container: a pod recreated under the
// same name (a StatefulSet's) is not the one that stopped.
func (r *Recorder) lookup(j job) (types.UID, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	pod, err := r.client.CoreV1().Pods(j.namespace).Get(ctx, j.pod, metav1.GetOptions{})
	if err != nil {
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err):
			r.forbidden.Do(func() {
				r.log.Warn("kube events: may not get pods (RBAC): events carry no pod UID, so kubectl describe pod will not list them", "error", err)
			})
		default:
			r.log.Debug("kube events: reading pod", "namespace", textsafe.Terminal(j.namespace),
				"pod", textsafe.Terminal(j.pod), "error", err)
		}
		return "", true
	}
	if r.node != "" && pod.Spec.NodeName != "" && pod.Spec.NodeName != r.node {
		r.log.Warn("kube events: pod runs on another node; not writing events on it",
			"namespace", textsafe.Terminal(j.namespace), "pod", textsafe.Terminal(j.pod), "pod_node", pod.Spec.NodeName)
		return "", false
	}
	if j.containerID == "" || hasContainer(pod, j.containerID) {
		return pod.UID, true
	}
	return "", true
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
