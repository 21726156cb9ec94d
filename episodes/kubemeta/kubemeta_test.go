package kubemeta

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/kubeclient/kubeclienttest"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/testutil"
)

func pod(name string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func killingEvent(podName, ctr, msg string, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: podName + "." + ctr, Namespace: "shop"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: podName, FieldPath: "spec.containers{" + ctr + "}"},
		Reason:         "Killing", Message: msg, LastTimestamp: metav1.NewTime(at), Type: corev1.EventTypeNormal,
	}
}

// Each reason, from what the API server holds when the stop is explained.
func TestExplain(t *testing.T) {
	stop := time.Now().Truncate(time.Second)
	one := int64(1)
	client := fake.NewClientset(
		pod("deleted", func(p *corev1.Pod) {
			ts := metav1.NewTime(stop.Add(-time.Second))
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &ts, &one
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-7d9f8c6b5", Controller: ptr(true)}}
			p.Labels = map[string]string{"pod-template-hash": "7d9f8c6b5"}
		}),
		pod("evicted", func(p *corev1.Pod) {
			ts := metav1.NewTime(stop)
			p.DeletionTimestamp = &ts
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"}}
		}),
		pod("preempted", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"}}
		}),
		pod("probed", func(p *corev1.Pod) {
			// Restarted, then deleted: the replaced container's stop was the probe's.
			ts := metav1.NewTime(stop.Add(time.Second))
			p.DeletionTimestamp = &ts
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", LastTerminationState: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://c0ffee"}}}}
		}),
		pod("changed", nil),
		pod("running", nil),
		killingEvent("probed", "app", "Container app failed liveness probe, will be restarted", stop.Add(-time.Second)),
		killingEvent("changed", "app", "Container app definition changed, will be restarted", stop),
		killingEvent("deleted", "app", "Stopping container app", stop),
	)
	p := New(kubeclienttest.FromClientset(client), "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	testutil.WaitFor(t, "the informers to sync", func() bool { return p.synced.Load() && p.slicesSynced.Load() })
	for name, want := range map[string]struct {
		reason string
		grace  time.Duration
	}{
		"deleted":    {ReasonDeleted, time.Second},
		"evicted":    {ReasonEvicted, 0},
		"preempted":  {ReasonPreempted, 0},
		"probed":     {ReasonProbeFailed, 0},
		"changed":    {ReasonRestarted, 0},
		"running":    {ReasonUnknown, 0},
		"never-seen": {ReasonUnknown, 0},
	} {
		reason, grace, _ := p.Explain("shop", name, "app", "c0ffee", stop)
		if reason != want.reason || grace != want.grace {
			t.Errorf("%s: %s %v, want %s %v", name, reason, grace, want.reason, want.grace)
		}
	}

	// The container that replaced the restarted one was stopped by the
	// deletion.
	if reason, _, _ := p.Explain("shop", "probed", "app", "beef", stop.Add(time.Second)); reason != ReasonDeleted {
		t.Errorf("the replacement's stop: %s, want deleted", reason)
	}

	// The pod goes from the API server after its containers stopped:
	// what was seen of it still explains a stop.
	if err := client.CoreV1().Pods("shop").Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	ep := timeline.Episode{Container: timeline.Container{Identity: identity.Identity{Pod: "deleted", Namespace: "shop", Name: "app"}}, StopAt: stop, GracePeriod: 30 * time.Second}
	annotate(p, &ep)
	if ep.StopReason != ReasonDeleted || ep.GracePeriod != time.Second || len(ep.NotLearnt) != 0 {
		t.Errorf("after the pod went: %s %v %v", ep.StopReason, ep.GracePeriod, ep.NotLearnt)
	}
	// And its workload and the revision it ran.
	if want := (timeline.Revision{Controller: "ReplicaSet/web-7d9f8c6b5", Hash: "7d9f8c6b5", Label: "pod-template-hash"}); ep.Owner == nil ||
		*ep.Owner != (timeline.Owner{Kind: "Deployment", Name: "web"}) || ep.Revision == nil || *ep.Revision != want {
		t.Errorf("after the pod went: owner %v revision %v, want Deployment/web %v", ep.Owner, ep.Revision, want)
	}

	// Without an API server the episode says what it could not learn.
	var none *Pods
	ep = timeline.Episode{Container: timeline.Container{Identity: identity.Identity{Pod: "web", Namespace: "shop", Name: "app"}}}
	annotate(none, &ep)
	if ep.StopReason != "" || len(ep.NotLearnt) != 1 {
		t.Errorf("without an API server: %q %v", ep.StopReason, ep.NotLearnt)
	}
}

