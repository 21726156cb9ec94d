package kubeplugin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The stops of the peer tests: an episode of node-a at t0 (half a second
// past, as a stop is timed), another 30 s later.
var peersT0 = time.Date(2026, 11, 25, 10, 0, 0, 500_000_000, time.UTC)

// ts is t0 plus d as the API server writes a timestamp: to the second.
func ts(d time.Duration) string {
	return peersT0.Add(d).Truncate(time.Second).Format(time.RFC3339)
}

// peer is a client that lost n requests (refused), named who by the agent.
func peer(addr string, n uint64, who timeline.PeerName) timeline.Peer {
	p := timeline.Peer{Lost: n, Who: who}
	if addr != "" {
		p.Addr = netip.MustParseAddr(addr)
	}
	p.Kinds[sigvocab.NetRefused] = n
	return p
}

// hurtEpisode is a stop of shop/web-N on node-a at stop whose clients are
// peers, as an agent serves it.
func hurtEpisode(id uint64, stop time.Time, peers ...timeline.Peer) timeline.Episode {
	tr := &timeline.Traffic{NetNS: 7, Since: stop, Until: stop.Add(5 * time.Second), SeesRefused: true, SeesLastSpeaker: true}
	var lost uint64
	for _, p := range peers {
		lost += p.Lost
	}
	tr.Counts[sigvocab.NetRefused] = sigvocab.NetCount{N: lost, First: stop, Last: stop.Add(time.Second)}
	tr.Peers = &timeline.Peers{Top: peers}
	return timeline.Episode{ID: id, Node: "node-a", Outcome: timeline.OutcomeGraceful, Start: stop, StopAt: stop, ExitAt: stop.Add(time.Second),
		Container: timeline.Container{Identity: identity.Identity{ID: fmt.Sprintf("c%d", id), Namespace: "shop", Pod: fmt.Sprintf("web-%d", id), Name: "app"}},
		Traffic:   tr}
}

// episodesAgent serves eps and its info, as the agent of node-a.
func episodesAgent(eps ...timeline.Episode) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/episodes", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(eps) })
	mux.HandleFunc("GET /api/v1/info", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(apiv1.Info{APIVersion: "v1", Node: "node-a"})
	})
	return mux
}

// clusterAPI is fakeAPIServer with the cluster's lists: every pod (pods,
// a PodList's items, or an error's status and body when status is not 200)
// and the nodes (likewise); it counts the lists asked for.
type clusterAPI struct {
	kubeconfig          string
	podLists, nodeLists atomic.Int64
}

type answer struct {
	status int
	body   string
}

func (a answer) serve(w http.ResponseWriter, kind string) {
	if a.status != http.StatusOK {
		w.WriteHeader(a.status)
		fmt.Fprint(w, a.body)
		return
	}
	fmt.Fprintf(w, `{"kind":%q,"apiVersion":"v1","metadata":{},"items":[%s]}`, kind, a.body)
}

