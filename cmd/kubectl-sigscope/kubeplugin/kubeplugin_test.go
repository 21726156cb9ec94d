package kubeplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/audit"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func TestParseTarget(t *testing.T) {
	for arg, want := range map[string]target{
		"web-1":          {pod: "web-1"},
		"pod/web-1":      {pod: "web-1"},
		"po/web-1":       {pod: "web-1"},
		"deploy/web":     {owner: timeline.Owner{Kind: "Deployment", Name: "web"}},
		"Deployment/web": {owner: timeline.Owner{Kind: "Deployment", Name: "web"}},
		"sts/db":         {owner: timeline.Owner{Kind: "StatefulSet", Name: "db"}},
		"ds/agent":       {owner: timeline.Owner{Kind: "DaemonSet", Name: "agent"}},
		"job/migrate":    {owner: timeline.Owner{Kind: "Job", Name: "migrate"}},
	} {
		got, err := parseTarget(arg)
		if err != nil || got != want {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v", arg, got, err, want)
		}
	}
	for _, bad := range []string{"svc/web", "deploy/", "deploy/a/b"} {
		if _, err := parseTarget(bad); err == nil || !IsUsage(err) {
			t.Errorf("parseTarget(%q): %v, want a usage error", bad, err)
		}
	}
}

func TestNextLink(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{`<?before=5&limit=3>; rel="next"`}, "?before=5&limit=3"},
		{[]string{`<https://x/a>; rel="prev", <?before=2>; rel=next`}, "?before=2"},
		{[]string{`<?a=1>; rel="prev"`}, ""},
		{nil, ""},
	} {
		if got := nextLink(tc.in); got != tc.want {
			t.Errorf("nextLink(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Top: grouped by workload, worst first; exit 137 and the slowest stop
// (from the preStop hook's start) counted per workload.
func TestTop(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	exit := func(outcome timeline.Outcome, owner *timeline.Owner, pod string, stop, dur time.Duration, status int) timeline.Episode {
		return timeline.Episode{Outcome: outcome, Owner: owner, Node: "n1", Start: t0.Add(stop), StopAt: t0.Add(stop),
			ExitAt: t0.Add(stop + dur), ExitStatus: status, Container: timeline.Container{Identity: identity.Identity{Namespace: "shop", Pod: pod, Name: "app"}}}
	}
	web := &timeline.Owner{Kind: "Deployment", Name: "web"}
	db := &timeline.Owner{Kind: "StatefulSet", Name: "db"}
	hooked := exit(timeline.OutcomeGraceful, db, "db-0", time.Minute, 2*time.Second, 0)
	hooked.PreStop = &timeline.PreStop{Kind: "exec", StartAt: t0.Add(time.Minute - 5*time.Second)}
	reason := func(ep timeline.Episode, r string) timeline.Episode { ep.StopReason = r; return ep }
	eps := []timeline.Episode{
		reason(exit(timeline.OutcomeGraceful, web, "web-1", 0, time.Second, 143), "deleted"),
		reason(exit(timeline.OutcomeIgnoredByInit, web, "web-2", time.Second, 30*time.Second, 137), "deleted"),
		reason(exit(timeline.OutcomeHandlerTimeout, web, "web-3", 2*time.Second, 10*time.Second, 137), "probe_failed"),
		hooked,
		exit(timeline.OutcomeKilled, nil, "debug", 3*time.Second, 0, 137),
		// Not a stop: counted apart, in none of the stop columns.
		{Outcome: timeline.OutcomeOOMKillSurvived, Owner: web, Node: "n1", Start: t0.Add(4 * time.Second),
			Container: timeline.Container{Identity: identity.Identity{Namespace: "shop", Pod: "web-1", Name: "app"}}},
	}
	rows := Top(eps)
	if len(rows) != 3 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	w := rows[0]
	if w.Workload != *web || w.Stops != 3 || w.NeedsFix != 2 || w.Exit137 != 2 || w.Slowest == nil ||
		w.Slowest.Seconds != 30 || w.Slowest.Pod != "web-2" || w.Outcomes["graceful"] != 1 || len(w.Nodes) != 1 {
		t.Errorf("first row %+v (slowest %+v)", w, w.Slowest)
	}
	// Pod/debug has an exit 137 but nothing to fix: before db (none of either).
	if rows[1].Workload != (timeline.Owner{Kind: "Pod", Name: "debug"}) || rows[1].NeedsFix != 0 || rows[1].Exit137 != 1 {
		t.Errorf("second row %+v", rows[1])
	}
	if rows[2].Workload != *db || rows[2].Slowest == nil || rows[2].Slowest.Seconds != 7 {
		t.Errorf("third row %+v: the slowest stop counts from the preStop hook (7 s)", rows[2])
	}
	if got := reasonCounts(w.Reasons); got != "deleted=2,probe_failed=1" {
		t.Errorf("reasons %q", got)
	}
	if w.RunningOOMKills != 1 || w.Outcomes[string(timeline.OutcomeOOMKillSurvived)] != 0 {
		t.Errorf("running OOM kills %d, outcomes %v: want 1, apart from the stops", w.RunningOOMKills, w.Outcomes)
	}
	if got := outcomeCounts(w.Outcomes, w.RunningOOMKills); got != "graceful=1,handler_timeout=1,ignored_by_init=1 (+1 oom_kill_survived)" {
		t.Errorf("outcomeCounts = %q", got)
	}
}

// fakeAPIServer answers the pod list of the agents' namespace and the pod
// proxy, as the API server does, for agents served by handlers.
func fakeAPIServer(t *testing.T, agents map[string]http.Handler, forbidProxy bool) string {
	t.Helper()
	srv := newFakeAPIServer(agents, forbidProxy)
	srv.Start()
	t.Cleanup(srv.Close)
	return kubeconfigFor(t, srv.URL)
}

// newFakeAPIServer is fakeAPIServer's server, not started yet.
func newFakeAPIServer(agents map[string]http.Handler, forbidProxy bool) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/namespaces/sigscope/pods", func(w http.ResponseWriter, _ *http.Request) {
		var items []string
		for name := range agents {
			items = append(items, fmt.Sprintf(`{"metadata":{"name":%q,"namespace":"sigscope"},"spec":{"nodeName":"node-%s",
				"containers":[{"name":"sigscope","ports":[{"name":"metrics","containerPort":10042}]}]},
				"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`, name, name))
		}
		fmt.Fprintf(w, `{"kind":"PodList","apiVersion":"v1","items":[%s]}`, strings.Join(items, ","))
	})
	mux.HandleFunc("GET /api/v1/nodes", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"nodes is forbidden"}`)
	})
	mux.HandleFunc("GET /api/v1/namespaces/sigscope/pods/{pod}/proxy/{path...}", func(w http.ResponseWriter, r *http.Request) {
		name, _, _ := strings.Cut(r.PathValue("pod"), ":")
		if forbidProxy {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"pods \"%s\" is forbidden"}`, name)
			return
		}
		h := agents[name]
		if h == nil { // a pod that does not listen
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":503,"message":"error trying to reach service: connection refused"}`)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + r.PathValue("path")
		h.ServeHTTP(w, r2)
	})
	return httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		mux.ServeHTTP(w, r)
	}))
}

