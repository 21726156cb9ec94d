package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// nodeImage is the host's Node.js in an image of its own
// (test/cluster/images.sh), and stopSignalGate the feature gate that lets
// a container's lifecycle.stopSignal reach the runtime (make cluster's
// default, FEATURE_GATES).
const (
	nodeImage      = "sigscope.local/node:host"
	stopSignalGate = "ContainerStopSignals"
)

// requireImage checks that ref was imported into the node's runtime.
func requireImage(t *testing.T, c *cluster, ref, hint string) {
	t.Helper()
	out, err := c.run(t, "get", "node", c.nodeName, "-o", "jsonpath={.status.images[*].names}")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, ref) {
		t.Fatalf("image %s is not on node %s: %s", ref, c.nodeName, hint)
	}
}

// featureGate reports whether gate is on in the API server and in the
// kubelet, as each says in its own kubernetes_feature_enabled metric. The
// kubelet is asked at its own address (the API server's node proxy refuses
// its loopback address), with the kubeconfig's credentials.
func featureGate(t *testing.T, c *cluster, gate string) (apiserver, kubelet bool) {
	t.Helper()
	on := func(args ...string) bool {
		t.Helper()
		out, err := c.run(t, append(args, "get", "--raw", "/metrics")...)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, `kubernetes_feature_enabled{name="`+gate+`"`) {
				return strings.HasSuffix(strings.TrimSpace(line), " 1")
			}
		}
		t.Fatalf("kubectl %s get --raw /metrics: no kubernetes_feature_enabled series for %s", strings.Join(args, " "), gate)
		return false
	}
	kubeletAt, err := c.run(t, "get", "node", c.nodeName, "-o",
		`jsonpath={.status.addresses[?(@.type=="InternalIP")].address}:{.status.daemonEndpoints.kubeletEndpoint.Port}`)
	if err != nil {
		t.Fatal(err)
	}
	return on(), on("--server", "https://"+kubeletAt)
}

// requireGate skips t (fails under SIGSCOPE_REQUIRE_CLUSTER=1) unless gate
// is on in both the API server and the kubelet.
func requireGate(t *testing.T, c *cluster, gate string) {
	t.Helper()
	api, kubelet := featureGate(t, c, gate)
	if api && kubelet {
		return
	}
	msg := fmt.Sprintf("feature gate %s: API server %v, kubelet %v; start the cluster with it (make cluster-down; FEATURE_GATES=%s=true make cluster, the default)", gate, api, kubelet, gate)
	if os.Getenv("SIGSCOPE_REQUIRE_CLUSTER") == "1" {
		t.Fatalf("%s, but SIGSCOPE_REQUIRE_CLUSTER=1", msg)
	}
	t.Skipf("skipping: %s", msg)
}

// auditRow is a row of `kubectl sigscope audit -o json`.
type auditRow struct {
	pluginAudit
	StopSignal string `json:"stop_signal"`
	Catches    bool   `json:"catches"`
	raw        string
}

// auditRows runs `kubectl sigscope audit -n default -o json` through the
// agents of namespace agentNS and returns the rows of the pods named.
func auditRows(t *testing.T, c *cluster, agentNS string, pods ...string) map[string]auditRow {
	t.Helper()
	out, errOut, err := c.plugin(t, "audit", "-n", "default", "-o", "json", "--agent-namespace", agentNS)
	if err != nil {
		t.Fatalf("kubectl sigscope audit: %v\n%s\n%s", err, out, errOut)
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("kubectl sigscope audit -o json: %v\n%s", err, out)
	}
	rows := map[string]auditRow{}
	for _, raw := range l.Items {
		var r auditRow
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("audit row %s: %v", raw, err)
		}
		r.raw = string(raw)
		for _, p := range pods {
			if r.Container.Pod == p && r.Container.Name == "app" {
				rows[p] = r
			}
		}
	}
	return rows
}

