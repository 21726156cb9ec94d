package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/internal/dockertest"
	"github.com/sigscope/sigscope/internal/testutil"
	"golang.org/x/sys/unix"
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

// attempt is one request of the client: when its connection was made (zero
// when it was not) and how it ended.
type attempt struct {
	dialed    time.Time // when connect began
	connected time.Time
	ended     time.Time // when the outcome was known (a refused attempt: when connect failed)
	outcome   string    // "ok", "refused", "reset" (established, then broken before the answer), "timeout", "other: ..."
}

// client makes HTTP/1.0 requests without pause, one connection each, from
// workers threads that entered the network namespace of pid (a client in
// the container's namespace, as a pod's neighbour or a sidecar is), and
// keeps every outcome: the ground truth the kernel's counts are held to.
type client struct {
	mu       sync.Mutex
	attempts []attempt
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startClient(t *testing.T, pid, workers int) *client {
	t.Helper()
	c := &client{stop: make(chan struct{})}
	entered := make(chan error, workers)
	for range workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
			if err == nil {
				err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
				f.Close()
			}
			entered <- err
			if err != nil {
				return
			}
			for {
				select {
				case <-c.stop:
					return
				default:
				}
				a := request()
				a.ended = time.Now()
				c.mu.Lock()
				c.attempts = append(c.attempts, a)
				c.mu.Unlock()
				if a.outcome != "ok" {
					time.Sleep(5 * time.Millisecond) // a client retrying, not a flood
				}
			}
		}()
	}
	for range workers {
		if err := <-entered; err != nil {
			t.Fatalf("client: entering the network namespace of %d: %v", pid, err)
		}
	}
	t.Cleanup(c.end)
	return c
}

func (c *client) end() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

func request() attempt {
	a := attempt{dialed: time.Now()}
	conn, err := net.DialTimeout("tcp", "127.0.0.1:8080", 2*time.Second)
	if err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			a.outcome = "refused"
		case errors.Is(err, syscall.ECONNRESET):
			// Established in the kernel (the server's accept queue),
			// then reset before connect() returned: the server died.
			a.outcome = "reset"
		case errors.As(err, &ne) && ne.Timeout():
			a.outcome = "timeout"
		default:
			a.outcome = "other: " + err.Error()
		}
		return a
	}
	a.connected = time.Now()
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		a.outcome = "reset"
		return a
	}
	status, err := bufio.NewReader(conn).ReadString('\n')
	switch {
	case err == nil && strings.HasPrefix(status, "HTTP/1.0 200"):
		io.Copy(io.Discard, conn)
		a.outcome = "ok"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF):
		a.outcome = "reset"
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		a.outcome = "timeout"
	default:
		a.outcome = fmt.Sprintf("other: %q %v", status, err)
	}
	return a
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
	refusedAtUntil     int // refused within slack of until (counted in outcomes)
	refusedAfter       int // refused after until+slack (not counted in outcomes)
	// okAtDeath are answered requests whose connection the server had not
	// closed yet when it died: the kernel closed it, the client had its
	// answer. sigscope counts such a connection as cut (open when its
	// process died) and says only that a request in flight on it was lost.
	okAtDeath int
}

func (c *client) tally(at, until, death time.Time, slack time.Duration) tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	tl := tally{outcomes: map[string]int{}}
	for _, a := range c.attempts {
		if a.outcome == "refused" {
			if a.ended.After(until.Add(slack)) {
				tl.refusedAfter++
				continue
			}
			if a.ended.After(until.Add(-slack)) {
				tl.refusedAtUntil++
			}
		}
		tl.outcomes[a.outcome]++
		if a.outcome == "ok" && !death.IsZero() && a.connected.Before(death) && a.ended.After(death.Add(-slack)) {
			tl.okAtDeath++
		}
		switch {
		case a.connected.IsZero():
		case a.dialed.After(at.Add(slack)):
			tl.connectedAfter++
		case a.connected.After(at.Add(-slack)):
			tl.connectedAtBoundry++
		}
	}
	return tl
}

// trafficJSON is the episode's "traffic" object, as the tests check it: a
// kind the kernel could not count is null.
type trafficJSON struct {
	Accepted       *struct{ N int } `json:"accepted"`
	Closed         *struct{ N int } `json:"closed"`
	ResetSent      *struct{ N int } `json:"reset_sent"`
	ResetReceived  *struct{ N int } `json:"reset_received"`
	Cut            *struct{ N int } `json:"cut"`
	Refused        *struct{ N int } `json:"refused"`
	ListenerClosed *struct{ N int } `json:"listener_closed"`
	Lost           *int             `json:"lost"`
	Verdict        string           `json:"verdict"`
	Hint           string           `json:"hint"`
	Unread         string           `json:"unread"`
	Until          string           `json:"until"`
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
			pid := hostEngine.mainPID(t, name)
			cl := startClient(t, pid, tc.workers)
			time.Sleep(500 * time.Millisecond)
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
				cl.end()
			}
			if err := <-stopped; err != nil {
				t.Fatalf("docker stop: %v", err)
			}
			time.Sleep(time.Second)
			cl.end()
			ep := episodeOf(t, l.stop(t), id)
			var with struct {
				Traffic *trafficJSON `json:"traffic"`
			}
			if err := json.Unmarshal(ep.raw, &with); err != nil || with.Traffic == nil {
				t.Fatalf("episode has no traffic (%v):\n%s", err, ep.raw)
			}
			tr := *with.Traffic
			stopAt, err := time.Parse(time.RFC3339Nano, ep.StopAt)
			if err != nil {
				t.Fatalf("stop_at %q: %v", ep.StopAt, err)
			}
			until, err := time.Parse(time.RFC3339Nano, tr.Until)
			if err != nil {
				t.Fatalf("traffic.until %q: %v", tr.Until, err)
			}
			death, _ := time.Parse(time.RFC3339Nano, ep.ExitAt)
			got := cl.tally(stopAt, until, death, 2*time.Millisecond)
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
			if tr.Accepted == nil || tr.Closed == nil || tr.ResetSent == nil || tr.ResetReceived == nil || tr.Cut == nil || tr.ListenerClosed == nil || tr.Lost == nil {
				t.Fatalf("a count the kernel always keeps is null")
			}
			if tr.Refused == nil {
				t.Logf("refused attempts unknown on this kernel (before 6.10)")
			} else if n := got.outcomes["refused"]; tr.Refused.N > n || tr.Refused.N < n-got.refusedAtUntil {
				t.Errorf("refused: sigscope %d, the client %d (%d of them at the read)", tr.Refused.N, n, got.refusedAtUntil)
			}
			if ended, broken := tr.Cut.N+tr.ResetSent.N, got.outcomes["reset"]; ended < broken || ended > broken+got.okAtDeath {
				t.Errorf("cut %d + reset by the server %d: sigscope %d, the client saw %d broken (and %d answered on a connection the death closed)",
					tr.Cut.N, tr.ResetSent.N, ended, broken, got.okAtDeath)
			}
			if tr.Accepted.N < got.connectedAfter || tr.Accepted.N > got.connectedAfter+got.connectedAtBoundry {
				t.Errorf("accepted: sigscope %d, the client connected %d after the stop (+%d at it)", tr.Accepted.N, got.connectedAfter, got.connectedAtBoundry)
			}
			if tr.ResetReceived.N != 0 {
				t.Errorf("reset_received %d: this client resets nothing", tr.ResetReceived.N)
			}
			lost := tr.Cut.N + tr.ResetSent.N
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
