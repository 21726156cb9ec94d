package kubeevents

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/kubeclient/kubeclienttest"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

const (
	node = "node-a"
	cid  = "ecfaf19ee593d5c1c1b0f1f5a1a6a4c1e0c9e1f2a3b4c5d6e7f8091a2b3c4d5e"
)

var t0 = time.Date(2026, 11, 21, 21, 9, 33, 400807802, time.UTC)

func pod(name, nodeName, containerID string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name:        "app",
			ContainerID: "containerd://" + containerID,
		}}},
	}
}

// stop is an episode as the timeline builds it for a pod's container, with
// the outcome's facts.
func stop(podName string, o timeline.Outcome) *timeline.Episode {
	ep := &timeline.Episode{
		Container:  timeline.Container{Identity: identity.Identity{ID: cid, Name: "app", Runtime: "containerd", Pod: podName, Namespace: "shop"}, PidNS: 4026532472},
		Main:       timeline.Proc{PID: 12918, NsPID: 1, Comm: "sh"},
		MainIsInit: true,
		Outcome:    o,
		Start:      t0,
		StopSignal: sigvocab.SIGTERM,
		StopAt:     t0,
		ExitAt:     t0.Add(3007 * time.Millisecond),
	}
	switch o {
	case timeline.OutcomeIgnoredByInit:
		ep.StopVerdict = sigvocab.FateDroppedInit
		ep.Hint = "PID 1 (sh) has no SIGTERM handler: the kernel drops SIGTERM sent to a namespace init. Use the exec form of ENTRYPOINT/CMD, `exec` the app in the entrypoint script, or run an init such as tini in the image."
	case timeline.OutcomeHandlerTimeout:
		ep.StopVerdict = sigvocab.FateHandler
	case timeline.OutcomeGraceful:
		ep.StopVerdict = sigvocab.FateHandler
		ep.ExitStatus = 0
		return ep
	}
	ep.GracePeriod = 3 * time.Second
	ep.KillAt = ep.ExitAt
	ep.ExitStatus, ep.ExitSignal = 137, sigvocab.SIGKILL
	ep.KillSender = &timeline.Sender{PID: 13506, Comm: "runc"}
	return ep
}

func events(t *testing.T, c *fake.Clientset) []corev1.Event {
	t.Helper()
	list, err := c.CoreV1().Events("shop").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func byReason(evs []corev1.Event) map[string]corev1.Event {
	out := map[string]corev1.Event{}
	for _, e := range evs {
		out[e.Reason] = e
	}
	return out
}

func TestIgnoredByInit(t *testing.T) {
	c := fake.NewClientset(pod("web-1", node, cid))
	r := running(New(kubeclienttest.FromClientset(c), node, Options{}))
	ep := stop("web-1", timeline.OutcomeIgnoredByInit)
	r.ObserveEpisode(ep)
	r.Close()

	evs := events(t, c)
	if len(evs) != 2 {
		t.Fatalf("%d events, want StopSignalIgnored and ContainerKilledAfterGracePeriod: %+v", len(evs), evs)
	}
	got := byReason(evs)
	wantRef := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "web-1", UID: "uid-web-1", FieldPath: "spec.containers{app}"}
	for reason, wantMsg := range map[string]string{
		ReasonStopSignalIgnored:      "container app: " + ep.Hint,
		ReasonKilledAfterGracePeriod: "container app: PID 1 (sh) did not act on SIGTERM (pid1_ignored); SIGKILL 3.007s after SIGTERM (grace period 3s); exit status 137",
	} {
		e, ok := got[reason]
		if !ok {
			t.Errorf("no %s event", reason)
			continue
		}
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("%s: type %q, want Warning", reason, e.Type)
		}
		if e.InvolvedObject != wantRef {
			t.Errorf("%s: involved object %+v, want %+v", reason, e.InvolvedObject, wantRef)
		}
		if e.Message != wantMsg {
			t.Errorf("%s: message\n%q\nwant\n%q", reason, e.Message, wantMsg)
		}
		if e.Source != (corev1.EventSource{Component: "sigscope", Host: node}) {
			t.Errorf("%s: source %+v", reason, e.Source)
		}
		if e.ReportingController != "sigscope" || e.ReportingInstance != node || e.Count != 1 {
			t.Errorf("%s: reporting %q/%q count %d", reason, e.ReportingController, e.ReportingInstance, e.Count)
		}
		if !e.FirstTimestamp.Time.Equal(ep.ExitAt) || !e.LastTimestamp.Time.Equal(ep.ExitAt) {
			t.Errorf("%s: timestamps %v %v, want PID 1's exit %v", reason, e.FirstTimestamp, e.LastTimestamp, ep.ExitAt)
		}
		if e.Namespace != "shop" || !strings.HasPrefix(e.Name, "web-1.") {
			t.Errorf("%s: event %s/%s", reason, e.Namespace, e.Name)
		}
	}
	if r.Sent() != 2 || r.Failed() != 0 || r.Suppressed() != 0 || r.Dropped() != 0 {
		t.Errorf("sent %d failed %d suppressed %d dropped %d, want 2 0 0 0", r.Sent(), r.Failed(), r.Suppressed(), r.Dropped())
	}
}

