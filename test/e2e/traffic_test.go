package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// trafficImage is the busybox image with testdata/traffic/server.go built
// static as /server.
var (
	trafficOnce sync.Once
	trafficImg  string
	trafficErr  error
)

func trafficImage(t *testing.T) string {
	t.Helper()
	busyboxImage(t) // skips when not privileged
	trafficOnce.Do(func() {
		dir := t.TempDir()
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "server"), filepath.Join("testdata", "traffic", "server.go"))
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			trafficErr = fmt.Errorf("go build testdata/traffic/server.go: %v\n%s", err, out)
			return
		}
		trafficImg = dockertest.BuildBusyboxImageWith(t, "sigscope-e2e-traffic:latest", dir, "COPY server /server")
	})
	if trafficErr != nil {
		t.Fatal(trafficErr)
	}
	return trafficImg
}

// tally is the client's count of each outcome, and of the connections made
// after at (and those whose connect() spanned it, within slack: the kernel
// may count them either way, since the handshake's end is not the moment
// the client's call returned).
// The refused attempts are counted up to until, when sigscope read the
// kernel's count: a client that goes on after that is not the stop's.
type tally struct {
	outcomes           map[string]int
	connectedAfter     int // connect() began after at+slack
	connectedAtBoundry int // connect() spanned at, give or take slack
	refusedAtUntil     int // refused by an attempt that spans until, give or take slack (counted in outcomes)
	refusedAfter       int // refused by an attempt dialled after until+slack (not counted in outcomes)
}

func tallyOf(attempts []testutil.HTTPAttempt, at, until time.Time, slack time.Duration) tally {
	tl := tally{outcomes: map[string]int{}}
	for _, a := range attempts {
		if a.Outcome == "refused" {
			// The kernel refused it between the client's dial and the end
			// it recorded (late, on a loaded machine): one whose dial
			// began after the read is not the stop's; one that spans the
			// read may be counted either way.
			if a.Dialed.After(until.Add(slack)) {
				tl.refusedAfter++
				continue
			}
			if a.Ended.After(until.Add(-slack)) {
				tl.refusedAtUntil++
			}
		}
		tl.outcomes[a.Outcome]++
		switch {
		case a.Connected.IsZero():
		case a.Dialed.After(at.Add(slack)):
			tl.connectedAfter++
		case a.Connected.After(at.Add(-slack)):
			tl.connectedAtBoundry++
		}
	}
	return tl
}

// trafficJSON is the episode's "traffic" object, as the tests check it: a
// kind the kernel could not count is null.
type trafficJSON struct {
	Since    string `json:"since"`
	Accepted *struct {
		N     int
		First string `json:"first"`
	} `json:"accepted"`
	Closed         *struct{ N int } `json:"closed"`
	ResetSent      *struct{ N int } `json:"reset_sent"`
	ResetReceived  *struct{ N int } `json:"reset_received"`
	Cut            *struct{ N int } `json:"cut"`
	Refused        *struct{ N int } `json:"refused"`
	ListenerClosed *struct{ N int } `json:"listener_closed"`
	Unanswered     *struct{ N int } `json:"unanswered"`
	AfterClose     *struct{ N int } `json:"after_close"`
	IdleAtExit     *struct{ N int } `json:"idle_at_exit"`
	Undecided      *struct{ N int } `json:"undecided"`
	Lost           *int             `json:"lost"`
	MaybeLost      int              `json:"maybe_lost"`
	Verdict        string           `json:"verdict"`
	Hint           string           `json:"hint"`
	Unread         string           `json:"unread"`
	Until          string           `json:"until"`
	LastRequest    *struct {
		At string `json:"at"`
	} `json:"last_request"`
}