func forbidden(resource string) answer {
	return answer{http.StatusForbidden, fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,`+
		`"message":"%s is forbidden: User \"alice\" cannot list resource \"%s\" in API group \"\" at the cluster scope"}`, resource, resource)}
}

func newClusterAPI(t *testing.T, agent http.Handler, pods, nodes answer) *clusterAPI {
	t.Helper()
	c := &clusterAPI{}
	srv := newFakeAPIServer(map[string]http.Handler{"a": agent}, false)
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/pods":
			c.podLists.Add(1)
			w.Header().Set("Content-Type", "application/json")
			pods.serve(w, "PodList")
		case "/api/v1/nodes":
			c.nodeLists.Add(1)
			w.Header().Set("Content-Type", "application/json")
			nodes.serve(w, "NodeList")
		default:
			inner.ServeHTTP(w, r)
		}
	})
	srv.Start()
	t.Cleanup(srv.Close)
	c.kubeconfig = kubeconfigFor(t, srv.URL)
	return c
}

// podItem is a pod of the list: ns/name on nodeName, created at t0+created,
// holding ip; extra is more of its JSON (owners, labels, status fields).
func podItem(ns, name, nodeName, ip string, created time.Duration, phase, extra string) string {
	if phase == "" {
		phase = "Running"
	}
	return fmt.Sprintf(`{"metadata":{"name":%q,"namespace":%q,"creationTimestamp":%q%s},"spec":{"nodeName":%q%s},"status":{"phase":%q,"podIPs":[{"ip":%q}]%s}}`,
		name, ns, ts(created), field(extra, "metadata"), nodeName, field(extra, "spec"), phase, ip, field(extra, "status"))
}

// field picks the part of extra for one object of a pod: "metadata:...|spec:...|status:...".
func field(extra, of string) string {
	for _, part := range strings.Split(extra, "|") {
		if v, ok := strings.CutPrefix(part, of+":"); ok {
			return "," + v
		}
	}
	return ""
}

func controller(kind, name string) string {
	return fmt.Sprintf(`metadata:"ownerReferences":[{"kind":"Other","name":"x"},{"kind":%q,"name":%q,"controller":true}]`, kind, name)
}

func finished(d time.Duration) string {
	return fmt.Sprintf(`status:"containerStatuses":[{"state":{"terminated":{"finishedAt":%q}}}]`, ts(d))
}

// The cluster of the peer tests, as the API server lists it.
var (
	clusterPods = strings.Join([]string{
		// On node-b, a Deployment's: named with its Deployment.
		podItem("shop", "client-7d9f8c6b5-x2x4z", "node-b", "10.244.1.5", -time.Hour, "",
			controller("ReplicaSet", "client-7d9f8c6b5")+`,"labels":{"pod-template-hash":"7d9f8c6b5","app":"client"}`),
		// 10.244.1.6 was another pod's at the stop, deleted since: this one
		// got it a minute after.
		podItem("shop", "reuser", "node-b", "10.244.1.6", time.Minute, "", ""),
		// 10.244.1.7: an evicted pod's, done an hour before the stop, then
		// the StatefulSet's pod's, created after it: the latest is taken.
		podItem("shop", "old-evicted", "node-b", "10.244.1.7", -3*time.Hour, "Failed", finished(-2*time.Hour)),
		podItem("shop", "api-0", "node-c", "10.244.1.7", -time.Hour, "", controller("StatefulSet", "api")),
		// A Job's pod that finished 10 s after the second stop: it held
		// its address then.
		podItem("batch", "migrate-29400000-q8w2n", "node-c", "10.244.2.8", 20*time.Second, "Succeeded",
			controller("Job", "migrate-29400000")+"|"+finished(40*time.Second)),
		// A Job's pod done before the stop: its status keeps an address it
		// no longer held.
		podItem("batch", "report-1-abcde", "node-c", "10.244.2.9", -2*time.Hour, "Succeeded", finished(-time.Hour)),
		// On the node's network: node-b's address, named as the node.
		podItem("kube-system", "ingress-hostnet", "node-b", "192.168.0.12", -time.Hour, "", `spec:"hostNetwork":true`),
		// A pod the agent of node-a named already at 10.244.0.3: kept.
		podItem("shop", "other-holder", "node-a", "10.244.0.3", -time.Hour, "", ""),
	}, ",")
	clusterNodes = `{"metadata":{"name":"node-a"},"status":{"addresses":[{"type":"InternalIP","address":"192.168.0.11"},{"type":"Hostname","address":"node-a"}]}},` +
		`{"metadata":{"name":"node-b"},"status":{"addresses":[{"type":"InternalIP","address":"192.168.0.12"},{"type":"ExternalIP","address":"198.51.100.12"}]}}`
)

// The episodes of the peer tests: the agent of node-a named its own pod
// and the namespace's calls; the rest is the plugin's to name.
func clusterEpisodes() []timeline.Episode {
	local := timeline.PeerName{Kind: timeline.PeerPod, Namespace: "shop", Name: "local-1", Workload: "Deployment/local"}
	return []timeline.Episode{
		hurtEpisode(1, peersT0,
			peer("10.244.1.5", 9, timeline.PeerName{}),
			peer("10.244.1.6", 7, timeline.PeerName{}),
			peer("10.244.1.7", 5, timeline.PeerName{}),
			peer("192.168.0.12", 3, timeline.PeerName{}),
			peer("203.0.113.9", 2, timeline.PeerName{})),
		hurtEpisode(2, peersT0.Add(30*time.Second),
			peer("10.244.2.8", 6, timeline.PeerName{}),
			peer("10.244.0.3", 4, local),
			peer("", 3, timeline.PeerName{Kind: timeline.PeerNamespace}),
			peer("198.51.100.12", 2, timeline.PeerName{}),
			peer("10.244.2.9", 1, timeline.PeerName{})),
	}
}

// noAgentOnB is what the plugin says of node-b, listed with the nodes.
const noAgentOnB = "warning: node node-b: no agent pod on this node\n"

// jsonPeer is a client of an episode's JSON.
type jsonPeer struct {
	Address, Kind, Namespace, Name, Workload string
}

func timelineJSON(t *testing.T, kubeconfig string) (map[uint64][]jsonPeer, []string, string) {
	t.Helper()
	out, errOut, err := runPlugin(t, "--kubeconfig", kubeconfig, "timeline", "-A", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var l struct {
		Items []struct {
			ID      uint64 `json:"id"`
			Traffic struct {
				Peers struct {
					Top []jsonPeer `json:"top"`
				} `json:"peers"`
			} `json:"traffic"`
		} `json:"items"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	peers := map[uint64][]jsonPeer{}
	for _, it := range l.Items {
		peers[it.ID] = it.Traffic.Peers.Top
	}
	return peers, l.Warnings, errOut
}