func TestWorkloadOf(t *testing.T) {
	ctrl := func(kind, name string) []metav1.OwnerReference {
		yes := true
		return []metav1.OwnerReference{{Kind: "Other", Name: "not-the-controller"}, {Kind: kind, Name: name, Controller: &yes}}
	}
	for _, tc := range []struct {
		refs   []metav1.OwnerReference
		labels map[string]string
		want   *timeline.Owner
	}{
		{ctrl("ReplicaSet", "web-7d9f8c6b5"), map[string]string{"pod-template-hash": "7d9f8c6b5"}, &timeline.Owner{Kind: "Deployment", Name: "web"}},
		// A ReplicaSet of its own (no Deployment's naming) stays one.
		{ctrl("ReplicaSet", "web"), map[string]string{"pod-template-hash": "7d9f8c6b5"}, &timeline.Owner{Kind: "ReplicaSet", Name: "web"}},
		{ctrl("ReplicaSet", "web-7d9f8c6b5"), nil, &timeline.Owner{Kind: "ReplicaSet", Name: "web-7d9f8c6b5"}},
		// An Argo Rollout's ReplicaSet's pod: the Rollout's.
		{ctrl("ReplicaSet", "web-5f9b48bf7c"), map[string]string{"rollouts-pod-template-hash": "5f9b48bf7c"}, &timeline.Owner{Kind: "Rollout", Name: "web"}},
		{ctrl("StatefulSet", "db"), nil, &timeline.Owner{Kind: "StatefulSet", Name: "db"}},
		{ctrl("DaemonSet", "agent"), nil, &timeline.Owner{Kind: "DaemonSet", Name: "agent"}},
		{ctrl("Job", "migrate-29400000"), nil, &timeline.Owner{Kind: "Job", Name: "migrate-29400000"}},
		{[]metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1"}}, nil, nil}, // not a controller
		{nil, nil, nil},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.refs, Labels: tc.labels}}
		got := WorkloadOf(pod)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("WorkloadOf(%v, %v) = %v, want %v", tc.refs, tc.labels, got, tc.want)
		}
	}
}

func TestRevisionOf(t *testing.T) {
	ctrl := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "Other", Name: "not-the-controller"}, {Kind: kind, Name: name, Controller: ptr(true)}}
	}
	for _, tc := range []struct {
		refs   []metav1.OwnerReference
		labels map[string]string
		want   *timeline.Revision
	}{
		{ctrl("ReplicaSet", "web-7d9f8c6b5"), map[string]string{"pod-template-hash": "7d9f8c6b5"},
			&timeline.Revision{Controller: "ReplicaSet/web-7d9f8c6b5", Hash: "7d9f8c6b5", Label: "pod-template-hash"}},
		{ctrl("StatefulSet", "db"), map[string]string{"controller-revision-hash": "db-6c8d5f7b9", "statefulset.kubernetes.io/pod-name": "db-0"},
			&timeline.Revision{Controller: "StatefulSet/db", Hash: "db-6c8d5f7b9", Label: "controller-revision-hash"}},
		{ctrl("Job", "migrate-29400000"), map[string]string{"controller-revision-hash": "x"}, nil},
		{[]metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1"}}, map[string]string{"pod-template-hash": "1"}, nil}, // not a controller
		{nil, nil, nil},
	} {
		got := RevisionOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.refs, Labels: tc.labels}})
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("RevisionOf(%v, %v) = %+v, want %+v", tc.refs, tc.labels, got, tc.want)
		}
	}
}