// kubeconfigFor writes a kubeconfig for the API server at url, namespace
// shop (an https one's certificate unchecked).
func kubeconfigFor(t *testing.T, url string) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: %t}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: shop}}]
current-context: c
`, url, strings.HasPrefix(url, "https:"))), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// pagedAgent serves n episodes of namespace shop, 2 to a page, with the
// agent's paging contract: Link rel="next" and the before cursor.
func pagedAgent(node string, n int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/episodes", func(w http.ResponseWriter, r *http.Request) {
		before := n + 1
		if v := r.URL.Query().Get("before"); v != "" {
			_, _ = fmt.Sscan(v, &before)
		}
		lo := max(1, before-2)
		var eps []timeline.Episode
		for id := lo; id < before; id++ {
			eps = append(eps, timeline.Episode{ID: uint64(id), Node: node, Outcome: timeline.OutcomeGraceful,
				Start: time.Unix(int64(id), 0), Container: timeline.Container{Identity: identity.Identity{ID: fmt.Sprintf("%s-%d", node, id), Namespace: "shop", Pod: "web"}}})
		}
		if lo > 1 {
			w.Header().Set("Link", fmt.Sprintf(`<?before=%d&limit=2>; rel="next"`, lo))
		}
		_ = json.NewEncoder(w).Encode(eps)
	})
	mux.HandleFunc("GET /api/v1/info", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(apiv1.Info{APIVersion: "v1", Node: node})
	})
	return mux
}

func runPlugin(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(&out, &errOut, "test")
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// Through a stand-in API server: every page of every agent is read, an
// agent the proxy cannot reach is named and the rest still printed, and a
// refused proxy names the permission.
func TestReadAgentsThroughProxy(t *testing.T) {
	kc := fakeAPIServer(t, map[string]http.Handler{"a": pagedAgent("node-a", 5), "b": pagedAgent("node-b", 3)}, false)
	out, errOut, err := runPlugin(t, "--kubeconfig", kc, "timeline", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var l struct {
		Items  []timeline.Episode `json:"items"`
		Agents []Agent            `json:"agents"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 8 || len(l.Agents) != 2 {
		t.Errorf("%d episodes from %d agents, want 8 from 2 (every page)", len(l.Items), len(l.Agents))
	}

	// An agent pod the API server cannot reach.
	kc = fakeAPIServer(t, map[string]http.Handler{"a": pagedAgent("node-a", 1), "gone": nil}, false)
	out, errOut, err = runPlugin(t, "--kubeconfig", kc, "top")
	if err != nil || !strings.Contains(out, "Pod/web") || !strings.Contains(out, "sigscope/gone") || !strings.Contains(errOut, "sigscope/gone: unreachable") {
		t.Errorf("one unreachable agent: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}

	kc = fakeAPIServer(t, map[string]http.Handler{"a": pagedAgent("node-a", 1)}, true)
	_, _, err = runPlugin(t, "--kubeconfig", kc, "audit", "-A")
	if err == nil || !strings.Contains(err.Error(), `"get" on "pods/proxy" in namespace sigscope`) {
		t.Errorf("a refused proxy: %v", err)
	}
}

// The audit table names each main process's language runtime, escaped as
// every cell is, and -o json carries it as pid1.runtime.
func TestAuditTableRuntime(t *testing.T) {
	agent := http.NewServeMux()
	agent.HandleFunc("GET /api/v1/audit", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode([]audit.Result{
			{Container: identity.Summary{Identity: identity.Identity{ID: "n1", Name: "web", Namespace: "shop", Pod: "web-1"}}, StopSignal: "SIGTERM", Catches: true,
				PID1: audit.PID1{PID: 11, Cmdline: []string{"node", "server.js"}, Runtime: "nodejs"}, Prediction: audit.IgnoredByInit,
				Hint: "PID 1 (node): its SIGTERM handler is one-shot (SA_RESETHAND)"},
			{Container: identity.Summary{Identity: identity.Identity{ID: "n2", Name: "side", Namespace: "shop", Pod: "web-1"}}, StopSignal: "SIGTERM",
				PID1: audit.PID1{PID: 12, Cmdline: []string{"/x"}, Runtime: "go\tjvm"}, Prediction: audit.Graceful},
		})
	})
	agent.HandleFunc("GET /api/v1/info", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(apiv1.Info{APIVersion: "v1", Node: "node-a"})
	})
	kc := fakeAPIServer(t, map[string]http.Handler{"a": agent}, false)
	out, errOut, err := runPlugin(t, "--kubeconfig", kc, "audit", "-A")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	t.Logf("\n%s", out)
	lines := strings.Split(out, "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "NODE NAMESPACE POD CONTAINER PID COMMAND RUNTIME SIGNAL CATCHES PREDICTION" {
		t.Errorf("header %q", got)
	}
	if got := strings.Join(strings.Fields(lines[2]), " "); got != "node-a shop web-1 web 11 node server.js nodejs SIGTERM true ignored_by_init" {
		t.Errorf("node row %q", got)
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != `node-a shop web-1 side 12 /x go\x09jvm SIGTERM false graceful` {
		t.Errorf("escaped row %q", got)
	}
	out, _, err = runPlugin(t, "--kubeconfig", kc, "audit", "-A", "-o", "json")
	if err != nil || !strings.Contains(out, `"runtime": "nodejs"`) && !strings.Contains(out, `"runtime":"nodejs"`) {
		t.Errorf("-o json: %v\n%s", err, out)
	}
}

