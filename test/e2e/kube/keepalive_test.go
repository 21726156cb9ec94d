package kube

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// A Deployment's pod whose server, on SIGTERM, closes its idle keep-alive
// connections under its clients for a second and then exits, deleted on
// the real kubelet while eight pooled HTTP/1.1 clients on the node send
// POSTs (never retried) to its IP across the CNI bridge: the episode's
// lost requests equal the clients' failures, kind by kind, the verdict
// names the keep-alive race and the hint drains; the clients are named,
// by their address, as this node.
func TestPodDeletionKeepAlive(t *testing.T) {
	c := requireCluster(t)
	dir := trafficServer(t)
	name := fmt.Sprintf("sigscope-ka-%d", time.Now().Unix()%100000)
	pod, ip := deployTraffic(t, c, name, dir, "ka-closeidle", "")
	l := startTimeline(t, c)
	testutil.WaitPrograms(t, l.Cmd.Process.Pid, 8)
	cl, err := testutil.StartKeepAliveLoad(net.JoinHostPort(ip, "8080"), 8, 20*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	cl.WaitAnswered(t)
	time.Sleep(500 * time.Millisecond) // every worker's connection kept
	if _, err := c.run(t, "-n", "default", "delete", "pod", pod, "--wait=true", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	attempts := cl.Stop()
	eps := podEpisodes(l.stop(t, pod, 1), pod)
	if len(eps) != 1 {
		t.Fatalf("%d episodes of %s, want 1", len(eps), pod)
	}
	var ep struct {
		Traffic *struct {
			Unread     string           `json:"unread"`
			Until      string           `json:"until"`
			Unanswered *struct{ N int } `json:"unanswered"`
			AfterClose *struct{ N int } `json:"after_close"`
			Cut        *struct{ N int } `json:"cut"`
			ResetSent  *struct{ N int } `json:"reset_sent"`
			Refused    *struct{ N int } `json:"refused"`
			Undecided  *struct{ N int } `json:"undecided"`
			Lost       *int             `json:"lost"`
			Verdict    string           `json:"verdict"`
			Hint       string           `json:"hint"`
			Peers      *struct {
				Top []struct {
					Address string `json:"address"`
					Lost    int    `json:"lost"`
					Kind    string `json:"kind"`
				} `json:"top"`
				Unattributed int `json:"unattributed"`
			} `json:"peers"`
		} `json:"traffic"`
	}
	if err := json.Unmarshal([]byte(eps[0].raw), &ep); err != nil {
		t.Fatal(err)
	}
	tr := ep.Traffic
	if tr == nil || tr.Unread != "" || tr.Unanswered == nil || tr.AfterClose == nil || tr.Cut == nil || tr.ResetSent == nil || tr.Undecided == nil || tr.Lost == nil {
		t.Fatalf("counts not read, or a kind that tells who spoke last is null:\n%s", eps[0].raw)
	}
	until, err := time.Parse(time.RFC3339Nano, tr.Until)
	if err != nil {
		t.Fatal(err)
	}
	got := testutil.TallyWindow(attempts, until, 2*time.Millisecond)
	t.Logf("clients: %d ok, %d broken, %d refused, other %v (%d at the read, %d after it); episode: %s", got.OK, got.Reset, got.Refused, got.Other, got.AtUntil, got.After, eps[0].raw)
	if got.Reset == 0 {
		t.Fatal("no request broken: the test's premise is that closing idle keep-alive connections under the clients breaks some")
	}
	counts := testutil.EpisodeLost{Unanswered: tr.Unanswered.N, AfterClose: tr.AfterClose.N, Cut: tr.Cut.N, ResetSent: tr.ResetSent.N,
		Undecided: tr.Undecided.N, Lost: *tr.Lost}
	if tr.Refused != nil {
		counts.Refused = &tr.Refused.N
	}
	got.CheckLost(t, counts)
	if tr.Unanswered.N+tr.AfterClose.N > 0 && (!strings.Contains(tr.Verdict, "the keep-alive race") || !strings.Contains(tr.Hint, "Connection: close")) {
		t.Errorf("the keep-alive race not named or not drained: verdict %q, hint %q", tr.Verdict, tr.Hint)
	}
	// The clients dial from the node: its address on the CNI bridge,
	// named as this node.
	// Only the handshakes the listener's close dropped may be
	// unattributed (their request sockets' clients are not read at the
	// close): reset_sent, or cut when the server's exit closed it.
	if tr.Peers == nil || len(tr.Peers.Top) != 1 || tr.Peers.Top[0].Kind != "node" || tr.Peers.Top[0].Lost+tr.Peers.Unattributed != *tr.Lost ||
		tr.Peers.Unattributed > tr.ResetSent.N+tr.Cut.N {
		t.Errorf("peers %+v: want the node alone, with the %d lost", tr.Peers, *tr.Lost)
	}
}