// A pod deletion seen as it happens calls OnHookStart for the containers
// whose preStop hook the kubelet runs itself (sleep, httpGet), each with the
// hook's end at the latest; not for an exec hook (its own exec marks its
// start), a pod first seen already deleted, a pod on the node's network,
// nor a second update of the same deletion.
func TestHookStart(t *testing.T) {
	now := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	p := New(nil, "", nil)
	p.now = func() time.Time { return now }
	var got []HookStart
	p.OnHookStart = func(h HookStart) { got = append(got, h) }
	grace := int64(20)
	withHooks := func(q *corev1.Pod) {
		q.Spec.Containers = []corev1.Container{
			{Name: "app", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}},
			{Name: "proxy", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain"}}}},
			{Name: "batch", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "3"}}}}},
			{Name: "plain"},
		}
		q.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://aaa"},
			{Name: "proxy", ContainerID: "containerd://bbb"}, {Name: "batch", ContainerID: "containerd://ccc"}, {Name: "plain", ContainerID: "containerd://ddd"}}
	}
	deleted := func(q *corev1.Pod) {
		withHooks(q)
		ts := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
		q.DeletionTimestamp, q.DeletionGracePeriodSeconds = &ts, &grace
	}
	p.pod(pod("web", withHooks))
	now = now.Add(time.Minute)
	p.pod(pod("web", deleted))
	p.pod(pod("web", deleted)) // the same deletion again
	want := []HookStart{{Namespace: "shop", Pod: "web", At: now, Containers: []HookedContainer{
		{Name: "app", ID: "aaa", Until: now.Add(5 * time.Second)}, {Name: "proxy", ID: "bbb", Until: now.Add(20 * time.Second)}}}}
	if len(got) != 1 || got[0].At != want[0].At || len(got[0].Containers) != 2 || got[0].Containers[0] != want[0].Containers[0] || got[0].Containers[1] != want[0].Containers[1] {
		t.Fatalf("hook starts %+v, want %+v", got, want)
	}
	got = nil
	p.pod(pod("old", deleted)) // first seen deleted: its hooks began unseen
	p.pod(pod("hostnet", func(q *corev1.Pod) { withHooks(q); q.Spec.HostNetwork = true }))
	p.pod(pod("hostnet", func(q *corev1.Pod) { deleted(q); q.Spec.HostNetwork = true }))
	if len(got) != 0 {
		t.Errorf("hook starts %+v, want none", got)
	}
}

