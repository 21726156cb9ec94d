package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// kaClients is a keep-alive load on the stopped server, in one of the
// shapes clients make it: waitAnswered returns once the server answered
// one of its requests; stop ends it (again: nothing more) and returns every
// request it made, by the clients' own count.
type kaClients interface {
	waitAnswered(t *testing.T)
	stop(t *testing.T) []testutil.HTTPAttempt
}

// httpLoadClients is testutil's hand-written keep-alive client as a
// kaClients.
type httpLoadClients struct{ l *testutil.HTTPLoad }

func (c httpLoadClients) waitAnswered(t *testing.T)              { c.l.WaitAnswered(t) }
func (c httpLoadClients) stop(*testing.T) []testutil.HTTPAttempt { return c.l.Stop() }

// kaCase is a keep-alive server's shape (testdata/traffic/server.go's
// ka-* modes) and what its stop does to its clients.
type kaCase struct {
	mode string
	// clientFor: how long after docker stop began the clients stop (the
	// load balancer moved); 0: until a second after the container is
	// gone.
	clientFor time.Duration
	hurt      bool
	race      bool // the verdict names the keep-alive race
	// crossesAnswer: the clients send a request's body behind its
	// headers, and it crosses a draining server's answer (Python's
	// http.client): the kernel cannot tell that rest from a new request,
	// so a draining server's episode says "possibly" lost, never lost.
	crossesAnswer bool
}

var kaCases = []kaCase{
	{mode: "ka-closeidle", hurt: true, race: true},
	{mode: "ka-drain", clientFor: 500 * time.Millisecond},
	{mode: "ka-exit", hurt: true},
}

// TestStopTrafficKeepAlive stops an HTTP/1.1 server whose clients keep
// their connections alive between requests (a pool: what every proxy,
// load balancer and HTTP client does), each request a POST never retried,
// so that the clients' count of broken requests is the truth. The
// episode's lost requests equal the clients' failures, kind by kind: a
// server that closes idle connections under its clients (the keep-alive
// race: requests read and never answered, or sent after the close) is
// hurting them and the episode says so, with the drain as the fix; a
// server that drains with Connection: close hurts nobody; one that exits
// at once loses the requests in flight and those sent after on its dead
// connections, not the idle connections nobody used again.
// TestStopTrafficClientShapes does the same with the clients users run.
func TestStopTrafficKeepAlive(t *testing.T) {
	img := trafficImage(t)
	for _, tc := range kaCases {
		t.Run(tc.mode, func(t *testing.T) {
			stopKeepAlive(t, img, "e2e-traffic-"+tc.mode, tc, func(t *testing.T, pid int) kaClients {
				cl, err := testutil.StartKeepAliveLoad("127.0.0.1:8080", 8, 20*time.Millisecond, pid)
				if err != nil {
					t.Fatal(err)
				}
				return httpLoadClients{cl}
			})
		})
	}
}

// stopKeepAlive runs the traffic image's server in tc's mode as container
// name, starts the timeline, then the clients (start, in the network
// namespace of the container's main process pid, listening on
// 127.0.0.1:8080), stops the container with docker stop -t 5 and holds the
// episode's traffic to the clients' own count of their requests.
func stopKeepAlive(t *testing.T, img, name string, tc kaCase, start func(t *testing.T, pid int) kaClients) {
	t.Helper()
	id := runContainer(t, name, img, "/server", tc.mode)
	l := startTimeline(t)
	testutil.WaitPrograms(t, l.Cmd.Process.Pid, 8)
	pid := hostEngine.mainPID(t, name)
	cl := start(t, pid)
	t.Cleanup(func() { cl.stop(t) })
	cl.waitAnswered(t)
	time.Sleep(200 * time.Millisecond) // every worker's connection kept
	stopped := make(chan error, 1)
	go func() {
		out, err := exec.Command("docker", "stop", "-t", "5", name).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, out)
		}
		stopped <- err
	}()
	if tc.clientFor > 0 {
		time.Sleep(tc.clientFor)
		cl.stop(t)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("docker stop: %v", err)
	}
	time.Sleep(time.Second)
	attempts := cl.stop(t)
	checkKeepAliveEpisode(t, tc, attempts, episodeOf(t, l.stop(t, id), id))
}

