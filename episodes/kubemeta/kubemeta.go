package kubemeta

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/kubeclient"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// Stop reasons (timeline.Episode.StopReason).
const (
	ReasonDeleted     = "deleted"      // the pod was deleted through the API
	ReasonEvicted     = "evicted"      // eviction API, node pressure, taint manager
	ReasonPreempted   = "preempted"    // the scheduler made room for another pod
	ReasonProbeFailed = "probe_failed" // a liveness or startup probe failed: the kubelet restarts it
	ReasonRestarted   = "restarted"    // the container's spec changed: the kubelet restarts it
	// ReasonDeadlineExceeded: the pod ran longer than its
	// activeDeadlineSeconds; the kubelet failed it and stopped its
	// containers (status reason DeadlineExceeded), with no deletion.
	ReasonDeadlineExceeded = "deadline_exceeded"
	// ReasonNodeShutdown: the kubelet's graceful node shutdown stopped the
	// pod (status reason Terminated, DisruptionTarget TerminationByKubelet).
	ReasonNodeShutdown = "node_shutdown"
	// ReasonPostStartFailed: the container's postStart hook failed and the
	// kubelet killed it (its Killing event "FailedPostStartHook").
	ReasonPostStartFailed = "poststart_failed"
	ReasonUnknown         = "unknown" // the API server said nothing that explains it
)

// The kubelet's eviction manager gives a pod it evicts for a local storage
// limit (an emptyDir's sizeLimit, the pod's or a container's
// ephemeral-storage limit) and for a hard node-pressure threshold a grace
// override of 1 s (immediateEvictionGracePeriodSeconds), which kuberuntime
// raises to its minimum of 2 s (minimumGracePeriodInSeconds) before the stop.
const kubeletMinGrace = 2 * time.Second

// maxPods bounds the pods remembered, deleted ones included.
const maxPods = 4096

type podState struct {
	// uid is the pod object's; prev is the state of the pod of the same
	// name before it (a StatefulSet's pod made again, another revision),
	// kept for the stop of its containers that may complete after the new
	// pod appeared (stateOf). One back, and only one: it holds no prev.
	uid  string
	prev *podState
	// ips are the pod's addresses (status.podIPs; none for a host-network
	// pod, whose are the node's), from created until gone (its object's
	// deletion, as the informer saw it; zero while it is there): who was
	// hurt is named by the pod that held the address at the stop.
	ips           []netip.Addr
	created, gone time.Time
	deletedAt     time.Time // the deletionTimestamp first seen
	deleteGrace   *int64    // the deletionGracePeriodSeconds first seen
	disruption    string    // the DisruptionTarget condition's reason, when true
	// deleteSeen is when the deletion was made, for the endpoints' lags:
	// when this agent saw the deletionTimestamp appear (its informer's
	// time, on the clock of the endpoints' times), or, for a pod first
	// seen deleted, the API server's time of the request
	// (deletionTimestamp less deletionGracePeriodSeconds, to the second).
	deleteSeen time.Time
	// restarted are the container IDs the kubelet replaced (the
	// lastState of a container status): those stops were restarts.
	restarted []string
	owner     *timeline.Owner    // the pod's workload; nil for a bare pod
	revision  *timeline.Revision // the pod's template, as its controller labelled it
	// The graces the kubelet takes for its own stops: the pod's
	// terminationGracePeriodSeconds, and each container's liveness and
	// startup probes' own (KEP-2238), which win for a probe's failure.
	specGrace   *int64
	probeGraces map[string][2]*int64 // by container: liveness, startup
	// statusReason and statusMessage are the pod status's reason and
	// message as last seen ("DeadlineExceeded", "Evicted", ...).
	statusReason, statusMessage string
}

type killing struct {
	container string
	message   string
	at        time.Time
}

// Pods follows the pods of a node (or all) and the kubelet's Killing events.
type Pods struct {
	client kubeclient.Client
	node   string
	log    *slog.Logger
	synced atomic.Bool

	// slicesSynced is set when the EndpointSlices are listed, apart from
	// synced: without RBAC for them (a chart older than the agent) the
	// stop reasons are still learnt. slicesErr is the last error of their
	// list or watch.
	slicesSynced atomic.Bool
	slicesErr    atomic.Pointer[string]
	now          func() time.Time // the informers' observation time; time.Now but in tests

	// OnHookStart, when set before Run, is called (on the informer's
	// goroutine, outside any lock: keep it short) for each deletion seen
	// as it happened of a pod with a sleep or httpGet preStop hook.
	OnHookStart func(HookStart)

	mu        sync.Mutex
	pods      map[string]*podState // "namespace/name"
	kills     map[string][]killing
	endpoints map[string]*podEndpoints // by the pod's "namespace/name"
	order     []string                 // keys in the order first seen, for the bound
}

