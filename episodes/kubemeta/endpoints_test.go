package kubemeta

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
)

// endpoint is a pod's endpoint with its three conditions.
func endpoint(pod, uid, node string, ready, serving, terminating bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{"10.244.0.9"},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: pod, UID: types.UID(uid)}}
	if node != "" {
		e.NodeName = &node
	}
	return e
}

func live(pod, uid string) discoveryv1.Endpoint {
	return endpoint(pod, uid, "node-1", true, true, false)
}

func endpointSlice(name, service string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
	}
}

// endpointOf is a copy of what p holds of the pod's endpoint in service.
func endpointOf(p *Pods, pod, service string) (endpointState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.state("shop/"+pod, "shop/"+service, false); st != nil {
		return *st, true
	}
	return endpointState{}, false
}

func dur(d time.Duration) *time.Duration { return &d }

// A pod in two Services' EndpointSlices (web: dual-stack, two slices;
// admin: one), as the fake API server changes them, each change taken at
// the clock the informer reads: each transition recorded once, at the time
// it was first seen; an endpoint removed when it goes from its slice, or
// from its Service's last slice, or when that slice is deleted; nothing for
// a change made before the agent listed the slice, for a pod no slice lists
// or another node's pod; the lags from the pod's deletion (when the agent
// saw it) and from the stop signal, on the annotated episode and in its
// JSON.
func TestEndpoints(t *testing.T) {
	base := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	var clock atomic.Int64 // seconds after base
	at := func(s int64) { clock.Store(s) }
	sec := func(s int64) time.Time { return base.Add(time.Duration(s) * time.Second) }

	podOn := func(name, uid, node string) *corev1.Pod {
		return pod(name, func(p *corev1.Pod) { p.UID, p.Spec.NodeName = types.UID(uid), node })
	}
	client := fake.NewClientset(
		podOn("web-0", "u0", "node-1"), podOn("web-1", "u1", "node-1"), podOn("lonely", "ul", "node-1"), podOn("other", "uo", "node-2"),
		endpointSlice("web-v4", "web", live("web-0", "u0"), endpoint("other", "uo", "node-2", true, true, false)),
		endpointSlice("web-v6", "web", live("web-0", "u0")),
		endpointSlice("admin-x", "admin", live("web-0", "u0")),
		// Already terminating when the agent starts: not seen to change.
		endpointSlice("legacy-x", "legacy", endpoint("web-0", "u0", "node-1", false, false, true)),
	)
	p := New(kubeclienttest.FromClientset(client), "node-1", nil)
	p.now = func() time.Time { return sec(clock.Load()) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	testutil.WaitFor(t, "the informers to sync", func() bool { return p.synced.Load() && p.slicesSynced.Load() })

	slices := client.DiscoveryV1().EndpointSlices("shop")
	update := func(s *discoveryv1.EndpointSlice) {
		t.Helper()
		if _, err := slices.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	web := func() endpointState { st, _ := endpointOf(p, "web-0", "web"); return st }
	admin := func() endpointState { st, _ := endpointOf(p, "web-0", "admin"); return st }
	sentinel := func() endpointState { st, _ := endpointOf(p, "web-1", "web"); return st }

	// The deletion, seen at 1 s (the API server's deletionTimestamp says
	// the request plus the grace, to the second).
	at(1)
	del := pod("web-0", func(p *corev1.Pod) {
		p.UID = "u0"
		ts, grace := metav1.NewTime(sec(31).Add(-300*time.Millisecond)), int64(30)
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &ts, &grace
	})
	if _, err := client.CoreV1().Pods("shop").Update(ctx, del, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the deletion", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.pods["shop/web-0"].deleteSeen.IsZero()
	})

	at(2) // not ready and terminating in one slice of web
	update(endpointSlice("web-v4", "web", endpoint("web-0", "u0", "node-1", false, true, true), endpoint("other", "uo", "node-2", true, true, false)))
	testutil.WaitFor(t, "web not ready", func() bool { return !web().notReadyAt.IsZero() })

	at(3) // the other slice, not updated yet, still says ready: no change
	update(endpointSlice("web-v6", "web", live("web-0", "u0"), live("web-1", "u1")))
	testutil.WaitFor(t, "web-1 listed", func() bool { return len(sentinel().slices) == 1 })

	at(4) // now it says so too: seen already
	update(endpointSlice("web-v6", "web", endpoint("web-0", "u0", "node-1", false, true, true), endpoint("web-1", "u1", "node-1", false, true, false)))
	testutil.WaitFor(t, "web-1 not ready", func() bool { return !sentinel().notReadyAt.IsZero() })

	at(5)
	update(endpointSlice("web-v4", "web", endpoint("web-0", "u0", "node-1", false, false, true), endpoint("other", "uo", "node-2", true, true, false)))
	testutil.WaitFor(t, "web not serving", func() bool { return !web().notServingAt.IsZero() })

	at(6)
	update(endpointSlice("admin-x", "admin", endpoint("web-0", "u0", "node-1", false, false, true)))
	testutil.WaitFor(t, "admin not ready", func() bool { return !admin().notReadyAt.IsZero() })

	at(7) // gone from admin's only slice
	update(endpointSlice("admin-x", "admin"))
	testutil.WaitFor(t, "admin removed", func() bool { return !admin().removedAt.IsZero() })

	at(8) // gone from one of web's slices, still in the other
	update(endpointSlice("web-v4", "web", endpoint("other", "uo", "node-2", true, true, false), live("web-1", "u1")))
	testutil.WaitFor(t, "web-1 in both slices", func() bool { return len(sentinel().slices) == 2 })
	if st := web(); !st.removedAt.IsZero() || len(st.slices) != 1 {
		t.Errorf("web-0 removed while web-v6 lists it: %+v", st)
	}

	at(9) // the other slice deleted
	if err := slices.Delete(ctx, "web-v6", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "web removed", func() bool { return !web().removedAt.IsZero() })
	at(10)

	want := []timeline.EndpointChange{
		{Service: "shop/admin", NotReadyAt: sec(6), NotServingAt: sec(6), TerminatingAt: sec(6), RemovedAt: sec(7),
			AfterDeletion: dur(5 * time.Second), AfterStop: dur(3 * time.Second)},
		{Service: "shop/legacy"},
		{Service: "shop/web", NotReadyAt: sec(2), NotServingAt: sec(5), TerminatingAt: sec(2), RemovedAt: sec(9),
			AfterDeletion: dur(time.Second), AfterStop: dur(-time.Second)},
	}
	ep := timeline.Episode{Container: timeline.Container{Identity: identity.Identity{Pod: "web-0", Namespace: "shop", Name: "app", PodUID: "u0"}}, StopAt: sec(3)}
	annotate(p, &ep)
	if !reflect.DeepEqual(ep.Endpoints, want) || ep.StopReason != ReasonDeleted || len(ep.NotLearnt) != 0 {
		t.Errorf("annotated: %s %v endpoints\n%s\nwant\n%s", ep.StopReason, ep.NotLearnt, changes(ep.Endpoints), changes(want))
	}
	b, err := json.Marshal(ep)
	if err != nil {
		t.Fatal(err)
	}
	if w := `"endpoints":[{"service":"shop/admin","not_ready_at":"2026-11-25T03:00:06.000000000Z","not_serving_at":"2026-11-25T03:00:06.000000000Z",` +
		`"terminating_at":"2026-11-25T03:00:06.000000000Z","removed_at":"2026-11-25T03:00:07.000000000Z","after_deletion_s":5,"after_stop_s":3},{"service":"shop/legacy"},`; !strings.Contains(string(b), w) {
		t.Errorf("JSON %s\nlacks %s", b, w)
	}

	// A pod that no slice lists, another node's pod, another pod of the
	// same name: none.
	lonely := timeline.Episode{Container: timeline.Container{Identity: identity.Identity{Pod: "lonely", Namespace: "shop", Name: "app"}}, StopAt: sec(3)}
	annotate(p, &lonely)
	if lonely.Endpoints != nil || len(lonely.NotLearnt) != 0 {
		t.Errorf("a pod in no slice: %v %v", lonely.Endpoints, lonely.NotLearnt)
	}
	if got := p.Endpoints("shop", "other", "", sec(3)); got != nil {
		t.Errorf("another node's pod: %s", changes(got))
	}
	if got := p.Endpoints("shop", "web-0", "u-next", sec(3)); got != nil {
		t.Errorf("another pod named web-0: %s", changes(got))
	}
	// No stop signal: no lag from it.
	if got := p.Endpoints("shop", "web-0", "", time.Time{}); len(got) != 3 || got[0].AfterStop != nil || *got[0].AfterDeletion != 5*time.Second {
		t.Errorf("without a stop signal: %s", changes(got))
	}
}

func changes(cs []timeline.EndpointChange) string {
	var b strings.Builder
	for _, c := range cs {
		lag := func(d *time.Duration) string {
			if d == nil {
				return "-"
			}
			return d.String()
		}
		fmt.Fprintf(&b, "  %s ready-false %s serving-false %s terminating %s removed %s after deletion %s after stop %s\n", c.Service,
			c.NotReadyAt.Format(time.TimeOnly), c.NotServingAt.Format(time.TimeOnly), c.TerminatingAt.Format(time.TimeOnly),
			c.RemovedAt.Format(time.TimeOnly), lag(c.AfterDeletion), lag(c.AfterStop))
	}
	return b.String()
}

// Without the right to list EndpointSlices (a ClusterRole older than the
// agent) the stop reason is still learnt, and the episode says what was
// not, with the API server's answer.
func TestEndpointsForbidden(t *testing.T) {
	client := fake.NewClientset(pod("web-0", nil))
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", fmt.Errorf("RBAC: not allowed"))
	})
	p := New(kubeclienttest.FromClientset(client), "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	testutil.WaitFor(t, "the pods' informers and the slices' error", func() bool { return p.synced.Load() && p.slicesErr.Load() != nil })
	ep := timeline.Episode{Container: timeline.Container{Identity: identity.Identity{Pod: "web-0", Namespace: "shop", Name: "app"}}}
	annotate(p, &ep)
	if ep.StopReason != ReasonUnknown || ep.Endpoints != nil || len(ep.NotLearnt) != 1 ||
		!strings.HasPrefix(ep.NotLearnt[0], "endpoints: the EndpointSlices were not read: ") || !strings.Contains(ep.NotLearnt[0], "forbidden") {
		t.Errorf("without EndpointSlices: %q %v %q", ep.StopReason, ep.Endpoints, ep.NotLearnt)
	}
}

