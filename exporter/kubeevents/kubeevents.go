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

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sigscope/sigscope/containers/kubeclient"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter/sink"
	"github.com/sigscope/sigscope/internal/textsafe"
)

// Event reasons.
const (
	ReasonStopSignalIgnored      = "StopSignalIgnored"
	ReasonKilledAfterGracePeriod = "ContainerKilledAfterGracePeriod"
	// ReasonStopLostConnections: clients lost connections while the
	// container stopped (refused, reset by it, cut), as the kernel counted.
	ReasonStopLostConnections = "StopLostConnections"
	// ReasonOOMKillInRunningContainer: the OOM killer killed a process of
	// a container whose main process lived on (not a stop: the kubelet
	// reports nothing, as the container did not restart).
	ReasonOOMKillInRunningContainer = "OOMKillInRunningContainer"
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
	// The API server's outages are retried as every output's (package
	// sink): after 1 s, 2 s, 4 s... up to every 30 s; the last try of
	// what is queued at shutdown gives up after 3 s.
	DefaultRetryMin     = sink.DefaultRetryMin
	DefaultRetryMax     = sink.DefaultRetryMax
	DefaultDrainTimeout = sink.DefaultDrainTimeout
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
	// DrainTimeout bounds the last try of what is queued when the
	// Recorder stops: what is still queued then is dropped. 0 means
	// DefaultDrainTimeout.
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
	sink.Collector // sigscope_kube_events_*: metrics.go

	client kubeclient.Client
	node   string
	opts   Options
	log    *slog.Logger
	now    func() time.Time // tests replace it

	// limit is the token bucket of Options.Burst and Every, asked with
	// the event's own time (the tests' clock).
	limit *rate.Limiter
	// out queues jobs, an episode's events each, for the sender (send.go).
	out *sink.Sink[*job]

	suppressed atomic.Uint64
	seq        atomic.Uint64 // makes event names unique
	forbidden  sync.Once     // warn once about RBAC
}

// job is one episode's events for one pod, until each is sent or given up.
type job struct {
	namespace, pod, containerID string
	events                      []*corev1.Event // those not yet sent, in order
	lookedUp                    bool            // the Pod's UID is in events
	retried                     bool            // events[0]'s create failed transiently before
}

// New returns a Recorder writing with client as the agent of node nodeName
// (the events' source host; from the downward API's spec.nodeName).
// [Recorder.Run] sends what it queues.
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
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{
		client: client,
		node:   nodeName,
		opts:   opts,
		log:    opts.Logger,
		now:    time.Now,
		limit:  rate.NewLimiter(rate.Every(opts.Every), opts.Burst),
	}
	r.out = sink.New(sink.Options[*job]{
		QueueSize:    opts.QueueSize,
		Size:         func(j *job) int { return len(j.events) },
		Send:         r.send,
		RetryAfter:   retryAfter,
		RetryMin:     opts.RetryMin,
		RetryMax:     opts.RetryMax,
		DrainTimeout: opts.DrainTimeout,
		Logger:       opts.Logger,
		Log: sink.Messages{
			Down:    "kube events: the API server does not answer; events stay queued and are retried",
			Again:   "kube events: retrying",
			Up:      "kube events: the API server answers again",
			UpLevel: slog.LevelWarn,
			Dropped: "kube events: events still queued at shutdown were dropped",
		},
	})
	r.Collector = r.metrics()
	return r
}

// Run sends the queued events until ctx ends or Close is called, then
// tries what is still queued once more, for at most Options.DrainTimeout,
// and returns.
func (r *Recorder) Run(ctx context.Context) { r.out.Run(ctx) }

// Close stops the Recorder: later episodes are dropped. It returns once
// Run has, or, when Run was never called, once what is queued had its last
// try. It is idempotent.
func (r *Recorder) Close() error { return r.out.Close() }

// Suppressed counts events the rate limit held back.
func (r *Recorder) Suppressed() uint64 { return r.suppressed.Load() }

// Dropped counts events lost unsent: pushed out of a full queue (the
// oldest first), or still queued when Close gave up.
func (r *Recorder) Dropped() uint64 { return r.out.Dropped() }

// Sent counts events the API server accepted.
func (r *Recorder) Sent() uint64 { return r.out.Sent() }

// Failed counts events the API server refused for good (403, 404, 422...),
// and events not written because the pod is another node's.
func (r *Recorder) Failed() uint64 { return r.out.Failed() }

// Queued is the number of events waiting for the API server, the ones
// being sent included.
func (r *Recorder) Queued() int { return r.out.Queued() }

// Retries counts API requests (event creates, pod GETs) that failed
// transiently: the API server did not answer, or answered 429 or 5xx.
func (r *Recorder) Retries() uint64 { return r.out.Retries() }

// ObserveEpisode queues the events ep calls for, if any, and returns at once.
// Only Kubernetes containers (Pod and Namespace known) get events.
func (r *Recorder) ObserveEpisode(ep *timeline.Episode) {
	if ep == nil || ep.Container.Pod == "" || ep.Container.Namespace == "" {
		return
	}
	var evs []*corev1.Event
	now := r.now()
	if ep.Outcome == timeline.OutcomeOOMKillSurvived {
		evs = append(evs, r.event(ep, now, ReasonOOMKillInRunningContainer, containerPrefix(ep)+ep.Summary()+". "+ep.Hint))
	}
	if (ep.Outcome == timeline.OutcomeIgnoredByInit || ep.Outcome == timeline.OutcomeIgnored) && ep.StopSignal != 0 {
		evs = append(evs, r.event(ep, now, ReasonStopSignalIgnored, ignoredMessage(ep)))
	}
	if killedAfterGrace(ep) {
		evs = append(evs, r.event(ep, now, ReasonKilledAfterGracePeriod, containerPrefix(ep)+ep.Summary()))
	}
	if t := ep.Traffic; t != nil && t.Unread == "" && t.Lost() > 0 {
		msg := containerPrefix(ep) + t.Verdict
		if t.Hint != "" {
			msg += ". " + t.Hint
		}
		evs = append(evs, r.event(ep, now, ReasonStopLostConnections, msg))
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
	// A full queue drops its oldest: see doc.go for why.
	r.out.Add(&job{namespace: ep.Container.Namespace, pod: ep.Container.Pod, containerID: ep.Container.ID, events: allowed})
}

// killedAfterGrace: a stop signal, then the SIGKILL that ends a grace period.
func killedAfterGrace(ep *timeline.Episode) bool { return ep.Outcome.KilledAfterGrace() }

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
