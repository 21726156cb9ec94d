package kubeevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sigscope/sigscope/internal/kubeclient"
	"github.com/sigscope/sigscope/internal/retry"
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
	// The API server's outages are retried every 1 s, 2 s, 4 s... up to
	// every 30 s: soon enough to see a restart, seldom enough that a
	// cluster's agents do not flood an API server that comes back.
	DefaultRetryMin = time.Second
	DefaultRetryMax = 30 * time.Second
	// Close gives up after 3 s: the chart's terminationGracePeriodSeconds
	// is 10, and the HTTP server's shutdown comes first.
	DefaultDrainTimeout = 3 * time.Second
)

// Options configures a [Recorder]. The zero value is usable.
type Options struct {
	// Burst and Every make the token bucket: up to Burst events at once, then
	// one per Every. 0 means DefaultBurst and DefaultEvery.
	Burst int
	Every time.Duration
	// QueueSize bounds the episodes waiting for the API server, besides
	// the one being sent; past it the oldest is dropped. 0 means
	// DefaultQueueSize.
	QueueSize int
	// Timeout bounds each API request. 0 means DefaultTimeout.
	Timeout time.Duration
	// RetryMin and RetryMax bound the wait after a transient failure: it
	// starts at RetryMin and doubles up to RetryMax (plus up to a fifth, at
	// random). 0 means DefaultRetryMin and DefaultRetryMax.
	RetryMin, RetryMax time.Duration
	// DrainTimeout bounds Close: what is still queued then is dropped.
	// 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
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
	client kubeclient.Client
	node   string
	opts   Options
	log    *slog.Logger
	now    func() time.Time // tests replace it

	// limit is the token bucket of Options.Burst and Every, asked with
	// the event's own time (the tests' clock).
	limit *rate.Limiter

	mu      sync.Mutex // guards closed, queue and drain
	closed  bool
	queue   ring
	drain   *time.Timer     // cancels ctx DrainTimeout after Close
	wake    chan struct{}   // one pending wake-up for the sender: a job or Close
	closing chan struct{}   // closed by Close: no more waiting between tries
	ctx     context.Context // every request's parent; canceled when Close gives up
	cancel  context.CancelFunc
	done    chan struct{}

	suppressed, dropped, sent, failed, retries atomic.Uint64
	queued                                     atomic.Int64  // events queued or being sent
	seq                                        atomic.Uint64 // makes event names unique
	forbidden                                  sync.Once     // warn once about RBAC
}

// job is one episode's events for one pod, until each is sent or given up.
type job struct {
	namespace, pod, containerID string
	events                      []*corev1.Event // those not yet sent, in order
	lookedUp                    bool            // the Pod's UID is in events
	retried                     bool            // events[0]'s create failed transiently before
}

// New starts a Recorder writing with client as the agent of node nodeName
// (the events' source host; from the downward API's spec.nodeName).
func New(client kubeclient.Client, nodeName string, opts Options) *Recorder {
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
	if opts.RetryMin <= 0 {
		opts.RetryMin = DefaultRetryMin
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = DefaultRetryMax
	}
	opts.RetryMax = max(opts.RetryMax, opts.RetryMin)
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{
		client:  client,
		node:    nodeName,
		opts:    opts,
		log:     opts.Logger,
		now:     time.Now,
		limit:   rate.NewLimiter(rate.Every(opts.Every), opts.Burst),
		queue:   ring{jobs: make([]*job, opts.QueueSize)},
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.run()
	return r
}

// Suppressed counts events the rate limit held back.
func (r *Recorder) Suppressed() uint64 { return r.suppressed.Load() }

// Dropped counts events lost unsent: pushed out of a full queue (the
// oldest first), or still queued when Close gave up.
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// Sent counts events the API server accepted.
func (r *Recorder) Sent() uint64 { return r.sent.Load() }

// Failed counts events the API server refused for good (403, 404, 422...),
// and events not written because the pod is another node's.
func (r *Recorder) Failed() uint64 { return r.failed.Load() }

// Queued is the number of events waiting for the API server, the ones
// being sent included.
func (r *Recorder) Queued() int { return int(r.queued.Load()) }

// Retries counts API requests (event creates, pod GETs) that failed
// transiently: the API server did not answer, or answered 429 or 5xx.
func (r *Recorder) Retries() uint64 { return r.retries.Load() }

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
	j := &job{namespace: ep.Container.Namespace, pod: ep.Container.Pod, containerID: ep.Container.ID, events: allowed}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.dropped.Add(uint64(len(allowed)))
		return
	}
	r.queued.Add(int64(len(allowed)))
	if r.queue.full() {
		// The oldest goes: see doc.go for why.
		r.drop(r.queue.popFront())
	}
	r.queue.pushBack(j)
	r.mu.Unlock()
	r.signal()
}

