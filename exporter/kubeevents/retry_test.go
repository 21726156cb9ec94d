package kubeevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sigscope/sigscope/containers/kubeclient"
	"github.com/sigscope/sigscope/containers/kubeclient/kubeclienttest"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/testutil"
)

// fast retries, so that the tests' outages take milliseconds.
var fast = Options{RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond}

// refused is what client-go returns when nothing listens at the API
// server's address.
var refused = &url.Error{Op: "Post", URL: "https://10.244.0.1:6443/api/v1/namespaces/shop/events",
	Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}

// running starts r's sender as the agent does, under its own goroutine;
// the test's Close stops it.
func running(r *Recorder) *Recorder {
	go r.Run(context.Background())
	return r
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "events"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"connection reset", &url.Error{Op: "Get", URL: "https://x/", Err: syscall.ECONNRESET}, true},
		{"no route", &url.Error{Op: "Get", URL: "https://x/", Err: syscall.EHOSTUNREACH}, true},
		{"request timeout", &url.Error{Op: "Post", URL: "https://x/", Err: context.DeadlineExceeded}, true},
		{"EOF", io.ErrUnexpectedEOF, true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"500", apierrors.NewInternalError(errors.New("etcd")), true},
		{"500 server timeout", apierrors.NewServerTimeout(gr, "create", 1), true},
		{"502", apierrors.NewGenericServerResponse(http.StatusBadGateway, "POST", gr, "", "", 0, true), true},
		{"503", apierrors.NewServiceUnavailable("starting"), true},
		{"504", apierrors.NewTimeoutError("slow etcd", 0), true},
		{"400", apierrors.NewBadRequest("bad"), false},
		{"401", apierrors.NewUnauthorized("token"), false},
		{"403", apierrors.NewForbidden(gr, "", errors.New("RBAC")), false},
		{"404 namespace gone", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "shop"), false},
		{"409", apierrors.NewAlreadyExists(gr, "web-1.1"), false},
		{"422", apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "web-1.1", field.ErrorList{field.Required(field.NewPath("reason"), "")}), false},
		{"wrapped 403", fmt.Errorf("creating: %w", apierrors.NewForbidden(gr, "", nil)), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s (%v): transient %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// An API server that fails a few times, without answering and then with
// 503 and 429, gets the events in the end: the pod lookup and each create are
// tried again, with the same event names.
func TestTransientThenSent(t *testing.T) {
	c := fake.NewClientset(pod("web-1", node, cid))
	var gets, creates atomic.Int32
	c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		switch gets.Add(1) {
		case 1:
			return true, nil, refused
		case 2:
			return true, nil, apierrors.NewServiceUnavailable("the API server is shutting down")
		}
		return false, nil, nil
	})
	c.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		switch creates.Add(1) {
		case 1:
			return true, nil, refused
		case 2:
			return true, nil, apierrors.NewTooManyRequests("priority and fairness", 1)
		}
		return false, nil, nil
	})
	r := running(New(kubeclienttest.FromClientset(c), node, fast))
	r.ObserveEpisode(stop("web-1", timeline.OutcomeIgnoredByInit))
	testutil.WaitFor(t, "two events sent", func() bool { return r.Sent() == 2 })
	r.Close()

	if r.Failed() != 0 || r.Dropped() != 0 || r.Queued() != 0 || r.Retries() != 4 {
		t.Errorf("failed %d dropped %d queued %d retries %d, want 0 0 0 4", r.Failed(), r.Dropped(), r.Queued(), r.Retries())
	}
	evs := events(t, c)
	if len(evs) != 2 {
		t.Fatalf("%d events in the API, want 2", len(evs))
	}
	for _, e := range evs {
		if e.InvolvedObject.UID != "uid-web-1" {
			t.Errorf("%s: UID %q: the lookup was not tried again", e.Reason, e.InvolvedObject.UID)
		}
	}
	names := map[string]int{}
	for _, a := range c.Actions() {
		if a.GetVerb() == "create" {
			names[a.(k8stesting.CreateAction).GetObject().(*corev1.Event).Name]++
		}
	}
	if len(names) != 2 {
		t.Errorf("creates named %v: want the two events' names, each retry under its event's name", names)
	}
}