// The grace the kubelet applies to a stop of its own, from where it takes
// it: a failed probe's own terminationGracePeriodSeconds, else the pod's;
// a deletion's, from the deletion.
func TestExplainGraceFrom(t *testing.T) {
	stop := time.Now().Truncate(time.Second)
	p := New(nil, "", nil)
	thirty, three, one := int64(30), int64(3), int64(1)
	p.pod(pod("probed", func(q *corev1.Pod) {
		q.Spec.TerminationGracePeriodSeconds = &thirty
		q.Spec.Containers = []corev1.Container{{Name: "app", LivenessProbe: &corev1.Probe{TerminationGracePeriodSeconds: &three}},
			{Name: "side", StartupProbe: &corev1.Probe{}}}
	}))
	p.event(killingEvent("probed", "app", "Container app failed liveness probe, will be restarted", stop.Add(-time.Second)))
	p.event(killingEvent("probed", "side", "Container side failed startup probe, will be restarted", stop.Add(-time.Second)))
	if r, g, from := p.Explain("shop", "probed", "app", "", stop); r != ReasonProbeFailed || g != 3*time.Second || from != "the liveness probe's terminationGracePeriodSeconds" {
		t.Errorf("liveness: %s %v %q", r, g, from)
	}
	if r, g, from := p.Explain("shop", "probed", "side", "", stop); r != ReasonProbeFailed || g != 30*time.Second || from != "the pod's terminationGracePeriodSeconds" {
		t.Errorf("startup probe without its own grace: %s %v %q", r, g, from)
	}
	p.pod(pod("late", func(q *corev1.Pod) {
		q.Spec.TerminationGracePeriodSeconds = &three
		q.Status.Phase, q.Status.Reason = corev1.PodFailed, "DeadlineExceeded"
	}))
	if r, g, from := p.Explain("shop", "late", "app", "", stop); r != ReasonDeadlineExceeded || g != 3*time.Second || from != "the pod's terminationGracePeriodSeconds" {
		t.Errorf("activeDeadlineSeconds: %s %v %q", r, g, from)
	}
	p.pod(pod("gone", func(q *corev1.Pod) { q.Spec.TerminationGracePeriodSeconds = &thirty }))
	p.pod(pod("gone", func(q *corev1.Pod) {
		q.Spec.TerminationGracePeriodSeconds = &thirty
		ts := metav1.NewTime(stop)
		q.DeletionTimestamp, q.DeletionGracePeriodSeconds = &ts, &one
	}))
	if r, g, from := p.Explain("shop", "gone", "app", "", stop); r != ReasonDeleted || g != time.Second || from != "the pod's deletion (deletionGracePeriodSeconds)" {
		t.Errorf("deleted with --grace-period 1: %s %v %q", r, g, from)
	}
}

// The kubelet's own stops of a pod nobody deleted, each with the grace the
// kubelet applied for it, or the kubelet's rule where the API server's
// records do not tell it (the messages are the kubelet's own formats).
func TestExplainKubeletStops(t *testing.T) {
	stop := time.Now().Truncate(time.Second)
	p := New(nil, "", nil)
	thirty := int64(30)
	status := func(reason, msg string, conds ...corev1.PodCondition) func(*corev1.Pod) {
		return func(q *corev1.Pod) {
			q.Spec.TerminationGracePeriodSeconds = &thirty
			q.Status.Phase, q.Status.Reason, q.Status.Message, q.Status.Conditions = corev1.PodFailed, reason, msg, conds
		}
	}
	byKubelet := func(msg string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonTerminationByKubelet, Message: msg}
	}
	for _, c := range []struct {
		name, reason, msg string
		conds             []corev1.PodCondition
		want              string
		grace             time.Duration
		from              string
	}{
		{"podstorage", "Evicted", "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. ", nil, ReasonEvicted, 2 * time.Second, string(timeline.GraceFromLocalStorageEviction)},
		{"ctrstorage", "Evicted", `Container app exceeded its local ephemeral storage limit "1Mi". `, nil, ReasonEvicted, 2 * time.Second, string(timeline.GraceFromLocalStorageEviction)},
		{"emptydir", "Evicted", `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `, nil, ReasonEvicted, 2 * time.Second, string(timeline.GraceFromLocalStorageEviction)},
		{"pressure", "Evicted", "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. ",
			[]corev1.PodCondition{byKubelet("The node was low on resource: memory.")}, ReasonEvicted, 0, "a node-pressure eviction"},
		{"shutdown", "Terminated", "Pod was terminated in response to imminent node shutdown.",
			[]corev1.PodCondition{byKubelet("Pod was terminated in response to imminent node shutdown.")}, ReasonNodeShutdown, 0, "the kubelet's shutdownGracePeriod"},
	} {
		p.pod(pod(c.name, status(c.reason, c.msg, c.conds...)))
		r, g, from := p.Explain("shop", c.name, "app", "", stop)
		if r != c.want || g != c.grace || !strings.HasPrefix(string(from), c.from) {
			t.Errorf("%s: %s %v %q, want %s %v %q...", c.name, r, g, from, c.want, c.grace, c.from)
		}
	}
	// A failed postStart hook: kuberuntime's Killing event, the pod's grace.
	p.pod(pod("hooked", func(q *corev1.Pod) { q.Spec.TerminationGracePeriodSeconds = &thirty }))
	p.event(killingEvent("hooked", "app", "FailedPostStartHook", stop.Add(-time.Second)))
	if r, g, from := p.Explain("shop", "hooked", "app", "", stop); r != ReasonPostStartFailed || g != 30*time.Second || from != "the pod's terminationGracePeriodSeconds" {
		t.Errorf("postStart failed: %s %v %q", r, g, from)
	}
	// A grace the records do not tell is said not learnt, never shown.
	p.synced.Store(true)
	p.slicesSynced.Store(true)
	ep := timeline.Episode{Container: timeline.Container{Identity: identity.Identity{Pod: "pressure", Namespace: "shop", Name: "app"}}, StopAt: stop}
	annotate(p, &ep)
	if ep.StopReason != ReasonEvicted || ep.GracePeriod != 0 || ep.GraceFrom != "" || len(ep.NotLearnt) != 1 || !strings.HasPrefix(ep.NotLearnt[0], "the applied grace period: a node-pressure eviction") {
		t.Errorf("node pressure: %s %v %q %q", ep.StopReason, ep.GracePeriod, ep.GraceFrom, ep.NotLearnt)
	}
}

