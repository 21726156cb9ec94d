package kube

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// trafficServer builds test/e2e/testdata/traffic/server.go static into a
// directory the pods mount (hostPath): no registry, no image to build.
func trafficServer(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sigscope-kube-traffic-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "server"), filepath.Join("..", "testdata", "traffic", "server.go"))
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build server.go: %v\n%s", err, out)
	}
	return dir
}

// trafficManifest is a Service and a one-replica Deployment behind it on the
// CNI bridge (not the host's network), the server in mode, ready when it
// answers, with an optional preStop hook.
func trafficManifest(c *cluster, name, dir, mode, preStop string) string {
	lifecycle := ""
	if preStop != "" {
		lifecycle = fmt.Sprintf(`, "lifecycle": {"preStop": %s}`, preStop)
	}
	return fmt.Sprintf(`{"apiVersion": "v1", "kind": "List", "items": [
{"apiVersion": "v1", "kind": "Service", "metadata": {"name": %[1]q, "namespace": "default"},
 "spec": {"selector": {"app": %[1]q}, "ports": [{"port": 8080, "targetPort": 8080}]}},
{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": %[1]q, "namespace": "default"},
 "spec": {"replicas": 1, "selector": {"matchLabels": {"app": %[1]q}},
  "template": {"metadata": {"labels": {"app": %[1]q, "app.kubernetes.io/name": "sigscope-e2e-kube"}},
   "spec": {"nodeName": %[2]q, "terminationGracePeriodSeconds": 5,
    "volumes": [{"name": "srv", "hostPath": {"path": %[3]q}}],
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": ["/srv/server", %[4]q], "volumeMounts": [{"name": "srv", "mountPath": "/srv"}],
      "readinessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 1, "failureThreshold": 1}%[5]s}]}}}}
]}`, name, c.nodeName, dir, mode, lifecycle)
}

// deployTraffic applies trafficManifest (removed at the test's end), waits
// until the Deployment is available, and returns its pod and the pod's IP.
func deployTraffic(t *testing.T, c *cluster, name, dir, mode, preStop string) (pod, ip string) {
	t.Helper()
	if _, err := c.runInput(t, trafficManifest(c, name, dir, mode, preStop), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kubectlCleanup(c, "-n", "default", "delete", "deployment,service", name, "--ignore-not-found", "--wait=false")
	})
	if _, err := c.run(t, "-n", "default", "wait", "--for=condition=Available", "deployment/"+name, "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	out, err := c.run(t, "-n", "default", "get", "pods", "-l", "app="+name, "-o", `jsonpath={.items[0].metadata.name} {.items[0].status.podIP}`)
	f := strings.Fields(out)
	if err != nil || len(f) != 2 {
		t.Fatalf("pod and IP: %q, %v", out, err)
	}
	return f[0], f[1]
}

// sliceWatch is an independent watch of the Service's EndpointSlices
// (the API's watch through kubectl get --raw): when it saw the pod's
// endpoint leave, ready and not terminating before, not ready, terminating
// or removed after. A state the watch found at its start is no change, and
// an endpoint that came back (a readiness probe that failed once under the
// client's load, then passed) forgets its change: the agent's own rule
// (kubemeta's Endpoints), which an endpoint not yet ready when the watch
// began, or a flap before the deletion, would otherwise break.
type sliceWatch struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	first   time.Time
	serving bool // the pod's endpoint was seen serving: a change of it will be seen
}

func watchSlices(t *testing.T, c *cluster, service, pod string) *sliceWatch {
	t.Helper()
	return watchSlicesAt(t, c, service, pod, "")
}

