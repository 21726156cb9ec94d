package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The agent's own namespace and release name (fullnameOverride), so that the
// cluster-scoped RBAC objects do not collide with a real installation.
const agentNS = "sigscope-e2e"

// readMetrics reads the agent pod's /metrics through the API server's pod
// proxy, the way kubectl sigscope reaches the agents.
func readMetrics(t *testing.T, c *cluster, pod string) string {
	t.Helper()
	out, err := c.run(t, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:10042/proxy/metrics", agentNS, pod))
	if err != nil {
		t.Fatalf("metrics through the pod proxy: %v", err)
	}
	return out
}

// metricValue sums the samples of series: a metric name (every label set)
// or name{labels} exactly as exposed.
func metricValue(text, series string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if name != series && !(strings.HasPrefix(name, series+"{") && !strings.Contains(series, "{")) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// The node agent installed from the chart on the local cluster: it becomes
// Ready, serves /metrics through the API server, counts a pod whose PID 1
// dropped SIGTERM, and posts the StopSignalIgnored Warning on that pod.
func TestAgentDaemonSet(t *testing.T) {
	c := requireCluster(t)
	requireAgentImage(t, c)

	start := time.Now()
	installAgent(t, c, agentNS)
	dumpAgent := func() string {
		var b strings.Builder
		describe, err := c.run(t, "-n", agentNS, "describe", "daemonset,pods")
		fmt.Fprintf(&b, "kubectl describe (%v):\n%s\n", err, describe)
		logs, err := c.run(t, "-n", agentNS, "logs", "daemonset/"+agentNS, "--all-containers", "--tail=100")
		fmt.Fprintf(&b, "agent logs (%v):\n%s", err, logs)
		return b.String()
	}
	pod, err := c.run(t, "-n", agentNS, "get", "pods", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil || pod == "" {
		t.Fatalf("agent pod: %q %v\n%s", pod, err, dumpAgent())
	}
	if _, err := c.run(t, "-n", agentNS, "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=50s"); err != nil {
		t.Fatalf("agent pod not Ready: %v\n%s", err, dumpAgent())
	}
	t.Logf("agent pod %s Ready %v after apply", pod, time.Since(start).Round(100*time.Millisecond))

	// The capabilities the chart gives the container are what it runs with.
	caps, err := c.run(t, "-n", agentNS, "get", "pod", pod, "-o", "jsonpath={.spec.containers[0].securityContext.capabilities.add}")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent capabilities added: %s", caps)

	before := readMetrics(t, c, pod)
	if !strings.Contains(before, "sigscope_build_info{") {
		t.Fatalf("no sigscope_build_info in /metrics:\n%s", before)
	}
	cascade0, _ := metricValue(before, "sigscope_pidns_cascade_kills_total")
	ignored0, _ := metricValue(before, `sigscope_container_stops_total{outcome="ignored_by_init"}`)
	killed0, _ := metricValue(before, `sigscope_container_stops_total{outcome="killed"}`)

	// PID 1 a shell with no SIGTERM handler: the kubelet's SIGTERM is
	// dropped, the SIGKILL after 2 s takes the pid namespace down.
	name := fmt.Sprintf("sigscope-agent-%d-%d", os.Getpid(), time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 2, "", "sh", "-c", "sleep 1000 & wait"))
	deleted := time.Now()
	took := deletePod(t, c, name)
	t.Logf("kubectl delete %s returned after %v", name, took.Round(time.Millisecond))

	// (b) the agent's Warning on the pod, within 30 s of the deletion.
	var event map[string]any
	deadline := deleted.Add(30 * time.Second)
	for event == nil {
		out, err := c.run(t, "get", "events", "-n", "default", "--field-selector", "involvedObject.name="+name, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Items []map[string]any `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		for _, ev := range list.Items {
			if ev["reason"] == "StopSignalIgnored" {
				event = ev
			}
		}
		if event != nil {
			break
		}
		if time.Now().After(deadline) {
			all, _ := c.run(t, "get", "events", "-n", "default", "--field-selector", "involvedObject.name="+name)
			t.Fatalf("no StopSignalIgnored Event on pod %s within 30 s of its deletion; its events:\n%s", name, all)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("StopSignalIgnored Event %v after the delete began: type %v, source %v, message %q",
		time.Since(deleted).Round(100*time.Millisecond), event["type"], event["source"], event["message"])
	if event["type"] != "Warning" {
		t.Errorf("StopSignalIgnored Event of type %v, want Warning", event["type"])
	}
	if msg, _ := event["message"].(string); !strings.Contains(msg, "app") {
		t.Errorf("Event message %q does not name the container app", msg)
	}

	// (a) the counters moved.
	after := readMetrics(t, c, pod)
	cascade1, _ := metricValue(after, "sigscope_pidns_cascade_kills_total")
	ignored1, ok := metricValue(after, `sigscope_container_stops_total{outcome="ignored_by_init"}`)
	t.Logf("sigscope_pidns_cascade_kills_total %v -> %v, container_stops_total{ignored_by_init} %v -> %v", cascade0, cascade1, ignored0, ignored1)
	if !ok {
		t.Errorf("no container_stops_total{outcome=\"ignored_by_init\"} series")
	}
	if ignored1 <= ignored0 {
		t.Errorf("container_stops_total{outcome=\"ignored_by_init\"} did not move: %v -> %v", ignored0, ignored1)
	}
	if cascade1 <= cascade0 {
		t.Errorf("pidns_cascade_kills_total did not move: %v -> %v (the sleep child dies with PID 1)", cascade0, cascade1)
	}
	// The runtime SIGKILLs the pod's sandbox (pause) at the end of every
	// pod deletion: that is no container stop.
	if killed1, _ := metricValue(after, `sigscope_container_stops_total{outcome="killed"}`); killed1 != killed0 {
		t.Errorf("container_stops_total{outcome=\"killed\"} moved %v -> %v: the sandbox's SIGKILL was counted", killed0, killed1)
	}
}

// requireAgentImage checks that the image the DaemonSet runs
// was imported into the cluster (`make cluster-images`).
func requireAgentImage(t *testing.T, c *cluster) {
	t.Helper()
	out, err := c.run(t, "get", "node", c.nodeName, "-o", "jsonpath={.status.images[*].names}")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "sigscope.local/sigscope:dev") {
		t.Fatalf("image sigscope.local/sigscope:dev is not on node %s: run `make cluster-images`", c.nodeName)
	}
}

// kubectlCleanup runs kubectl from a t.Cleanup, where t.Context() (which
// c.run uses) is already canceled.
func kubectlCleanup(c *cluster, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, args...)
	cmd.Env = c.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
