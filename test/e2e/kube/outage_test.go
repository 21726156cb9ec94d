package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// relay stops or starts the cluster's apiserver-relay (test/cluster/relay.sh),
// the agent's only way to the API server: the DaemonSet's pod is on the
// bridge, kubectl and the kubelet use 127.0.0.1.
func relay(ctx context.Context, action string) error {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "..", "test", "cluster", "relay.sh"), action)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("relay.sh %s: %v\n%s", action, err, out)
	}
	return nil
}

// The API server unreachable from the agent (--kube-events) while a pod's
// PID 1 drops its SIGTERM: the agent records the episode, keeps its Events
// queued (sigscope_kube_events_queued) and retries; once the API server is
// reachable again the StopSignalIgnored Event arrives on the pod and
// sigscope_kube_events_total{result="sent"} rises, with nothing dropped.
func TestAgentAPIServerOutage(t *testing.T) {
	c := requireCluster(t)
	installAgent(t, c, agentNS)
	agent, err := c.run(t, "-n", agentNS, "get", "pods", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil || agent == "" {
		t.Fatalf("agent pod: %q %v", agent, err)
	}
	name := fmt.Sprintf("sigscope-outage-%d-%d", os.Getpid(), time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 2, "", "sh", "-c", "sleep 1000 & wait"))

	value := func(text, series string) float64 {
		v, ok := metricValue(text, series)
		if !ok {
			t.Fatalf("no %s in the agent's /metrics", series)
		}
		return v
	}
	const (
		sent    = `sigscope_kube_events_total{result="sent"}`
		dropped = `sigscope_kube_events_total{result="dropped"}`
		failed  = `sigscope_kube_events_total{result="failed"}`
		queued  = "sigscope_kube_events_queued"
		retries = "sigscope_kube_events_retries_total"
	)
	m := readMetrics(t, c, agent)
	sent0, dropped0, failed0, retries0 := value(m, sent), value(m, dropped), value(m, failed), value(m, retries)
	if q := value(m, queued); q != 0 {
		t.Fatalf("%s %v before the outage, want 0", queued, q)
	}

	// Whatever happens below, the relay runs again afterwards.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := relay(ctx, "start"); err != nil {
			t.Errorf("restoring the relay: %v", err)
		}
	})
	if err := relay(t.Context(), "stop"); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	took := deletePod(t, c, name)
	t.Logf("outage: kubectl delete %s (grace period 2 s) returned after %v", name, took.Round(time.Millisecond))

	// The episode is in the agent (the API server reaches the pod directly
	// through its pod proxy), and its Events wait.
	var q, r float64
	var outcome string
	deadline := time.Now().Add(testutil.Bound)
	for {
		out, err := c.run(t, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:10042/proxy/api/v1/episodes?namespace=default&pod=%s", agentNS, agent, name))
		if err != nil {
			t.Fatal(err)
		}
		var eps []episode
		if err := json.Unmarshal([]byte(out), &eps); err != nil {
			t.Fatalf("episodes: %v\n%s", err, out)
		}
		if len(eps) > 0 {
			outcome = eps[len(eps)-1].Outcome
		}
		m = readMetrics(t, c, agent)
		q, r = value(m, queued), value(m, retries)
		// Three failed tries: the sender has backed off 1 s, 2 s and 4 s.
		if outcome != "" && q >= 1 && r >= retries0+3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the delete: episode outcome %q, %s %v, %s %v -> %v; want an episode, 1+ queued and 3 retries",
				testutil.Bound, outcome, queued, q, retries, retries0, r)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if outcome != "ignored_by_init" {
		t.Errorf("episode of %s: outcome %q, want ignored_by_init", name, outcome)
	}
	podEvents := func() map[string]string {
		out, err := c.run(t, "get", "events", "-n", "default", "--field-selector", "involvedObject.name="+name, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Items []struct {
				Reason  string `json:"reason"`
				Message string `json:"message"`
				Source  struct {
					Component string `json:"component"`
				} `json:"source"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range list.Items {
			if e.Source.Component == "sigscope" {
				got[e.Reason] = e.Message
			}
		}
		return got
	}
	if evs := podEvents(); len(evs) != 0 {
		t.Fatalf("sigscope Events on %s while the agent cannot reach the API server: %v (is the relay its only way?)", name, evs)
	}
	t.Logf("outage: episode %s in the agent %v after the relay stopped; %s %v, %s %v -> %v",
		outcome, time.Since(down).Round(100*time.Millisecond), queued, q, retries, retries0, r)

	if err := relay(t.Context(), "start"); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	// The sender waits at most RetryMax (30 s) and a fifth more between tries.
	deadline = up.Add(90 * time.Second)
	var evs map[string]string
	for {
		evs = podEvents()
		m = readMetrics(t, c, agent)
		if len(evs) == 2 && value(m, queued) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("90 s after the relay came back: sigscope Events %v, %s %v; want StopSignalIgnored and ContainerKilledAfterGracePeriod, nothing queued",
				evs, queued, value(m, queued))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("outage: relay down %v; Events in the API server %v after it came back",
		up.Sub(down).Round(100*time.Millisecond), time.Since(up).Round(100*time.Millisecond))
	if msg := evs["StopSignalIgnored"]; !strings.Contains(msg, "app") {
		t.Errorf("StopSignalIgnored Event message %q does not name the container app", msg)
	}
	if _, ok := evs["ContainerKilledAfterGracePeriod"]; !ok {
		t.Errorf("no ContainerKilledAfterGracePeriod Event: %v", evs)
	}
	sent1, dropped1, failed1, retries1 := value(m, sent), value(m, dropped), value(m, failed), value(m, retries)
	t.Logf("outage: %s %v -> %v, %s %v -> %v, %s %v -> %v, %s %v -> %v",
		sent, sent0, sent1, dropped, dropped0, dropped1, failed, failed0, failed1, retries, retries0, retries1)
	if sent1 < sent0+2 {
		t.Errorf("%s %v -> %v, want 2 more", sent, sent0, sent1)
	}
	if dropped1 != dropped0 || failed1 != failed0 {
		t.Errorf("%s %v -> %v, %s %v -> %v: the queued Events were lost", dropped, dropped0, dropped1, failed, failed0, failed1)
	}
	// The agent says when the outage began and ended (its last line may
	// reach the log a moment after the metrics).
	var lines []string
	for deadline := time.Now().Add(testutil.Bound); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		logs, err := c.run(t, "-n", agentNS, "logs", "pod/"+agent)
		if err != nil {
			t.Fatal(err)
		}
		lines = lines[:0]
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "kube events:") {
				lines = append(lines, line)
			}
		}
		if strings.Contains(logs, "the API server answers again") {
			break
		}
	}
	for _, line := range lines {
		t.Logf("agent: %s", line)
	}
	if len(lines) < 2 {
		t.Errorf("the agent logged %d kube events lines, want the outage's start and end", len(lines))
	}
}
