package kube

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// clientPod is a bare pod on the node that requests addr without pause
// (busybox's nc, a new connection an HTTP/1.0 request; its static wget
// crashes), as another workload's pod calling a Service's backend does.
func clientPod(c *cluster, name, addr string) string {
	return fmt.Sprintf(`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": %[1]q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
 "spec": {"nodeName": %[2]q, "terminationGracePeriodSeconds": 1,
  "containers": [{"name": "client", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
   "command": ["sh", "-c", "while :; do printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 1 %[3]s >/dev/null 2>&1; usleep 20000; done"]}]}}`, name, c.nodeName, strings.Replace(addr, ":", " ", 1))
}

// Two client pods on the node call a Deployment's pod whose server exits at
// once on SIGTERM, and both are refused once it has gone: the episode
// names each peer as its pod, by the pod that held the address at the
// stop, each with what it lost; the node's own probes stay apart.
func TestPodDeletionPeersNamed(t *testing.T) {
	c := requireCluster(t)
	dir := trafficServer(t)
	name := fmt.Sprintf("sigscope-peers-%d", time.Now().Unix()%100000)
	pod, ip := deployTraffic(t, c, name, dir, "exit", "")
	clients := map[string]string{} // address: the client pod's name
	for _, cl := range []string{name + "-client-a", name + "-client-b"} {
		if _, err := c.runInput(t, clientPod(c, cl, ip+":8080"), "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kubectlCleanup(c, "-n", "default", "delete", "pod", cl, "--ignore-not-found", "--wait=false")
		})
		if _, err := c.run(t, "-n", "default", "wait", "--for=condition=Ready", "pod/"+cl, "--timeout=60s"); err != nil {
			t.Fatal(err)
		}
		addr, err := c.run(t, "-n", "default", "get", "pod", cl, "-o", "jsonpath={.status.podIP}")
		if err != nil || addr == "" {
			t.Fatalf("client %s's address: %q, %v", cl, addr, err)
		}
		clients[strings.TrimSpace(addr)] = cl
	}
	l := startTimeline(t, c)
	testutil.WaitPrograms(t, l.Cmd.Process.Pid, 8)
	time.Sleep(time.Second) // the clients calling
	if _, err := c.run(t, "-n", "default", "delete", "pod", pod, "--wait=true", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	eps := podEpisodes(l.stop(t, pod, 1), pod)
	if len(eps) != 1 {
		t.Fatalf("%d episodes of %s, want 1", len(eps), pod)
	}
	var ep struct {
		Traffic *struct {
			Lost      *int             `json:"lost"`
			ResetSent *struct{ N int } `json:"reset_sent"`
			Cut       *struct{ N int } `json:"cut"`
			Peers     *struct {
				Top []struct {
					Address   string `json:"address"`
					Lost      int    `json:"lost"`
					Kind      string `json:"kind"`
					Namespace string `json:"namespace"`
					Name      string `json:"name"`
				} `json:"top"`
				More         int `json:"more"`
				Unattributed int `json:"unattributed"`
			} `json:"peers"`
			Probes map[string]uint64 `json:"probes"`
		} `json:"traffic"`
	}
	if err := json.Unmarshal([]byte(eps[0].raw), &ep); err != nil {
		t.Fatal(err)
	}
	tr := ep.Traffic
	if tr == nil || tr.Lost == nil || tr.Peers == nil {
		t.Fatalf("no counts or no peers:\n%s", eps[0].raw)
	}
	peers, _ := json.Marshal(tr.Peers)
	t.Logf("clients %v; peers %s; probes %v; lost %d; episode %s", clients, peers, tr.Probes, *tr.Lost, eps[0].raw)
	sum := 0
	for _, p := range tr.Peers.Top {
		sum += p.Lost
		cl, ok := clients[p.Address]
		if !ok {
			t.Errorf("peer %s (%s %s/%s, %d lost) is none of the clients %v", p.Address, p.Kind, p.Namespace, p.Name, p.Lost, clients)
			continue
		}
		if p.Kind != "pod" || p.Namespace != "default" || p.Name != cl || p.Lost == 0 {
			t.Errorf("peer %s: %s %s/%s with %d lost, want pod default/%s", p.Address, p.Kind, p.Namespace, p.Name, p.Lost, cl)
		}
		delete(clients, p.Address)
	}
	if len(clients) > 0 {
		t.Errorf("clients %v are not among the peers", clients)
	}
	// Only the handshakes the listener's close dropped may be
	// unattributed (their request sockets' clients are not read at the
	// close): reset_sent, or cut when the server's exit closed it.
	dropped := 0
	for _, k := range []*struct{ N int }{tr.ResetSent, tr.Cut} {
		if k != nil {
			dropped += k.N
		}
	}
	if sum+tr.Peers.Unattributed != *tr.Lost || tr.Peers.More != 0 || tr.Peers.Unattributed > dropped {
		t.Errorf("the peers hold %d lost (%d more, %d unattributed; %d reset or cut), the stop lost %d", sum, tr.Peers.More, tr.Peers.Unattributed, dropped, *tr.Lost)
	}
}
