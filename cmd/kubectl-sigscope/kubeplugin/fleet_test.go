package kubeplugin

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// fleet is a stand-in API server for n agent pods (agent-000, ...), each
// on its own node, over HTTP/1.1, or HTTP/2 on TLS as API servers serve
// it (h2), whose pod proxy counts the requests in flight through it, the
// most at once, and the TCP connections the plugin opened. Each
// agent answers through answer, which by default serves one episode and
// its info after delay.
type fleet struct {
	kubeconfig      string
	inFlight, peak  atomic.Int64
	requests, conns atomic.Int64
	overHTTP2       atomic.Int64 // requests that came over HTTP/2
	mu              sync.Mutex
	queries         []url.Values // of /api/v1/episodes and /api/v1/audit
	delay           time.Duration
	answer          func(f *fleet, agent string, w http.ResponseWriter, r *http.Request)
}

func newFleet(t *testing.T, n int, h2 bool, delay time.Duration, answer func(*fleet, string, http.ResponseWriter, *http.Request)) *fleet {
	t.Helper()
	f := &fleet{delay: delay, answer: answer}
	if f.answer == nil {
		f.answer = (*fleet).episodeAgent
	}
	agents := map[string]http.Handler{}
	for i := range n {
		name := fmt.Sprintf("agent-%03d", i)
		agents[name] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.requests.Add(1)
			if r.ProtoMajor == 2 {
				f.overHTTP2.Add(1)
			}
			now := f.inFlight.Add(1)
			defer f.inFlight.Add(-1)
			for p := f.peak.Load(); now > p && !f.peak.CompareAndSwap(p, now); p = f.peak.Load() {
			}
			if r.URL.Path != "/api/v1/info" {
				f.mu.Lock()
				f.queries = append(f.queries, r.URL.Query())
				f.mu.Unlock()
			}
			f.answer(f, name, w, r)
		})
	}
	srv := newFakeAPIServer(agents, false)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	f.kubeconfig = kubeconfigFor(t, srv.URL)
	return f
}

// episodeAgent answers after f.delay, as an agent behind the API server's
// proxy does: one episode of namespace shop, and its info.
func (f *fleet) episodeAgent(agent string, w http.ResponseWriter, r *http.Request) {
	select {
	case <-time.After(f.delay):
	case <-r.Context().Done():
		return
	}
	if r.URL.Path == "/api/v1/info" {
		_ = json.NewEncoder(w).Encode(apiv1.Info{APIVersion: "v1", Node: "node-" + agent, StartedAt: time.Now().Add(-24 * time.Hour)})
		return
	}
	_ = json.NewEncoder(w).Encode([]timeline.Episode{{ID: 1, Node: "node-" + agent, Outcome: timeline.OutcomeIgnoredByInit,
		Start: time.Now().Add(-time.Minute), Owner: &timeline.Owner{Kind: "Deployment", Name: "web"},
		Container: timeline.Container{Identity: identity.Identity{ID: agent + "-c", Name: "app", Namespace: "shop", Pod: "web-" + agent}}}})
}