// TestStopTraffic stops an HTTP server in each shape users run, with a
// client in its network namespace making requests without pause, and holds
// the episode's connection counts to the client's own, kind by kind: the
// refused attempts, the connections broken mid-request (cut by the kernel
// at the process's death), the connections accepted after the stop began;
// a server that drains is reported as clean.
func TestStopTraffic(t *testing.T) {
	img := trafficImage(t)
	for _, tc := range []struct {
		mode, timeout string
		workers       int
		// clientFor is how long after docker stop began the client stops
		// (a load balancer that took the endpoint out); 0: until a second
		// after the container is gone.
		clientFor time.Duration
		outcome   string
		hurt      bool
	}{
		{mode: "drain", timeout: "5", workers: 2, clientFor: 500 * time.Millisecond, outcome: "graceful"},
		{mode: "exit", timeout: "5", workers: 2, outcome: "graceful", hurt: true},
		{mode: "slow", timeout: "1", workers: 3, outcome: "handler_timeout", hurt: true},
		{mode: "ignore", timeout: "1", workers: 2, outcome: "ignored_by_init", hurt: true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			name := "e2e-traffic-" + tc.mode
			id := runContainer(t, name, img, "/server", tc.mode)
			l := startTimeline(t)
			// The signal programs and the three that count connections.
			testutil.WaitPrograms(t, l.Cmd.Process.Pid, 8)
			// sigscope trace --connections, filtered to the container.
			rec := startTrace(t, "--connections", "--container", name)
			testutil.WaitPrograms(t, rec.Cmd.Process.Pid, 8)
			pid := hostEngine.mainPID(t, name)
			// The client in the container's network namespace.
			cl, err := testutil.StartHTTPLoad("127.0.0.1:8080", tc.workers, 2*time.Second, pid)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cl.Stop() })
			cl.WaitAnswered(t)
			stopped := make(chan error, 1)
			go func() {
				out, err := exec.Command("docker", "stop", "-t", tc.timeout, name).CombinedOutput()
				if err != nil {
					err = fmt.Errorf("%v: %s", err, out)
				}
				stopped <- err
			}()
			if tc.clientFor > 0 {
				time.Sleep(tc.clientFor)
				cl.Stop()
			}
			if err := <-stopped; err != nil {
				t.Fatalf("docker stop: %v", err)
			}
			time.Sleep(time.Second)
			attempts := cl.Stop()
			ep := episodeOf(t, l.stop(t, id), id)
			var with struct {
				Traffic *trafficJSON `json:"traffic"`
			}
			if err := json.Unmarshal(ep.raw, &with); err != nil || with.Traffic == nil {
				t.Fatalf("episode has no traffic (%v):\n%s", err, ep.raw)
			}
			tr := *with.Traffic
			checkTraceConnections(t, rec.stop(t), id, tr)
			stopAt, err := time.Parse(time.RFC3339Nano, ep.StopAt)
			if err != nil {
				t.Fatalf("stop_at %q: %v", ep.StopAt, err)
			}
			until, err := time.Parse(time.RFC3339Nano, tr.Until)
			if err != nil {
				t.Fatalf("traffic.until %q: %v", tr.Until, err)
			}
			got := tallyOf(attempts, stopAt, until, 2*time.Millisecond)
			t.Logf("client: %v (and %d refused after the count was read), connected after the stop %d (+%d at it); sigscope: %s",
				got.outcomes, got.refusedAfter, got.connectedAfter, got.connectedAtBoundry, ep.raw)
			if tr.Unread != "" {
				t.Fatalf("counts not read: %s", tr.Unread)
			}
			for o := range got.outcomes {
				if o != "ok" && o != "refused" && o != "reset" {
					t.Errorf("client saw %d %q: not a kind this test expects", got.outcomes[o], o)
				}
			}
			if tr.Accepted == nil || tr.Closed == nil || tr.ResetSent == nil || tr.ResetReceived == nil || tr.Cut == nil || tr.ListenerClosed == nil || tr.Lost == nil ||
				tr.Unanswered == nil || tr.AfterClose == nil || tr.IdleAtExit == nil || tr.Undecided == nil {
				t.Fatalf("a count the kernel always keeps is null")
			}
			if tr.Refused == nil {
				t.Logf("refused attempts unknown on this kernel (before 6.10)")
			} else if n := got.outcomes["refused"]; tr.Refused.N > n || tr.Refused.N < n-got.refusedAtUntil {
				t.Errorf("refused: sigscope %d, the client %d (%d of them at the read)", tr.Refused.N, n, got.refusedAtUntil)
			}
			// Each request the client saw broken is one connection lost
			// (cut, reset, unanswered or sent after the close), or one of
			// those where who spoke last could not be told (undecided);
			// none lost that the client had answered.
			broken := got.outcomes["reset"]
			if ended := tr.Cut.N + tr.ResetSent.N + tr.Unanswered.N + tr.AfterClose.N; ended > broken || ended+tr.Undecided.N < broken {
				t.Errorf("cut %d + reset by the server %d + unanswered %d + after the close %d = %d (and %d undecided): the client saw %d broken",
					tr.Cut.N, tr.ResetSent.N, tr.Unanswered.N, tr.AfterClose.N, ended, tr.Undecided.N, broken)
			}
			if tr.Accepted.N < got.connectedAfter || tr.Accepted.N > got.connectedAfter+got.connectedAtBoundry {
				t.Errorf("accepted: sigscope %d, the client connected %d after the stop (+%d at it)", tr.Accepted.N, got.connectedAfter, got.connectedAtBoundry)
			}
			if tr.ResetReceived.N != 0 {
				t.Errorf("reset_received %d: this client resets nothing", tr.ResetReceived.N)
			}
			lost := tr.Cut.N + tr.ResetSent.N + tr.Unanswered.N + tr.AfterClose.N
			if tr.Refused != nil {
				lost += tr.Refused.N
			}
			if tc.hurt && lost == 0 {
				t.Logf("client outcomes: %v", got.outcomes)
			}
			if *tr.Lost != lost {
				t.Errorf("lost %d, want %d", *tr.Lost, lost)
			}
			if tr.ListenerClosed.N != 1 {
				t.Errorf("listener closed %d times, want once", tr.ListenerClosed.N)
			}
			if tc.hurt != (lost > 0) {
				t.Errorf("lost %d: the %s server should%s hurt its clients", lost, tc.mode, map[bool]string{true: "", false: " not"}[tc.hurt])
			}
			if !tc.hurt && (!strings.HasPrefix(tr.Verdict, "no client was hurt") || tr.Hint != "") {
				t.Errorf("a draining server: verdict %q, hint %q", tr.Verdict, tr.Hint)
			}
			if tc.hurt && tr.Hint == "" {
				t.Errorf("clients were hurt and no hint: %q", tr.Verdict)
			}
			if ep.Outcome != tc.outcome {
				t.Errorf("outcome %s, want %s (the traffic does not change it)", ep.Outcome, tc.outcome)
			}
		})
	}
}