// A create whose answer was lost may still have been written: the retry's
// AlreadyExists means it was, and the event counts as sent, once.
func TestLostAnswer(t *testing.T) {
	c := fake.NewClientset(pod("web-1", node, cid))
	var first sync.Once
	c.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lost := false
		first.Do(func() { lost = true })
		if !lost {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject()
		if err := c.Tracker().Create(a.GetResource(), ev, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, nil, &url.Error{Op: "Post", URL: "https://x/", Err: context.DeadlineExceeded}
	})
	r := running(New(kubeclienttest.FromClientset(c), node, fast))
	r.ObserveEpisode(stop("web-1", timeline.OutcomeIgnoredByInit))
	testutil.WaitFor(t, "two events sent", func() bool { return r.Sent() == 2 })
	r.Close()
	if n := len(events(t, c)); n != 2 {
		t.Errorf("%d events in the API, want 2", n)
	}
	if r.Sent() != 2 || r.Failed() != 0 || r.Retries() != 1 {
		t.Errorf("sent %d failed %d retries %d, want 2 0 1", r.Sent(), r.Failed(), r.Retries())
	}
}

// Refusals are final: one create per event, counted as failed.
func TestPermanentNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"403 RBAC", apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no create on events"))},
		{"422 invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "web-1.1", field.ErrorList{field.TooLong(field.NewPath("message"), "", 1024)})},
		{"404 namespace gone", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "shop")},
		{"400", apierrors.NewBadRequest("no")},
		{"401", apierrors.NewUnauthorized("expired token")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(pod("web-1", node, cid))
			var creates atomic.Int32
			c.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
				creates.Add(1)
				return true, nil, tc.err
			})
			r := running(New(kubeclienttest.FromClientset(c), node, fast))
			r.ObserveEpisode(stop("web-1", timeline.OutcomeIgnoredByInit))
			r.Close()
			if n := creates.Load(); n != 2 {
				t.Errorf("%d creates, want 2 (one per event, no retry)", n)
			}
			if r.Failed() != 2 || r.Sent() != 0 || r.Dropped() != 0 || r.Retries() != 0 || r.Queued() != 0 {
				t.Errorf("failed %d sent %d dropped %d retries %d queued %d, want 2 0 0 0 0",
					r.Failed(), r.Sent(), r.Dropped(), r.Retries(), r.Queued())
			}
		})
	}
}

// While the API server is away the queue keeps the newest QueueSize
// episodes, drops the oldest and counts them; once it answers, the queued
// ones are sent. The metrics say so.
func TestOutageDropsOldest(t *testing.T) {
	var objs []runtime.Object
	for i := 1; i <= 6; i++ {
		objs = append(objs, pod(fmt.Sprintf("web-%d", i), node, cid))
	}
	c := fake.NewClientset(objs...)
	var down atomic.Bool
	down.Store(true)
	unreachable := func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, refused
		}
		return false, nil, nil
	}
	c.PrependReactor("get", "pods", unreachable)
	c.PrependReactor("create", "events", unreachable)
	opts := fast
	opts.QueueSize = 3
	r := running(New(kubeclienttest.FromClientset(c), node, opts))
	defer r.Close()
	for i := 1; i <= 6; i++ { // one event each
		r.ObserveEpisode(stop(fmt.Sprintf("web-%d", i), timeline.OutcomeHandlerTimeout))
	}
	// web-1 may be between a try and its return to the queue: wait until
	// it is back (or dropped).
	testutil.WaitFor(t, "3 queued and 3 dropped", func() bool { return r.Queued() == 3 && r.Dropped() == 3 })
	testutil.WaitFor(t, "a retry", func() bool { return r.Retries() > 0 })
	if n := len(events(t, c)); n != 0 {
		t.Fatalf("%d events while the API server is down", n)
	}
	if err := promtestutil.CollectAndCompare(r, strings.NewReader(`
# HELP sigscope_kube_events_queued Kubernetes Events waiting for the API server, the ones being sent included.
# TYPE sigscope_kube_events_queued gauge
sigscope_kube_events_queued 3
`), "sigscope_kube_events_queued"); err != nil {
		t.Error(err)
	}
	testutil.Accounted(t, r, 6)

	down.Store(false)
	testutil.WaitFor(t, "the queued events sent", func() bool { return r.Sent() == 3 })
	var pods []string
	for _, e := range events(t, c) {
		pods = append(pods, e.InvolvedObject.Name)
		if e.InvolvedObject.UID == "" {
			t.Errorf("event on %s without the pod's UID", e.InvolvedObject.Name)
		}
	}
	if got := strings.Join(slices.Sorted(slices.Values(pods)), " "); got != "web-4 web-5 web-6" {
		t.Errorf("events on %s, want the newest three: web-4 web-5 web-6", got)
	}
	if err := promtestutil.CollectAndCompare(r, strings.NewReader(`
# HELP sigscope_kube_events_queued Kubernetes Events waiting for the API server, the ones being sent included.
# TYPE sigscope_kube_events_queued gauge
sigscope_kube_events_queued 0
# HELP sigscope_kube_events_total Kubernetes Events (--kube-events) by result: sent (the API server accepted it), failed (refused for good, or the pod is another node's), dropped (lost unsent: pushed out of the full queue or still queued at shutdown), suppressed (held back by the rate limit).
# TYPE sigscope_kube_events_total counter
sigscope_kube_events_total{result="dropped"} 3
sigscope_kube_events_total{result="failed"} 0
sigscope_kube_events_total{result="sent"} 3
sigscope_kube_events_total{result="suppressed"} 0
`), "sigscope_kube_events_queued", "sigscope_kube_events_total"); err != nil {
		t.Error(err)
	}
	if n := promtestutil.CollectAndCount(r, "sigscope_kube_events_retries_total"); n != 1 {
		t.Errorf("%d sigscope_kube_events_retries_total series, want 1", n)
	}
	t.Logf("outage: 6 episodes, queue 3: sent %d dropped %d retries %d", r.Sent(), r.Dropped(), r.Retries())
}

