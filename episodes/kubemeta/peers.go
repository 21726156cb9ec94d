package kubemeta

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sigscope/sigscope/episodes/timeline"
)

// podGone notes when a pod's object went: its address may go to another
// pod from then on.
func (p *Pods) podGone(o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.pods[pod.Namespace+"/"+pod.Name]; st != nil && st.gone.IsZero() {
		st.gone = p.now()
	}
}

// PeerNames names the addresses of the clients that lost requests in a
// stop at at: a pod of this agent's node (its informer's; another node's
// pods are the plugin's to name, which sees the cluster) that held the
// address then (a pod's address is reused after it goes: the one created
// before at and not gone before it, the latest created if several), or
// this node (node: its own addresses, nodeName its name).
func (p *Pods) PeerNames(addrs []netip.Addr, at time.Time, node map[netip.Addr]bool, nodeName string) map[netip.Addr]timeline.PeerName {
	out := map[netip.Addr]timeline.PeerName{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		if node[a] {
			out[a] = timeline.PeerName{Kind: timeline.PeerNode, Name: nodeName}
			continue
		}
		var best *podState
		var bestKey string
		for key, st := range p.pods {
			if !holds(st, a, at) || best != nil && !st.created.After(best.created) {
				continue
			}
			best, bestKey = st, key
		}
		if best == nil {
			continue
		}
		n := timeline.PeerName{Kind: timeline.PeerPod}
		n.Namespace, n.Name = splitKey(bestKey)
		if o := best.owner; o != nil {
			n.Workload = o.Kind + "/" + o.Name
		}
		out[a] = n
	}
	return out
}

// holds reports whether st's pod held address a at at.
func holds(st *podState, a netip.Addr, at time.Time) bool {
	if st.created.After(at) || !st.gone.IsZero() && st.gone.Before(at) {
		return false
	}
	for _, ip := range st.ips {
		if ip == a {
			return true
		}
	}
	return false
}

func splitKey(key string) (namespace, name string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}
