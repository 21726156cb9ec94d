package kubemeta

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sigscope/sigscope/containers/kubeclient"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// Bounds of what is kept of one pod's endpoints, beside maxPods: the
// Services that list it, and the slices of one Service that do (two for a
// dual-stack Service, one per address family; more only while the
// endpoints controller moves it from one to another). An endpoint past a
// bound is not followed.
const (
	maxServices = 32
	maxSlices   = 8
)

// conditions are an endpoint's conditions as a consumer reads them: a
// ready left unset is ready, a serving left unset is the ready condition,
// a terminating left unset is false.
type conditions struct{ ready, serving, terminating bool }

func conditionsOf(c discoveryv1.EndpointConditions) conditions {
	out := conditions{ready: c.Ready == nil || *c.Ready}
	out.serving = out.ready
	if c.Serving != nil {
		out.serving = *c.Serving
	}
	out.terminating = c.Terminating != nil && *c.Terminating
	return out
}

// endpointState is what was seen of a pod's endpoint in one Service's
// EndpointSlices.
type endpointState struct {
	service string
	uid     types.UID // the targetRef's: another pod of the same name starts over
	// slices are the slices of the Service that list the endpoint now,
	// with its conditions in each: each slice is followed apart, so that
	// one that was not updated yet (the other family of a dual-stack
	// Service) does not undo a change the other showed.
	slices []sliceConditions
	// last are the conditions last seen in any slice: an endpoint that
	// moves to another slice is compared with them.
	last  conditions
	known bool // last was seen

	notReadyAt, notServingAt, terminatingAt, removedAt time.Time
}

type sliceConditions struct {
	slice string
	c     conditions
}

// podEndpoints are a pod's endpoints, one per Service, in the order first
// seen.
type podEndpoints struct{ services []*endpointState }

// sliceInformer follows the EndpointSlices of every namespace. They cannot
// be selected by node on the API server; its transform keeps, of each, only
// what is read below: the Service's label and the endpoints of pods (of
// this node when it has one), with their conditions.
func (p *Pods) sliceInformer() cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(p.client.ListWatch(kubeclient.EndpointSlices, ""), &discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	_ = inf.SetTransform(p.trimSlice)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		// Until the first list: an agent whose ClusterRole predates the
		// EndpointSlices gets Forbidden, retried forever, and its episodes
		// say so. After it, a dropped watch is routine.
		if !p.slicesSynced.Load() {
			msg := err.Error()
			if prev := p.slicesErr.Swap(&msg); prev == nil || *prev != msg {
				p.log.Warn("EndpointSlices not read: episodes lack their endpoints", "error", err)
			}
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.slice(nil, o) },
		UpdateFunc: func(old, o any) { p.slice(old, o) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			p.slice(o, nil)
		},
	})
	return inf
}

// trimSlice is the informer's transform: it may change the object in
// place (client-go 1.27+), and is idempotent.
func (p *Pods) trimSlice(o any) (any, error) {
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok {
		return o, nil
	}
	s.ManagedFields, s.Annotations, s.OwnerReferences, s.Ports = nil, nil, nil, nil
	if svc, ok := s.Labels[discoveryv1.LabelServiceName]; ok {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	} else {
		s.Labels = nil
	}
	kept := s.Endpoints[:0]
	for _, e := range s.Endpoints {
		if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || p.node != "" && e.NodeName != nil && *e.NodeName != p.node {
			continue
		}
		kept = append(kept, discoveryv1.Endpoint{Conditions: e.Conditions, NodeName: e.NodeName,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: e.TargetRef.Namespace, Name: e.TargetRef.Name, UID: e.TargetRef.UID}})
	}
	clear(s.Endpoints[len(kept):])
	s.Endpoints = slices.Clip(kept)
	return s, nil
}

// sliceEndpoint is an endpoint of a pod in a slice.
type sliceEndpoint struct {
	pod string // "namespace/name"
	uid types.UID
	c   conditions
}

// endpointsOf lists the pods' endpoints of a slice that this node
// follows: with a node, those on it (an endpoint that names no node: a
// pod known to be on it).
func (p *Pods) endpointsOf(s *discoveryv1.EndpointSlice) []sliceEndpoint {
	var out []sliceEndpoint
	for _, e := range s.Endpoints {
		ref := e.TargetRef
		if ref == nil || ref.Kind != "Pod" || ref.Name == "" {
			continue
		}
		ns := ref.Namespace
		if ns == "" {
			ns = s.Namespace
		}
		key := ns + "/" + ref.Name
		if p.node != "" {
			if e.NodeName != nil && *e.NodeName != p.node {
				continue
			}
			if _, ok := p.pods[key]; e.NodeName == nil && !ok {
				continue
			}
		}
		out = append(out, sliceEndpoint{pod: key, uid: ref.UID, c: conditionsOf(e.Conditions)})
	}
	return out
}

