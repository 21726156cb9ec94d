package kubeplugin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A Deployment rolled back: ReplicaSet a held revisions 1 and 3 and holds
// 5, b held 2, c holds 4. Each rollout stops the revision before it: the
// rollback to 3 stopped b's pods, and 5 (a again) c's. A rollout a
// ReplicaSet was made for begins at its creation; a rollback at the
// Deployment's scale-up event after the rollout before began, and without
// one it is not known, its stops taken from the rollout before's
// beginning.
func TestRolloutWindowsRollback(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	rs := func(name string, created time.Duration, rev string, history string) replicaSet {
		var r replicaSet
		r.Metadata.Name, r.Metadata.CreationTimestamp = name, t0.Add(created)
		r.Metadata.Labels = map[string]string{timeline.LabelPodTemplateHash: strings.TrimPrefix(name, "web-")}
		r.Metadata.Annotations = map[string]string{annRevision: rev}
		if history != "" {
			r.Metadata.Annotations[annRevisionHistory] = history
		}
		yes := true
		r.Metadata.OwnerReferences = []ownerRef{{Kind: "Deployment", Name: "web", UID: "u1", Controller: &yes}}
		return r
	}
	var w workloadObject
	w.Metadata.UID = "u1"
	other := rs("web-x", 0, "9", "") // another Deployment's
	other.Metadata.OwnerReferences[0].UID = "u2"
	revs := deploymentRevisions("Deployment", &w, []replicaSet{rs("web-a", 0, "5", "1,3"), rs("web-b", time.Hour, "2", ""), rs("web-c", 3*time.Hour, "4", ""), other})
	if revs.current != 5 || revs.byNum[1] != revs.byNum[3] || revs.byNum[3] != revs.byNum[5] || revs.byNum[9] != nil {
		t.Fatalf("revisions %+v", revs.byNum)
	}
	// The rollback to 3 scaled a up at 2h; the one to 5 has no event left.
	wins := windows(revs, map[string][]time.Time{"web-a": {t0.Add(-time.Hour), t0.Add(2 * time.Hour)}})
	type got struct {
		n          int64
		from, to   string
		began, end time.Duration
	}
	var g []got
	d := func(at time.Time) time.Duration {
		if at.IsZero() {
			return -1
		}
		return at.Sub(t0)
	}
	for _, w := range wins {
		g = append(g, got{w.number, w.from.Hash, w.to.Hash, d(w.began), d(w.hi)})
	}
	want := []got{{2, "a", "b", time.Hour, 2 * time.Hour}, {3, "b", "a", 2 * time.Hour, 3 * time.Hour}, {4, "a", "c", 3 * time.Hour, -1}, {5, "c", "a", -1, -1}}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("windows %+v, want %+v", g, want)
	}
	if wins[3].lo != t0.Add(3*time.Hour) {
		t.Errorf("the rollback to 5, begun when is not known: stops from %v, want the rollout before's beginning", wins[3].lo)
	}
	if p := pickWindows(wins, 3, 1); len(p) != 1 || wins[p[0]].number != 3 {
		t.Errorf("--revision 3: %v", p)
	}
	if p := pickWindows(wins, 0, 2); len(p) != 2 || wins[p[1]].number != 5 {
		t.Errorf("--last 2: %v", p)
	}
}