// The clients the agent could not name are named by the plugin from the
// cluster's pods and nodes, in the JSON and in the text's hurt: line: a
// pod on another node with its Deployment, the latest of the pods created
// by the stop (not the one created after it: a reused address stays
// unnamed), a finished pod only while it ran, a node by its InternalIP
// or ExternalIP (a host-network pod's address is its node's); an address
// nobody in the cluster has stays unnamed, and what the agent named is
// kept. One list of pods and one of nodes for all the episodes.
func TestTimelineNamesPeersAcrossCluster(t *testing.T) {
	c := newClusterAPI(t, episodesAgent(clusterEpisodes()...), answer{http.StatusOK, clusterPods}, answer{http.StatusOK, clusterNodes})
	peers, warnings, errOut := timelineJSON(t, c.kubeconfig)
	want := map[uint64][]jsonPeer{
		1: {
			{Address: "10.244.1.5", Kind: "pod", Namespace: "shop", Name: "client-7d9f8c6b5-x2x4z", Workload: "Deployment/client"},
			{Address: "10.244.1.6"},
			{Address: "10.244.1.7", Kind: "pod", Namespace: "shop", Name: "api-0", Workload: "StatefulSet/api"},
			{Address: "192.168.0.12", Kind: "node", Name: "node-b"},
			{Address: "203.0.113.9"},
		},
		2: {
			{Address: "10.244.2.8", Kind: "pod", Namespace: "batch", Name: "migrate-29400000-q8w2n", Workload: "Job/migrate-29400000"},
			{Address: "10.244.0.3", Kind: "pod", Namespace: "shop", Name: "local-1", Workload: "Deployment/local"},
			{Kind: "namespace"},
			{Address: "198.51.100.12", Kind: "node", Name: "node-b"},
			{Address: "10.244.2.9"},
		},
	}
	for id, w := range want {
		if got := peers[id]; fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("episode %d: peers\n%+v\nwant\n%+v", id, got, w)
		}
	}
	if len(warnings) != 0 || errOut != noAgentOnB {
		t.Errorf("warnings %q, stderr %q", warnings, errOut)
	}
	if n := c.podLists.Load(); n != 1 {
		t.Errorf("%d lists of the cluster's pods, want 1", n)
	}
	if n := c.nodeLists.Load(); n != 1 {
		t.Errorf("%d lists of the nodes, want 1 (the one that finds nodes without an agent)", n)
	}

	out, errOut, err := runPlugin(t, "--kubeconfig", c.kubeconfig, "timeline", "-A")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, line := range []string{
		"hurt: 10.244.1.5 (pod shop/client-7d9f8c6b5-x2x4z, Deployment/client): 9 lost (refused); 10.244.1.6: 7 lost (refused); " +
			"10.244.1.7 (pod shop/api-0, StatefulSet/api): 5 lost (refused); " +
			"192.168.0.12 (node node-b: a process on it, a host-network pod, or traffic kube-proxy masqueraded): 3 lost (refused); 203.0.113.9: 2 lost (refused)\n",
		"hurt: 10.244.2.8 (pod batch/migrate-29400000-q8w2n, Job/migrate-29400000): 6 lost (refused); 10.244.0.3 (pod shop/local-1, Deployment/local): 4 lost (refused); ",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("the text lacks %q:\n%s", line, out)
		}
	}
}