// slice takes an EndpointSlice's change: old is nil when it was added, s
// when it was deleted. What changed is found by comparing each endpoint
// with what was seen of it, so that the informer's first list, which shows
// no change, records none.
func (p *Pods) slice(oldObj, obj any) {
	old, _ := oldObj.(*discoveryv1.EndpointSlice)
	s, _ := obj.(*discoveryv1.EndpointSlice)
	ref := s
	if ref == nil {
		ref = old
	}
	if ref == nil {
		return
	}
	name := ref.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return // not a Service's: nothing routes by it
	}
	service := ref.Namespace + "/" + name
	now := p.now()

	p.mu.Lock()
	defer p.mu.Unlock()
	var listed []string
	if s != nil {
		for _, e := range p.endpointsOf(s) {
			listed = append(listed, e.pod)
			p.seeEndpoint(service, s.Name, e, now)
		}
	}
	if old != nil {
		for _, e := range p.endpointsOf(old) {
			if !slices.Contains(listed, e.pod) {
				p.goneFromSlice(service, old.Name, e.pod, now)
			}
		}
	}
}

// state is the pod's endpoint in service; nil when it is not followed and
// create is false, or past the bounds.
func (p *Pods) state(pod, service string, create bool) *endpointState {
	pe := p.endpoints[pod]
	if pe != nil {
		for _, st := range pe.services {
			if st.service == service {
				return st
			}
		}
	}
	if !create {
		return nil
	}
	if pe == nil {
		p.remember(pod)
		pe = &podEndpoints{}
		p.endpoints[pod] = pe
	}
	if len(pe.services) >= maxServices {
		return nil
	}
	st := &endpointState{service: service}
	pe.services = append(pe.services, st)
	return st
}

func (p *Pods) seeEndpoint(service, slice string, e sliceEndpoint, now time.Time) {
	st := p.state(e.pod, service, true)
	if st == nil {
		return
	}
	if st.uid != "" && e.uid != "" && st.uid != e.uid {
		// Another pod of the same name (a StatefulSet's, made again).
		*st = endpointState{service: service}
	}
	if e.uid != "" {
		st.uid = e.uid
	}
	i := slices.IndexFunc(st.slices, func(sc sliceConditions) bool { return sc.slice == slice })
	switch {
	case i >= 0:
		st.change(st.slices[i].c, e.c, now)
		st.slices[i].c = e.c
	case len(st.slices) < maxSlices:
		// New in this slice: it moved from another, or came back.
		if st.known {
			st.change(st.last, e.c, now)
		}
		st.removedAt = time.Time{}
		st.slices = append(st.slices, sliceConditions{slice: slice, c: e.c})
	default:
		return
	}
	st.last, st.known = e.c, true
}

// change records the conditions' changes from was to now. A condition
// back in its serving state forgets its change: a readiness probe that
// failed and passed again says nothing of a later stop.
func (st *endpointState) change(was, is conditions, now time.Time) {
	mark := func(at *time.Time, from, to bool) {
		switch {
		case from && !to && at.IsZero():
			*at = now
		case !from && to:
			*at = time.Time{}
		}
	}
	mark(&st.notReadyAt, was.ready, is.ready)
	mark(&st.notServingAt, was.serving, is.serving)
	mark(&st.terminatingAt, !was.terminating, !is.terminating)
}

func (p *Pods) goneFromSlice(service, slice, pod string, now time.Time) {
	st := p.state(pod, service, false)
	if st == nil {
		return
	}
	st.slices = slices.DeleteFunc(st.slices, func(sc sliceConditions) bool { return sc.slice == slice })
	if len(st.slices) == 0 && st.removedAt.IsZero() {
		st.removedAt = now
	}
}

// Endpoints are the endpoint changes of the pod namespace/name in each
// Service whose EndpointSlices listed it, sorted by Service, with their lags
// from the pod's deletion and from stopAt (zero: none); nil when no slice
// listed it. uid, when given, is the pod's: what was seen of another pod of
// that name is not its.
//
// Each time is when this agent's informer saw the change (time.Now as it
// took the update): an EndpointSlice carries no time per condition, so
// what is measured is the API server's change plus its watch's delay, the
// same for an independent watch. A change already made when the informer
// first listed the slice is not known, and a condition that came back
// (ready again) forgets its change.
func (p *Pods) Endpoints(namespace, pod, uid string, stopAt time.Time) []timeline.EndpointChange {
	key := namespace + "/" + pod
	p.mu.Lock()
	defer p.mu.Unlock()
	pe := p.endpoints[key]
	if pe == nil {
		return nil
	}
	// The deletion of the pod of uid: a StatefulSet's pod made again
	// under the name is not the one that stopped.
	var deleted time.Time
	if st := p.stateOf(key, uid); st != nil && (uid == "" || st.uid == "" || st.uid == uid) {
		deleted = st.deleteSeen
	}
	var out []timeline.EndpointChange
	for _, st := range pe.services {
		if uid != "" && st.uid != "" && string(st.uid) != uid {
			continue
		}
		c := timeline.EndpointChange{Service: st.service, NotReadyAt: st.notReadyAt, NotServingAt: st.notServingAt,
			TerminatingAt: st.terminatingAt, RemovedAt: st.removedAt}
		c.SetLags(deleted, stopAt)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b timeline.EndpointChange) int { return strings.Compare(a.Service, b.Service) })
	return out
}