// HookStart is a pod's deletion as this process saw it happen, with the
// containers whose preStop hook the kubelet runs itself (sleep, httpGet):
// nothing in such a container marks the hook's start, which begins its
// stop.
type HookStart struct {
	Namespace, Pod string
	At             time.Time // when the informer saw the deletion
	Containers     []HookedContainer
}

// HookedContainer is a container of a HookStart.
type HookedContainer struct {
	Name, ID string    // ID without the runtime's scheme
	Until    time.Time // the hook's end at the latest: At plus its sleep, or plus the grace period
}

// New returns Pods for node ("" for every node). Run starts it.
func New(client kubeclient.Client, node string, log *slog.Logger) *Pods {
	if log == nil {
		log = slog.Default()
	}
	return &Pods{client: client, node: node, log: log.With("component", "kubemeta"), now: time.Now,
		pods: map[string]*podState{}, kills: map[string][]killing{}, endpoints: map[string]*podEndpoints{}}
}

// Run follows the API server until ctx ends. Until its caches are synced,
// Annotate says it could not learn the reason.
func (p *Pods) Run(ctx context.Context) {
	podSel := ""
	if p.node != "" {
		podSel = "spec.nodeName=" + p.node
	}
	podInf := cache.NewSharedIndexInformer(p.client.ListWatch("pods", podSel), &corev1.Pod{}, 0, cache.Indexers{})
	_, _ = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.pod(o) },
		UpdateFunc: func(_, o any) { p.pod(o) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			p.pod(o)
			p.podGone(o)
		},
	})
	evInf := cache.NewSharedIndexInformer(p.client.ListWatch("events", "reason=Killing"), &corev1.Event{}, 0, cache.Indexers{})
	_, _ = evInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.event(o) },
		UpdateFunc: func(_, o any) { p.event(o) },
	})
	sliceInf := p.sliceInformer()
	var wg sync.WaitGroup
	wg.Go(func() { podInf.RunWithContext(ctx) })
	wg.Go(func() { evInf.RunWithContext(ctx) })
	wg.Go(func() { sliceInf.RunWithContext(ctx) })
	wg.Go(func() {
		if cache.WaitForCacheSync(ctx.Done(), sliceInf.HasSynced) {
			p.slicesSynced.Store(true)
		}
	})
	if cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, evInf.HasSynced) {
		p.synced.Store(true)
	}
	// Run returns once the informers have stopped, as the factories'
	// Shutdown waited for them.
	wg.Wait()
}

func (p *Pods) remember(key string) {
	if _, ok := p.pods[key]; ok {
		return
	}
	if _, ok := p.kills[key]; ok {
		return
	}
	if _, ok := p.endpoints[key]; ok {
		return
	}
	p.order = append(p.order, key)
	if len(p.order) > maxPods {
		old := p.order[0]
		p.order = p.order[1:]
		delete(p.pods, old)
		delete(p.kills, old)
		delete(p.endpoints, old)
	}
}