// No client left unnamed by the agents: the cluster's pods are not listed.
func TestTimelineListsPodsOnlyForUnnamedPeers(t *testing.T) {
	named := hurtEpisode(1, peersT0, peer("10.244.0.3", 4, timeline.PeerName{Kind: timeline.PeerPod, Namespace: "shop", Name: "local-1"}),
		peer("", 3, timeline.PeerName{Kind: timeline.PeerNamespace}))
	quiet := hurtEpisode(2, peersT0)
	quiet.Traffic.Peers = nil // an older count: no peers kept
	c := newClusterAPI(t, episodesAgent(named, quiet), answer{http.StatusOK, clusterPods}, answer{http.StatusOK, clusterNodes})
	for _, args := range [][]string{{"timeline", "-A"}, {"timeline", "-A", "-o", "json"}, {"top", "-A"}, {"audit", "-A"}} {
		if _, errOut, err := runPlugin(t, append([]string{"--kubeconfig", c.kubeconfig}, args...)...); err != nil && args[0] != "audit" {
			t.Fatalf("%v: %v\n%s", args, err, errOut)
		}
	}
	if n := c.podLists.Load(); n != 0 {
		t.Errorf("%d lists of the cluster's pods, want none", n)
	}
}

// A list the user's RBAC refuses fails nothing: one warning on stderr and
// in the JSON's warnings, saying what to grant, and the clients it would
// have named stay unnamed; what the other list names is named.
func TestTimelinePeersListForbidden(t *testing.T) {
	c := newClusterAPI(t, episodesAgent(clusterEpisodes()...), forbidden("pods"), answer{http.StatusOK, clusterNodes})
	peers, warnings, errOut := timelineJSON(t, c.kubeconfig)
	if p := peers[1]; len(p) != 5 || p[0].Kind != "" || p[2].Kind != "" || p[3].Kind != "node" || p[3].Name != "node-b" {
		t.Errorf("pods forbidden: peers %+v", p)
	}
	if p := peers[2]; len(p) != 5 || p[0].Kind != "" || p[1].Name != "local-1" {
		t.Errorf("pods forbidden: peers %+v", p)
	}
	want := `clients the agents could not name stay unnamed (other nodes' pods: kubectl sigscope needs "list" on "pods" cluster-wide to name them ` +
		`(check with kubectl auth can-i list pods -A); the API server said: pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope)`
	if len(warnings) != 1 || warnings[0] != want {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	if errOut != noAgentOnB+"warning: "+want+"\n" {
		t.Errorf("stderr %q", errOut)
	}

	// Both refused (nodes too, as the chart's reader role has it): one
	// warning that says both; the text still printed.
	c = newClusterAPI(t, episodesAgent(clusterEpisodes()...), forbidden("pods"), forbidden("nodes"))
	out, errOut, err := runPlugin(t, "--kubeconfig", c.kubeconfig, "timeline", "-A")
	if err != nil || !strings.Contains(out, "hurt: 10.244.1.5: 9 lost (refused); 10.244.1.6: 7 lost (refused)") {
		t.Errorf("%v\n%s", err, out)
	}
	if lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "warning: clients the agents could not name stay unnamed (other nodes' pods: ") ||
		!strings.Contains(lines[0], `; nodes: kubectl sigscope needs "list" on "nodes" cluster-wide to name them (check with kubectl auth can-i list nodes)`) {
		t.Errorf("stderr %q", errOut)
	}
	if n := c.podLists.Load() + c.nodeLists.Load(); n != 2 {
		t.Errorf("%d lists, want one of pods and one of nodes", n)
	}

	// An API server that fails the list: said as its error.
	c = newClusterAPI(t, episodesAgent(clusterEpisodes()...), answer{http.StatusInternalServerError, "etcd timed out"}, answer{http.StatusOK, clusterNodes})
	_, warnings, _ = timelineJSON(t, c.kubeconfig)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "other nodes' pods: listing pods cluster-wide: ") || !strings.Contains(warnings[0], "etcd timed out") {
		t.Errorf("warnings %q", warnings)
	}

	// Every client named by what could be listed: nothing to warn of.
	one := hurtEpisode(1, peersT0, peer("192.168.0.12", 3, timeline.PeerName{}))
	c = newClusterAPI(t, episodesAgent(one), forbidden("pods"), answer{http.StatusOK, clusterNodes})
	peers, warnings, errOut = timelineJSON(t, c.kubeconfig)
	if p := peers[1]; len(p) != 1 || p[0].Kind != "node" || len(warnings) != 0 || errOut != noAgentOnB {
		t.Errorf("peers %+v, warnings %q, stderr %q", p, warnings, errOut)
	}
}