// watchSlicesAt is watchSlices for the pod of that name at address ip
// ("": any): a StatefulSet's pod made again has the old one's name and
// another address, and its endpoint, ready, is not the old one's back.
func watchSlicesAt(t *testing.T, c *cluster, service, pod, ip string) *sliceWatch {
	t.Helper()
	w := &sliceWatch{}
	// The API's own watch, one JSON event a line, as any client sees it.
	w.cmd = exec.Command(c.kubectl, "get", "--raw",
		"/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?watch=1&labelSelector=kubernetes.io/service-name="+service)
	w.cmd.Env = c.env
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cmd.Process.Kill(); w.cmd.Wait() })
	go func() {
		// The pod's endpoint changes when it is not ready, terminating, or
		// gone from a slice that listed it.
		type event struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Endpoints []struct {
					Addresses []string `json:"addresses"`
					TargetRef struct {
						Name string `json:"name"`
					} `json:"targetRef"`
					Conditions struct {
						Ready       *bool `json:"ready"`
						Terminating *bool `json:"terminating"`
					} `json:"conditions"`
				} `json:"endpoints"`
			} `json:"object"`
		}
		listed := map[string]bool{}
		serving := map[string]bool{} // by slice: the pod's endpoint ready and not terminating there
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			seen := time.Now()
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			slice := ev.Object.Metadata.Name
			here, ok := false, false
			for _, e := range ev.Object.Endpoints {
				if e.TargetRef.Name != pod || ip != "" && !slices.Contains(e.Addresses, ip) {
					continue
				}
				here = ev.Type != "DELETED"
				cond := e.Conditions
				ok = here && !(cond.Ready != nil && !*cond.Ready || cond.Terminating != nil && *cond.Terminating)
			}
			was := listed[slice] && serving[slice]
			listed[slice], serving[slice] = here, ok
			w.mu.Lock()
			w.serving = w.serving || ok
			switch {
			case was && !ok && w.first.IsZero():
				w.first = seen
			case !was && ok:
				w.first = time.Time{} // back: its change is forgotten
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// sawServing reports whether the watch has seen the pod's endpoint
// serving: a change made before it had would be taken for its start.
func (w *sliceWatch) sawServing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.serving
}

func (w *sliceWatch) firstChange() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

type trafficEpisode struct {
	Outcome string `json:"outcome"`
	StopAt  string `json:"stop_at"`
	Traffic *struct {
		Since    string `json:"since"`
		Accepted *struct {
			N int `json:"n"`
		} `json:"accepted"`
		Refused        *struct{ N int } `json:"refused"`
		Cut            *struct{ N int } `json:"cut"`
		ResetSent      *struct{ N int } `json:"reset_sent"`
		ListenerClosed *struct {
			N     int    `json:"n"`
			First string `json:"first"`
		} `json:"listener_closed"`
		Verdict     string            `json:"verdict"`
		Hint        string            `json:"hint"`
		Unread      string            `json:"unread"`
		Until       string            `json:"until"`
		Probes      map[string]uint64 `json:"probes"`
		LastRequest *struct {
			At               string   `json:"at"`
			Kind             string   `json:"kind"`
			AfterBeginS      float64  `json:"after_begin_s"`
			AfterEndpointS   *float64 `json:"after_endpoint_left_s"`
			CoveringPreStopS int      `json:"covering_prestop_sleep_s"`
		} `json:"last_request"`
	} `json:"traffic"`
	Endpoints []struct {
		Service       string   `json:"service"`
		NotReadyAt    string   `json:"not_ready_at"`
		TerminatingAt string   `json:"terminating_at"`
		AfterDeletion *float64 `json:"after_deletion_s"`
	} `json:"endpoints"`
	EndpointRace string `json:"endpoint_race"`
}

