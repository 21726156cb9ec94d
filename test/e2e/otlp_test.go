package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// OTLP logs (issue 22) against a real OpenTelemetry Collector: the
// records it received, read field by field from its file exporter.

// One record per episode arrives over OTLP/HTTP and over gRPC, with the
// agent's resource and the attributes of each stop: a shell-form PID 1
// (ignored_by_init, WARN) and a PID 1 that traps SIGTERM (graceful, INFO).
func TestOTLPLogs(t *testing.T) {
	img := busyboxImage(t)
	for _, proto := range []string{"http/protobuf", "grpc"} {
		short := strings.TrimSuffix(proto, "/protobuf")
		t.Run(short, func(t *testing.T) {
			col := newCollector(t)
			col.start(t)
			node := "e2e-otlp-" + short
			port, agentErr := startServe(t, "--otlp-endpoint", col.endpoint(proto), "--otlp-protocol", proto, "--node-name", node)
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			shell := runContainer(t, "e2e-otlp-shell", img, "sh", "-c", "sleep 1000 & sleep 1000 & wait")
			trap := runContainer(t, "e2e-otlp-trap", img, "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait")
			docker(t, "stop", "-t", "2", "e2e-otlp-shell")
			docker(t, "stop", "-t", "5", "e2e-otlp-trap")
			epShell := faultWaitEpisode(t, base, shell)
			epTrap := faultWaitEpisode(t, base, trap)

			// Every episode the agent completed (another engineer's stops on
			// this kernel included) is sent, once.
			episodes := waitOTLPSettled(t, base, agentErr)
			recs := nodeRecords(waitRecords(t, col, node, episodes), node)
			seen := map[int64]int{}
			for _, r := range recs {
				id, _ := r.Attrs["sigscope.episode.id"].(int64)
				seen[id]++
			}
			for id := int64(1); id <= int64(episodes); id++ {
				if seen[id] != 1 {
					t.Errorf("episode %d: %d records, want 1", id, seen[id])
				}
			}
			if len(recs) != int(episodes) {
				t.Errorf("%d records for %d episodes", len(recs), episodes)
			}

			r := recordOf(t, recs, shell)
			checkRecord(t, r, epShell, node)
			if r.SeverityText != "WARN" || r.Severity != 13 || r.Attrs["sigscope.outcome"] != "ignored_by_init" ||
				r.Attrs["sigscope.cascade_kills"] != int64(2) || r.Attrs["process.exit.code"] != int64(137) || r.Attrs["sigscope.kill_after_s"] == nil {
				t.Errorf("shell-form stop: %s %d, attributes %v", r.SeverityText, r.Severity, r.Attrs)
			}
			r = recordOf(t, recs, trap)
			checkRecord(t, r, epTrap, node)
			if r.SeverityText != "INFO" || r.Severity != 9 || r.Attrs["sigscope.outcome"] != "graceful" ||
				r.Attrs["process.exit.code"] != int64(0) || r.Attrs["sigscope.kill_after_s"] != nil {
				t.Errorf("graceful stop: %s %d, attributes %v", r.SeverityText, r.Severity, r.Attrs)
			}
			if testing.Verbose() {
				t.Logf("the collector's debug exporter printed:\n%s", col.stderr.String())
			}
		})
	}
}