// annotate finishes ep with what p's records say of it, as the pipeline
// does.
func annotate(p *Pods, ep *timeline.Episode) {
	timeline.Finish(ep, timeline.Facts{Kube: p.Facts(ep.Container.Identity, ep.StopAt, ep.Start)})
}

// A StatefulSet's pod made again keeps its name: the stop of the old pod's
// container, completing after the new pod appeared, is explained by the old
// pod (its revision, its deletion), the new pod's by the new one's.
func TestPodOfTheSameName(t *testing.T) {
	p := New(nil, "", nil)
	stop := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	sts := func(uid, hash string, deleted bool) *corev1.Pod {
		return pod("db-0", func(q *corev1.Pod) {
			q.UID = types.UID(uid)
			q.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "db", Controller: ptr(true)}}
			q.Labels = map[string]string{"controller-revision-hash": hash}
			if deleted {
				ts := metav1.NewTime(stop)
				q.DeletionTimestamp = &ts
			}
		})
	}
	p.pod(sts("old", "db-1111", false))
	p.pod(sts("old", "db-1111", true))
	p.pod(sts("new", "db-2222", false))
	for _, tc := range []struct{ uid, hash, reason string }{{"old", "db-1111", ReasonDeleted}, {"new", "db-2222", ReasonUnknown}, {"", "db-2222", ReasonUnknown}} {
		_, rev := p.workload("shop", "db-0", tc.uid)
		reason, _, _ := p.explain("shop", "db-0", tc.uid, "app", "c1", stop.Add(time.Second))
		if rev == nil || rev.Hash != tc.hash || reason != tc.reason {
			t.Errorf("pod uid %q: revision %+v, reason %s; want %s, %s", tc.uid, rev, reason, tc.hash, tc.reason)
		}
	}
	// The old pod's endpoint, terminating 50 ms after its deletion: its
	// lag after that deletion, not after the new pod's (none).
	p.mu.Lock()
	p.pods["shop/db-0"].prev.deleteSeen = stop
	p.endpoints["shop/db-0"] = &podEndpoints{services: []*endpointState{{service: "shop/db", uid: "old", terminatingAt: stop.Add(50 * time.Millisecond)}}}
	p.mu.Unlock()
	if got := p.Endpoints("shop", "db-0", "old", stop.Add(time.Second)); len(got) != 1 || got[0].AfterDeletion == nil || *got[0].AfterDeletion != 50*time.Millisecond {
		t.Errorf("the old pod's endpoint: %+v, want its lag after its own deletion", got)
	}
}