// A Deployment's pod behind a Service, with a client dialling its IP across
// the CNI bridge while the pod is deleted, which follows the EndpointSlice
// as a load balancer does: it stops a known delay (followDelay) after an
// independent watch saw the endpoint leave. The episode's endpoint times
// agree with that watch within 0.5 s; its last request agrees with the
// client's own log of its last request, which came about followDelay after
// the endpoint left, and the preStop sleep it suggests covers it; the race
// is won only when nothing came after the listener closed (a preStop sleep
// longer than the client's delay), and lost when the client was refused.
func TestPodDeletionTraffic(t *testing.T) {
	const followDelay = 300 * time.Millisecond
	c := requireCluster(t)
	dir := trafficServer(t)
	for _, tc := range []struct {
		name, preStop string
		won           bool // the endpoint surely left first
	}{
		{name: "prestop", preStop: `{"exec": {"command": ["sleep", "2"]}}`, won: true},
		// The kubelet's own sleep: nothing in the container marks the
		// hook's start; the API server's report of the deletion does.
		{name: "sleep", preStop: `{"sleep": {"seconds": 2}}`, won: true},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("sigscope-traffic-%s-%d", tc.name, time.Now().Unix()%100000)
			pod, ip := deployTraffic(t, c, name, dir, "exit", tc.preStop)
			w := watchSlices(t, c, name, pod)
			l := startTimeline(t, c)
			// The signal programs and the three that count connections.
			testutil.WaitPrograms(t, l.Cmd.Process.Pid, 8)
			// The client dials the pod's IP across the CNI bridge, until
			// followDelay after the endpoint left.
			cl, err := testutil.StartHTTPLoad(net.JoinHostPort(ip, "8080"), 1, 500*time.Millisecond, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cl.Stop() })
			cl.WaitAnswered(t)
			followed := make(chan []testutil.HTTPAttempt, 1)
			go func() {
				for w.firstChange().IsZero() {
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(followDelay)
				followed <- cl.Stop()
			}()
			time.Sleep(time.Second) // a second of load before the deletion
			deleted := time.Now()
			if _, err := c.run(t, "-n", "default", "delete", "pod", pod, "--wait=true", "--timeout=60s"); err != nil {
				t.Fatal(err)
			}
			var attempts []testutil.HTTPAttempt
			select {
			case attempts = <-followed:
			case <-time.After(30 * time.Second):
				t.Fatal("the independent watch never saw the endpoint leave")
			}
			outcomes := testutil.Outcomes(attempts)
			eps := podEpisodes(l.stop(t, pod, 1), pod)
			if len(eps) != 1 {
				t.Fatalf("%d episodes of %s, want 1", len(eps), pod)
			}
			var ep trafficEpisode
			if err := json.Unmarshal([]byte(eps[0].raw), &ep); err != nil {
				t.Fatal(err)
			}
			t.Logf("client %v; episode %s", outcomes, eps[0].raw)
			if ep.Traffic == nil || ep.Traffic.Unread != "" {
				t.Fatalf("no traffic counts")
			}
			// The kernel counts every refused attempt at the pod: the
			// client's as the client's, and the kubelet's readiness probes
			// (one a second, from the node's address as the client's)
			// apart, told by the process that made them.
			if ep.Traffic.Probes == nil {
				t.Errorf("the kubelet's probes were not told apart: %+v", ep.Traffic)
			}
			// The readiness probe runs every second through a preStop
			// hook's two: some of its connections were counted, apart.
			if tc.preStop != "" && ep.Traffic.Probes["accepted"] == 0 {
				t.Errorf("no readiness probe counted during the preStop hook: probes %v", ep.Traffic.Probes)
			}
			if r := ep.Traffic.Refused; r != nil && r.N != outcomes["refused"] {
				t.Errorf("refused %d; the client saw %d (and the probes %d, apart)", r.N, outcomes["refused"], ep.Traffic.Probes["refused"])
			}
			since, _ := time.Parse(time.RFC3339Nano, ep.Traffic.Since)
			stopAt, _ := time.Parse(time.RFC3339Nano, ep.StopAt)
			// The client's own log: when it last sent, of what came before
			// the counts were read.
			until, _ := time.Parse(time.RFC3339Nano, ep.Traffic.Until)
			lo, hi, sent := testutil.LastArrivalBounds(attempts, until)
			if tc.preStop != "" {
				// The count began at the hook's start, two seconds
				// before SIGTERM, and took the connections served then
				// (none when the client had moved before the hook began:
				// an exec hook starts when the kubelet execs it). A
				// request sent before the count began may end after it
				// (an answer late, a SYN sent again): only one sent after
				// it surely came while the kernel counted.
				if d := stopAt.Sub(since); d < time.Second || ep.Traffic.Accepted == nil || lo.After(since) && ep.Traffic.Accepted.N == 0 {
					t.Errorf("count began %v before SIGTERM with %+v accepted, the client's last request sent at %v: want from the preStop hook's start", d, ep.Traffic.Accepted, lo)
				}
			} else if !since.Equal(stopAt) && since.After(stopAt.Add(time.Millisecond)) {
				t.Errorf("count began at %v, after SIGTERM at %v", since, stopAt)
			}
			if len(ep.Endpoints) != 1 || ep.Endpoints[0].Service != "default/"+name {
				t.Fatalf("endpoints %+v, want the Service's", ep.Endpoints)
			}
			e := ep.Endpoints[0]
			var first time.Time
			for _, s := range []string{e.NotReadyAt, e.TerminatingAt} {
				if at, err := time.Parse(time.RFC3339Nano, s); err == nil && (first.IsZero() || at.Before(first)) {
					first = at
				}
			}
			indep := w.firstChange()
			if first.IsZero() || indep.IsZero() {
				t.Fatalf("endpoint change: sigscope %v, the independent watch %v", first, indep)
			}
			if d := first.Sub(indep); d < -500*time.Millisecond || d > 500*time.Millisecond {
				t.Errorf("endpoint left at %v by sigscope, %v by the independent watch: %v apart", first, indep, d)
			}
			t.Logf("endpoint left %v after the deletion (independent watch %v); %s", first.Sub(deleted), indep.Sub(deleted), ep.EndpointRace)
			lc := ep.Traffic.ListenerClosed
			if lc == nil || lc.N == 0 {
				t.Fatalf("the listener never closed: %+v", lc)
			}
			closed, _ := time.Parse(time.RFC3339Nano, lc.First)
			if !sent {
				t.Fatal("the client sent nothing while the kernel counted")
			}
			// The race, against the last sender: the client's own log says
			// whether it sent after the listener closed.
			switch {
			case outcomes["refused"] > 0:
				if !strings.HasPrefix(ep.EndpointRace, "race lost") {
					t.Errorf("race %q; the client was refused %d times after the listener closed at %v", ep.EndpointRace, outcomes["refused"], closed)
				}
			case hi.Before(closed):
				if !strings.HasPrefix(ep.EndpointRace, "race won") {
					t.Errorf("race %q; the client's last request ended at %v, before the listener closed at %v", ep.EndpointRace, hi, closed)
				}
			}
			if tc.won && outcomes["refused"] > 0 {
				t.Errorf("a preStop sleep of 2 s against a client %v behind: %d refused", followDelay, outcomes["refused"])
			}
			// The last request, against the client's log (at a tick's
			// resolution, 10 ms at the coarsest), about followDelay after
			// the endpoint left (the agent's view of it within 0.5 s of
			// the independent watch's), and the sleep that covers it.
			lr := ep.Traffic.LastRequest
			if hi.Before(since) {
				// The client moved before the count began (an exec
				// hook's start): nothing to measure, and nothing made up.
				if lr != nil {
					t.Errorf("a last request at %s, though the client's last ended at %v, before the count began at %v", lr.At, hi, since)
				}
				t.Logf("the client's last request ended at %v, %v before the count began (the preStop hook's start, or the stop signal)", hi, since.Sub(hi))
				return
			}
			if lr == nil {
				if lo.After(since) {
					t.Fatalf("no last request; the client's last was sent at %v, after the count began at %v", lo, since)
				}
				// Sent before the count began, ended after it: its
				// request may have come before (an answer that came
				// late): nothing to measure.
				t.Logf("no last request: the client's last was sent at %v, before the count began at %v, and ended at %v", lo, since, hi)
				return
			}
			at, err := time.Parse(time.RFC3339Nano, lr.At)
			const tick = 10 * time.Millisecond
			if err != nil || at.Before(lo.Add(-tick)) || at.After(hi.Add(tick)) {
				t.Errorf("last request at %s (%v); the client's last between %v and %v", lr.At, err, lo, hi)
			}
			if lr.AfterEndpointS == nil || *lr.AfterEndpointS < (followDelay-700*time.Millisecond).Seconds() || *lr.AfterEndpointS > (followDelay+700*time.Millisecond).Seconds() {
				t.Errorf("last request %v s after the endpoint left; the client followed it %v later", lr.AfterEndpointS, followDelay)
			}
			if float64(lr.CoveringPreStopS) < lr.AfterBeginS || lr.CoveringPreStopS < 1 {
				t.Errorf("a preStop sleep of %d s does not cover the last request, %.3f s after the stop began", lr.CoveringPreStopS, lr.AfterBeginS)
			}
			t.Logf("last request %s (%s), %.3f s after the stop began, %v s after the endpoint left; covering preStop sleep %d s; the client's last %v..%v",
				lr.At, lr.Kind, lr.AfterBeginS, *lr.AfterEndpointS, lr.CoveringPreStopS, lo, hi)
		})
	}
}