// The collector stopped (SIGTERM) for SIGSCOPE_OTLP_OUTAGE (default 30 s)
// while containers stop, then started again: an agent with the default
// queue sends every record it queued meanwhile; one whose queue holds 2
// drops the oldest of the others, and counts each: sent + dropped +
// failed is the number of episodes.
func TestOTLPCollectorOutage(t *testing.T) {
	img := busyboxImage(t)
	outage := 30 * time.Second
	if s := os.Getenv("SIGSCOPE_OTLP_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SIGSCOPE_OTLP_OUTAGE: %v", err)
		}
		outage = d
	}
	col := newCollector(t)
	col.start(t)
	const n, small = 5, 2
	flags := []string{"--otlp-endpoint", col.endpoint("http/protobuf"), "--otlp-retry-max", "2s"}
	bigPort, bigErr := startServe(t, append(flags, "--node-name", "e2e-otlp-queue")...)
	smallPort, smallErr := startServe(t, append(flags, "--node-name", "e2e-otlp-small", "--otlp-queue-size", fmt.Sprint(small))...)
	bigBase, smallBase := fmt.Sprintf("http://127.0.0.1:%d", bigPort), fmt.Sprintf("http://127.0.0.1:%d", smallPort)
	var ids []string
	for i := range n {
		ids = append(ids, runContainer(t, fmt.Sprintf("e2e-otlp-out-%d", i), img, "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"))
	}
	// What each agent sent before the outage (nothing, unless another
	// engineer's container stopped meanwhile).
	waitOTLPSettled(t, bigBase, bigErr)
	smallBefore := waitOTLPSettled(t, smallBase, smallErr)

	col.stop(t)
	down := time.Now()
	for i := range n {
		docker(t, "stop", "-t", "5", fmt.Sprintf("e2e-otlp-out-%d", i))
	}
	for _, id := range ids {
		faultWaitEpisode(t, bigBase, id)
		faultWaitEpisode(t, smallBase, id)
	}
	for _, base := range []string{bigBase, smallBase} {
		waitMetric(t, base, "sigscope_otlp_log_exports_retried_total", func(v float64) bool { return v > 0 })
	}
	waitMetric(t, smallBase, "sigscope_otlp_log_records_queued", func(v float64) bool { return v == small })
	time.Sleep(time.Until(down.Add(outage)))
	t.Logf("collector stopped for %v", time.Since(down).Round(time.Millisecond))
	col.start(t)

	bigEpisodes, smallEpisodes := waitOTLPSettled(t, bigBase, bigErr), waitOTLPSettled(t, smallBase, smallErr)
	bm, sm := otlpMetrics(t, bigBase), otlpMetrics(t, smallBase)
	t.Logf("default queue: %d episodes, sent %v dropped %v failed %v; queue of %d: %d episodes, sent %v dropped %v failed %v",
		bigEpisodes, bm["sent"], bm["dropped"], bm["failed"], small, smallEpisodes, sm["sent"], sm["dropped"], sm["failed"])
	if bm["sent"] != float64(bigEpisodes) || bm["dropped"] != 0 || bm["failed"] != 0 {
		t.Errorf("default queue: %d episodes, sent %v dropped %v failed %v: want all sent", bigEpisodes, bm["sent"], bm["dropped"], bm["failed"])
	}
	during := smallEpisodes - smallBefore
	if sm["sent"]+sm["dropped"]+sm["failed"] != float64(smallEpisodes) || sm["failed"] != 0 ||
		sm["dropped"] != float64(during-small) || sm["sent"] != float64(smallBefore+small) {
		t.Errorf("queue of %d: %d episodes (%d while the collector was away), sent %v dropped %v failed %v",
			small, smallEpisodes, during, sm["sent"], sm["dropped"], sm["failed"])
	}

	recs := waitRecords(t, col, "e2e-otlp-small", uint64(sm["sent"]))
	bigRecs := nodeRecords(waitRecords(t, col, "e2e-otlp-queue", bigEpisodes), "e2e-otlp-queue")
	for _, id := range ids {
		recordOf(t, bigRecs, id) // each stop during the outage arrived, once
	}
	if len(bigRecs) != int(bigEpisodes) {
		t.Errorf("default queue: %d records for %d episodes", len(bigRecs), bigEpisodes)
	}
	// The small queue kept the newest: the highest episode ids.
	var got []int64
	for _, r := range nodeRecords(recs, "e2e-otlp-small") {
		got = append(got, r.Attrs["sigscope.episode.id"].(int64))
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if len(got) != int(sm["sent"]) || len(got) < small || got[len(got)-1] != int64(smallEpisodes) || got[len(got)-2] != int64(smallEpisodes-1) {
		t.Errorf("queue of %d: records of episodes %v arrived, want the newest two of %d", small, got, smallEpisodes)
	}
}