// checkKeepAliveEpisode holds a keep-alive server's episode to its
// clients' requests: broken ones (closed or reset before their answer)
// are lost as unanswered, after_close, cut or reset_sent, give or take
// those that span the read and at most the undecided more; refused ones
// are refused; lost is their sum; a server that hurt nobody says so.
func checkKeepAliveEpisode(t *testing.T, tc kaCase, attempts []testutil.HTTPAttempt, ep episode) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("the episode: %s", ep.raw)
		}
	}()
	var with struct {
		Traffic *trafficJSON `json:"traffic"`
	}
	if err := json.Unmarshal(ep.raw, &with); err != nil || with.Traffic == nil {
		t.Fatalf("episode has no traffic (%v):\n%s", err, ep.raw)
	}
	tr := *with.Traffic
	if tr.Unread != "" {
		t.Fatalf("counts not read: %s", tr.Unread)
	}
	if tr.Unanswered == nil || tr.AfterClose == nil || tr.IdleAtExit == nil || tr.Undecided == nil || tr.Cut == nil || tr.ResetSent == nil || tr.Lost == nil {
		t.Fatalf("a count that tells who spoke last is null:\n%s", ep.raw)
	}
	until, err := time.Parse(time.RFC3339Nano, tr.Until)
	if err != nil {
		t.Fatalf("traffic.until %q: %v", tr.Until, err)
	}
	got := testutil.TallyWindow(attempts, until, 2*time.Millisecond)
	t.Logf("clients: %d ok, %d broken, %d refused, other %v (%d at the read, %d after it); sigscope: unanswered %d, after_close %d, cut %d, reset_sent %d, refused %v, idle_at_exit %d, undecided %d, closed %d, lost %d: %s; hint: %s",
		got.OK, got.Reset, got.Refused, got.Other, got.AtUntil, got.After, tr.Unanswered.N, tr.AfterClose.N, tr.Cut.N, tr.ResetSent.N, tr.Refused,
		tr.IdleAtExit.N, tr.Undecided.N, tr.Closed.N, *tr.Lost, tr.Verdict, tr.Hint)
	// The clients are in the container's network namespace, not its
	// cgroup: their refused connects are the namespace's own localhost
	// calls (self_refused), given back to refused as another cgroup's.
	var split struct {
		Traffic struct {
			SelfRefused *struct{ N int } `json:"self_refused"`
			Own         json.RawMessage  `json:"own"`
			Others      json.RawMessage  `json:"others"`
			OwnUnknown  string           `json:"own_unknown"`
		} `json:"traffic"`
	}
	if err := json.Unmarshal(ep.raw, &split); err == nil {
		sr := split.Traffic.SelfRefused
		t.Logf("self_refused %v, own %s, others %s, own_unknown %q", sr, split.Traffic.Own, split.Traffic.Others, split.Traffic.OwnUnknown)
	}
	if len(got.Other) > 0 {
		t.Errorf("the clients saw %v: not a kind this test expects", got.Other)
	}
	if got.OK == 0 {
		t.Fatal("no request was answered")
	}
	counts := testutil.EpisodeLost{Unanswered: tr.Unanswered.N, AfterClose: tr.AfterClose.N, Cut: tr.Cut.N, ResetSent: tr.ResetSent.N,
		Undecided: tr.Undecided.N, Lost: *tr.Lost}
	if tr.Refused != nil {
		counts.Refused = &tr.Refused.N
	}
	got.CheckLost(t, counts)
	if tc.hurt != (got.Reset+got.Refused > 0) {
		t.Fatalf("the clients saw %d broken and %d refused: the %s server should%s hurt them (the test's premise)",
			got.Reset, got.Refused, tc.mode, map[bool]string{true: "", false: " not"}[tc.hurt])
	}
	clean := strings.HasPrefix(tr.Verdict, "no client was hurt")
	if tc.crossesAnswer && !clean && tr.Unanswered.N == 0 && tr.Undecided.N > 0 && strings.HasPrefix(tr.Verdict, "possibly ") {
		clean = true // undecided, never lost: the kernel's limit
		t.Logf("a draining server under clients whose body crosses its answer: %d possibly lost, none lost", tr.Undecided.N)
	}
	if !tc.hurt && (*tr.Lost != 0 || !clean || tr.Hint != "") {
		t.Errorf("a draining server: lost %d, verdict %q, hint %q", *tr.Lost, tr.Verdict, tr.Hint)
	}
	if tc.hurt && (*tr.Lost == 0 || strings.HasPrefix(tr.Verdict, "no client was hurt")) {
		t.Errorf("the clients were hurt, the episode says %q", tr.Verdict)
	}
	if race := tr.Unanswered.N+tr.AfterClose.N > 0; tc.race && race != strings.Contains(tr.Verdict, "the keep-alive race") {
		t.Errorf("keep-alive race %v, verdict %q", race, tr.Verdict)
	}
	if tc.race && tr.Unanswered.N+tr.AfterClose.N > 0 && !strings.Contains(tr.Hint, "Connection: close") {
		t.Errorf("the keep-alive race without its fix: %q", tr.Hint)
	}
	if ep.Outcome != "graceful" {
		t.Errorf("outcome %s, want graceful", ep.Outcome)
	}
	// The last request the kernel saw is the clients' last, by
	// their own log, at the kernel tick's resolution (10 ms at
	// HZ=100, the coarsest).
	lo, hi, sent := testutil.LastArrivalBounds(attempts, until)
	switch {
	case !sent:
		t.Fatal("the clients sent nothing while the kernel counted")
	case tr.LastRequest == nil:
		t.Errorf("no last request, the clients' last was sent at %s", lo.Format(time.RFC3339Nano))
	default:
		at, err := time.Parse(time.RFC3339Nano, tr.LastRequest.At)
		const tick = 10 * time.Millisecond
		if err != nil || at.Before(lo.Add(-tick)) || at.After(hi.Add(tick)) {
			t.Errorf("last request at %s (%v), the clients' last between %s and %s", tr.LastRequest.At, err, lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
		}
		t.Logf("last request at %s; the clients' last sent %s, ended by %s", tr.LastRequest.At, lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
	}
}

// TestStopOwnCalls stops a server with no clients at all whose SIGTERM
// handler calls its sidecar, which had stopped first (its own namespace's
// localhost, nothing listening), and a peer elsewhere (another network
// namespace at an address of its own, joined by a veth pair as another
// pod or a database would be, nothing listening): its own calls refused
// are named apart from its clients, each where it failed, and no client
// is counted lost. Where the socket cgroup split cannot tell whose calls
// they were, the namespace's own refusals count as its clients' (never
// "nobody hurt" on a guess).
func TestStopOwnCalls(t *testing.T) {
	img := trafficImage(t)
	const name = "e2e-traffic-callout"
	const elsewhere = "10.200.3.2:9" // StartNetPeer's address on subnet 3
	id := runContainer(t, name, img, "/server", "call-out", ":8080", elsewhere)
	l := startTimeline(t)
	testutil.WaitPrograms(t, l.Cmd.Process.Pid, 8)
	if p := testutil.StartNetPeer(t, mainPID(t, name), 3); p.Addr+":9" != elsewhere {
		t.Fatalf("the peer elsewhere is at %s, the server calls %s", p.Addr, elsewhere)
	}
	if out, err := exec.Command("docker", "stop", "-t", "10", name).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v: %s", err, out)
	}
	logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
	var refused int
	for _, line := range strings.Split(string(logs), "\n") {
		if _, err := fmt.Sscanf(line, "refused %d", &refused); err == nil {
			break
		}
	}
	ep := episodeOf(t, l.stop(t, id), id)
	var with struct {
		Traffic *struct {
			trafficJSON
			Own *struct {
				SelfRefused *int `json:"self_refused"`
				OutRefused  *int `json:"out_refused"`
			} `json:"own"`
			OwnUnknown  string           `json:"own_unknown"`
			SelfRefused *struct{ N int } `json:"self_refused"`
			OutRefused  *struct{ N int } `json:"out_refused"`
		} `json:"traffic"`
	}
	if err := json.Unmarshal(ep.raw, &with); err != nil || with.Traffic == nil {
		t.Fatalf("episode has no traffic (%v):\n%s", err, ep.raw)
	}
	tr := with.Traffic
	t.Logf("the server's own calls refused: %d (to 127.0.0.1:9090, and %s); sigscope: %s", refused, elsewhere, ep.raw)
	if refused != 20 {
		t.Fatalf("the server saw %d of its calls refused: want its sidecar's 10 and the peer elsewhere's 10 (the test's premise): %s", refused, logs)
	}
	if tr.Lost == nil || tr.SelfRefused == nil || tr.OutRefused == nil {
		t.Fatalf("counts not read, or without the namespace's own calls:\n%s", ep.raw)
	}
	if tr.SelfRefused.N != 10 || tr.OutRefused.N != 10 {
		t.Errorf("the namespace's own calls refused: %d on its localhost, %d elsewhere; want 10 and 10", tr.SelfRefused.N, tr.OutRefused.N)
	}
	if got := tr.SelfRefused.N + tr.OutRefused.N; got != refused {
		t.Errorf("the namespace's own calls refused: %d (self %d, elsewhere %d), the server counted %d", got, tr.SelfRefused.N, tr.OutRefused.N, refused)
	}
	if tr.Own == nil {
		// Whose calls they were cannot be told: its own namespace's
		// refusals count as its clients'.
		if *tr.Lost != tr.SelfRefused.N {
			t.Errorf("split unknown (%s): lost %d, want the %d refused on its localhost", tr.OwnUnknown, *tr.Lost, tr.SelfRefused.N)
		}
		return
	}
	if own := *tr.Own.SelfRefused + *tr.Own.OutRefused; own != refused {
		t.Errorf("its own calls refused: %d, the server counted %d", own, refused)
	}
	if *tr.Lost != 0 || !strings.HasPrefix(tr.Verdict, "no client was hurt") || tr.Hint != "" ||
		!strings.Contains(tr.Verdict, fmt.Sprintf("its own calls failed, apart from its clients: %d refused", refused)) {
		t.Errorf("lost %d, verdict %q, hint %q: want no client hurt and its own %d calls named", *tr.Lost, tr.Verdict, tr.Hint, refused)
	}
}