// signal wakes the sender if it waits for a job; one pending wake-up is
// enough, since it empties the queue before it waits again.
func (r *Recorder) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// drop gives up j's remaining events.
func (r *Recorder) drop(j *job) {
	r.dropped.Add(uint64(len(j.events)))
	r.queued.Add(-int64(len(j.events)))
	j.events = nil
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
func (r *Recorder) allow(now time.Time) bool { return r.limit.AllowN(now, 1) }

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

// Close tries once more to send what is queued, for at most
// Options.DrainTimeout, drops the rest and stops the Recorder. Later
// episodes are dropped. It is idempotent.
func (r *Recorder) Close() error {
	r.mu.Lock()
	first := !r.closed
	if first {
		r.closed = true
		close(r.closing)
		r.drain = time.AfterFunc(r.opts.DrainTimeout, r.cancel)
	}
	dropped := r.Dropped()
	r.mu.Unlock()
	r.signal()
	<-r.done
	r.mu.Lock()
	r.drain.Stop()
	r.mu.Unlock()
	r.cancel()
	if n := r.Dropped() - dropped; first && n > 0 {
		r.log.Warn("kube events: events still queued at shutdown were dropped", "dropped", n)
	}
	return nil
}

// run is the sender: one job at a time, oldest first. A job that fails
// transiently goes back to the queue's head, and the sender waits before
// the next try; the wait doubles while the API server does not answer.
func (r *Recorder) run() {
	defer close(r.done)
	b := retry.Backoff{Min: r.opts.RetryMin, Max: r.opts.RetryMax}
	timer := time.NewTimer(time.Hour) // one timer for every wait
	timer.Stop()
	var outage time.Time // when the API server stopped answering
	for {
		j := r.take()
		if j == nil {
			return
		}
		err := r.send(j)
		if err == nil {
			if !outage.IsZero() {
				// At the warning's level, which sigscope logs by
				// default: it closes that warning.
				r.log.Warn("kube events: the API server answers again", "after", time.Since(outage).Round(time.Millisecond),
					"queued", r.Queued(), "dropped_total", r.Dropped())
				outage = time.Time{}
			}
			b.Reset()
			continue
		}
		if r.ctx.Err() != nil { // Close gave up: counted by Close
			r.mu.Lock()
			r.drop(j)
			r.mu.Unlock()
			continue
		}
		r.retries.Add(1)
		if outage.IsZero() {
			outage = time.Now()
			r.log.Warn("kube events: the API server does not answer; events stay queued and are retried",
				"queued", r.Queued(), "error", err)
		} else {
			r.log.Debug("kube events: retrying", "queued", r.Queued(), "error", err)
		}
		if !r.requeue(j) {
			continue // closing: no waiting, each job had its last try
		}
		timer.Reset(b.Next(retryAfter(err)))
		select {
		case <-timer.C:
		case <-r.closing:
			timer.Stop()
		}
	}
}

// take waits for the oldest job; nil once closed and empty.
func (r *Recorder) take() *job {
	for {
		r.mu.Lock()
		j := r.queue.popFront()
		closed := r.closed
		r.mu.Unlock()
		if j != nil || closed {
			return j
		}
		<-r.wake
	}
}

// requeue puts j back at the head after a transient failure, unless the
// Recorder is closing (false) or the queue filled meanwhile: j is then the
// oldest, and dropped.
func (r *Recorder) requeue(j *job) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.drop(j)
		return false
	}
	if r.queue.full() {
		r.drop(j)
	} else {
		r.queue.pushFront(j)
	}
	return true
}

// send writes j's events; an error is transient, with the events not yet
// sent left in j. Events sent or refused for good are counted here.
func (r *Recorder) send(j *job) error {
	if !r.opts.NoPodLookup && !j.lookedUp {
		uid, ok, err := r.lookup(j)
		if err != nil {
			return err
		}
		if !ok {
			r.failed.Add(uint64(len(j.events)))
			r.queued.Add(-int64(len(j.events)))
			j.events = nil
			return nil
		}
		for _, ev := range j.events {
			ev.InvolvedObject.UID = uid
		}
		j.lookedUp = true
	}
	for len(j.events) > 0 {
		ev := j.events[0]
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.Timeout)
		_, err := r.client.CreateEvent(ctx, ev)
		cancel()
		switch {
		case err == nil:
			r.sent.Add(1)
		case apierrors.IsAlreadyExists(err) && j.retried:
			// A try that timed out had reached the API server: names are
			// unique to this Recorder, so the event is ours.
			r.sent.Add(1)
		case transient(err):
			j.retried = true
			return err
		default:
			r.failed.Add(1)
			r.log.Warn("kube events: creating event", "namespace", textsafe.Terminal(ev.Namespace),
				"pod", textsafe.Terminal(ev.InvolvedObject.Name), "reason", ev.Reason, "error", err)
		}
		j.events, j.retried = j.events[1:], false
		r.queued.Add(-1)
	}
	return nil
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
func (r *Recorder) lookup(j *job) (types.UID, bool, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.Timeout)
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