// apiServer is a minimal API server for the real client: GET of pod
// web-1 and POST of events in namespace shop.
type apiServer struct {
	mu     sync.Mutex
	events []corev1.Event
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/shop/pods/web-1":
		_ = json.NewEncoder(w).Encode(pod("web-1", node, cid))
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/shop/events":
		var ev corev1.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.events = append(s.events, ev)
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&ev)
	default:
		http.NotFound(w, r)
	}
}

// realClient is the agent's own client (sigscope serve --kube-events).
func realClient(t *testing.T, host string) kubeclient.Client {
	t.Helper()
	c, err := kubeclient.New(&rest.Config{Host: host, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// client-go's own errors for an address where nothing listens are
// transient: the events wait, and go once an API server listens there.
func TestRealClientRecovers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // connection refused from now on

	r := running(New(realClient(t, "http://"+addr), node, Options{RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond}))
	defer r.Close()
	r.ObserveEpisode(stop("web-1", timeline.OutcomeIgnoredByInit))
	testutil.WaitFor(t, "3 retries", func() bool { return r.Retries() >= 3 })
	if r.Queued() != 2 || r.Failed() != 0 || r.Sent() != 0 {
		t.Fatalf("queued %d failed %d sent %d with nothing listening, want 2 0 0", r.Queued(), r.Failed(), r.Sent())
	}

	if l, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("skipping: %s was taken meanwhile: %v", addr, err)
	}
	api := &apiServer{}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	testutil.WaitFor(t, "two events sent", func() bool { return r.Sent() == 2 })
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.events) != 2 {
		t.Fatalf("the API server got %d events, want 2", len(api.events))
	}
	for _, e := range api.events {
		if e.InvolvedObject.UID != "uid-web-1" {
			t.Errorf("%s: UID %q, want uid-web-1", e.Reason, e.InvolvedObject.UID)
		}
	}
	t.Logf("recovered after %d retries (connection refused)", r.Retries())
}

// An API server that accepts connections and never answers cannot hold
// Close beyond DrainTimeout, even with a request hanging and long
// per-request timeouts; what is left is counted as dropped.
func TestCloseBounded(t *testing.T) {
	entered := make(chan struct{}, 100)
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done()
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: hang, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	r := running(New(realClient(t, "http://"+l.Addr().String()), node, Options{Timeout: time.Hour, DrainTimeout: 100 * time.Millisecond}))
	for i := 1; i <= 3; i++ {
		r.ObserveEpisode(stop(fmt.Sprintf("web-%d", i), timeline.OutcomeIgnoredByInit))
	}
	<-entered // the first pod GET hangs
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testutil.Bound):
		t.Fatal("Close did not return with the API server hanging")
	}
	if r.Dropped() != 6 || r.Sent() != 0 || r.Failed() != 0 || r.Queued() != 0 {
		t.Errorf("dropped %d sent %d failed %d queued %d, want 6 0 0 0", r.Dropped(), r.Sent(), r.Failed(), r.Queued())
	}
}

// The metrics pass Prometheus' linter (names, units, help).
func TestMetricsLint(t *testing.T) {
	r := running(New(kubeclienttest.FromClientset(fake.NewClientset()), node, Options{}))
	defer r.Close()
	problems, err := promtestutil.CollectAndLint(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	if n := promtestutil.CollectAndCount(r); n != 6 {
		t.Errorf("%d series, want 6: four results, queued, retries", n)
	}
}