// plugin runs kubectl-sigscope against the fleet and decodes its -o json.
func (f *fleet) plugin(t *testing.T, args ...string) (items []json.RawMessage, agents []Agent, stderr string) {
	t.Helper()
	out, errOut, err := runPlugin(t, append([]string{"--kubeconfig", f.kubeconfig, "-o", "json"}, args...)...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, errOut)
	}
	var l struct {
		Items  []json.RawMessage `json:"items"`
		Agents []Agent           `json:"agents"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return l.Items, l.Agents, errOut
}

// 200 agents, each answering 25 ms after it is asked, behind a stand-in
// API server over HTTP/1.1 and over HTTP/2 (TLS): the plugin never has more
// requests in flight than --max-in-flight, reads every agent, and reuses
// its connections. The wall times and peaks are the figures of
// docs/kubectl.md (go test -run TestFleet200 -v ./cmd/kubectl-sigscope/kubeplugin/).
func TestFleet200(t *testing.T) {
	const agents, delay = 200, 25 * time.Millisecond
	for _, h2 := range []bool{false, true} {
		proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2]
		for _, n := range []int{16, 64} {
			f := newFleet(t, agents, h2, delay, nil)
			start := time.Now()
			// top reads each agent's episodes, then its info: 400 requests.
			items, read, _ := f.plugin(t, "top", "-A", "--max-in-flight", fmt.Sprint(n))
			wall := time.Since(start)
			var stops int
			for _, it := range items {
				var w WorkloadStops
				if err := json.Unmarshal(it, &w); err != nil {
					t.Fatal(err)
				}
				stops += w.Stops
			}
			failed := 0
			for _, a := range read {
				if a.Error != "" {
					failed++
				}
			}
			peak, conns := f.peak.Load(), f.conns.Load()
			t.Logf("%s, %d agents answering after %v, --max-in-flight %d: %v wall, %d requests, peak %d in flight, %d connections opened",
				proto, agents, delay, n, wall.Round(time.Millisecond), f.requests.Load(), peak, conns)
			if stops != agents || len(read) != agents || failed != 0 {
				t.Errorf("%s --max-in-flight %d: %d stops from %d agents (%d failed), want %d from %d", proto, n, stops, len(read), failed, agents, agents)
			}
			if f.requests.Load() != 2*agents {
				t.Errorf("%s --max-in-flight %d: %d requests, want %d (episodes and info of each agent)", proto, n, f.requests.Load(), 2*agents)
			}
			if peak > int64(n) {
				t.Errorf("%s --max-in-flight %d: %d requests in flight at once", proto, n, peak)
			}
			if h2 && f.overHTTP2.Load() != f.requests.Load() || !h2 && f.overHTTP2.Load() != 0 {
				t.Errorf("%s: %d of %d requests over HTTP/2", proto, f.overHTTP2.Load(), f.requests.Load())
			}
			// Connections are kept and used again: about one per request
			// in flight over HTTP/1.1 (a dial may lose the race to a
			// connection coming back), one over HTTP/2; not one per request.
			if conns > int64(2*n) {
				t.Errorf("%s --max-in-flight %d: %d connections opened for %d requests", proto, n, conns, f.requests.Load())
			}
		}
	}
}

// The requests are not serialized on the way (a transport's per-host
// connection cap, a lock): the agents answer only once --max-in-flight
// requests are in flight together, and then all of them do.
func TestFleetReachesMaxInFlight(t *testing.T) {
	const n = 24
	all := make(chan struct{})
	release := sync.OnceFunc(func() { close(all) })
	// Only so that a broken plugin ends the test: everyone is let go 10 s
	// after the first request, and the peak says how many were waiting.
	var giveUp sync.Once
	f := newFleet(t, 100, false, 0, func(f *fleet, agent string, w http.ResponseWriter, r *http.Request) {
		giveUp.Do(func() { time.AfterFunc(10*time.Second, release) })
		if f.inFlight.Load() >= n {
			release()
		}
		select {
		case <-all:
		case <-r.Context().Done():
			return
		}
		f.episodeAgent(agent, w, r)
	})
	_, read, _ := f.plugin(t, "timeline", "-A", "--max-in-flight", fmt.Sprint(n), "--agent-timeout", "1m")
	if peak := f.peak.Load(); peak != n {
		t.Errorf("peak %d requests in flight, want --max-in-flight %d", peak, n)
	}
	if len(read) != 100 {
		t.Errorf("%d agents", len(read))
	}
}

// An agent that does not answer within --agent-timeout is named, per node,
// and the others are printed; the time an agent waits for a slot is not
// its own: with one request at a time, the agents after the silent one are
// asked more than --agent-timeout after the command began, and still
// answer in time.
func TestFleetAgentTimeout(t *testing.T) {
	f := newFleet(t, 12, false, 20*time.Millisecond, func(f *fleet, agent string, w http.ResponseWriter, r *http.Request) {
		if agent == "agent-007" {
			<-r.Context().Done() // never answers
			return
		}
		f.episodeAgent(agent, w, r)
	})
	items, read, stderr := f.plugin(t, "timeline", "-A", "--max-in-flight", "1", "--agent-timeout", "500ms")
	if len(items) != 11 {
		t.Errorf("%d episodes, want the 11 of the agents that answered", len(items))
	}
	for _, a := range read {
		hung := a.Pod == "sigscope/agent-007"
		if timedOut := strings.Contains(a.Error, "timed out: no answer within 500ms (--agent-timeout)"); hung != timedOut || !hung && a.Error != "" {
			t.Errorf("agent %s on %s: error %q", a.Pod, a.Node, a.Error)
		}
	}
	if want := "warning: node node-agent-007: agent sigscope/agent-007: timed out: no answer within 500ms (--agent-timeout)\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	for _, bad := range [][]string{{"--max-in-flight", "0"}, {"--agent-timeout", "0s"}} {
		if _, _, err := runPlugin(t, append([]string{"--kubeconfig", f.kubeconfig, "top"}, bad...)...); err == nil || !IsUsage(err) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}

// The filters go to the agents, which answer only what was asked: the
// namespace, the pod, the workload as the agent's owner filter
// (deploy/web is owner=Deployment/web), and the window as an RFC 3339
// time, the same on every page.
func TestFleetFiltersOnTheAgent(t *testing.T) {
	f := newFleet(t, 1, false, 0, nil)
	for _, tc := range []struct {
		args []string
		want string // the query, since left out
	}{
		{[]string{"timeline", "deploy/web", "-n", "shop", "--since", "2h"}, "namespace=shop&owner=Deployment%2Fweb"},
		{[]string{"timeline", "sts/db"}, "namespace=shop&owner=StatefulSet%2Fdb"},
		{[]string{"timeline", "pod/web-1"}, "namespace=shop&pod=web-1"},
		{[]string{"timeline", "-A"}, ""},
		{[]string{"top", "-n", "shop"}, "namespace=shop"},
		{[]string{"audit", "-n", "other"}, "namespace=other"},
	} {
		f.mu.Lock()
		f.queries = nil
		f.mu.Unlock()
		start := time.Now()
		f.plugin(t, tc.args...)
		end := time.Now()
		if len(f.queries) != 1 {
			t.Fatalf("%v: %d queries", tc.args, len(f.queries))
		}
		q := f.queries[0]
		since := q.Get("since")
		q.Del("since")
		if got := q.Encode(); got != tc.want {
			t.Errorf("%v: query %q, want %q", tc.args, got, tc.want)
		}
		window := map[string]time.Duration{"timeline": 2 * time.Hour, "top": time.Hour}[tc.args[0]]
		if tc.args[0] == "timeline" && !strings.Contains(strings.Join(tc.args, " "), "--since") {
			window = 0
		}
		if window == 0 {
			if since != "" {
				t.Errorf("%v: since=%s, want none", tc.args, since)
			}
			continue
		}
		// An absolute time, start - window at the latest: a duration would
		// move between pages.
		at, err := time.Parse(time.RFC3339Nano, since)
		if err != nil || at.Before(start.Add(-window)) || at.After(end.Add(-window)) {
			t.Errorf("%v: since=%q, want an RFC 3339 time %v before the command", tc.args, since, window)
		}
	}
}

// The transports client-go builds keep --max-in-flight connections per
// host between requests and cap none, through the wrappers client-go puts
// around them; Go's shared default transport is copied, not changed.
func TestPoolFor(t *testing.T) {
	def := http.DefaultTransport.(*http.Transport)
	idle, conns := def.MaxIdleConnsPerHost, def.MaxConnsPerHost
	got, ok := poolFor(64)(http.DefaultTransport).(*http.Transport)
	if !ok || got == def || got.MaxIdleConnsPerHost != 64 || got.MaxConnsPerHost != 0 || got.MaxIdleConns < 64 {
		t.Errorf("over the default transport: %T %+v", got, got)
	}
	if def.MaxIdleConnsPerHost != idle || def.MaxConnsPerHost != conns {
		t.Error("poolFor changed http.DefaultTransport")
	}

	// TLS: a transport of client-go's own, in its cache's wrapper.
	for _, cfg := range []*rest.Config{
		{Host: "https://127.0.0.1:1", BearerToken: "x", TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
		{Host: "http://127.0.0.1:1", BearerToken: "x"},
	} {
		var inner *http.Transport
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			rt = poolFor(64)(rt)
			inner = transportUnder(rt)
			return rt
		}
		if _, err := rest.HTTPClientFor(cfg); err != nil {
			t.Fatal(err)
		}
		if inner == nil || inner.MaxIdleConnsPerHost != 64 || inner.MaxConnsPerHost != 0 {
			t.Errorf("%s: the transport under client-go's wrappers: %+v", cfg.Host, inner)
		}
	}
}

// An agent's error answer reaches the terminal escaped.
func TestAgentErrorEscaped(t *testing.T) {
	f := newFleet(t, 2, false, 0, func(f *fleet, agent string, w http.ResponseWriter, r *http.Request) {
		if agent == "agent-001" {
			http.Error(w, "bad\x1b[2Jagent", http.StatusInternalServerError)
			return
		}
		f.episodeAgent(agent, w, r)
	})
	out, stderr, err := runPlugin(t, "--kubeconfig", f.kubeconfig, "timeline", "-A")
	want := `node node-agent-001: agent sigscope/agent-001: agent answered 500 Internal Server Error: bad\x1b[2Jagent`
	if err != nil || !strings.Contains(stderr, want) || !strings.Contains(out, want) || strings.Contains(out+stderr, "\x1b") {
		t.Errorf("%v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
}