func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		outcome timeline.Outcome
		reasons []string
	}{
		{timeline.OutcomeIgnoredByInit, []string{ReasonStopSignalIgnored, ReasonKilledAfterGracePeriod}},
		{timeline.OutcomeHandlerTimeout, []string{ReasonKilledAfterGracePeriod}},
		{timeline.OutcomeGraceful, nil},
		{timeline.OutcomeKilled, nil},
		{timeline.OutcomeOOMKilled, nil},
		{timeline.OutcomeExited, nil},
		{timeline.OutcomeUnfinished, nil},
		{timeline.OutcomeOOMKillSurvived, []string{ReasonOOMKillInRunningContainer}},
	} {
		t.Run(string(tc.outcome), func(t *testing.T) {
			c := fake.NewClientset(pod("web-1", node, cid))
			r := running(New(kubeclienttest.FromClientset(c), node, Options{}))
			r.ObserveEpisode(stop("web-1", tc.outcome))
			r.Close()
			got := byReason(events(t, c))
			if len(got) != len(tc.reasons) {
				t.Errorf("events %v, want %v", got, tc.reasons)
			}
			for _, reason := range tc.reasons {
				if _, ok := got[reason]; !ok {
					t.Errorf("no %s event", reason)
				}
			}
			if tc.outcome == timeline.OutcomeHandlerTimeout {
				want := "container app: PID 1 (sh) took SIGTERM (handler) but was still running at the SIGKILL; SIGKILL 3.007s after SIGTERM (grace period 3s); exit status 137"
				if m := got[ReasonKilledAfterGracePeriod].Message; m != want {
					t.Errorf("message %q, want %q", m, want)
				}
			}
		})
	}
}

// Docker containers, containers of an unknown runtime and namespaces made by
// unshare have no Pod to put an event on.
func TestNotKubernetes(t *testing.T) {
	c := fake.NewClientset()
	r := running(New(kubeclienttest.FromClientset(c), node, Options{}))
	for _, ctr := range []timeline.Container{
		{Identity: identity.Identity{ID: cid, Name: "ex-shell", Runtime: "docker"}},
		{PidNS: 4026532180},
		{Identity: identity.Identity{Name: "half", Pod: "web-1"}}, // no namespace: not enough to address a Pod
	} {
		ep := stop("", timeline.OutcomeIgnoredByInit)
		ep.Container = ctr
		r.ObserveEpisode(ep)
	}
	r.ObserveEpisode(nil)
	r.Close()
	if n := len(c.Actions()); n != 0 {
		t.Errorf("%d API calls for non-Kubernetes containers: %v", n, c.Actions())
	}
	if r.Sent()+r.Suppressed()+r.Dropped()+r.Failed() != 0 {
		t.Error("counters moved for non-Kubernetes containers")
	}
}

func TestRateLimit(t *testing.T) {
	c := fake.NewClientset(pod("web-1", node, cid))
	r := running(New(kubeclienttest.FromClientset(c), node, Options{Burst: 3, Every: time.Minute}))
	now := t0
	var mu sync.Mutex
	r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	for i := 0; i < 5; i++ { // 10 events; the bucket holds 3
		r.ObserveEpisode(stop("web-1", timeline.OutcomeIgnoredByInit))
	}
	if r.Suppressed() != 7 {
		t.Errorf("suppressed %d, want 7", r.Suppressed())
	}
	mu.Lock()
	now = now.Add(90 * time.Second) // one and a half tokens back
	mu.Unlock()
	r.ObserveEpisode(stop("web-1", timeline.OutcomeIgnoredByInit))
	r.Close()
	if r.Sent() != 4 || r.Suppressed() != 8 {
		t.Errorf("sent %d suppressed %d, want 4 and 8", r.Sent(), r.Suppressed())
	}
	if n := len(events(t, c)); n != 4 {
		t.Errorf("%d events in the API, want 4", n)
	}
	mu.Lock()
	now = now.Add(time.Hour) // refills to the burst, not beyond
	mu.Unlock()
	for i := 0; i < 3; i++ {
		if !r.allow(r.now()) {
			t.Errorf("token %d refused after an hour", i)
		}
	}
	if r.allow(r.now()) {
		t.Error("the bucket refilled beyond its burst")
	}
}