// waitOTLPSettled waits until the agent's OTLP queue is empty and returns
// how many episodes it has completed.
func waitOTLPSettled(t *testing.T, base string, agentErr fmt.Stringer) uint64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var info apiv1.Info
		if err := json.Unmarshal(faultGet(t, base, "/api/v1/info"), &info); err != nil {
			t.Fatal(err)
		}
		m := otlpMetrics(t, base)
		if m["queued"] == 0 && m["sent"]+m["dropped"]+m["failed"] == float64(info.Episodes.LastID) {
			return info.Episodes.LastID
		}
		if time.Now().After(deadline) {
			t.Fatalf("OTLP never settled: %d episodes, %v\nagent:\n%s", info.Episodes.LastID, m, tail(agentErr.String()))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func otlpMetrics(t *testing.T, base string) map[string]float64 {
	t.Helper()
	fams := mustScrape(t, base)
	m := map[string]float64{"queued": sumMetric(fams, "sigscope_otlp_log_records_queued", nil)}
	for _, k := range []string{"sent", "failed", "dropped"} {
		name := "sigscope_otlp_log_records_" + k + "_total"
		if fams[name] == nil {
			t.Fatalf("no %s", name)
		}
		m[k] = sumMetric(fams, name, nil)
	}
	return m
}

func waitMetric(t *testing.T, base, name string, ok func(float64) bool) {
	t.Helper()
	if !testutil.Poll(100*time.Millisecond, func() bool { return ok(sumMetric(mustScrape(t, base), name, nil)) }) {
		t.Fatalf("%s never got there", name)
	}
}

// waitRecords waits until the collector has written n records of node.
func waitRecords(t *testing.T, col *collector, node string, n uint64) []testutil.OTLPRecord {
	t.Helper()
	var recs []testutil.OTLPRecord
	if !testutil.Poll(100*time.Millisecond, func() bool { recs = col.records(t); return len(nodeRecords(recs, node)) >= int(n) }) {
		t.Fatalf("the collector wrote %d records of %s, want %d\ncollector:\n%s", len(nodeRecords(recs, node)), node, n, tail(col.stderr.String()))
	}
	return recs
}

// nodeRecords are the records whose resource is node's agent.
func nodeRecords(recs []testutil.OTLPRecord, node string) []testutil.OTLPRecord {
	var out []testutil.OTLPRecord
	for _, r := range recs {
		if r.Resource["k8s.node.name"] == node {
			out = append(out, r)
		}
	}
	return out
}

// recordOf is the one record of container id.
func recordOf(t *testing.T, recs []testutil.OTLPRecord, id string) testutil.OTLPRecord {
	t.Helper()
	var found []testutil.OTLPRecord
	for _, r := range recs {
		if r.Attrs["container.id"] == id {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d records of container %.12s, want 1", len(found), id)
	}
	return found[0]
}

// checkRecord checks r field by field against the episode the agent's API
// serves: every attribute the episode calls for, and no other.
func checkRecord(t *testing.T, r testutil.OTLPRecord, ep timeline.Episode, node string) {
	t.Helper()
	if r.EventName != "sigscope.container.stop" || r.Scope != "github.com/sigscope/sigscope/internal/otlplog" {
		t.Errorf("event %q scope %q", r.EventName, r.Scope)
	}
	if !r.Time.Equal(ep.Start) || r.Observed.Before(ep.ExitAt) {
		t.Errorf("timestamp %v observed %v; the episode starts %v and ends %v", r.Time, r.Observed, ep.Start, ep.ExitAt)
	}
	if want := "container " + ep.Container.Name + ": " + string(ep.Outcome) + " — " + ep.Summary(); r.Body != want {
		t.Errorf("body %q\nwant %q", r.Body, want)
	}
	if r.Resource["service.name"] != "sigscope" || r.Resource["service.version"] == "" || r.Resource["host.name"] == "" {
		t.Errorf("resource %v", r.Resource)
	}
	name, tag, _ := strings.Cut(ep.Container.Image, ":")
	want := map[string]any{
		"k8s.node.name":          node,
		"container.name":         ep.Container.Name,
		"container.id":           ep.Container.ID,
		"container.runtime.name": "docker",
		"container.image.name":   name,
		"container.image.tags":   []any{tag},
		"process.pid":            int64(ep.Main.PID),
		"process.exit.code":      int64(ep.ExitStatus),
		"sigscope.outcome":       string(ep.Outcome),
		"sigscope.needs_fix":     ep.Outcome.NeedsFix(),
		"sigscope.episode.id":    int64(ep.ID),
		"sigscope.stop_signal":   "SIGTERM",
		"sigscope.stop_verdict":  ep.StopVerdict.String(),
		"sigscope.main.comm":     ep.Main.Comm,
		"sigscope.main.is_init":  true,
	}
	if d, ok := ep.StopDuration(); ok {
		want["sigscope.stop_duration_s"] = d.Seconds()
	}
	if d, ok := ep.KillAfter(); ok {
		want["sigscope.kill_after_s"] = d.Seconds()
	}
	if ep.GracePeriod > 0 {
		want["sigscope.grace_period_s"] = ep.GracePeriod.Seconds()
	}
	if ep.StopTimeout > 0 {
		want["sigscope.stop_timeout_s"] = ep.StopTimeout.Seconds()
	}
	if ep.ExitSignal != 0 {
		want["sigscope.exit_signal"] = ep.ExitSignal.String()
	}
	if n := len(ep.CascadeKills) + ep.CascadeOmitted; n > 0 {
		want["sigscope.cascade_kills"] = int64(n)
	}
	if ep.Main.Runtime != "" {
		want["sigscope.main.runtime"] = string(ep.Main.Runtime)
	}
	if ep.Hint != "" {
		want["sigscope.hint"] = ep.Hint
	}
	if ep.EventsDropped > 0 {
		want["sigscope.events_dropped"] = int64(ep.EventsDropped)
	}
	if tr := ep.Traffic; tr != nil && tr.Unread == "" {
		// The stop's connection counts (docs/otlp.md): each kind the
		// kernel counted, the listener's close aside.
		for k := range sigvocab.NumNetKinds {
			if kind := sigvocab.NetKind(k); kind != sigvocab.NetListenerClosed && tr.Known(kind) {
				want["sigscope.connections."+kind.String()] = int64(tr.N(kind))
			}
		}
		want["sigscope.connections.lost"] = int64(tr.Lost())
		if tr.Probes != nil {
			// The kubelet's probes, apart, where the agent found a
			// kubelet on the node: the same kinds.
			for k, n := range tr.Probes {
				if kind := sigvocab.NetKind(k); kind != sigvocab.NetListenerClosed && tr.Known(kind) {
					want["sigscope.probes."+kind.String()] = int64(n)
				}
			}
		}
		want["sigscope.traffic.verdict"] = tr.Verdict
		if tr.Hint != "" {
			want["sigscope.traffic.hint"] = tr.Hint
		}
		if ps := tr.Peers; ps != nil && len(ps.Top) > 0 {
			// Who was hurt, parallel arrays (docs/otlp.md).
			var addr, kind, pod, ns, wl []string
			var lost, maybe []int64
			for _, p := range ps.Top {
				a := ""
				if p.Addr.IsValid() {
					a = p.Addr.String()
				}
				name, space := "", ""
				if p.Who.Kind == timeline.PeerPod {
					name, space = p.Who.Name, p.Who.Namespace
				}
				addr, kind, pod, ns, wl = append(addr, a), append(kind, string(p.Who.Kind)), append(pod, name), append(ns, space), append(wl, p.Who.Workload)
				lost, maybe = append(lost, int64(p.Lost)), append(maybe, int64(p.MaybeLost))
			}
			want["sigscope.peers.network.peer.address"], want["sigscope.peers.kind"] = addr, kind
			want["sigscope.peers.k8s.pod.name"], want["sigscope.peers.k8s.namespace.name"], want["sigscope.peers.workload"] = pod, ns, wl
			want["sigscope.peers.lost"], want["sigscope.peers.maybe_lost"] = lost, maybe
			if ps.More > 0 {
				want["sigscope.peers.more"], want["sigscope.peers.more_lost"] = int64(ps.More), int64(ps.MoreLost)
			}
		}
		if l, ok := ep.Lag(); ok {
			if l.AfterStop != nil {
				want["sigscope.last_request.after_stop_s"] = l.AfterStop.Seconds()
			}
			if l.AfterLeft != nil {
				want["sigscope.last_request.after_endpoint_left_s"] = l.AfterLeft.Seconds()
			}
			if secs, ok := ep.CoveringPreStopSleep(); ok {
				want["sigscope.last_request.covering_prestop_sleep_s"] = int64(secs)
			}
		}
	}
	for k, w := range want {
		g, ok := r.Attrs[k]
		wf, isFloat := w.(float64)
		gf, _ := g.(float64)
		switch {
		case !ok:
			t.Errorf("%s: missing, want %v", k, w)
		case isFloat && math.Abs(gf-wf) > 1e-6:
			t.Errorf("%s = %v, want %v", k, g, w)
		case !isFloat && fmt.Sprint(g) != fmt.Sprint(w):
			t.Errorf("%s = %#v, want %#v", k, g, w)
		}
	}
	for k, v := range r.Attrs {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected attribute %s = %v", k, v)
		}
	}
}