// agentEpisode waits (up to testutil.Bound) for the agent's episode of
// pod's container app, through `kubectl sigscope timeline`.
func agentEpisode(t *testing.T, c *cluster, agentNS, pod string) *pluginEpisode {
	t.Helper()
	for deadline := time.Now().Add(testutil.Bound); ; time.Sleep(time.Second) {
		out, errOut, err := c.plugin(t, "timeline", "pod/"+pod, "-n", "default", "-o", "json", "--agent-namespace", agentNS)
		if err != nil {
			t.Fatalf("kubectl sigscope timeline pod/%s: %v\n%s", pod, err, errOut)
		}
		for _, ep := range decodeList[pluginEpisode](t, out).Items {
			if ep.Container.Name == "app" {
				return &ep
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no episode of pod %s from the agent after %v", pod, testutil.Bound)
			return nil
		}
	}
}

// stopSignalSteps is what the kernel showed sent to an episode's main
// process from outside: the texts of its stop_signal and sigkill steps.
func stopSignalSteps(ep episode) []string {
	var out []string
	for _, s := range ep.Steps {
		if s.Kind == "stop_signal" || s.Kind == "sigkill" {
			out = append(out, s.Text)
		}
	}
	return out
}

// runtimePod is a pod of one container "app" on the node: image, grace
// period, extra pod spec fields and container fields (JSON, each with its
// leading comma).
func runtimePod(c *cluster, name, image string, grace int, spec, container string) string {
	return fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Never", "terminationGracePeriodSeconds": %d%s,
    "containers": [{"name": "app", "image": %q, "imagePullPolicy": "Never"%s}]
  }
}`, name, c.nodeName, grace, spec, image, container)
}

// want is what a test expects of a pod's audit row and stop episode.
type want struct {
	prediction, outcome, signal string
	exit                        int
	comm, runtime               string // the main process (PID 1); runtime "" is not checked
}

// auditStopAndCheck runs pod (a spec of runtimePod) with the agent of
// agentNS and a host timeline running, calls running (if not nil), asks
// `kubectl sigscope audit` for its prediction, deletes it, and checks the
// host's episode and the agent's against w.
func auditStopAndCheck(t *testing.T, c *cluster, agentNS string, l liveTimeline, name, spec string, w want, running func()) {
	t.Helper()
	runPod(t, c, name, spec)
	if running != nil {
		running()
	}

	// Before the stop: what the agent predicts.
	rows := auditRows(t, c, agentNS, name)
	if r, ok := rows[name]; !ok {
		t.Errorf("kubectl sigscope audit: no row for pod %s's container app", name)
	} else {
		t.Logf("audit of %s: %s", name, r.raw)
		if r.Prediction != w.prediction || r.StopSignal != w.signal {
			t.Errorf("audit of pod %s: prediction %s for %s, want %s for %s\n%s", name, r.Prediction, r.StopSignal, w.prediction, w.signal, r.raw)
		}
	}

	took := deletePod(t, c, name)
	t.Logf("kubectl delete pod %s took %v", name, took.Round(time.Millisecond))
	eps := podEpisodes(l.stop(t, name, 1), name)
	if len(eps) != 1 {
		t.Fatalf("%d episodes of pod %s, want 1: %+v", len(eps), name, eps)
	}
	ep := eps[0]
	exit := "none"
	if ep.ExitStatus != nil {
		exit = fmt.Sprint(*ep.ExitStatus)
	}
	t.Logf("episode of %s: outcome %s, stop signal %s, main %s (runtime %q), exit %s; signals from outside: %q",
		name, ep.Outcome, ep.StopSignal, ep.Main.Comm, ep.Main.Runtime, exit, stopSignalSteps(ep))
	if ep.Outcome != w.outcome || ep.StopSignal != w.signal || exit != fmt.Sprint(w.exit) {
		t.Errorf("pod %s: outcome %s stop signal %s exit %s, want %s, %s, %d\n%s", name, ep.Outcome, ep.StopSignal, exit, w.outcome, w.signal, w.exit, ep.raw)
	}
	if ep.Main.Comm != w.comm || ep.Main.NsPID != 1 || (w.runtime != "" && ep.Main.Runtime != w.runtime) {
		t.Errorf("pod %s: main %+v, want PID 1 %s, runtime %q\n%s", name, ep.Main, w.comm, w.runtime, ep.raw)
	}
	// The kernel saw the runtime send the stop signal to PID 1, and no
	// other.
	sent := false
	for _, s := range ep.Steps {
		if s.Kind != "stop_signal" {
			continue
		}
		if !strings.Contains(s.Text, "sends "+w.signal+" to PID 1") {
			t.Errorf("pod %s: stop signal step %q, want %s to PID 1", name, s.Text, w.signal)
		}
		sent = true
	}
	if !sent {
		t.Errorf("pod %s: no stop_signal step: the kernel saw no %s sent to PID 1\n%s", name, w.signal, ep.raw)
	}

	// The agent's own episode of the same stop says the same.
	if a := agentEpisode(t, c, agentNS, name); a != nil && (a.Outcome != ep.Outcome || a.StopSignal != ep.StopSignal || a.Main.Runtime != ep.Main.Runtime) {
		raw, _ := json.Marshal(a)
		t.Errorf("pod %s: the agent's episode says %s, %s, runtime %q; the host's timeline %s, %s, runtime %q\n%s",
			name, a.Outcome, a.StopSignal, a.Main.Runtime, ep.Outcome, ep.StopSignal, ep.Main.Runtime, raw)
	}
}

// A pod whose PID 1 is Node.js with no SIGTERM listener (`node -e
// 'setInterval(...)'`, the shape of `CMD ["node", "server.js"]`). Node's
// own SIGTERM handler is one-shot (SA_RESETHAND): it resets the terminal
// and re-raises the signal, which the kernel drops for a namespace init,
// so only the kubelet's SIGKILL after the grace period ends it:
// ignored_by_init, exit 137, the runtime named nodejs, and `kubectl
// sigscope audit` predicts it before the stop. The image is the host's
// node (test/cluster/images.sh).
func TestKubeletNodeJSPID1(t *testing.T) {
	c := requireCluster(t)
	requireImage(t, c, nodeImage, "install Node.js (apt-get install nodejs), then `make cluster-images`")
	const agentNS = "sigscope-e2e-nodejs"
	l := startTimeline(t, c)
	installAgent(t, c, agentNS)
	name := fmt.Sprintf("sigscope-nodejs-%d", time.Now().Unix()%100000)
	auditStopAndCheck(t, c, agentNS, l, name,
		runtimePod(c, name, nodeImage, 3, "", `, "command": ["node", "-e", "setInterval(() => {}, 1000)"]`),
		want{prediction: "ignored_by_init", outcome: "ignored_by_init", signal: "SIGTERM", exit: 137, comm: "node", runtime: "nodejs"}, nil)
}