// A slow API server never blocks the caller: past the queue, the oldest
// waiting events drop.
func TestQueueFullDrops(t *testing.T) {
	c := fake.NewClientset()
	entered, release := make(chan struct{}, 10), make(chan struct{})
	c.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		entered <- struct{}{}
		<-release
		return false, nil, nil // on to the tracker
	})
	r := running(New(kubeclienttest.FromClientset(c), node, Options{QueueSize: 1, NoPodLookup: true}))
	r.ObserveEpisode(stop("web-1", timeline.OutcomeHandlerTimeout)) // taken by the sender, which blocks
	<-entered
	done := make(chan struct{})
	go func() {
		r.ObserveEpisode(stop("web-2", timeline.OutcomeHandlerTimeout)) // queued
		r.ObserveEpisode(stop("web-3", timeline.OutcomeHandlerTimeout)) // queued, web-2 dropped
		r.ObserveEpisode(stop("web-4", timeline.OutcomeHandlerTimeout)) // queued, web-3 dropped
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testutil.Bound):
		t.Fatal("ObserveEpisode blocked on a stuck API server")
	}
	if r.Dropped() != 2 {
		t.Errorf("dropped %d, want 2", r.Dropped())
	}
	close(release)
	r.Close() // drains the queued one
	if r.Sent() != 2 {
		t.Errorf("sent %d after Close, want 2 (the blocked one and the queued one)", r.Sent())
	}
	var pods []string
	for _, e := range events(t, c) {
		pods = append(pods, e.InvolvedObject.Name)
	}
	if got := strings.Join(slices.Sorted(slices.Values(pods)), " "); got != "web-1 web-4" {
		t.Errorf("events on %s, want web-1 (being sent) and web-4 (the newest)", got)
	}
	r.Close() // idempotent
	r.ObserveEpisode(stop("web-5", timeline.OutcomeHandlerTimeout))
	if r.Dropped() != 3 {
		t.Errorf("dropped %d after Close, want 3", r.Dropped())
	}
}

func TestHostileNames(t *testing.T) {
	c := fake.NewClientset(pod("web-1", node, cid))
	r := running(New(kubeclienttest.FromClientset(c), node, Options{}))
	ep := stop("web-1", timeline.OutcomeIgnoredByInit)
	ep.Main.Comm = "sh\x1b[2J\xff\n"
	ep.Container.Name = "app"
	ep.Hint = "PID 1 (" + ep.Main.Comm + ") " + strings.Repeat("é", 2000)
	r.ObserveEpisode(ep)
	r.Close()
	evs := events(t, c)
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	for _, e := range evs {
		if !utf8.ValidString(e.Message) {
			t.Errorf("%s: message not valid UTF-8: %q", e.Reason, e.Message)
		}
		if len(e.Message) > MaxMessageBytes {
			t.Errorf("%s: message %d bytes, max %d", e.Reason, len(e.Message), MaxMessageBytes)
		}
		for _, ch := range e.Message {
			if unicode.IsControl(ch) {
				t.Errorf("%s: control character %U in %q", e.Reason, ch, e.Message)
				break
			}
		}
		if !strings.Contains(e.Message, `sh\x1b[2J\xff\x0a`) {
			t.Errorf("%s: message %q does not show the comm escaped", e.Reason, e.Message)
		}
	}
	if m := byReason(evs)[ReasonStopSignalIgnored].Message; !strings.HasSuffix(m, "é...") {
		t.Errorf("long message not cut at a character with an ellipsis: ...%q", m[len(m)-20:])
	}
}

// The pod name comes from container labels: sigscope does not write events
// on a pod the API server places on another node.
func TestPodOnAnotherNode(t *testing.T) {
	c := fake.NewClientset(pod("web-1", "node-b", cid))
	r := running(New(kubeclienttest.FromClientset(c), node, Options{}))
	r.ObserveEpisode(stop("web-1", timeline.OutcomeIgnoredByInit))
	r.Close()
	if n := len(events(t, c)); n != 0 {
		t.Errorf("%d events on another node's pod", n)
	}
	if r.Failed() != 2 {
		t.Errorf("failed %d, want 2", r.Failed())
	}
}