// The handler's rules, slice by slice: unset conditions, a readiness that
// comes back, an endpoint that moves to another slice, another pod of the
// same name, a slice of no Service.
func TestEndpointChanges(t *testing.T) {
	p := New(nil, "", nil)
	var now time.Time
	p.now = func() time.Time { return now }
	base := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	step := func(s int, old, new *discoveryv1.EndpointSlice) {
		now = base.Add(time.Duration(s) * time.Second)
		var o, n any
		if old != nil {
			o = old
		}
		if new != nil {
			n = new
		}
		p.slice(o, n)
	}
	get := func(pod, service string) endpointState { st, _ := endpointOf(p, pod, service); return st }
	unset := discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "a", UID: "ua"}}
	notReady := endpoint("a", "ua", "", false, false, false)

	// Unset conditions are ready, serving, not terminating.
	s0 := endpointSlice("s-0", "svc", unset)
	step(0, nil, s0)
	s1 := endpointSlice("s-0", "svc", notReady)
	step(1, s0, s1)
	if st := get("a", "svc"); !st.notReadyAt.Equal(base.Add(time.Second)) || !st.notServingAt.Equal(base.Add(time.Second)) || !st.terminatingAt.IsZero() {
		t.Errorf("from unset conditions: %+v", st)
	}
	// Ready again: forgotten; not ready later: that time.
	s2 := endpointSlice("s-0", "svc", unset)
	step(2, s1, s2)
	if st := get("a", "svc"); !st.notReadyAt.IsZero() || !st.notServingAt.IsZero() {
		t.Errorf("ready again: %+v", st)
	}
	s3 := endpointSlice("s-0", "svc", notReady)
	step(3, s2, s3)
	if st := get("a", "svc"); !st.notReadyAt.Equal(base.Add(3 * time.Second)) {
		t.Errorf("not ready again: %+v", st)
	}
	// Moved to another slice, the old one's update first: back in a
	// slice, it was not removed; its conditions compare with the last
	// seen (ready again, in the new slice).
	step(4, s3, endpointSlice("s-0", "svc"))
	if st := get("a", "svc"); st.removedAt.IsZero() {
		t.Errorf("in no slice: %+v", st)
	}
	step(5, nil, endpointSlice("s-1", "svc", unset))
	if st := get("a", "svc"); !st.removedAt.IsZero() || !st.notReadyAt.IsZero() || len(st.slices) != 1 || st.slices[0].slice != "s-1" {
		t.Errorf("moved to s-1: %+v", st)
	}
	// Another pod named a (a StatefulSet's, made again): starts over.
	step(6, endpointSlice("s-1", "svc", unset), endpointSlice("s-1", "svc", notReady))
	b := endpoint("a", "ub", "", true, true, false)
	step(7, endpointSlice("s-1", "svc", notReady), endpointSlice("s-1", "svc", b))
	if st := get("a", "svc"); st.uid != "ub" || !st.notReadyAt.IsZero() || st.known && !st.last.ready {
		t.Errorf("another pod of the same name: %+v", st)
	}
	// The deletion's time: when it was seen to happen (TestEndpoints); for
	// a pod first seen deleted, the API server's time of the request.
	ts, grace := metav1.NewTime(base.Add(40*time.Second)), int64(30)
	now = base.Add(12 * time.Second)
	p.pod(pod("gone", func(q *corev1.Pod) { q.DeletionTimestamp, q.DeletionGracePeriodSeconds = &ts, &grace }))
	if got := p.pods["shop/gone"].deleteSeen; !got.Equal(base.Add(10 * time.Second)) {
		t.Errorf("a pod first seen deleted: deleted at %v, want the request's time %v", got, base.Add(10*time.Second))
	}
	// A slice with no Service's label is no Service's.
	noSvc := endpointSlice("x", "", live("c", "uc"))
	step(8, nil, noSvc)
	if _, ok := p.endpoints["shop/c"]; ok {
		t.Errorf("a slice of no Service was followed")
	}
}

