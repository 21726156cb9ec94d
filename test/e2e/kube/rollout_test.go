package kube

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// rolloutManifest is a Service and a workload (Deployment or StatefulSet)
// of replicas pods behind it, the traffic server in mode drain (it serves
// a second after SIGTERM, then closes its listener and exits: attempts
// after that are refused, and counted while the pod's network namespace
// lives), ready when it answers.
func rolloutManifest(c *cluster, kind, name, dir string, replicas int) string {
	extra := fmt.Sprintf(`"replicas": %d,`, replicas)
	switch kind {
	case "StatefulSet":
		extra += fmt.Sprintf(`"serviceName": %q, "podManagementPolicy": "OrderedReady",`, name)
	case "DaemonSet":
		extra = "" // a pod a node: the one node here
	}
	return fmt.Sprintf(`{"apiVersion": "v1", "kind": "List", "items": [
{"apiVersion": "v1", "kind": "Service", "metadata": {"name": %[1]q, "namespace": "default"},
 "spec": {"selector": {"app": %[1]q}, "ports": [{"port": 8080, "targetPort": 8080}]}},
{"apiVersion": "apps/v1", "kind": %[4]q, "metadata": {"name": %[1]q, "namespace": "default"},
 "spec": {%[5]s "selector": {"matchLabels": {"app": %[1]q}},
  "template": {"metadata": {"labels": {"app": %[1]q, "app.kubernetes.io/name": "sigscope-e2e-kube"}},
   "spec": {"nodeName": %[2]q, "terminationGracePeriodSeconds": 5,
    "volumes": [{"name": "srv", "hostPath": {"path": %[3]q}}],
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": ["/srv/server", "drain"], "volumeMounts": [{"name": "srv", "mountPath": "/srv"}],
      "readinessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 1, "failureThreshold": 1}}]}}}}
]}`, name, c.nodeName, dir, kind, extra)
}

// rolloutClients are a client per pod of a workload, each dialling its pod's
// IP across the CNI bridge until followDelay after an independent watch saw
// the pod's endpoint leave, as a load balancer that follows the
// EndpointSlices: what each pod's clients counted.
type rolloutClients struct {
	done map[string]chan []testutil.HTTPAttempt // by pod: its client's attempts
	mu   sync.Mutex
	left map[string]time.Time // by pod: when the watch saw its endpoint leave
}

// rolloutFollowDelay is how late a client follows its pod's endpoint: well
// past the second the server serves after SIGTERM, so that a pod without a
// preStop sleep surely refuses some of its client's attempts (the kubelet's
// SIGTERM may come half a second after the endpoint left), and not much
// past the counts' read, a second after the pod's exit, so that the
// sleep measured covers.
const rolloutFollowDelay = 2500 * time.Millisecond

// rolloutSettle is how long a pod has run before its rollout begins. The
// kubelet stops a pod deleted a second after it started only once it has
// synced it: 1.2 to 1.5 s after the deletion here, more in a CI run, whose
// DaemonSet's first rollout then lost nothing (the server still served
// when its client moved). The product counts that delay in the sleep it
// advises; the test needs a rollout that loses requests.
const rolloutSettle = 3 * time.Second