// A StatefulSet's ControllerRevisions: a pod's label is the revision's
// name; a DaemonSet's pod carries the hash alone. A number a rollback took
// away from its revision leaves a rollout with no revision to stop.
func TestRolloutControllerRevisions(t *testing.T) {
	cr := func(name string, rev int64, uid string) controllerRevision {
		var c controllerRevision
		c.Metadata.Name, c.Revision = name, rev
		c.Metadata.Labels = map[string]string{timeline.LabelControllerRevisionHash: strings.TrimPrefix(name, "db-")}
		yes := true
		c.Metadata.OwnerReferences = []ownerRef{{Kind: "StatefulSet", Name: "db", UID: uid, Controller: &yes}}
		c.Data.Spec.Template.Spec.Containers = []containerTemplate{{Name: "db", Image: "db:" + name}}
		return c
	}
	var w workloadObject
	w.Metadata.Name, w.Metadata.UID = "db", "u1"
	crs := []controllerRevision{cr("db-5c4d", 3, "u1"), cr("db-7f8e", 2, "u1"), cr("db-0000", 1, "u9")}
	sts := controllerRevisions("StatefulSet", &w, crs)
	if sts.current != 3 || sts.byNum[3].Hash != "db-5c4d" || sts.byNum[1] != nil {
		t.Errorf("statefulset %+v", sts.byNum)
	}
	ds := controllerRevisions("DaemonSet", &w, crs)
	if ds.byNum[3].Hash != "5c4d" {
		t.Errorf("daemonset hash %q, want the label's", ds.byNum[3].Hash)
	}
	wins := windows(sts, nil)
	if len(wins) != 2 || wins[0].from != nil || wins[1].from.Hash != "db-7f8e" {
		t.Errorf("windows %+v", wins)
	}
	r := buildReport("shop", timeline.Owner{Kind: "StatefulSet", Name: "db"}, wins, &wins[0], nil, sts.byNum[sts.current], 3)
	if !strings.Contains(r.Verdict, "no longer known") {
		t.Errorf("rollout 2 of revision 1, which moved on: %q", r.Verdict)
	}
}

// rolloutEpisode is a container's stop of a Deployment web's pod of
// ReplicaSet web-HASH: deleted, graceful unless killed, its traffic with
// refused attempts until refusedUntil after its SIGTERM and the other lost
// kinds given.
func rolloutEpisode(t0 time.Time, node, hash, pod, container string, refused uint64, refusedUntil time.Duration, lost map[sigvocab.NetKind]uint64) timeline.Episode {
	return kindEpisode("Deployment", t0, node, hash, pod, container, refused, refusedUntil, lost)
}

// kindEpisode is rolloutEpisode of a workload of kind Deployment or Rollout
// (an Argo Rollout's ReplicaSet's pod).
func kindEpisode(kind string, t0 time.Time, node, hash, pod, container string, refused uint64, refusedUntil time.Duration, lost map[sigvocab.NetKind]uint64) timeline.Episode {
	label := timeline.LabelPodTemplateHash
	if kind == timeline.KindRollout {
		label = timeline.LabelRolloutsPodTemplateHash
	}
	ep := timeline.Episode{Outcome: timeline.OutcomeGraceful, Owner: &timeline.Owner{Kind: kind, Name: "web"}, Node: node,
		Revision: &timeline.Revision{Controller: "ReplicaSet/web-" + hash, Hash: hash, Label: label},
		Start:    t0, StopAt: t0, ExitAt: t0.Add(2 * time.Second), StopReason: "deleted", GracePeriod: 30 * time.Second, GraceFrom: "the pod's terminationGracePeriodSeconds",
		StopSignal: sigvocab.SIGTERM,
		Container:  timeline.Container{Identity: identity.Identity{ID: node + pod + container, Namespace: "shop", Pod: pod, Name: container}}}
	tr := &timeline.Traffic{NetNS: 7, Since: t0, Until: t0.Add(6 * time.Second), SeesRefused: true, SeesLastSpeaker: true}
	tr.Counts[sigvocab.NetListenerClosed] = sigvocab.NetCount{N: 1, First: t0.Add(2 * time.Second), Last: t0.Add(2 * time.Second)}
	tr.Counts[sigvocab.NetAccepted] = sigvocab.NetCount{N: 4, First: t0, Last: t0.Add(1500 * time.Millisecond)}
	if refused > 0 {
		tr.Counts[sigvocab.NetRefused] = sigvocab.NetCount{N: refused, First: t0.Add(2 * time.Second), Last: t0.Add(refusedUntil)}
	}
	for k, n := range lost {
		tr.Counts[k] = sigvocab.NetCount{N: n, First: t0.Add(time.Second), Last: t0.Add(time.Second)}
	}
	ep.Traffic = tr
	ep.Endpoints = []timeline.EndpointChange{{Service: "shop/web", TerminatingAt: t0.Add(300 * time.Millisecond)}}
	ep.Endpoints[0].SetLags(t0, t0)
	return ep
}