func (p *Pods) pod(o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	var hooks *HookStart
	defer func() { // after the unlock: deferred calls run last first
		if hooks != nil && p.OnHookStart != nil {
			p.OnHookStart(*hooks)
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remember(key)
	st := p.pods[key]
	seen := st != nil
	if st != nil && st.uid != "" && pod.UID != "" && st.uid != string(pod.UID) {
		// A new pod of the old one's name: its own state, the old one's
		// kept beside it.
		st.prev = nil
		st = &podState{prev: st}
		p.pods[key] = st
		seen = false
	}
	if st == nil {
		st = &podState{}
		p.pods[key] = st
	}
	st.uid = string(pod.UID)
	// The first deletion seen is the one the kubelet acted on: the
	// kubelet's own final delete has a grace of 0.
	if pod.DeletionTimestamp != nil && st.deletedAt.IsZero() {
		st.deletedAt = pod.DeletionTimestamp.Time
		st.deleteGrace = pod.DeletionGracePeriodSeconds
		st.deleteSeen = p.now()
		if !seen {
			// The API server sets the deletionTimestamp to the request's
			// time plus the grace, and keeps that request time when a
			// later delete shortens the grace.
			st.deleteSeen = st.deletedAt
			if g := st.deleteGrace; g != nil && *g > 0 {
				st.deleteSeen = st.deletedAt.Add(-time.Duration(*g) * time.Second)
			}
		} else {
			hooks = hookStart(pod, st.deleteSeen)
		}
	}
	if o := WorkloadOf(pod); o != nil {
		st.owner = o
	}
	if r := RevisionOf(pod); r != nil {
		st.revision = r
	}
	st.created = pod.CreationTimestamp.Time
	if !pod.Spec.HostNetwork && len(pod.Status.PodIPs) > 0 {
		// A status without addresses (a pod not started yet, or one the
		// kubelet has finished with) leaves those it had.
		st.ips = st.ips[:0]
		for _, ip := range pod.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				st.ips = append(st.ips, a.Unmap())
			}
		}
	}
	st.specGrace = pod.Spec.TerminationGracePeriodSeconds
	if pod.Status.Reason != "" {
		st.statusReason, st.statusMessage = pod.Status.Reason, pod.Status.Message
	}
	st.probeGraces = nil
	for _, c := range pod.Spec.Containers {
		var g [2]*int64
		if p := c.LivenessProbe; p != nil {
			g[0] = p.TerminationGracePeriodSeconds
		}
		if p := c.StartupProbe; p != nil {
			g[1] = p.TerminationGracePeriodSeconds
		}
		if g[0] != nil || g[1] != nil {
			if st.probeGraces == nil {
				st.probeGraces = map[string][2]*int64{}
			}
			st.probeGraces[c.Name] = g
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			st.disruption = c.Reason
		}
	}
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		t := cs.LastTerminationState.Terminated
		if t == nil || t.ContainerID == "" {
			continue
		}
		_, id, _ := strings.Cut(t.ContainerID, "://")
		if id != "" && !slices.Contains(st.restarted, id) {
			st.restarted = append(st.restarted, id)
			if len(st.restarted) > 16 {
				st.restarted = st.restarted[1:]
			}
		}
	}
}

func (p *Pods) event(o any) {
	ev, ok := o.(*corev1.Event)
	if !ok || ev.Reason != "Killing" || ev.InvolvedObject.Kind != "Pod" {
		return
	}
	// fieldPath: spec.containers{app}, spec.initContainers{proxy}
	fp := ev.InvolvedObject.FieldPath
	i, j := strings.IndexByte(fp, '{'), strings.LastIndexByte(fp, '}')
	if i < 0 || j < i {
		return
	}
	at := ev.LastTimestamp.Time
	if !ev.EventTime.IsZero() {
		at = ev.EventTime.Time
	}
	if at.IsZero() {
		at = ev.CreationTimestamp.Time
	}
	key := ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remember(key)
	ks := append(p.kills[key], killing{container: fp[i+1 : j], message: ev.Message, at: at})
	if len(ks) > 8 {
		ks = ks[len(ks)-8:]
	}
	p.kills[key] = ks
}

// Explain says why the container ctr (runtime ID id) of the pod was
// stopped at stopAt, the grace period the kubelet applied for that reason,
// and where it took it from. A grace of 0 with a from is one the API
// server's records do not tell: from then says the kubelet's rule and why. The API server's times have a second's resolution, too
// coarse to tell a restart from a deletion that follows it: a container the
// kubelet replaced (its ID in a lastState) was restarted, for the reason of
// the kubelet's last Killing event of a restart; any other stop of a pod
// being deleted is the deletion's.
func (p *Pods) Explain(namespace, pod, ctr, id string, stopAt time.Time) (reason string, grace time.Duration, from timeline.GraceSource) {
	return p.explain(namespace, pod, "", ctr, id, stopAt)
}

// stateOf is the state of the pod namespace/name (key) whose uid is uid: the
// pod of that name now, or the one before it; the one now when uid is ""
// or neither's. Under p.mu.
func (p *Pods) stateOf(key, uid string) *podState {
	st := p.pods[key]
	if st != nil && uid != "" && st.uid != uid && st.prev != nil && st.prev.uid == uid {
		return st.prev
	}
	return st
}