// The time a pod is taken at: created at the stop's second or before (the
// API server's timestamps are to the second), and a reused address's
// latest holder by then; a finished pod until its last container's finish.
func TestNamePeersAt(t *testing.T) {
	var pods []pod
	if err := json.Unmarshal([]byte("["+strings.Join([]string{
		podItem("a", "same-second", "n", "10.0.0.1", 0, "", ""),
		podItem("a", "older", "n", "10.0.0.1", -time.Minute, "", ""),
		podItem("a", "next-second", "n", "10.0.0.2", time.Second, "", ""),
		podItem("a", "done-then", "n", "10.0.0.3", -time.Minute, "Failed", finished(0)),
		podItem("a", "done-unknown", "n", "10.0.0.4", -time.Minute, "Succeeded", ""),
		podItem("b", "twin", "n", "10.0.0.5", -time.Minute, "", ""),
		podItem("a", "twin", "n", "10.0.0.5", -time.Minute, "", ""),
	}, ",")+"]"), &pods); err != nil {
		t.Fatal(err)
	}
	ep := hurtEpisode(1, peersT0, peer("10.0.0.1", 5, timeline.PeerName{}), peer("10.0.0.2", 4, timeline.PeerName{}),
		peer("10.0.0.3", 3, timeline.PeerName{}), peer("10.0.0.4", 2, timeline.PeerName{}), peer("10.0.0.5", 1, timeline.PeerName{}))
	eps := []timeline.Episode{ep}
	namePeers(eps, pods, nil)
	var got []string
	for _, p := range eps[0].Traffic.Peers.Top {
		got = append(got, p.Who.Namespace+"/"+p.Who.Name)
	}
	if want := []string{"a/same-second", "/", "a/done-then", "/", "a/twin"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("named %q, want %q", got, want)
	}
}
