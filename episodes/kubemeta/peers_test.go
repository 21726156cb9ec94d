package kubemeta

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sigscope/sigscope/episodes/timeline"
)

// Who was hurt, named by the pod that held the address at the stop: a
// pod's address goes to another after it is gone; this node's addresses
// are the node's; an address no pod here held is not named.
func TestPeerNames(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	now := t0
	p := New(nil, "", nil)
	p.now = func() time.Time { return now }
	at := func(ip string, created time.Time) func(*corev1.Pod) {
		return func(q *corev1.Pod) {
			q.CreationTimestamp = metav1.NewTime(created)
			q.Status.PodIPs = []corev1.PodIP{{IP: ip}}
			q.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: q.Name + "-6d5f8b7c9", Controller: ptr(true)}}
		}
	}
	old := pod("ingress-a", at("10.88.0.7", t0))
	p.pod(old)
	now = t0.Add(10 * time.Minute)
	p.pod(old)
	p.podGone(old)
	p.pod(pod("client-b", at("10.88.0.7", t0.Add(11*time.Minute)))) // the address reused
	node := map[netip.Addr]bool{netip.MustParseAddr("10.88.0.1"): true}
	addrs := []netip.Addr{netip.MustParseAddr("10.88.0.7"), netip.MustParseAddr("10.88.0.1"), netip.MustParseAddr("10.99.0.9")}
	before := p.PeerNames(addrs, t0.Add(5*time.Minute), node, "node-1")
	after := p.PeerNames(addrs, t0.Add(12*time.Minute), node, "node-1")
	if n := before[addrs[0]]; n.Kind != timeline.PeerPod || n.Namespace != "shop" || n.Name != "ingress-a" {
		t.Errorf("at 5 min: %+v, want shop/ingress-a", n)
	}
	if n := after[addrs[0]]; n.Name != "client-b" {
		t.Errorf("at 12 min: %+v, want client-b (the address reused)", n)
	}
	if n := after[addrs[1]]; n.Kind != timeline.PeerNode || n.Name != "node-1" {
		t.Errorf("the node's address: %+v", n)
	}
	if n, ok := after[addrs[2]]; ok {
		t.Errorf("an address no pod here held named %+v", n)
	}
	if n := p.PeerNames(addrs[:1], t0.Add(-time.Minute), node, "")[addrs[0]]; n.Kind != timeline.PeerUnknown {
		t.Errorf("before any pod held it: %+v", n)
	}
}

func ptr[T any](v T) *T { return &v }