// explain is Explain for the pod of uid ("": the one of that name now).
func (p *Pods) explain(namespace, pod, uid, ctr, id string, stopAt time.Time) (reason string, grace time.Duration, from timeline.GraceSource) {
	key := namespace + "/" + pod
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stateOf(key, uid)
	probe := -1 // the failed probe: 0 liveness, 1 startup
	restartReason := func() string {
		// The kubelet's Killing event comes when it decides, before the
		// hook and the stop signal.
		reason := ""
		for _, k := range p.kills[key] {
			if k.container != ctr || k.at.After(stopAt.Add(2*time.Second)) || !k.at.After(stopAt.Add(-15*time.Minute)) {
				continue
			}
			m := strings.ToLower(k.message)
			switch {
			case strings.Contains(m, "liveness probe"):
				reason, probe = ReasonProbeFailed, 0
			case strings.Contains(m, "startup probe"):
				reason, probe = ReasonProbeFailed, 1
			case strings.Contains(m, "will be restarted"):
				reason = ReasonRestarted
			case m == "failedpoststarthook":
				// kuberuntime's own message for a failed postStart hook.
				reason = ReasonPostStartFailed
			}
		}
		return reason
	}
	// kubeletGrace is the grace the kubelet applies to a stop of its own
	// (no deletion), where it takes it from (kuberuntime's
	// setTerminationGracePeriod): a failed probe's own
	// terminationGracePeriodSeconds, else the pod's.
	kubeletGrace := func(reason string) (time.Duration, timeline.GraceSource) {
		if st == nil {
			return 0, ""
		}
		if reason == ReasonProbeFailed && probe >= 0 {
			if g := st.probeGraces[ctr][probe]; g != nil && *g >= 0 {
				return time.Duration(*g) * time.Second, [...]timeline.GraceSource{timeline.GraceFromLivenessProbe, timeline.GraceFromStartupProbe}[probe]
			}
		}
		if g := st.specGrace; g != nil && *g >= 0 {
			return time.Duration(*g) * time.Second, timeline.GraceFromPod
		}
		return 0, ""
	}
	if st != nil && id != "" && slices.Contains(st.restarted, id) {
		if r := restartReason(); r != "" {
			// The kubelet stopped it (its Killing event): its grace.
			g, f := kubeletGrace(r)
			return r, g, f
		}
		// Replaced with no Killing event: it ended by itself (a crash)
		// and the kubelet started another; no grace was applied.
		return ReasonRestarted, 0, ""
	}
	if st != nil && st.deletedAt.IsZero() {
		// The kubelet's own stops of a pod nobody deleted: its status says
		// which, set before the kill.
		switch {
		case st.statusReason == "DeadlineExceeded":
			// With the pod's grace (no override).
			g, f := kubeletGrace(ReasonDeadlineExceeded)
			return ReasonDeadlineExceeded, g, f
		case st.statusReason == "Evicted":
			g, f := evictionGrace(st.statusMessage)
			return ReasonEvicted, g, f
		case st.statusReason == "Terminated" && st.disruption == corev1.PodReasonTerminationByKubelet:
			// The shutdown manager's override: its priority group's
			// share of shutdownGracePeriod, or the pod's own grace
			// when that is less.
			return ReasonNodeShutdown, 0, timeline.GraceRuleNodeShutdown
		}
	}
	if st == nil || st.deletedAt.IsZero() && st.disruption == "" {
		if r := restartReason(); r != "" {
			g, f := kubeletGrace(r)
			return r, g, f
		}
		return ReasonUnknown, 0, ""
	}
	if st.deleteGrace != nil && *st.deleteGrace >= 0 {
		grace, from = time.Duration(*st.deleteGrace)*time.Second, timeline.GraceFromDeletion
	}
	switch st.disruption {
	case "PreemptionByScheduler":
		return ReasonPreempted, grace, from
	case "":
	default:
		return ReasonEvicted, grace, from
	}
	if !st.deletedAt.IsZero() {
		return ReasonDeleted, grace, from
	}
	return ReasonUnknown, 0, ""
}

// evictionGrace is the grace the kubelet's eviction manager applied to a pod
// it evicted with the status message msg, and where it comes from; 0 with
// the kubelet's rule when the API server's record does not tell it.
func evictionGrace(msg string) (time.Duration, timeline.GraceSource) {
	switch {
	case strings.HasPrefix(msg, "Pod ephemeral local storage usage exceeds"),
		strings.HasPrefix(msg, "Usage of EmptyDir volume"),
		strings.HasPrefix(msg, "Container ") && strings.Contains(msg, "exceeded its local ephemeral storage limit"):
		return kubeletMinGrace, timeline.GraceFromLocalStorageEviction
	case strings.HasPrefix(msg, "The node was low on resource"), strings.HasPrefix(msg, "The node had condition"):
		return 0, timeline.GraceRuleNodePressure
	}
	return 0, timeline.GraceRuleEviction
}

