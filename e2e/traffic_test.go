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
	connected time.Time
	outcome   string // "ok", "refused", "reset" (established, then broken before the answer), "timeout", "other: ..."
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
	conn, err := net.DialTimeout("tcp", "127.0.0.1:8080", 2*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return attempt{outcome: "refused"}
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return attempt{outcome: "timeout"}
		}
		return attempt{outcome: "other: " + err.Error()}
	}
	a := attempt{connected: time.Now()}
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
// after at (and within slack of it: those the kernel may count either way).
type tally struct {
	outcomes           map[string]int
	connectedAfter     int // connected after at+slack
	connectedAtBoundry int // connected within slack of at
}

func (c *client) tally(at time.Time, slack time.Duration) tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	tl := tally{outcomes: map[string]int{}}
	for _, a := range c.attempts {
		tl.outcomes[a.outcome]++
		switch {
		case a.connected.IsZero():
		case a.connected.After(at.Add(slack)):
			tl.connectedAfter++
		case a.connected.After(at.Add(-slack)):
			tl.connectedAtBoundry++
		}
	}
	return tl
}

// trafficJSON is the episode's "traffic" object, as the tests check it.
type trafficJSON struct {
	Accepted      struct{ N int } `json:"accepted"`
	Closed        struct{ N int } `json:"closed"`
	ResetSent     struct{ N int } `json:"reset_sent"`
	ResetReceived struct{ N int } `json:"reset_received"`
	Cut           struct{ N int } `json:"cut"`
	Refused       *struct {
		N int
	} `json:"refused"`
	RefusedUnknown bool   `json:"refused_unknown"`
	ListenerClosed string `json:"listener_closed"`
	Lost           int    `json:"lost"`
	Verdict        string `json:"verdict"`
	Hint           string `json:"hint"`
	Unread         string `json:"unread"`
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
		{mode: "ignore", timeout: "1", workers: 2, outcome: "ignored", hurt: true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			name := "e2e-traffic-" + tc.mode
			id := runContainer(t, name, img, "/server", tc.mode)
			l := startTimeline(t)
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
			got := cl.tally(stopAt, 2*time.Millisecond)
			t.Logf("client: %v, connected after the stop %d (+%d at it); sigscope: %s", got.outcomes, got.connectedAfter, got.connectedAtBoundry, ep.raw)
			if tr.Unread != "" {
				t.Fatalf("counts not read: %s", tr.Unread)
			}
			for o := range got.outcomes {
				if o != "ok" && o != "refused" && o != "reset" {
					t.Errorf("client saw %d %q: not a kind this test expects", got.outcomes[o], o)
				}
			}
			if tr.Refused == nil {
				if !tr.RefusedUnknown {
					t.Errorf("no refused count, and not said to be unknown")
				}
			} else if tr.Refused.N != got.outcomes["refused"] {
				t.Errorf("refused: sigscope %d, the client %d", tr.Refused.N, got.outcomes["refused"])
			}
			if broken := tr.Cut.N + tr.ResetSent.N; broken != got.outcomes["reset"] {
				t.Errorf("cut %d + reset by the server %d: sigscope %d, the client saw %d broken", tr.Cut.N, tr.ResetSent.N, broken, got.outcomes["reset"])
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
			if tr.Lost != lost {
				t.Errorf("lost %d, want %d", tr.Lost, lost)
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
