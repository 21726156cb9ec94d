package kubeplugin

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/internal/textsafe"
)

// Who was hurt, named across the cluster. An agent names the clients of a
// stop that it knows (its node's addresses, its node's pods: its informer
// lists no others); the plugin, which sees the cluster, names the rest
// from one list of every pod and one of the nodes: another node's pod by
// the pod that held the address at the stop, another node by its
// addresses. A pod deleted since cannot be listed: its address stays
// unnamed (or is named by a later pod only if that one was created by
// the stop).

// unnamedPeers says whether some episode has a client with an address
// that no agent named: only then does the plugin list the cluster.
func unnamedPeers(eps []timeline.Episode) bool {
	for i := range eps {
		t := eps[i].Traffic
		if t == nil || t.Peers == nil {
			continue
		}
		for _, p := range t.Peers.Top {
			if p.Who.Kind == timeline.PeerUnknown && p.Addr.IsValid() {
				return true
			}
		}
	}
	return false
}

// namePeers names, on eps, the clients no agent named (kind unknown, with
// an address), so that both the text (hurt:) and the JSON carry the
// names: a pod of pods that held the address at the stop
// (timeline.Episode.PeerAddrs' time), else a node of nodes with that
// address (InternalIP, ExternalIP). Names the agents gave are kept.
func namePeers(eps []timeline.Episode, pods []pod, nodes []node) {
	idx := indexAddrs(pods, nodes)
	for i := range eps {
		ep := &eps[i]
		t := ep.Traffic
		if t == nil || t.Peers == nil {
			continue
		}
		_, at := ep.PeerAddrs()
		names := map[netip.Addr]timeline.PeerName{}
		for _, p := range t.Peers.Top {
			if p.Who.Kind != timeline.PeerUnknown || !p.Addr.IsValid() {
				continue
			}
			if n, ok := idx.name(p.Addr.Unmap(), at); ok {
				names[p.Addr] = n
			}
		}
		t.NamePeers(names)
	}
}

// addrIndex is the cluster's pods and nodes by address.
type addrIndex struct {
	pods  map[netip.Addr][]*pod
	nodes map[netip.Addr]string
}

func indexAddrs(pods []pod, nodes []node) *addrIndex {
	idx := &addrIndex{pods: map[netip.Addr][]*pod{}, nodes: map[netip.Addr]string{}}
	for i := range pods {
		p := &pods[i]
		if p.Spec.HostNetwork {
			continue // the node's addresses: named as the node
		}
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				idx.pods[a.Unmap()] = append(idx.pods[a.Unmap()], p)
			}
		}
	}
	for _, n := range nodes {
		for _, na := range n.Status.Addresses {
			if na.Type != "InternalIP" && na.Type != "ExternalIP" {
				continue
			}
			if a, err := netip.ParseAddr(na.Address); err == nil {
				if _, ok := idx.nodes[a.Unmap()]; !ok {
					idx.nodes[a.Unmap()] = n.Metadata.Name
				}
			}
		}
	}
	return idx
}

// name names address a as it was at at: the pod that held it then (the
// latest created of those that may have: a pod's address is reused after
// it goes), else the node that has it.
func (idx *addrIndex) name(a netip.Addr, at time.Time) (timeline.PeerName, bool) {
	var best *pod
	for _, p := range idx.pods[a] {
		if !heldAt(p, at) {
			continue
		}
		if best == nil || createdAfter(p, best) {
			best = p
		}
	}
	if best != nil {
		n := timeline.PeerName{Kind: timeline.PeerPod, Namespace: best.Metadata.Namespace, Name: best.Metadata.Name}
		if o, ok := workloadOfPod(best); ok {
			n.Workload = o.String()
		}
		return n, true
	}
	if name, ok := idx.nodes[a]; ok {
		return timeline.PeerName{Kind: timeline.PeerNode, Name: name}, true
	}
	return timeline.PeerName{}, false
}

// heldAt says whether p may have held its addresses at at: created by then
// (creationTimestamp, to the second), and, when it has finished (Succeeded,
// Failed: its status keeps the addresses, which went back to the node's
// pool), its containers not all finished before at. A finished pod without
// a finish time is not taken: unnamed rather than misnamed.
func heldAt(p *pod, at time.Time) bool {
	if p.Metadata.CreationTimestamp.After(at) {
		return false
	}
	if p.Status.Phase != "Succeeded" && p.Status.Phase != "Failed" {
		return true
	}
	var end time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(end) {
			end = t.FinishedAt
		}
	}
	return !end.IsZero() && !end.Before(at.Truncate(time.Second)) // finishedAt is to the second too
}

// createdAfter says whether p was created after q; of two created in the
// same second (creationTimestamp's precision), the first by namespace and
// name, so that the choice is the same each time.
func createdAfter(p, q *pod) bool {
	if c := p.Metadata.CreationTimestamp.Compare(q.Metadata.CreationTimestamp); c != 0 {
		return c > 0
	}
	return p.Metadata.Namespace+"/"+p.Metadata.Name < q.Metadata.Namespace+"/"+q.Metadata.Name
}

// workloadOfPod is the workload of p's controller reference, by the
// agent's rule (timeline.ControllerWorkload, kubemeta.WorkloadOf's).
func workloadOfPod(p *pod) (timeline.Owner, bool) {
	for _, ref := range p.Metadata.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return timeline.ControllerWorkload(ref.Kind, ref.Name, p.Metadata.Labels.PodTemplateHash, p.Metadata.Labels.RolloutsPodTemplateHash), true
		}
	}
	return timeline.Owner{}, false
}

// nameClusterPeers names the clients of eps that no agent could (another
// node's pods, other nodes), listing every pod and the nodes only when
// some client needs it. A list that fails (RBAC, the API server) fails
// nothing: what it would have named stays unnamed, and the warning
// returned says why when some client is left unnamed ("" otherwise).
func nameClusterPeers(ctx context.Context, s *session, eps []timeline.Episode) (warning string) {
	if !unnamedPeers(eps) {
		return ""
	}
	pods, podsErr := s.fleet.API.pods(ctx, "", "")
	nodes, nodesErr := s.nodes(ctx)
	namePeers(eps, pods, nodes) // nil on an error: nothing named from it
	if podsErr == nil && nodesErr == nil || !unnamedPeers(eps) {
		return ""
	}
	var why []string
	if podsErr != nil {
		why = append(why, "other nodes' pods: "+listFailed("pods", "list pods -A", podsErr))
	}
	if nodesErr != nil {
		why = append(why, "nodes: "+listFailed("nodes", "list nodes", nodesErr))
	}
	return textsafe.Terminal("clients the agents could not name stay unnamed (" + strings.Join(why, "; ") + ")")
}

// listFailed says why a cluster-wide list of resource failed: the
// permission to grant (and how to check it), or the error.
func listFailed(resource, canI string, err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf(`kubectl sigscope needs "list" on %q cluster-wide to name them (check with kubectl auth can-i %s); the API server said: %v`,
			resource, canI, err)
	}
	return fmt.Sprintf("listing %s cluster-wide: %v", resource, err)
}
