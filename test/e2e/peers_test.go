package e2e

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// TestStopTrafficPeers stops a server that closes its idle keep-alive
// connections under its clients and then exits, with two clients at two
// addresses of their own (network namespaces joined to the container's by
// veth pairs, as other pods or nodes are): A keeps its connections alive
// (the keep-alive race hurts it), B makes a new connection per request
// (refused once the server has gone). Each is named by its address with
// what it lost, by its own count.
func TestStopTrafficPeers(t *testing.T) {
	img := trafficImage(t)
	const name = "e2e-traffic-peers"
	id := runContainer(t, name, img, "/server", "ka-closeidle")
	l := startTimeline(t)
	testutil.WaitPrograms(t, l.Cmd.Process.Pid, 8)
	pid := hostEngine.mainPID(t, name)
	a, b := testutil.StartNetPeer(t, pid, 1), testutil.StartNetPeer(t, pid, 2)
	ka, err := testutil.StartKeepAliveLoad(a.ContainerAddr+":8080", 4, 20*time.Millisecond, a.PID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ka.Stop() })
	plain, err := testutil.StartHTTPLoad(b.ContainerAddr+":8080", 2, 500*time.Millisecond, b.PID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Stop() })
	ka.WaitAnswered(t)
	plain.WaitAnswered(t)
	time.Sleep(200 * time.Millisecond)
	if out, err := exec.Command("docker", "stop", "-t", "5", name).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v: %s", err, out)
	}
	time.Sleep(time.Second)
	attemptsA, attemptsB := ka.Stop(), plain.Stop()
	ep := episodeOf(t, l.stop(t, id), id)
	var with struct {
		Traffic *struct {
			trafficJSON
			Peers *struct {
				Top []struct {
					Address   string         `json:"address"`
					Lost      int            `json:"lost"`
					MaybeLost int            `json:"maybe_lost"`
					Kinds     map[string]int `json:"kinds"`
					Kind      string         `json:"kind"`
				} `json:"top"`
				More         int `json:"more"`
				Unattributed int `json:"unattributed"`
			} `json:"peers"`
		} `json:"traffic"`
	}
	if err := json.Unmarshal(ep.raw, &with); err != nil || with.Traffic == nil || with.Traffic.Unread != "" {
		t.Fatalf("episode has no traffic counts (%v):\n%s", err, ep.raw)
	}
	tr := with.Traffic
	until, err := time.Parse(time.RFC3339Nano, tr.Until)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Peers == nil {
		t.Fatalf("no peers:\n%s", ep.raw)
	}
	byAddr := map[string]int{}
	for i, p := range tr.Peers.Top {
		byAddr[p.Address] = i
	}
	for _, c := range []struct {
		name     string
		peer     *testutil.NetPeer
		attempts []testutil.HTTPAttempt
	}{{"A (keep-alive)", a, attemptsA}, {"B (a connection a request)", b, attemptsB}} {
		got := testutil.TallyWindow(c.attempts, until, 2*time.Millisecond)
		failed := got.Reset + got.Refused
		t.Logf("client %s at %s: %d ok, %d broken, %d refused (%d at the read, %d after it), other %v", c.name, c.peer.Addr, got.OK, got.Reset, got.Refused, got.AtUntil, got.After, got.Other)
		if failed == 0 {
			t.Fatalf("client %s lost nothing: the test's premise is that both were hurt", c.name)
		}
		i, ok := byAddr[c.peer.Addr]
		if !ok {
			t.Errorf("client %s at %s is not among the peers: %+v", c.name, c.peer.Addr, tr.Peers)
			continue
		}
		p := tr.Peers.Top[i]
		// A handshake the listener's close dropped is this client's broken
		// request, and unattributed: its request socket's client is not
		// read at the close (docs/kernel.md).
		if p.Lost > failed+got.AtUntil || p.Lost+p.MaybeLost+tr.Peers.Unattributed < failed {
			t.Errorf("peer %s: lost %d (possibly %d more, %v; %d unattributed); the client failed %d (%d at the read)", p.Address, p.Lost, p.MaybeLost, p.Kinds, tr.Peers.Unattributed, failed, got.AtUntil)
		}
		if p.Kind != "" {
			t.Errorf("peer %s named %q: nothing on this node holds that address", p.Address, p.Kind)
		}
	}
	// The clients are two, and the table keeps both: only handshakes the
	// listener's close dropped (reset_sent) may be unattributed.
	resetSent := 0
	if tr.ResetSent != nil {
		resetSent = tr.ResetSent.N
	}
	if len(tr.Peers.Top) != 2 || tr.Peers.More != 0 || tr.Peers.Unattributed > resetSent {
		t.Errorf("peers %+v: want the two clients, and nothing else but dropped handshakes (reset_sent %d)", tr.Peers, resetSent)
	}
	peers, _ := json.Marshal(tr.Peers)
	t.Logf("peers: %s; episode: %s", peers, ep.raw)
}