// TestStopTrafficHostNetwork stops a server that shares the node's network
// namespace (--network host), under load: its connections cannot be told
// from the node's, so the kernel counts none of them (the stop signal comes
// from the runtime in the same namespace, flagged net_shared) and the
// episode says so instead of keeping silent or counting the node's.
func TestStopTrafficHostNetwork(t *testing.T) {
	img := trafficImage(t)
	const name = "e2e-traffic-hostnet"
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	id := runContainer(t, name, "--network", "host", img, "/server", "exit", addr)
	// The node's namespace, as the container has it (this process's main
	// thread may be in another: the load client's threads enter others).
	hostNS, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", hostEngine.mainPID(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	if dockerd, err := exec.Command("pidof", "-s", "dockerd").Output(); err == nil {
		if ns, err := os.Readlink("/proc/" + strings.TrimSpace(string(dockerd)) + "/ns/net"); err == nil && ns != hostNS {
			t.Fatalf("the --network host container is in %s, dockerd in %s", hostNS, ns)
		}
	}
	l := startTimeline(t)
	testutil.WaitPrograms(t, l.Cmd.Process.Pid, 8)
	cl, err := testutil.StartHTTPLoad(addr, 2, 2*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	cl.WaitAnswered(t)
	if out, err := exec.Command("docker", "stop", "-t", "5", name).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v: %s", err, out)
	}
	time.Sleep(time.Second)
	attempts := cl.Stop()
	ep := episodeOf(t, l.stop(t, id), id)
	var with struct {
		Traffic *struct {
			trafficJSON
			NetNS uint32 `json:"netns"`
			Scope string `json:"scope"`
		} `json:"traffic"`
	}
	if err := json.Unmarshal(ep.raw, &with); err != nil || with.Traffic == nil {
		t.Fatalf("episode has no traffic (%v):\n%s", err, ep.raw)
	}
	tr := with.Traffic
	ok := 0
	for _, a := range attempts {
		if a.Outcome == "ok" {
			ok++
		}
	}
	t.Logf("client: %d attempts, %d answered; sigscope: %s", len(attempts), ok, ep.raw)
	if ok == 0 {
		t.Fatal("the client was never answered: the server did not serve on the host's network")
	}
	if hostNS != fmt.Sprintf("net:[%d]", tr.NetNS) || tr.Scope != "node" {
		t.Errorf("traffic netns %d scope %q, want the host's %s and node", tr.NetNS, tr.Scope, hostNS)
	}
	if !strings.HasPrefix(tr.Verdict, "not counted: the container shares its network namespace") || tr.Unread == "" || tr.Lost != nil ||
		tr.Accepted != nil || tr.Cut != nil || tr.Hint != "" {
		t.Errorf("traffic %+v: want nothing counted, and the reason", tr.trafficJSON)
	}
	if ep.Outcome != "graceful" {
		t.Errorf("outcome %s, want graceful", ep.Outcome)
	}
}

