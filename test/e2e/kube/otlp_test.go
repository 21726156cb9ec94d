package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// otelcolManifest is an OpenTelemetry Collector Deployment (the image of
// test/otelcol): the OTLP receiver on the pod's network, the file exporter
// into a host directory the test reads, and the debug exporter.
const otelcolManifest = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: otelcol, namespace: %[1]s}
data:
  config.yaml: |
    receivers:
      otlp:
        protocols:
          grpc: {endpoint: "0.0.0.0:4317"}
          http: {endpoint: "0.0.0.0:4318"}
    exporters:
      file: {path: /out/logs.jsonl, flush_interval: 100ms}
      debug: {verbosity: detailed}
    service:
      telemetry: {metrics: {level: none}}
      pipelines:
        logs: {receivers: [otlp], exporters: [file, debug]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: otelcol, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: otelcol}}
  template:
    metadata: {labels: {app: otelcol}}
    spec:
      containers:
        - name: otelcol
          image: sigscope.local/otelcol:dev
          imagePullPolicy: Never
          args: [--config=/etc/otelcol/config.yaml]
          ports: [{containerPort: 4317}, {containerPort: 4318}]
          volumeMounts:
            - {name: config, mountPath: /etc/otelcol}
            - {name: out, mountPath: /out}
      volumes:
        - {name: config, configMap: {name: otelcol}}
        - {name: out, hostPath: {path: %[2]s, type: Directory}}
`

// The agent installed from the chart with otlp.endpoint pointing at an
// OpenTelemetry Collector Deployment on the node: a pod whose PID 1 is a
// shell is deleted, and its record arrives with the pod's attributes.
func TestAgentOTLPToCollectorDeployment(t *testing.T) {
	c := requireCluster(t)
	testutil.RequirePrivileged(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "..", "test", "cluster", "images.sh"), "--otelcol").CombinedOutput(); err != nil {
		t.Fatalf("test/cluster/images.sh --otelcol: %v\n%s", err, out)
	}
	t.Logf("collector image built and imported in %v", time.Since(start).Round(100*time.Millisecond))

	const ns = "sigscope-e2e-otelcol"
	dir, err := os.MkdirTemp("", "sigscope-e2e-otelcol-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil { // the collector runs as nobody
		t.Fatal(err)
	}
	if _, err := c.runInput(t, fmt.Sprintf(otelcolManifest, ns, dir), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kubectlCleanup(c, "delete", "namespace", ns, "--wait=true", "--timeout=60s"); err != nil {
			t.Error(err)
		}
	})
	if _, err := c.run(t, "-n", ns, "rollout", "status", "deployment/otelcol", "--timeout=90s"); err != nil {
		logs, _ := c.run(t, "-n", ns, "logs", "deployment/otelcol", "--tail=30")
		t.Fatalf("the collector Deployment: %v\n%s", err, logs)
	}
	ip, err := c.run(t, "-n", ns, "get", "pod", "-l", "app=otelcol", "-o", "jsonpath={.items[0].status.podIP}")
	if err != nil || ip == "" {
		t.Fatalf("the collector's pod IP: %q %v", ip, err)
	}
	endpoint := fmt.Sprintf("http://%s:4318", strings.TrimSpace(ip))
	installAgent(t, c, "sigscope-e2e-otlp", "otlp.endpoint="+endpoint)

	const pod = "otlp-shell"
	runPod(t, c, pod, podSpec(c, pod, 2, "", "sh", "-c", "sleep 1000 & wait"))
	deletePod(t, c, pod)

	var rec testutil.OTLPRecord
	deadline := time.Now().Add(60 * time.Second)
	for found := false; !found; {
		for _, r := range testutil.ReadOTLPFile(t, filepath.Join(dir, "logs.jsonl")) {
			if r.Attrs["k8s.pod.name"] == pod {
				rec, found = r, true
			}
		}
		if !found && time.Now().After(deadline) {
			logs, _ := c.run(t, "-n", ns, "logs", "deployment/otelcol", "--tail=50")
			t.Fatalf("no record of pod %s at the collector %s\n%s", pod, endpoint, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	want := map[string]any{
		"k8s.node.name":           c.nodeName,
		"k8s.namespace.name":      "default",
		"k8s.pod.name":            pod,
		"k8s.container.name":      "app",
		"container.name":          "app",
		"container.runtime.name":  c.runtimeName(),
		"container.image.name":    "sigscope.local/busybox",
		"sigscope.outcome":        "ignored_by_init",
		"sigscope.stop_signal":    "SIGTERM",
		"sigscope.stop_reason":    "deleted",
		"sigscope.grace_period_s": 2.0,
		"process.exit.code":       int64(137),
	}
	for k, w := range want {
		if g := rec.Attrs[k]; fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
	if rec.SeverityText != "WARN" || rec.EventName != "sigscope.container.stop" || rec.Resource["k8s.node.name"] != c.nodeName ||
		rec.Resource["service.name"] != "sigscope" || rec.Attrs["container.id"] == nil {
		t.Errorf("record %+v", rec)
	}
	if testing.Verbose() {
		logs, _ := c.run(t, "-n", ns, "logs", "deployment/otelcol")
		t.Logf("the collector Deployment's debug exporter:\n%s", logs)
	}
}