// One rollout's report: a pod's app and its proxy sidecar are one row,
// their shared count once; a pod of the new revision restarted during it
// is shown apart; the verdict counts what the clients lost, by kind; the
// advice measures the sleep (the longest of the refused attempts' delays,
// rounded up) and the grace (with the graceful stops' shutdown); against
// the rollout before, the template change and the lost requests.
func TestRolloutReport(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	five := 5.0
	mk := func(n int64, hash string, created time.Duration, prestop string) *WorkloadRevision {
		f := TemplateFacts{GracePeriod: 30, Containers: []ContainerTemplate{{Name: "app", Image: "web:1", PreStop: prestop}}}
		if prestop == "sleep 5 s" {
			f.Containers[0].PreStopSleep = &five
		}
		return &WorkloadRevision{Number: n, First: n, Object: "ReplicaSet/web-" + hash, Hash: hash, Created: t0.Add(created), Template: f}
	}
	revs := &revisions{kind: "Deployment", byNum: map[int64]*WorkloadRevision{
		1: mk(1, "aaa", -time.Hour, ""), 2: mk(2, "bbb", 0, ""), 3: mk(3, "ccc", time.Hour, "sleep 5 s")}, current: 3}
	wins := windows(revs, nil)
	wl := timeline.Owner{Kind: "Deployment", Name: "web"}
	at := t0.Add(10 * time.Second)
	app := rolloutEpisode(at, "n1", "aaa", "web-aaa-1", "app", 20, 2300*time.Millisecond, nil)
	proxy := rolloutEpisode(at, "n1", "aaa", "web-aaa-1", "proxy", 24, 2300*time.Millisecond, nil)
	proxy.Traffic.Until = proxy.Traffic.Until.Add(4 * time.Second) // a later read: its count includes the app's
	other := rolloutEpisode(at, "n2", "aaa", "web-aaa-2", "app", 0, 0, map[sigvocab.NetKind]uint64{sigvocab.NetAfterClose: 3})
	killed := rolloutEpisode(at, "n2", "aaa", "web-aaa-3", "app", 10, 4100*time.Millisecond, nil)
	killed.Outcome, killed.ExitStatus, killed.KillAt = timeline.OutcomeIgnoredByInit, 137, at.Add(30*time.Second)
	killed.ExitAt = killed.KillAt
	restarted := rolloutEpisode(at, "n1", "bbb", "web-bbb-1", "app", 0, 0, nil)
	restarted.StopReason = "probe_failed"
	early := rolloutEpisode(t0.Add(-2*time.Hour), "n1", "aaa", "web-aaa-9", "app", 5, time.Second, nil) // before the rollout
	eps := []timeline.Episode{app, proxy, other, killed, restarted, early}

	r := buildReport("shop", wl, wins, &wins[0], eps, revs.byNum[revs.current], 3)
	if len(r.Pods) != 3 || r.Pods[0].Pod != "web-aaa-1" || r.Pods[0].Containers != 2 || *r.Pods[0].Lost != 24 {
		t.Fatalf("pods %+v", r.Pods)
	}
	if len(r.Apart) != 1 || r.Apart[0].StopReason != "probe_failed" {
		t.Errorf("apart %+v", r.Apart)
	}
	tot := r.Totals
	if tot.Lost != 37 || tot.PodsHurt != 3 || tot.LostByKind["refused"] != 34 || tot.LostByKind["after_close"] != 3 || tot.Exit137 != 1 {
		t.Errorf("totals %+v", tot)
	}
	if want := "clients lost 37 requests on 3 of 3 pods (34 refused, 3 sent after the close); 1 of 3 pods ended in SIGKILL (exit 137)"; r.Verdict != want {
		t.Errorf("verdict %q\nwant    %q", r.Verdict, want)
	}
	// Refused until 4.1 s after the stop: a 5 s sleep; the graceful stops
	// shut down 2 s after SIGTERM: a grace of 7 s.
	if r.PreStopSleep == nil || *r.PreStopSleep != 5 || r.GracePeriod == nil || *r.GracePeriod != 7 {
		t.Errorf("sleep %v, grace %v; advice %q", r.PreStopSleep, r.GracePeriod, r.Advice)
	}
	if !strings.Contains(strings.Join(r.Advice, "\n"), "Revision 3, now current, sleeps 5 s already") {
		t.Errorf("advice does not see revision 3's sleep: %q", r.Advice)
	}
	// The three stops overlapped, and the workload has 3 replicas: none
	// was left to serve.
	if r.Totals.AtOnce != 3 || !strings.Contains(strings.Join(r.Advice, "\n"), "all 3 pods of revision 1 were stopping at the same time") {
		t.Errorf("at once %d, advice %q", r.Totals.AtOnce, r.Advice)
	}
	if p := r.Pods[0]; p.LastNewConnection == nil || *p.LastNewConnection != 1.5 || p.EndpointLag == nil || *p.EndpointLag != 0.3 {
		t.Errorf("pod row %+v", p)
	}

	// Rollout 3 stopped revision 2's pods, which had no preStop either:
	// nothing to credit; its clients lost nothing.
	clean := rolloutEpisode(t0.Add(time.Hour+10*time.Second), "n1", "bbb", "web-bbb-2", "app", 0, 0, nil)
	r3 := buildReport("shop", wl, wins, &wins[1], []timeline.Episode{clean}, revs.byNum[revs.current], 3)
	r3.compare(&r)
	if r3.Verdict != "no client was hurt" || r3.Compared == nil || len(r3.Compared.Changes) != 0 || !strings.Contains(r3.Compared.Words, "nothing to credit") ||
		!strings.Contains(r3.Compared.Words, "lost requests 37 → 0") {
		t.Errorf("rollout 3: %q, compared %+v", r3.Verdict, r3.Compared)
	}
	// The same stops, but the stopped revision had slept 5 s: credited.
	revs.byNum[2].Template.Containers[0].PreStop, revs.byNum[2].Template.Containers[0].PreStopSleep = "sleep 5 s", &five
	r3.compare(&r)
	if !strings.Contains(r3.Compared.Words, "preStop of app: none → sleep 5 s") || !strings.HasSuffix(r3.Compared.Words, "it helped") {
		t.Errorf("compared %q", r3.Compared.Words)
	}

	// Refused attempts still coming when the counts were read: the sleep
	// is a floor, and said so.
	coming := rolloutEpisode(at, "n1", "aaa", "web-aaa-1", "app", 20, 5500*time.Millisecond, nil)
	if r := buildReport("shop", wl, wins, &wins[0], []timeline.Episode{coming}, revs.byNum[revs.current], 3); r.PreStopSleep == nil || *r.PreStopSleep != 6 ||
		!r.PreStopSleepAtLeast || !r.Pods[0].CoveringAtLeast || !strings.Contains(r.Advice[0], "at least 6 s") {
		t.Errorf("still coming: sleep %v at least %v, advice %q", r.PreStopSleep, r.PreStopSleepAtLeast, r.Advice)
	}

	// Rollouts in quick succession: a pod of revision 1 deleted after
	// rollout 3 began is still rollout 2's, and not rollout 3's, even apart.
	late := rolloutEpisode(t0.Add(time.Hour+20*time.Second), "n3", "aaa", "web-aaa-4", "app", 0, 0, nil)
	if r := buildReport("shop", wl, wins, &wins[0], append(slices.Clone(eps), late), revs.byNum[revs.current], 3); len(r.Pods) != 4 {
		t.Errorf("rollout 2 with a late stop: %d pods, want 4", len(r.Pods))
	}
	if r := buildReport("shop", wl, wins, &wins[1], []timeline.Episode{clean, late}, revs.byNum[revs.current], 3); len(r.Pods) != 1 || len(r.Apart) != 0 {
		t.Errorf("rollout 3 took rollout 2's late stop: pods %+v, apart %+v", r.Pods, r.Apart)
	}

	// Never "no client was hurt" with a pod's traffic not counted.
	unread := rolloutEpisode(t0.Add(time.Hour+10*time.Second), "n2", "bbb", "web-bbb-3", "app", 0, 0, nil)
	unread.Traffic = &timeline.Traffic{Unread: "no counts arrived in time"}
	r3 = buildReport("shop", wl, wins, &wins[1], []timeline.Episode{clean, unread}, revs.byNum[revs.current], 3)
	if strings.Contains(r3.Verdict, "no client was hurt") || !strings.Contains(r3.Verdict, "the traffic of 1 pods was not counted") {
		t.Errorf("one pod uncounted: %q", r3.Verdict)
	}
	// Nor on a kernel that cannot count refused attempts.
	old := clean
	old.Traffic = &timeline.Traffic{NetNS: 7, Since: clean.Start, Until: clean.Start.Add(time.Second), SeesLastSpeaker: true}
	r3 = buildReport("shop", wl, wins, &wins[1], []timeline.Episode{old}, revs.byNum[revs.current], 3)
	if strings.Contains(r3.Verdict, "no client was hurt") || !strings.Contains(r3.Verdict, "refused attempts cannot be counted") {
		t.Errorf("refused unknown: %q", r3.Verdict)
	}
}