// With the ContainerStopSignals feature gate (make cluster's default): a
// pod whose container's lifecycle.stopSignal is SIGUSR1 and whose PID 1, a
// shell, traps only TERM. The kubelet gives the signal to the runtime in
// the container's CRI configuration, and the runtime stops the container
// with it. containerd 2.4 reports it in ContainerStatus.stop_signal (which
// the kubelet shows as status.containerStatuses[].stopSignal); CRI-O 1.34
// leaves that unset and writes it into the container's OCI spec (the
// org.opencontainers.image.stopSignal annotation, in the verbose status).
// PID 1 has no handler for SIGUSR1: the kernel drops it, and the SIGKILL
// after the grace period ends the stop. ignored_by_init with stop_signal
// SIGUSR1 in the timeline and in the audit, which would predict graceful if
// it took the stop signal for SIGTERM.
func TestKubeletContainerStopSignal(t *testing.T) {
	c := requireCluster(t)
	requireGate(t, c, stopSignalGate)
	const agentNS = "sigscope-e2e-stopsignal"
	l := startTimeline(t, c)
	installAgent(t, c, agentNS)
	name := fmt.Sprintf("sigscope-stopsignal-%d", time.Now().Unix()%100000)
	// lifecycle.stopSignal needs spec.os.name.
	spec := runtimePod(c, name, "sigscope.local/busybox:latest", 3, `, "os": {"name": "linux"}`,
		`, "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"], "lifecycle": {"stopSignal": "SIGUSR1"}`)
	auditStopAndCheck(t, c, agentNS, l, name, spec,
		want{prediction: "ignored_by_init", outcome: "ignored_by_init", signal: "SIGUSR1", exit: 137, comm: "sh"},
		func() {
			// The API server kept the field (the gate), the runtime has
			// the signal, and the kubelet reports what the runtime gives
			// in ContainerStatus.stop_signal.
			got, err := c.run(t, "-n", "default", "get", "pod", name, "-o",
				"jsonpath={.spec.containers[0].lifecycle.stopSignal}/{.status.containerStatuses[0].stopSignal}/{.status.containerStatuses[0].containerID}")
			if err != nil {
				t.Fatal(err)
			}
			f := strings.SplitN(got, "/", 3)
			if len(f) != 3 {
				t.Fatalf("pod %s: spec stopSignal/status stopSignal/containerID %q", name, got)
			}
			cri, oci := criStopSignal(t, c, f[2])
			t.Logf("pod %s: spec stopSignal %q, status stopSignal %q; the runtime's ContainerStatus.stop_signal %q, OCI spec annotation %q", name, f[0], f[1], cri, oci)
			want := "SIGUSR1" // containerd reports it
			if c.runtime() == "crio" {
				want = "" // CRI-O 1.34 does not
			}
			if f[0] != "SIGUSR1" || f[1] != cri || cri != want {
				t.Errorf("pod %s: spec stopSignal %q, status %q, ContainerStatus.stop_signal %q; want SIGUSR1, then %q from %s", name, f[0], f[1], cri, want, c.runtime())
			}
			if cri == "" && oci != "SIGUSR1" {
				t.Errorf("pod %s: %s reports no stop signal and its OCI spec says %q: want SIGUSR1", name, c.runtime(), oci)
			}
		})
}

