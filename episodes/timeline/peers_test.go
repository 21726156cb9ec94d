package timeline

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Who was hurt: the few clients that lost most, the rest summed, what the
// kernel did not keep said, a sidecar's given-back refusals the pod's own,
// and the names the agent knew; read back from the JSON as written.
func TestPeers(t *testing.T) {
	tr := &Traffic{SeesRefused: true, SeesLastSpeaker: true}
	tr.Counts[sigvocab.NetRefused].N = 30
	tr.Counts[sigvocab.NetUnanswered].N = 4
	tr.Counts[sigvocab.NetUndecided].N = 1
	var ps []sigvocab.PeerCounts
	add := func(addr string, kinds map[sigvocab.NetKind]uint64) {
		p := sigvocab.PeerCounts{Addr: netip.MustParseAddr(addr)}
		for k, n := range kinds {
			p.N[k] = n
		}
		ps = append(ps, p)
	}
	add("10.0.0.5", map[sigvocab.NetKind]uint64{sigvocab.NetRefused: 10, sigvocab.NetUnanswered: 2})
	add("10.0.0.9", map[sigvocab.NetKind]uint64{sigvocab.NetRefused: 3, sigvocab.NetUndecided: 1})
	add("fd00::1", map[sigvocab.NetKind]uint64{sigvocab.NetUnanswered: 2})
	for _, a := range []string{"10.0.1.1", "10.0.1.2", "10.0.1.3"} {
		add(a, map[sigvocab.NetKind]uint64{sigvocab.NetRefused: 1})
	}
	add("10.0.2.1", map[sigvocab.NetKind]uint64{sigvocab.NetClosed: 7}) // lost nothing: not a peer
	// 30 refused: 10 + 3 + 3 held, 4 given back from self_refused (a
	// sidecar's), 10 the kernel did not keep.
	tr.takePeers(ps, 4)
	p := tr.Peers
	if len(p.Top) != MaxPeers || p.More != 2 || p.MoreLost != 2 || p.Unattributed != 10 {
		t.Fatalf("peers %+v", p)
	}
	if p.Top[0].Addr != netip.MustParseAddr("10.0.0.5") || p.Top[0].Lost != 12 || p.Top[1].Who.Kind != PeerNamespace || p.Top[1].Lost != 4 ||
		p.Top[2].Lost != 3 || p.Top[2].MaybeLost != 1 || p.Top[3].Addr != netip.MustParseAddr("fd00::1") {
		t.Errorf("top %+v", p.Top)
	}
	tr.NamePeers(map[netip.Addr]PeerName{netip.MustParseAddr("10.0.0.5"): {Kind: PeerPod, Namespace: "shop", Name: "ingress-7c9", Workload: "Deployment/ingress"},
		netip.MustParseAddr("10.0.0.9"): {Kind: PeerNode, Name: "node-1"}})
	want := "10.0.0.5 (pod shop/ingress-7c9, Deployment/ingress): 12 lost (10 refused, 2 read and never answered); the pod's own namespace (a sidecar's calls for its clients): 4 lost (refused); " +
		"10.0.0.9 (node node-1: a process on it, a host-network pod, or traffic kube-proxy masqueraded): 3 lost (refused), 1 possibly; fd00::1: 2 lost (read and never answered); 10.0.1.1: 1 lost (refused); " +
		"2 more clients: 2 lost; 10 lost by clients the kernel's table (4096) did not keep"
	if got := tr.PeersText(); got != want {
		t.Errorf("text\n%q\nwant\n%q", got, want)
	}
	b, err := json.Marshal(peersJSON(tr.Peers))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `{"address":"10.0.0.5","lost":12,"kinds":{"refused":10,"unanswered":2},"kind":"pod","namespace":"shop","name":"ingress-7c9","workload":"Deployment/ingress"}`) {
		t.Errorf("json %s", b)
	}
	var j jsonPeers
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	back, err := peersFromJSON(&j)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(peersJSON(back))
	if string(b2) != string(b) {
		t.Errorf("read back\n%s\nwant\n%s", b2, b)
	}
	// A kernel that cannot see refused attempts: none of them counts.
	tr.SeesRefused = false
	tr.takePeers(ps, 0)
	if len(tr.Peers.Top) != 3 || tr.Peers.Top[0].Lost != 2 {
		t.Errorf("without refused: %+v", tr.Peers.Top)
	}
}