func TestPodUID(t *testing.T) {
	forbidden := fake.NewClientset(pod("web-1", node, cid))
	forbidden.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-1", nil)
	})
	for _, tc := range []struct {
		name    string
		client  *fake.Clientset
		opts    Options
		wantUID string
	}{
		{"container in the pod's status", fake.NewClientset(pod("web-1", node, cid)), Options{}, "uid-web-1"},
		{"pod recreated under the same name", fake.NewClientset(pod("web-1", node, "0ther")), Options{}, ""},
		{"pod already deleted", fake.NewClientset(), Options{}, ""},
		{"no RBAC to get pods", forbidden, Options{}, ""},
		{"lookup disabled", fake.NewClientset(pod("web-1", node, cid)), Options{NoPodLookup: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := running(New(kubeclienttest.FromClientset(tc.client), node, tc.opts))
			r.ObserveEpisode(stop("web-1", timeline.OutcomeIgnoredByInit))
			r.Close()
			evs := events(t, tc.client)
			if len(evs) != 2 {
				t.Fatalf("%d events, want 2 (a missing UID does not stop them)", len(evs))
			}
			for _, e := range evs {
				if string(e.InvolvedObject.UID) != tc.wantUID {
					t.Errorf("%s: UID %q, want %q", e.Reason, e.InvolvedObject.UID, tc.wantUID)
				}
			}
			gets := 0
			for _, a := range tc.client.Actions() {
				if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
					gets++
				}
			}
			if want := map[bool]int{true: 0, false: 1}[tc.opts.NoPodLookup]; gets != want {
				t.Errorf("%d pod GETs, want %d (one per episode)", gets, want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	if got := Message("plain"); got != "plain" {
		t.Errorf("Message(plain) = %q", got)
	}
	long := strings.Repeat("a", MaxMessageBytes+1)
	if got := Message(long); len(got) != MaxMessageBytes || !strings.HasSuffix(got, "...") {
		t.Errorf("Message(long) is %d bytes, ends %q", len(got), got[len(got)-5:])
	}
	if got := Message(strings.Repeat("a", MaxMessageBytes)); len(got) != MaxMessageBytes || strings.HasSuffix(got, "...") {
		t.Error("a message of exactly the limit was cut")
	}
}

func TestEventNames(t *testing.T) {
	r := running(New(kubeclienttest.FromClientset(fake.NewClientset()), node, Options{}))
	defer r.Close()
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		n := r.eventName("web-1", t0) // the same instant
		if seen[n] {
			t.Fatalf("duplicate event name %s", n)
		}
		seen[n] = true
	}
	long := r.eventName(strings.Repeat("a", 250)+"-x", t0)
	if len(long) > 253 {
		t.Errorf("event name %d characters, max 253", len(long))
	}
}

// A stop whose clients lost connections gets a StopLostConnections event
// with the traffic's verdict and hint; one that lost none, or whose counts
// were not read, gets none.
func TestStopLostConnections(t *testing.T) {
	lost := &timeline.Traffic{NetNS: 7, Since: t0, Until: t0.Add(4 * time.Second), SeesRefused: true,
		Verdict: "43 connections lost: 40 refused, 3 cut", Hint: "Keep accepting after the stop begins until the endpoint is removed."}
	lost.Counts[sigvocab.NetRefused].N, lost.Counts[sigvocab.NetCut].N = 40, 3
	clean := &timeline.Traffic{NetNS: 7, Since: t0, Until: t0.Add(4 * time.Second), SeesRefused: true, Verdict: "no client was hurt"}
	clean.Counts[sigvocab.NetAccepted].N = 12
	for _, tc := range []struct {
		name    string
		traffic *timeline.Traffic
		want    string
	}{
		{"lost", lost, "container app: 43 connections lost: 40 refused, 3 cut. Keep accepting after the stop begins until the endpoint is removed."},
		{"clean", clean, ""},
		{"unread", &timeline.Traffic{NetNS: 7, Unread: "the trace ended"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(pod("web-1", node, cid))
			r := running(New(kubeclienttest.FromClientset(c), node, Options{}))
			ep := stop("web-1", timeline.OutcomeGraceful)
			ep.Traffic = tc.traffic
			r.ObserveEpisode(ep)
			r.Close()
			got := byReason(events(t, c))
			ev, ok := got[ReasonStopLostConnections]
			if ok != (tc.want != "") || ev.Message != tc.want || ok && ev.Type != corev1.EventTypeWarning {
				t.Errorf("events %v: %s %q (%s), want %q", got, ReasonStopLostConnections, ev.Message, ev.Type, tc.want)
			}
		})
	}
}
