package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/sigscope/sigscope/containers/kubeclient"
	"github.com/sigscope/sigscope/containers/kubeclient/kubeclienttest"
	"github.com/sigscope/sigscope/exporter/otlplog"
	"github.com/sigscope/sigscope/test/testutil"
)

// lifecycleCycles is how many times TestAgentLifecycleLeavesNothing starts
// and stops an agent.
const lifecycleCycles = 20

// The agent's goroutines are one tree: started and stopped many times, in
// every way it can end (ctx cancelled, Close, the HTTP port taken, the
// health port taken, closed without running), with a node journal, with the container runtimes
// down and the API server down or fake, an agent leaves no goroutine
// behind, and Run returns an error exactly when a port was taken. Run it
// with -race: the audit loop audits every few milliseconds while HTTP
// requests ask for audits and the agent stops under them.
func TestAgentLifecycleLeavesNothing(t *testing.T) {
	testutil.RequirePrivileged(t)
	dir := t.TempDir()
	// Runtimes down: sockets that nothing listens on.
	down := Options{
		DockerSocket:  filepath.Join(dir, "docker.sock"),
		CRISockets:    []string{filepath.Join(dir, "containerd.sock")},
		AuditInterval: 5 * time.Millisecond,
		MaxEpisodes:   16,
		Logger:        slog.New(slog.DiscardHandler),
		// The journal's writer is one more goroutine to join, and its
		// directory lock one more thing a stopped agent must release:
		// the next cycle's New fails while it is held.
		JournalDir: filepath.Join(dir, "journal"),
	}
	// An API server that does not answer: the informers retry until the
	// agent stops.
	nowhere, err := kubeclient.New(&rest.Config{Host: "http://127.0.0.1:1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	type cycle struct {
		name string
		run  func(t *testing.T, opts Options)
	}
	cycles := []cycle{
		{"cancel", func(t *testing.T, opts Options) { runAndStop(t, opts, false) }},
		{"close", func(t *testing.T, opts Options) { runAndStop(t, opts, true) }},
		{"api-server-down", func(t *testing.T, opts Options) {
			opts.KubeEvents, opts.KubeClient, opts.NodeName = true, nowhere, "node-a"
			runAndStop(t, opts, false)
		}},
		{"fake-api-server", func(t *testing.T, opts Options) {
			opts.KubeEvents, opts.KubeClient, opts.NodeName = true, kubeclienttest.FromClientset(fake.NewClientset()), "node-a"
			runAndStop(t, opts, true)
		}},
		{"otlp-collector-down-http", func(t *testing.T, opts Options) {
			opts.OTLP = &otlplog.Options{Endpoint: "http://127.0.0.1:1", Protocol: otlplog.ProtocolHTTP}
			runAndStop(t, opts, true)
		}},
		{"otlp-collector-down-grpc", func(t *testing.T, opts Options) {
			opts.OTLP = &otlplog.Options{Endpoint: "http://127.0.0.1:1", Protocol: otlplog.ProtocolGRPC}
			runAndStop(t, opts, false)
		}},
		{"port-taken", func(t *testing.T, opts Options) {
			taken := listen(t)
			opts.ListenAddresses = []string{taken.Addr().String()}
			runFails(t, opts, "address already in use")
		}},
		{"health-port-taken", func(t *testing.T, opts Options) {
			taken := listen(t)
			opts.Listener, opts.HealthAddress = listen(t), taken.Addr().String()
			runFails(t, opts, "--web.health-address")
		}},
		{"never-run", func(t *testing.T, opts Options) {
			a, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := a.Run(context.Background()); !errors.Is(err, ErrClosed) {
				t.Errorf("Run after Close: %v, want ErrClosed", err)
			}
		}},
	}

	// One cycle first: what a process starts once and keeps (the HTTP
	// client's and client-go's background goroutines, the kernel BTF
	// cache's) is not the agent's.
	cycles[2].run(t, down)
	before, beforeDump := settledGoroutines(0)
	t.Logf("goroutines before: %d", before)

	for i := range lifecycleCycles {
		c := cycles[i%len(cycles)]
		if !t.Run(c.name, func(t *testing.T) { c.run(t, down) }) {
			t.Fatalf("cycle %d (%s) failed", i, c.name)
		}
	}

	after, afterDump := settledGoroutines(before)
	t.Logf("goroutines after %d cycles: %d", lifecycleCycles, after)
	if after > before {
		t.Errorf("%d goroutines before, %d after %d agent runs\nbefore:\n%s\nafter:\n%s", before, after, lifecycleCycles, beforeDump, afterDump)
	}
}

// runAndStop runs an agent until it is ready, reads its API (an audit with
// the runtimes down is a 503) while the audit loop runs, then stops it by
// cancelling its context or with Close, and checks that Run returned nil.
func runAndStop(t *testing.T, opts Options, viaClose bool) {
	t.Helper()
	l := listen(t)
	opts.Listener = l
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for deadline := time.Now().Add(testutil.Bound); !a.ready.Load(); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("agent stopped before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("agent never became ready")
		}
	}

	// Requests in flight while the agent stops: each must end, with an
	// answer or a closed connection, and leave nothing behind.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	base := "http://" + l.Addr().String()
	if code := status(t, client, base+"/api/v1/audit"); code != http.StatusServiceUnavailable {
		t.Errorf("/api/v1/audit with the runtimes down: %d, want 503", code)
	}
	var wg sync.WaitGroup
	for _, path := range []string{"/api/v1/audit", "/api/v1/episodes", "/metrics", "/readyz"} {
		wg.Go(func() {
			for range 5 {
				resp, err := client.Get(base + path)
				if err != nil {
					return // the agent has stopped
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	time.Sleep(20 * time.Millisecond) // a few audits of the loop
	if viaClose {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		// Close waited for Run to return (a.done is closed as Run
		// returns; the test goroutine's send on done comes just after).
		select {
		case <-a.done:
		default:
			t.Error("Close returned before Run did")
		}
		if err := <-done; err != nil {
			t.Errorf("Run after Close: %v", err)
		}
	} else {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
		if err := a.Close(); err != nil { // idempotent after Run
			t.Errorf("Close after Run: %v", err)
		}
	}
	wg.Wait()
	if _, err := a.currentAudit(context.Background(), 0); !errors.Is(err, errAgentClosed) {
		t.Errorf("an audit after the agent stopped: %v, want it refused", err)
	}
}

// runFails runs an agent whose HTTP cannot start: Run must return an
// error that says why, on its own, without its context ending.
func runFails(t *testing.T, opts Options, want string) {
	t.Helper()
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return with its port taken")
	}
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "serving HTTP") {
		t.Errorf("Run: %v, want serving HTTP: ...%s...", err, want)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close after a failed Run: %v", err)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func status(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// settledGoroutines waits, up to testutil.Bound, for the number of
// goroutines to fall to at most want (0: until it stops falling), and
// returns it with a dump of them. Goroutines that end asynchronously (a closed connection's
// reader, a timer's) take a moment after Close.
func settledGoroutines(want int) (int, string) {
	n, last := runtime.NumGoroutine(), -1
	for deadline := time.Now().Add(testutil.Bound); time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(100 * time.Millisecond)
		n = runtime.NumGoroutine()
		if want > 0 && n <= want || want == 0 && n == last {
			break
		}
		last = n
	}
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return n, b.String()
}