// Memory is bounded as the pods' is: the pods' endpoints count towards
// maxPods with the rest of what is kept of a pod, and go with it (a deleted
// pod's as long as its other state); a pod's Services and a Service's
// slices have their own bounds.
func TestEndpointsBound(t *testing.T) {
	p := New(nil, "", nil)
	p.pod(pod("first", nil))
	p.slice(nil, endpointSlice("first", "svc", live("first", "u")))
	for i := range maxPods {
		name := fmt.Sprintf("web-%d", i)
		p.slice(nil, endpointSlice(name, "svc", live(name, "u")))
		if i == maxPods-2 {
			// The oldest pod is still all there.
			if p.pods["shop/first"] == nil || p.Endpoints("shop", "first", "", time.Time{}) == nil {
				t.Fatalf("the oldest pod went before the bound")
			}
		}
	}
	if len(p.endpoints) != maxPods || len(p.order) != maxPods {
		t.Errorf("%d pods' endpoints, %d pods in order, want %d", len(p.endpoints), len(p.order), maxPods)
	}
	if p.pods["shop/first"] != nil || p.endpoints["shop/first"] != nil {
		t.Errorf("the oldest pod's state or endpoints outlived the bound")
	}
	last := fmt.Sprintf("web-%d", maxPods-1)
	if got := p.Endpoints("shop", last, "", time.Time{}); len(got) != 1 || got[0].Service != "shop/svc" {
		t.Errorf("the newest pod: %v", got)
	}

	// One pod in more Services, and in more slices of one, than kept.
	for i := range maxServices + 3 {
		p.slice(nil, endpointSlice(fmt.Sprintf("s-%d", i), fmt.Sprintf("svc-%d", i), live("many", "um")))
	}
	for i := range maxSlices + 3 {
		p.slice(nil, endpointSlice(fmt.Sprintf("t-%d", i), "svc-0", live("many", "um")))
	}
	pe := p.endpoints["shop/many"]
	if len(pe.services) != maxServices || len(pe.services[0].slices) != maxSlices {
		t.Errorf("%d services, %d slices of the first, want %d and %d", len(pe.services), len(pe.services[0].slices), maxServices, maxSlices)
	}
}