// criStopSignal asks the kubelet's runtime (CRI_SOCKET) about the container
// of the kubelet's containerID (scheme://id): the stop signal in its
// ContainerStatus ("" for the runtime's default, else the name without
// CRI's SIGNAL_ prefix), and the org.opencontainers.image.stopSignal
// annotation of its OCI spec in the verbose status ("" when not there).
func criStopSignal(t *testing.T, c *cluster, containerID string) (cri, oci string) {
	t.Helper()
	id, ok := strings.CutPrefix(containerID, c.idScheme())
	if !ok {
		t.Fatalf("container ID %q: want %s... (CLUSTER_RUNTIME=%s)", containerID, c.idScheme(), c.runtime())
	}
	conn, err := grpc.NewClient("unix://"+c.criSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatalf("CRI %s: ContainerStatus %s: %v", c.criSocket(), id, err)
	}
	if s := resp.GetStatus().GetStopSignal(); s != runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		cri = strings.TrimPrefix(s.String(), "SIGNAL_")
	}
	var v struct {
		RuntimeSpec struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"runtimeSpec"`
	}
	if info := resp.GetInfo()["info"]; info != "" {
		if err := json.Unmarshal([]byte(info), &v); err != nil {
			t.Fatalf("CRI %s: verbose ContainerStatus %s: %v", c.criSocket(), id, err)
		}
	}
	return cri, v.RuntimeSpec.Annotations["org.opencontainers.image.stopSignal"]
}