// rolloutCluster is a stand-in API server with Deployment shop/web at
// revision 3 (ReplicaSets web-aaa, web-bbb, web-ccc, made 50, 30 and 10
// minutes ago; web-ccc's pods run on n1 and n2), the kubelets' Killing
// events of web-bbb's pods on n1 and n2 and of web-aaa's on n3, and an
// agent per node, n4's included, each counting the requests it is asked.
type rolloutCluster struct {
	kubeconfig string
	asked      map[string]*atomic.Int32
}

func newRolloutCluster(t *testing.T, down ...string) *rolloutCluster {
	t.Helper()
	return newKindCluster(t, "Deployment", down...)
}

// newKindCluster is newRolloutCluster with a workload of kind Deployment
// or Rollout (Argo Rollouts': its own API group, revision annotation and
// pod label).
func newKindCluster(t *testing.T, kind string, down ...string) *rolloutCluster {
	t.Helper()
	workloadPath, revAnn, hashLabel := "/apis/apps/v1/namespaces/shop/deployments/web", annRevision, timeline.LabelPodTemplateHash
	if kind == timeline.KindRollout {
		workloadPath, revAnn, hashLabel = "/apis/argoproj.io/v1alpha1/namespaces/shop/rollouts/web", annRolloutRevision, timeline.LabelRolloutsPodTemplateHash
	}
	now := time.Now().UTC().Truncate(time.Second)
	c := &rolloutCluster{asked: map[string]*atomic.Int32{}}
	eps := map[string][]timeline.Episode{}
	// Rollout 3 stopped web-bbb's pods: one on n1 lost 12 refused attempts,
	// one on n2 none. Rollout 2 stopped web-aaa's: on n3, 30 refused.
	eps["n1"] = []timeline.Episode{kindEpisode(kind, now.Add(-9*time.Minute), "node-n1", "bbb", "web-bbb-1", "app", 12, 3200*time.Millisecond, nil)}
	eps["n2"] = []timeline.Episode{kindEpisode(kind, now.Add(-9*time.Minute), "node-n2", "bbb", "web-bbb-2", "app", 0, 0, nil)}
	eps["n3"] = []timeline.Episode{kindEpisode(kind, now.Add(-29*time.Minute), "node-n3", "aaa", "web-aaa-1", "app", 30, 2*time.Second, nil)}
	agents := map[string]http.Handler{}
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		counter := &atomic.Int32{}
		c.asked[n] = counter
		if slices.Contains(down, n) {
			agents[n] = nil
			continue
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /api/v1/episodes", func(w http.ResponseWriter, r *http.Request) {
			counter.Add(1)
			if r.URL.Query().Get("owner") != kind+"/web" || r.URL.Query().Get("since") == "" {
				http.Error(w, "want owner and since: "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			_ = json.NewEncoder(w).Encode(eps[n])
		})
		mux.HandleFunc("GET /api/v1/info", func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(apiv1.Info{APIVersion: "v1", Node: "node-" + n, StartedAt: now.Add(-24 * time.Hour)})
		})
		agents[n] = mux
	}
	srv := newFakeAPIServer(agents, false)
	inner := srv.Config.Handler
	rs := func(hash string, rev int, ago time.Duration, prestop string) string {
		lifecycle := ""
		if prestop != "" {
			lifecycle = fmt.Sprintf(`,"lifecycle":{"preStop":{"sleep":{"seconds":%s}}}`, prestop)
		}
		return fmt.Sprintf(`{"metadata":{"name":"web-%s","namespace":"shop","creationTimestamp":%q,"labels":{%q:%q},
			"annotations":{%q:"%d"},"ownerReferences":[{"kind":%q,"name":"web","uid":"u1","controller":true}]},
			"spec":{"template":{"spec":{"containers":[{"name":"app","image":"web:%d"%s}]}}},"status":{"replicas":%d}}`,
			hash, now.Add(-ago).Format(time.RFC3339), hashLabel, hash, revAnn, rev, kind, rev, lifecycle, map[bool]int{true: 2, false: 0}[rev == 3])
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+workloadPath, func(w http.ResponseWriter, _ *http.Request) {
		if kind == timeline.KindRollout { // its observedGeneration is a hash
			fmt.Fprint(w, `{"metadata":{"name":"web","namespace":"shop","uid":"u1","generation":3},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}}},
				"status":{"observedGeneration":"58c975674b","phase":"Healthy","replicas":2,"updatedReplicas":2}}`)
			return
		}
		fmt.Fprint(w, `{"metadata":{"name":"web","namespace":"shop","uid":"u1","generation":3},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}}},
			"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2}}`)
	})
	mux.HandleFunc("GET /apis/apps/v1/namespaces/shop/replicasets", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"items":[%s,%s,%s]}`, rs("aaa", 1, 50*time.Minute, ""), rs("bbb", 2, 30*time.Minute, ""), rs("ccc", 3, 10*time.Minute, "4"))
	})
	mux.HandleFunc("GET /api/v1/namespaces/shop/pods", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("labelSelector") != "app=web" {
			http.Error(w, "selector "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"items":[{"metadata":{"name":"web-ccc-1","namespace":"shop"},"spec":{"nodeName":"node-n1"}},{"metadata":{"name":"web-ccc-2","namespace":"shop"},"spec":{"nodeName":"node-n2"}}]}`)
	})
	mux.HandleFunc("GET /api/v1/namespaces/shop/events", func(w http.ResponseWriter, r *http.Request) {
		ev := func(pod, node string, ago time.Duration) string {
			return fmt.Sprintf(`{"involvedObject":{"kind":"Pod","name":%q},"reason":"Killing","message":"Stopping container app","firstTimestamp":%q,"source":{"host":%q}}`,
				pod, now.Add(-ago).Format(time.RFC3339), node)
		}
		switch sel := r.URL.Query().Get("fieldSelector"); sel {
		case "involvedObject.kind=Pod,reason=Killing":
			fmt.Fprintf(w, `{"items":[%s,%s,%s]}`, ev("web-bbb-1", "node-n1", 9*time.Minute), ev("web-bbb-2", "node-n2", 9*time.Minute), ev("web-aaa-1", "node-n3", 29*time.Minute))
		case "involvedObject.kind=" + kind + ",reason=ScalingReplicaSet":
			fmt.Fprint(w, `{"items":[]}`)
		default:
			http.Error(w, "fieldSelector "+sel, http.StatusBadRequest)
		}
	})
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, pattern := mux.Handler(r); pattern != "" {
			w.Header().Set("Content-Type", "application/json")
			h.ServeHTTP(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	c.kubeconfig = kubeconfigFor(t, srv.URL)
	return c
}

// The plugin asks only the agents of the nodes that ran the pods of the
// rollout and of the one before it, which it is compared with (n1 and n2
// from the pods and the Killing events of rollout 3, n3 from rollout 2's),
// never n4's. A node that does not answer is named, and the report is
// partial.
func TestRolloutAsksItsNodes(t *testing.T) {
	c := newRolloutCluster(t)
	out, errOut, err := runPlugin(t, "--kubeconfig", c.kubeconfig, "rollout", "deploy/web", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var l struct {
		Kind   string          `json:"kind"`
		Items  []RolloutReport `json:"items"`
		Agents []Agent         `json:"agents"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if l.Kind != "RolloutReportList" || len(l.Items) != 1 {
		t.Fatalf("%s", out)
	}
	r := l.Items[0]
	if r.Revision != 3 || r.From == nil || r.From.Hash != "bbb" || len(r.Pods) != 2 || r.Totals.Lost != 12 || r.Partial {
		t.Errorf("rollout 3: %s", out)
	}
	if !reflect.DeepEqual(r.Asked.Nodes, []string{"node-n1", "node-n2", "node-n3"}) || r.Asked.All {
		t.Errorf("asked %+v", r.Asked)
	}
	// The refused attempts came until 3.2 s after SIGTERM: a 4 s sleep
	// covers them, which revision 3 has.
	if r.PreStopSleep == nil || *r.PreStopSleep != 4 || !strings.Contains(strings.Join(r.Advice, " "), "Revision 3, now current, sleeps 4 s already") {
		t.Errorf("sleep %v, advice %q", r.PreStopSleep, r.Advice)
	}
	if r.Compared == nil || r.Compared.Revision != 2 || !strings.Contains(r.Compared.Words, "lost requests 30 → 12") {
		t.Errorf("compared %+v", r.Compared)
	}
	if n := c.asked["n4"].Load(); n != 0 {
		t.Errorf("n4's agent was asked %d times: it ran none of the rollouts' pods", n)
	}

	// The table, as a user reads it.
	out, _, err = runPlugin(t, "--kubeconfig", c.kubeconfig, "rollout", "deploy/web")
	if err != nil || !strings.Contains(out, "deploy/web") && !strings.Contains(out, "Deployment/web") || !strings.Contains(out, "verdict: clients lost 12 requests on 1 of 2 pods (12 refused)") {
		t.Errorf("table: %v\n%s", err, out)
	}

	// A node that does not answer: named, and the report partial.
	c = newRolloutCluster(t, "n2")
	out, errOut, err = runPlugin(t, "--kubeconfig", c.kubeconfig, "rollout", "deploy/web", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	r = l.Items[0]
	if !r.Partial || len(r.PartialWhy) == 0 || !strings.Contains(r.PartialWhy[0], "node node-n2 not read") || !strings.HasPrefix(r.Verdict, "partial: ") {
		t.Errorf("n2 down: partial %v %q, verdict %q", r.Partial, r.PartialWhy, r.Verdict)
	}
	if !strings.Contains(errOut, "node-n2") {
		t.Errorf("stderr does not name n2: %s", errOut)
	}
}

// An Argo Rollouts Rollout is a workload of its own: its ReplicaSets by
// their rollout.argoproj.io/revision, its pods by rollouts-pod-template-hash,
// its episodes' owner Rollout/NAME.
func TestRolloutArgo(t *testing.T) {
	c := newKindCluster(t, timeline.KindRollout)
	out, errOut, err := runPlugin(t, "--kubeconfig", c.kubeconfig, "rollout", "rollout/web", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var l struct {
		Items []RolloutReport `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Items) != 1 {
		t.Fatalf("%v\n%s", err, out)
	}
	r := l.Items[0]
	if r.Workload != (timeline.Owner{Kind: "Rollout", Name: "web"}) || r.Revision != 3 || r.From == nil || r.From.Hash != "bbb" ||
		len(r.Pods) != 2 || r.Totals.Lost != 12 || r.InProgress || r.Compared == nil || r.Compared.Lost != 30 {
		t.Errorf("an Argo Rollout's report: %s", out)
	}
}

// The JSON schema in docs/kubectl.md names every field a report carries:
// a field added, renamed or removed without the docs fails here.
func TestRolloutSchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/kubectl.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### The rollout report's JSON")
	if !ok {
		t.Fatal("docs/kubectl.md has no section \"### The rollout report's JSON\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z_0-9.]+)`").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeOf(time.Time{}) || typ == reflect.TypeOf(timeline.Owner{}) {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !documented[prefix+name] {
				t.Errorf("field %s%s is not in docs/kubectl.md's rollout report schema", prefix, name)
			}
			walk(prefix+name+".", f.Type)
		}
	}
	walk("", reflect.TypeOf(RolloutReport{}))
}

// A rollout in progress: the controller has not seen the last change, an
// old ReplicaSet still has pods, a StatefulSet's revisions differ, a
// DaemonSet's pods are not all updated. Its report says so.
func TestRolloutInProgress(t *testing.T) {
	three := int32(3)
	var w workloadObject
	w.Metadata.Generation, w.Status.ObservedGeneration = 4, 4
	w.Spec.Replicas = &three
	w.Status.Replicas, w.Status.UpdatedReplicas = 3, 3
	revs := &revisions{byNum: map[int64]*WorkloadRevision{1: {Pods: 0}, 2: {Pods: 3}}, current: 2}
	if w.inProgress("Deployment", revs) {
		t.Errorf("a finished Deployment in progress")
	}
	revs.byNum[1].Pods = 1
	if !w.inProgress("Deployment", revs) {
		t.Errorf("an old ReplicaSet with a pod left: not in progress")
	}
	revs.byNum[1].Pods = 0
	w.Metadata.Generation = 5
	if !w.inProgress("Deployment", revs) {
		t.Errorf("a change the controller has not seen: not in progress")
	}
	w.Metadata.Generation = 4
	w.Status.CurrentRevision, w.Status.UpdateRevision = "db-1", "db-2"
	if !w.inProgress("StatefulSet", revs) {
		t.Errorf("a StatefulSet between revisions: not in progress")
	}
	w.Status.DesiredNumberScheduled, w.Status.UpdatedNumberScheduled = 3, 2
	if !w.inProgress("DaemonSet", revs) {
		t.Errorf("a DaemonSet with a pod not updated: not in progress")
	}
	r := RolloutReport{From: &WorkloadRevision{Number: 1}, Revision: 2, InProgress: true}
	r.total()
	if v := r.verdict(); v != "in progress: no pod of revision 1 stopped yet" {
		t.Errorf("verdict %q", v)
	}
}

// A hook's sleep, as the advice weighs it: the sleep action, or an exec of
// sleep alone (directly or through a shell); any other hook sleeps no
// known time.
func TestHandlerSleepSeconds(t *testing.T) {
	for _, c := range []struct {
		hook string
		secs float64
		ok   bool
	}{
		{`{"sleep": {"seconds": 8}}`, 8, true},
		{`{"exec": {"command": ["sleep", "3"]}}`, 3, true},
		{`{"exec": {"command": ["/bin/sh", "-c", "sleep 2.5"]}}`, 2.5, true},
		{`{"exec": {"command": ["sh", "-c", "sleep 2; nginx -s quit"]}}`, 0, false},
		{`{"httpGet": {"port": 8080, "path": "/drain"}}`, 0, false},
	} {
		var h handler
		if err := json.Unmarshal([]byte(c.hook), &h); err != nil {
			t.Fatal(err)
		}
		if secs, ok := h.sleepSeconds(); secs != c.secs || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.hook, secs, ok, c.secs, c.ok)
		}
	}
	var none *handler
	if _, ok := none.sleepSeconds(); ok {
		t.Error("no hook sleeps")
	}
}