// Facts are what the API server's records say of the stop of container c
// of a pod, at stopAt (its start when no stop signal was seen): why the
// kubelet stopped it, the grace it applied and where that came from, the
// pod's workload, and its endpoints (see [Pods.Endpoints]); as values, for
// timeline.Finish. nil for a container of no pod.
func (p *Pods) Facts(c identity.Identity, stopAt, start time.Time) *timeline.KubeFacts {
	if c.Pod == "" {
		return nil
	}
	if p == nil || !p.synced.Load() {
		return &timeline.KubeFacts{Unread: timeline.KubeNotSynced}
	}
	at := stopAt
	if at.IsZero() {
		at = start
	}
	f := &timeline.KubeFacts{}
	// By the pod's uid: a StatefulSet's pod made again has the old one's
	// name, another revision, and no deletion yet.
	f.Owner, f.Revision = p.workload(c.Namespace, c.Pod, c.PodUID)
	f.Reason, f.Grace, f.GraceFrom = p.explain(c.Namespace, c.Pod, c.PodUID, c.Name, c.ID, at)
	if !p.slicesSynced.Load() {
		if e := p.slicesErr.Load(); e != nil {
			f.EndpointsWhy = *e
		}
		return f
	}
	f.EndpointsRead = true
	f.Endpoints = p.Endpoints(c.Namespace, c.Pod, c.PodUID, stopAt)
	return f
}

// Workload is the workload of the pod namespace/name and the revision it
// ran, as last seen (WorkloadOf, RevisionOf); each nil when it has none or
// the pod was not seen.
func (p *Pods) Workload(namespace, pod string) (*timeline.Owner, *timeline.Revision) {
	return p.workload(namespace, pod, "")
}

// workload is Workload for the pod of uid ("": the one of that name now).
func (p *Pods) workload(namespace, pod, uid string) (*timeline.Owner, *timeline.Revision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stateOf(namespace+"/"+pod, uid)
	if st == nil {
		return nil, nil
	}
	var o *timeline.Owner
	var r *timeline.Revision
	if st.owner != nil {
		c := *st.owner
		o = &c
	}
	if st.revision != nil {
		c := *st.revision
		r = &c
	}
	return o, r
}

// RevisionOf is the pod template pod was made from, as its controller
// labelled it (timeline.ControllerRevision, the kubectl plugin's rule
// too); nil for a pod with no controller or without the label.
func RevisionOf(pod *corev1.Pod) *timeline.Revision {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	return timeline.ControllerRevision(ref.Kind, ref.Name, pod.Labels[timeline.LabelPodTemplateHash], pod.Labels[timeline.LabelControllerRevisionHash],
		pod.Labels[timeline.LabelRolloutsPodTemplateHash])
}

// WorkloadOf is the workload that controls pod, from its controller
// reference alone (no further lookup, so no RBAC beyond reading pods): a
// ReplicaSet whose name is a Deployment's name, "-" and the pod's
// pod-template-hash label (the Deployment controller's naming) is taken for
// that Deployment (timeline.ControllerWorkload, the kubectl plugin's rule
// too). A CronJob's Jobs stay Jobs: telling one from a Job named like it
// would need the Job itself. nil for a pod with no controller.
func WorkloadOf(pod *corev1.Pod) *timeline.Owner {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	o := timeline.ControllerWorkload(ref.Kind, ref.Name, pod.Labels[timeline.LabelPodTemplateHash], pod.Labels[timeline.LabelRolloutsPodTemplateHash])
	return &o
}

// hookStart is the deletion of pod, seen at at, when a container of it has
// a preStop hook the kubelet runs itself (sleep, httpGet); nil otherwise,
// and for a pod on the node's network, whose connections are the node's.
func hookStart(pod *corev1.Pod, at time.Time) *HookStart {
	if pod.Spec.HostNetwork {
		return nil
	}
	grace := int64(30)
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		grace = *g
	} else if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	ids := map[string]string{}
	for _, cs := range pod.Status.ContainerStatuses {
		if _, id, ok := strings.Cut(cs.ContainerID, "://"); ok {
			ids[cs.Name] = id
		}
	}
	var h *HookStart
	for _, c := range pod.Spec.Containers {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || ids[c.Name] == "" {
			continue
		}
		ps := c.Lifecycle.PreStop
		until := at.Add(time.Duration(grace) * time.Second)
		switch {
		case ps.Sleep != nil:
			until = at.Add(time.Duration(min(ps.Sleep.Seconds, grace)) * time.Second)
		case ps.HTTPGet == nil:
			continue // exec: the hook's own exec marks its start
		}
		if h == nil {
			h = &HookStart{Namespace: pod.Namespace, Pod: pod.Name, At: at}
		}
		h.Containers = append(h.Containers, HookedContainer{Name: c.Name, ID: ids[c.Name], Until: until})
	}
	return h
}