// freeLoopbackPort is a TCP port nothing listens on now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// checkTraceConnections holds `sigscope trace --connections --container`'s
// net events to the episode's traffic: the same stop counted by another
// tracer from the same stop signal, each kind the container's side ends
// (accepted, cut, reset, the listener) equal once the container is gone.
func checkTraceConnections(t *testing.T, lines []string, id string, tr trafficJSON) {
	t.Helper()
	var last *trafficJSON
	var lastLine string
	nets := 0
	for _, line := range lines {
		var l struct {
			Event       string               `json:"event"`
			Container   *struct{ ID string } `json:"container"`
			Connections *trafficJSON         `json:"connections"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("trace line %q: %v", line, err)
		}
		if l.Container == nil || l.Container.ID != id {
			t.Errorf("trace --container printed another container's line: %s", line)
			continue
		}
		if l.Event == "net" {
			nets++
			if l.Connections == nil {
				t.Fatalf("a net event without counts: %s", line)
			}
			last, lastLine = l.Connections, line
		}
	}
	if last == nil {
		t.Fatalf("sigscope trace --connections printed no net event of the container in %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	t.Logf("trace: %d net events, the last %s", nets, lastLine)
	// Each tracer's count begins at its own program's reading of the
	// clock, on the same stop signal: one runs after the other, tens of µs
	// apart, and a connection accepted in between is one's only (its first
	// accepted is before the other's beginning).
	if last.Accepted == nil || tr.Accepted == nil {
		t.Errorf("accepted: trace %v, timeline %v", last.Accepted, tr.Accepted)
	} else if last.Accepted.N != tr.Accepted.N {
		more, other := last, &tr
		if tr.Accepted.N > last.Accepted.N {
			more, other = &tr, last
		}
		first, _ := time.Parse(time.RFC3339Nano, more.Accepted.First)
		began, _ := time.Parse(time.RFC3339Nano, other.Since)
		if more.Accepted.N-other.Accepted.N > 2 || first.IsZero() || !first.Before(began) {
			t.Errorf("accepted: trace %+v since %s, timeline %+v since %s", *last.Accepted, last.Since, *tr.Accepted, tr.Since)
		} else {
			t.Logf("accepted: trace %d since %s, timeline %d since %s: the first at %s, between the two beginnings", last.Accepted.N, last.Since, tr.Accepted.N, tr.Since, more.Accepted.First)
		}
	}
	for _, k := range []struct {
		name       string
		trace, eps *struct{ N int }
	}{{"cut", last.Cut, tr.Cut}, {"reset_sent", last.ResetSent, tr.ResetSent}, {"listener_closed", last.ListenerClosed, tr.ListenerClosed}} {
		if k.trace == nil || k.eps == nil || k.trace.N != k.eps.N {
			t.Errorf("%s: trace %v, timeline %v", k.name, k.trace, k.eps)
		}
	}
}

// TestStopTrafficSidecar stops a server whose network namespace a sidecar
// shares (`--network container:`, as a pod's containers share theirs),
// with clients of both: the counts are the namespace's, and where the
// kernel records each socket's cgroup v2 (a cgroup2 node) the episode
// splits them, the stopped container's own connections from the sidecar's.
// On a cgroup v1 node every process is in the root cgroup v2 and the
// episode says the split cannot be told.
func TestStopTrafficSidecar(t *testing.T) {
	forEngine(t, func(t *testing.T, e *engine) {
		img := e.image(t, trafficImage(t))
		app := e.runContainer(t, "e2e-traffic-app", img, "/server", "drain")
		e.runContainer(t, "e2e-traffic-sidecar", "--network", "container:e2e-traffic-app", img, "/server", "ignore", ":9090")
		l := e.startTimeline(t)
		testutil.WaitPrograms(t, l.Cmd.Process.Pid, 8)
		pid := e.mainPID(t, "e2e-traffic-app")
		// Where the app's processes are in cgroup v2: the root (every
		// process of a pure cgroup v1 node) or a group of their own (a
		// cgroup2 node, and runc's hybrid layout, which places them in the
		// unified hierarchy too, as on this project's machines).
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		v2Root := strings.Contains("\n"+string(cg), "\n0::/\n")
		toApp, err := testutil.StartHTTPLoad("127.0.0.1:8080", 1, 2*time.Second, pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { toApp.Stop() })
		toSidecar, err := testutil.StartHTTPLoad("127.0.0.1:9090", 1, 2*time.Second, pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { toSidecar.Stop() })
		toApp.WaitAnswered(t)
		toSidecar.WaitAnswered(t)
		e.docker(t, "stop", "-t", "5", "e2e-traffic-app")
		appAttempts, sidecarAttempts := toApp.Stop(), toSidecar.Stop()
		ep := episodeOf(t, l.stop(t, app), app)
		var with struct {
			Traffic *struct {
				trafficJSON
				Scope      string          `json:"scope"`
				Own        *map[string]int `json:"own"`
				Others     *map[string]int `json:"others"`
				OwnUnknown string          `json:"own_unknown"`
			} `json:"traffic"`
		}
		if err := json.Unmarshal(ep.raw, &with); err != nil || with.Traffic == nil {
			t.Fatalf("episode has no traffic (%v):\n%s", err, ep.raw)
		}
		tr := with.Traffic
		stopAt, _ := time.Parse(time.RFC3339Nano, ep.StopAt)
		exitAt, _ := time.Parse(time.RFC3339Nano, ep.ExitAt)
		// The sidecar's connections surely within the count: connected
		// after the stop signal and ended before the app's exit.
		within := 0
		for _, a := range sidecarAttempts {
			if !a.Connected.IsZero() && a.Dialed.After(stopAt) && a.Ended.Before(exitAt) {
				within++
			}
		}
		appOK := 0
		for _, a := range appAttempts {
			if a.Outcome == "ok" {
				appOK++
			}
		}
		t.Logf("%s: app client %d attempts (%d ok), sidecar client %d attempts (%d within the stop); sigscope: %s",
			e.name, len(appAttempts), appOK, len(sidecarAttempts), within, ep.raw)
		if tr.Unread != "" || tr.Accepted == nil || within == 0 {
			t.Fatalf("counts not read (%q), or no sidecar connection within the stop (%d)", tr.Unread, within)
		}
		if tr.Accepted.N < within {
			t.Errorf("accepted %d: fewer than the sidecar's %d within the stop", tr.Accepted.N, within)
		}
		if v2Root {
			if tr.Own != nil || !strings.Contains(tr.OwnUnknown, "root cgroup v2") {
				t.Errorf("the app in the root cgroup v2: own %v, own_unknown %q; want the split untold, and why", tr.Own, tr.OwnUnknown)
			}
			return
		}
		if tr.Own == nil || tr.Others == nil || tr.OwnUnknown != "" {
			t.Fatalf("the app in a cgroup v2 of its own (%q): own %v others %v (%q): want the split", cg, tr.Own, tr.Others, tr.OwnUnknown)
		}
		own, others := *tr.Own, *tr.Others
		for k, total := range map[string]int{"accepted": tr.Accepted.N, "closed": tr.Closed.N, "reset_sent": tr.ResetSent.N,
			"reset_received": tr.ResetReceived.N, "cut": tr.Cut.N, "listener_closed": tr.ListenerClosed.N} {
			if own[k]+others[k] != total {
				t.Errorf("%s: own %d + others %d != %d: the split lost or invented connections", k, own[k], others[k], total)
			}
		}
		if others["accepted"] < within || others["listener_closed"] != 0 {
			t.Errorf("others: %v; want the sidecar's %d connections within the stop, and its listener open", others, within)
		}
		if own["listener_closed"] != 1 || own["accepted"] > appOK {
			t.Errorf("own: %v; want the app's listener closed once, and at most its %d answered connections", own, appOK)
		}
	})
}