func startRolloutClients(t *testing.T, c *cluster, name string, replicas int) *rolloutClients {
	t.Helper()
	// The pods of the current revision alone: the last rollout's old pods
	// may still be terminating.
	var out string
	testutil.WaitFor(t, "the workload's pods, the terminating gone", func() bool {
		var err error
		out, err = c.run(t, "-n", "default", "get", "pods", "-l", "app="+name, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.status.containerStatuses[0].state.running.startedAt}{"\n"}{end}`)
		if err != nil {
			t.Fatal(err)
		}
		return len(strings.Fields(out)) == 3*replicas
	})
	var settled time.Time
	rc := &rolloutClients{done: map[string]chan []testutil.HTTPAttempt{}, left: map[string]time.Time{}}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		started, err := time.Parse(time.RFC3339, f[len(f)-1])
		if len(f) != 3 || err != nil {
			t.Fatalf("pods of %s: %q: %v", name, out, err)
		}
		if s := started.Add(rolloutSettle); s.After(settled) {
			settled = s
		}
		pod, ip := f[0], f[1]
		w := watchSlicesAt(t, c, name, pod, ip)
		// The rollout must not begin before the watch has seen the pod
		// serving: it would take the pod's leaving for its start.
		testutil.WaitFor(t, "the slice watch to see pod "+pod+" serving", w.sawServing)
		// Three workers: the pod refuses only between its listener's close
		// and its network's teardown, a few hundred milliseconds, which
		// one worker's dial that timed out (its goroutine late on a
		// loaded machine) can span whole.
		cl, err := testutil.StartHTTPLoad(net.JoinHostPort(ip, "8080"), 3, 500*time.Millisecond, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Stop() })
		cl.WaitAnswered(t)
		ch := make(chan []testutil.HTTPAttempt, 1)
		rc.done[pod] = ch
		go func() {
			// A change that the watch took back (a readiness probe that
			// failed once under the client's load, then passed) is no
			// leave: the client goes on, as a load balancer that put the
			// endpoint back would.
			for {
				left := w.firstChange()
				if left.IsZero() {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				time.Sleep(time.Until(left.Add(rolloutFollowDelay)))
				if w.firstChange().Equal(left) {
					rc.mu.Lock()
					rc.left[pod] = left
					rc.mu.Unlock()
					ch <- cl.Stop()
					return
				}
			}
		}()
	}
	time.Sleep(time.Until(settled))
	return rc
}

// wait is each pod's client's outcomes, once each followed its endpoint;
// on a timeout it shows the workload's state (name's objects and events).
func (rc *rolloutClients) wait(t *testing.T, c *cluster, name, ref string) map[string][]testutil.HTTPAttempt {
	t.Helper()
	got := map[string][]testutil.HTTPAttempt{}
	for pod, ch := range rc.done {
		select {
		case got[pod] = <-ch:
		case <-time.After(3 * time.Minute):
			state, _ := c.run(t, "-n", "default", "get", "rs,controllerrevisions,pods", "-l", "app="+name, "-o", "wide")
			status, _ := c.run(t, "-n", "default", "get", ref, "-o", "jsonpath={.metadata.generation} {.status}")
			events, _ := c.run(t, "-n", "default", "get", "events", "--sort-by=.lastTimestamp")
			t.Fatalf("pod %s's endpoint never left\n%s\n%s\n%s", pod, state, status, events)
		}
	}
	// When each client dialled, to read a rollout that lost nothing
	// against the stop's own times in its report.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for pod, as := range got {
		if len(as) == 0 {
			continue
		}
		line := fmt.Sprintf("pod %s: its endpoint left at %s; its client dialled from %s to %s",
			pod, rc.left[pod].UTC().Format(time.StampMicro), as[0].Dialed.UTC().Format(time.StampMicro), as[len(as)-1].Dialed.UTC().Format(time.StampMicro))
		for _, a := range as {
			if a.Outcome != "ok" {
				line += fmt.Sprintf(", first %s at %s", a.Outcome, a.Dialed.UTC().Format(time.StampMicro))
				break
			}
		}
		t.Log(line)
	}
	return got
}

// rolloutReport is the part of kubectl sigscope rollout's JSON checked here.
type rolloutReport struct {
	Revision int64 `json:"revision"`
	From     *struct {
		Object string `json:"object"`
		Hash   string `json:"hash"`
	} `json:"from"`
	Pods []struct {
		Pod          string            `json:"pod"`
		CountedUntil *time.Time        `json:"counted_until"`
		Node         string            `json:"node"`
		StopReason   string            `json:"stop_reason"`
		Lost         *uint64           `json:"lost"`
		LostByKind   map[string]uint64 `json:"lost_by_kind"`
		// For the log: a stop's own times.
		Used              *float64 `json:"stop_duration_s"`
		EndpointLag       *float64 `json:"endpoint_lag_s"`
		LastNewConnection *float64 `json:"last_new_connection_after_stop_s"`
	} `json:"pods"`
	Totals struct {
		Lost uint64 `json:"lost"`
	} `json:"totals"`
	Verdict      string `json:"verdict"`
	PreStopSleep *int   `json:"prestop_sleep_s"`
	AtLeast      bool   `json:"prestop_sleep_at_least"`
	GracePeriod  *int   `json:"termination_grace_period_s"`
	Compared     *struct {
		Revision int64    `json:"revision"`
		Changes  []string `json:"changes"`
		Words    string   `json:"words"`
	} `json:"compared"`
	Asked struct {
		All   bool     `json:"all"`
		Nodes []string `json:"nodes"`
	} `json:"asked"`
	Partial    bool     `json:"partial"`
	PartialWhy []string `json:"partial_why"`
}

// On the real kubelet, a Deployment of 3 pods, a StatefulSet of 2 and a
// DaemonSet (one pod: one node) behind a Service, each pod's client
// following its endpoint 2.5 s late. A
// rollout restart loses requests: `kubectl sigscope rollout` lists the old
// revision's pods with what each pod's client counted refused, and a
// measured preStop sleep that covers the delay. The workload is patched
// with it (itself a rollout of pods without the sleep, which lose
// requests too); the rollout after that stops pods that sleep, loses
// nothing, and its report says which change helped and by how much.
func TestRolloutReportOnKubelet(t *testing.T) {
	c := requireCluster(t)
	dir := trafficServer(t)
	const agentNS = "sigscope-e2e-rollout"
	installAgent(t, c, agentNS)
	for _, tc := range []struct {
		kind, short string
		replicas    int
	}{{"Deployment", "deploy", 3}, {"StatefulSet", "sts", 2}, {"DaemonSet", "ds", 1}} {
		t.Run(tc.kind, func(t *testing.T) {
			name := fmt.Sprintf("sigscope-rollout-%s-%d", tc.short, time.Now().Unix()%100000)
			if _, err := c.runInput(t, rolloutManifest(c, tc.kind, name, dir, tc.replicas), "apply", "-f", "-"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = kubectlCleanup(c, "-n", "default", "delete", strings.ToLower(tc.kind)+",service", name, "--ignore-not-found", "--wait=false")
			})
			ref := tc.short + "/" + name
			waitRollout := func() {
				t.Helper()
				if _, err := c.run(t, "-n", "default", "rollout", "status", ref, "--timeout=180s"); err != nil {
					t.Fatal(err)
				}
			}
			waitRollout()
			// A rollout, each old pod's client counting.
			roll := func(args ...string) map[string][]testutil.HTTPAttempt {
				t.Helper()
				clients := startRolloutClients(t, c, name, tc.replicas)
				if _, err := c.run(t, append([]string{"-n", "default"}, args...)...); err != nil {
					t.Fatal(err)
				}
				waitRollout()
				st, _ := c.run(t, "-n", "default", "get", ref, "-o", "jsonpath={.metadata.generation} {.status}")
				t.Logf("%s: rolled out: generation and status %s", strings.Join(args, " "), st)
				got := clients.wait(t, c, name, ref)
				t.Logf("%s: the clients counted %v", strings.Join(args, " "), outcomesOf(got))
				return got
			}
			report := func(last int) []rolloutReport {
				t.Helper()
				// The agent reads the last stop's counts a moment after it.
				var l pluginList[rolloutReport]
				for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
					out, errOut, err := c.plugin(t, "--agent-namespace", agentNS, "-n", "default", "rollout", ref, "--last", fmt.Sprint(last), "-o", "json")
					if err != nil {
						t.Fatalf("kubectl sigscope rollout: %v\n%s", err, errOut)
					}
					l = decodeList[rolloutReport](t, out)
					if len(l.Items) == last && len(l.Items[last-1].Pods) == tc.replicas {
						break
					}
					if time.Now().After(deadline) {
						eps, _, _ := c.plugin(t, "--agent-namespace", agentNS, "-n", "default", "timeline", ref, "-o", "json")
						t.Fatalf("no report of the last %d rollouts with %d pods within a minute:\n%s\nstderr %s\nthe workload's episodes:\n%s", last, tc.replicas, out, errOut, eps)
					}
				}
				for _, r := range l.Items {
					raw, _ := json.Marshal(r)
					t.Logf("report: %s", raw)
				}
				return l.Items
			}
			// checkPods holds a report's pods to the clients' counts: the
			// same pods, each pod's refused attempts as its client
			// counted them until the kernel's count was read (give or take
			// those that span the read), and every request its client saw
			// broken then lost.
			checkPods := func(r rolloutReport, counted map[string][]testutil.HTTPAttempt) {
				t.Helper()
				if r.Partial || r.Asked.All || len(r.Asked.Nodes) != 1 || r.Asked.Nodes[0] != c.nodeName {
					t.Errorf("rollout %d: partial %v %q, asked %+v: want the one node, whole", r.Revision, r.Partial, r.PartialWhy, r.Asked)
				}
				for _, p := range r.Pods {
					as, ok := counted[p.Pod]
					if !ok {
						t.Errorf("rollout %d lists pod %s, which no client of the rollout's old pods dialled", r.Revision, p.Pod)
						continue
					}
					if p.Lost == nil || p.CountedUntil == nil {
						t.Errorf("rollout %d, pod %s: traffic not counted", r.Revision, p.Pod)
						continue
					}
					tl := testutil.TallyWindow(as, *p.CountedUntil, 2*time.Millisecond)
					refused := int(p.LostByKind["refused"])
					// A refusal whose RST the client never read (its dial
					// timed out first, or the pod's network went) is its
					// timeout.
					if refused > tl.Refused+tl.Other["timeout"] || refused+tl.AtUntil < tl.Refused || *p.Lost+uint64(tl.AtUntil) < uint64(tl.Refused+tl.Reset) {
						t.Errorf("rollout %d, pod %s: lost %d %v; its client, until the count's read at %s: %d refused, %d broken (%d at the read, %d after it)",
							r.Revision, p.Pod, *p.Lost, p.LostByKind, p.CountedUntil.Format(time.RFC3339Nano), tl.Refused, tl.Reset, tl.AtUntil, tl.After)
					}
					if p.StopReason != "deleted" {
						t.Errorf("rollout %d, pod %s: stop reason %q", r.Revision, p.Pod, p.StopReason)
					}
				}
			}

			// 1. A restart: each old pod closes its listener a second after
			// SIGTERM while its client still dials it for 2.5 s.
			first := roll("rollout", "restart", ref)
			reps := report(1)
			r1 := reps[0]
			checkPods(r1, first)
			if r1.Totals.Lost == 0 || !strings.HasPrefix(r1.Verdict, "clients lost") {
				eps, _, _ := c.plugin(t, "--agent-namespace", agentNS, "-n", "default", "timeline", ref)
				t.Fatalf("rollout %d: lost %d, %q; the clients counted %v\nthe workload's episodes:\n%s", r1.Revision, r1.Totals.Lost, r1.Verdict, outcomesOf(first), eps)
			}
			// The sleep is measured from the stop's beginning (the kubelet's
			// SIGTERM, which comes a moment after the endpoint left; from
			// the pod's deletion when the kubelet began later) to the last
			// refused attempt counted, about 2.5 s after the endpoint left:
			// 3 s, or 2 when the counts were read before the client moved
			// (then at least 2). The next rollout but one shows whether it
			// covers.
			if r1.PreStopSleep == nil || *r1.PreStopSleep < 2 || *r1.PreStopSleep > 7 {
				t.Fatalf("rollout %d advises a preStop sleep of %s s against a client %v behind its endpoint", r1.Revision, intOr(r1.PreStopSleep), rolloutFollowDelay)
			}
			if out, _, err := c.plugin(t, "--agent-namespace", agentNS, "-n", "default", "rollout", ref); err == nil {
				t.Logf("kubectl sigscope rollout %s:\n%s", ref, out)
			}
			sleep := *r1.PreStopSleep
			grace := sleep + 2
			if r1.GracePeriod != nil && *r1.GracePeriod > grace {
				grace = *r1.GracePeriod
			}

			// 2. The advised sleep into the template: a rollout of pods
			// without it.
			patch := fmt.Sprintf(`{"spec": {"template": {"spec": {"terminationGracePeriodSeconds": %d, "containers": [{"name": "app", "lifecycle": {"preStop": {"sleep": {"seconds": %d}}}}]}}}}`, grace, sleep)
			second := roll("patch", ref, "--type=strategic", "-p", patch)

			// 3. A restart of pods that sleep: nothing lost, and the
			// report credits the sleep.
			third := roll("rollout", "restart", ref)
			reps = report(2)
			r2, r3 := reps[0], reps[1]
			checkPods(r2, second)
			checkPods(r3, third)
			if r2.Totals.Lost == 0 {
				t.Errorf("rollout %d stopped pods without the sleep, yet lost nothing; the clients counted %v", r2.Revision, outcomesOf(second))
			}
			if r3.Totals.Lost != 0 || r3.Verdict != "no client was hurt" {
				t.Errorf("rollout %d stopped pods that slept %d s: lost %d, %q; the clients counted %v", r3.Revision, sleep, r3.Totals.Lost, r3.Verdict, outcomesOf(third))
			}
			want := fmt.Sprintf("preStop of app: none → sleep %d s", sleep)
			if r3.Compared == nil || r3.Compared.Revision != r2.Revision || !strings.Contains(strings.Join(r3.Compared.Changes, "; "), want) ||
				!strings.Contains(r3.Compared.Words, fmt.Sprintf("lost requests %d → 0", r2.Totals.Lost)) || !strings.HasSuffix(r3.Compared.Words, "it helped") {
				t.Errorf("rollout %d against %d: %+v; want %q and the lost requests %d → 0, helped", r3.Revision, r2.Revision, r3.Compared, want, r2.Totals.Lost)
			}
			// The table a user reads.
			out, _, err := c.plugin(t, "--agent-namespace", agentNS, "-n", "default", "rollout", ref)
			if err != nil || !strings.Contains(out, "verdict: no client was hurt") || !strings.Contains(out, "it helped") {
				t.Errorf("the table: %v\n%s", err, out)
			}
			t.Logf("kubectl sigscope rollout %s:\n%s", ref, out)
		})
	}
}

func intOr(v *int) string {
	if v == nil {
		return "no"
	}
	return fmt.Sprint(*v)
}

// outcomesOf is each pod's client's outcomes, counted.
func outcomesOf(attempts map[string][]testutil.HTTPAttempt) map[string]map[string]int {
	out := map[string]map[string]int{}
	for pod, as := range attempts {
		out[pod] = testutil.Outcomes(as)
	}
	return out
}