// An agent that started inside the window is missing the stops before it,
// unless it read them back from its journal: then only the stops while no
// agent ran are missing, and the warning says so.
func TestWindowWarnings(t *testing.T) {
	now := time.Now()
	info := func(started time.Time, reloaded int) *apiv1.Info {
		in := &apiv1.Info{StartedAt: started}
		in.Episodes.Reloaded = reloaded
		return in
	}
	res := []Result[timeline.Episode]{
		{Agent: &Agent{Node: "old"}, Info: info(now.Add(-48*time.Hour), 0)},
		{Agent: &Agent{Node: "fresh"}, Info: info(now.Add(-time.Minute), 0)},
		{Agent: &Agent{Node: "upgraded"}, Info: info(now.Add(-time.Minute), 40)},
	}
	got := windowWarnings(res, time.Hour)
	if len(got) != 2 || !strings.HasPrefix(got[0], "node fresh:") || !strings.Contains(got[0], "stops before are missing") ||
		!strings.HasPrefix(got[1], "node upgraded:") || !strings.Contains(got[1], "read 40 episodes from before back from its journal: stops while no agent ran are missing") {
		t.Errorf("warnings %q", got)
	}
}

// What the stops cost their clients, per workload: the stops that lost
// connections and how many, the longest endpoint lag, and the preStop
// sleep that covers the latest refused attempt of any stop.
func TestTopTraffic(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	web := &timeline.Owner{Kind: "Deployment", Name: "web"}
	stop := func(pod string, refusedUntil time.Duration, cut uint64, lag time.Duration) timeline.Episode {
		ep := timeline.Episode{Outcome: timeline.OutcomeGraceful, Owner: web, Start: t0, StopAt: t0, ExitAt: t0.Add(time.Second),
			Container: timeline.Container{Identity: identity.Identity{Namespace: "shop", Pod: pod, Name: "app"}}}
		tr := &timeline.Traffic{NetNS: 7, Since: t0, Until: t0.Add(5 * time.Second), SeesRefused: true}
		tr.Counts[sigvocab.NetListenerClosed] = sigvocab.NetCount{N: 1, First: t0, Last: t0}
		if refusedUntil > 0 {
			tr.Counts[sigvocab.NetRefused] = sigvocab.NetCount{N: 10, First: t0.Add(time.Millisecond), Last: t0.Add(refusedUntil)}
		}
		tr.Counts[sigvocab.NetCut].N = cut
		ep.Traffic = tr
		ep.Endpoints = []timeline.EndpointChange{{Service: "shop/web", TerminatingAt: t0.Add(lag)}}
		ep.Endpoints[0].SetLags(t0, t0)
		return ep
	}
	hooked := stop("web-4", 1500*time.Millisecond, 0, 100*time.Millisecond)
	hooked.PreStop = &timeline.PreStop{Kind: "exec", StartAt: t0.Add(-3 * time.Second), EndAt: t0}
	rows := Top([]timeline.Episode{
		stop("web-1", 2300*time.Millisecond, 0, 100*time.Millisecond),
		hooked, // a 3 s hook, refused until 1.5 s after SIGTERM: a 5 s sleep would have covered it
		stop("web-2", 0, 3, 400*time.Millisecond),
		stop("web-3", 0, 0, 200*time.Millisecond),
	})
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	w := rows[0]
	if w.LostTraffic != 3 || w.LostConnections != 23 || w.EndpointLag == nil || *w.EndpointLag != 0.4 || w.PreStopSleep == nil || *w.PreStopSleep != 5 {
		t.Errorf("lost %d (%d), lag %v, sleep %v", w.LostTraffic, w.LostConnections, w.EndpointLag, w.PreStopSleep)
	}

	// A pod's two containers carry its traffic: the app's episode the
	// first read, its proxy's (which drained on) a later read of the same
	// count, with 2 more refused. One stop's traffic, counted once.
	app := stop("web-1", 2300*time.Millisecond, 0, 100*time.Millisecond)
	proxy := stop("web-1", 2300*time.Millisecond, 0, 100*time.Millisecond)
	proxy.Container.Name = "proxy"
	proxy.Traffic.Since = proxy.Traffic.Since.Add(3 * time.Microsecond) // each read's wall clock, anew
	proxy.Traffic.Until = proxy.Traffic.Until.Add(8 * time.Second)
	proxy.Traffic.Counts[sigvocab.NetRefused].N = 12
	rows = Top([]timeline.Episode{app, proxy})
	if w := rows[0]; w.Stops != 2 || w.LostTraffic != 1 || w.LostConnections != 12 || len(w.sleeps) != 1 {
		t.Errorf("a pod's two containers: %d stops, lost %d (%d), %d sleeps; want 2, 1 (12), 1", w.Stops, w.LostTraffic, w.LostConnections, len(w.sleeps))
	}
}
