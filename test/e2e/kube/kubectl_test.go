package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// installAgent runs `make cluster-agent`'s script for namespace ns: the
// chart with test/cluster/agent-values.yaml (and the chart values set, as
// helm --set takes them) and the image of this tree, waited for until
// Ready; removed when the test ends.
func installAgent(t *testing.T, c *cluster, ns string, set ...string) {
	t.Helper()
	testutil.RequirePrivileged(t)
	requireAgentImage(t, c)
	script := filepath.Join("..", "..", "..", "test", "cluster", "agent.sh")
	run := func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "SIGSCOPE_AGENT_NAMESPACE="+ns, "SIGSCOPE_AGENT_SET="+strings.Join(set, ","))
		return cmd.CombinedOutput()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := run(ctx, "delete"); err != nil {
			t.Errorf("agent.sh delete: %v\n%s", err, out)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := run(ctx)
	if err != nil {
		t.Fatalf("test/cluster/agent.sh (make cluster-agent): %v\n%s", err, out)
	}
	t.Logf("agent in namespace %s Ready %v after agent.sh began", ns, time.Since(start).Round(100*time.Millisecond))
}

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// plugin runs `kubectl sigscope ARGS` with the plugin built from this tree
// on kubectl's PATH, as a user installs it.
func (c *cluster) plugin(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp("", "kubectl-sigscope-")
		if pluginErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "kubectl-sigscope"), "../../../cmd/kubectl-sigscope").CombinedOutput()
		if err != nil {
			pluginErr = fmt.Errorf("go build ./cmd/kubectl-sigscope: %v\n%s", err, out)
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"sigscope"}, args...)...)
	cmd.Env = append(c.env, "PATH="+pluginDir+string(filepath.ListSeparator)+c.envVar("PATH"))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// pluginList is the plugin's -o json answer.
type pluginList[T any] struct {
	Kind   string `json:"kind"`
	Items  []T    `json:"items"`
	Agents []struct {
		Node  string `json:"node"`
		Pod   string `json:"pod"`
		Error string `json:"error"`
	} `json:"agents"`
	Warnings []string `json:"warnings"`
}

func decodeList[T any](t *testing.T, out string) pluginList[T] {
	t.Helper()
	var l pluginList[T]
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("plugin JSON: %v\n%s", err, out)
	}
	return l
}

type pluginEpisode struct {
	episode
	Node  string `json:"node"`
	ID    uint64 `json:"id"`
	Owner *struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"owner"`
	Revision *struct {
		Controller string `json:"controller"`
		Hash       string `json:"hash"`
		Label      string `json:"label"`
	} `json:"revision"`
}

type pluginAudit struct {
	Node      string `json:"node"`
	Container struct {
		Name      string `json:"name"`
		Pod       string `json:"pod"`
		Namespace string `json:"namespace"`
	} `json:"container"`
	Prediction string `json:"prediction"`
}

type pluginTop struct {
	Namespace string `json:"namespace"`
	Workload  struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"workload"`
	Stops    int            `json:"stops"`
	Outcomes map[string]int `json:"outcomes"`
	NeedsFix int            `json:"needs_fix"`
	Exit137  int            `json:"exit_137"`
	Slowest  *struct {
		Seconds float64 `json:"seconds"`
		Pod     string  `json:"pod"`
	} `json:"slowest"`
	Nodes []string `json:"nodes"`
}

// kubectl sigscope on the real cluster: the agent DaemonSet of
// `make cluster-agent`, a Deployment whose PID 1 is a shell and a bare pod
// that handles SIGTERM. audit predicts both, their deletions come back
// from timeline and top with the right outcomes and owners, in table and
// JSON; an agent pod that does not answer is named while the other is
// read, and the plugin fails only once none can be; users without the
// proxy permission are told which one they lack, and the chart's
// sigscope-reader ClusterRole, bound in the agents' namespace, is enough.
func TestKubectlPlugin(t *testing.T) {
	c := requireCluster(t)
	const agentNS, appNS = "sigscope-e2e-kubectl", "sigscope-e2e-apps"
	installAgent(t, c, agentNS)
	if _, err := c.run(t, "delete", "namespace", appNS, "--ignore-not-found", "--wait=true", "--timeout=55s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.run(t, "create", "namespace", appNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kubectlCleanup(c, "delete", "namespace", appNS, "--ignore-not-found", "--wait=true", "--timeout=55s", "--grace-period=1"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	agentFlags := []string{"--agent-namespace", agentNS}
	plugin := func(args ...string) (string, string, error) {
		t.Helper()
		return c.plugin(t, append(append([]string{}, args...), agentFlags...)...)
	}
	mustPlugin := func(args ...string) string {
		t.Helper()
		out, errOut, err := plugin(args...)
		if err != nil {
			t.Fatalf("kubectl sigscope %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}

	const deploy, good = "shell-web", "good-pod"
	manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[3]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s, tier: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - {name: app, image: "sigscope.local/busybox:latest", imagePullPolicy: Never, command: [sh, -c, "sleep 1000 & wait"]}
---
apiVersion: v1
kind: Pod
metadata: {name: %[2]s, namespace: %[3]s, labels: {app: %[2]s}}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - {name: app, image: "sigscope.local/busybox:latest", imagePullPolicy: Never, command: [sh, -c, "trap 'exit 0' TERM; sleep 1000 & wait"]}
`, deploy, good, appNS)
	if _, err := c.runInput(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	for _, sel := range []string{"app=" + deploy, "app=" + good} {
		if _, err := c.run(t, "-n", appNS, "wait", "--for=condition=Ready", "pod", "-l", sel, "--timeout=55s"); err != nil {
			describe, _ := c.run(t, "-n", appNS, "describe", "pods")
			t.Fatalf("pods %s not Ready: %v\n%s", sel, err, describe)
		}
	}
	shellPod, err := c.run(t, "-n", appNS, "get", "pods", "-l", "app="+deploy, "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	// The revision it runs: its ReplicaSet, and the template's hash.
	rsHash, err := c.run(t, "-n", appNS, "get", "pod", shellPod, "-o",
		`jsonpath={.metadata.ownerReferences[?(@.controller==true)].name}/{.metadata.labels.pod-template-hash}`)
	if err != nil {
		t.Fatal(err)
	}
	rs, hash, _ := strings.Cut(rsHash, "/")
	for _, pod := range []string{shellPod, good} {
		waitCommands(t, c, appNS, pod) // the trap is set
	}

	// audit: both running containers, with their node and prediction.
	audits := decodeList[pluginAudit](t, mustPlugin("audit", "-n", appNS, "-o", "json"))
	predicted := map[string]string{}
	for _, a := range audits.Items {
		if a.Node != c.nodeName || a.Container.Namespace != appNS {
			t.Errorf("audit row %+v: want node %s, namespace %s", a, c.nodeName, appNS)
		}
		predicted[a.Container.Pod] = a.Prediction
	}
	if predicted[shellPod] != "ignored_by_init" || predicted[good] != "graceful" || len(predicted) != 2 {
		t.Errorf("audit -n %s predictions %v, want %s ignored_by_init and %s graceful", appNS, predicted, shellPod, good)
	}
	bad := mustPlugin("audit", "-A", "--only-bad")
	t.Logf("kubectl sigscope audit -A --only-bad:\n%s", bad)
	if !strings.Contains(bad, shellPod) || strings.Contains(bad, good) || !strings.Contains(bad, "PREDICTION") {
		t.Errorf("audit -A --only-bad should list %s and not %s:\n%s", shellPod, good, bad)
	}
	if sel := mustPlugin("audit", "-n", appNS, "-l", "tier=web", "-o", "json"); len(decodeList[pluginAudit](t, sel).Items) != 1 {
		t.Errorf("audit -l tier=web: want only %s:\n%s", shellPod, sel)
	}

	// Stop both: the Deployment's pod drops SIGTERM (ignored_by_init, 137
	// after 2 s); the bare pod exits 0 on it.
	deletePodIn(t, c, appNS, shellPod)
	deletePodIn(t, c, appNS, good)

	var eps []pluginEpisode
	deadline := time.Now().Add(testutil.Bound)
	for {
		l := decodeList[pluginEpisode](t, mustPlugin("timeline", "deploy/"+deploy, "-n", appNS, "-o", "json"))
		eps = l.Items
		if len(eps) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(eps) != 1 {
		t.Fatalf("timeline deploy/%s: %d episodes, want 1: %+v", deploy, len(eps), eps)
	}
	ep := eps[0]
	if ep.Outcome != "ignored_by_init" || ep.Container.Pod != shellPod || ep.Node != c.nodeName || ep.ID == 0 ||
		ep.Owner == nil || ep.Owner.Kind != "Deployment" || ep.Owner.Name != deploy || ep.ExitStatus == nil || *ep.ExitStatus != 137 ||
		ep.StopReason != "deleted" {
		t.Errorf("timeline deploy/%s episode: %+v", deploy, ep)
	}
	if r := ep.Revision; r == nil || rs == "" || hash == "" || r.Controller != "ReplicaSet/"+rs || r.Hash != hash || r.Label != "pod-template-hash" {
		t.Errorf("timeline deploy/%s episode's revision %+v, want ReplicaSet/%s, %q by pod-template-hash", deploy, r, rs, hash)
	}
	// The bare pod's episode completes a settle time after its exit, which
	// may come after its delete returned: wait for it too.
	for deadline := time.Now().Add(testutil.Bound); ; time.Sleep(time.Second) {
		l := decodeList[pluginEpisode](t, mustPlugin("timeline", good, "-n", appNS, "-o", "json"))
		if len(l.Items) > 0 || time.Now().After(deadline) {
			break
		}
	}
	text := mustPlugin("timeline", good, "-n", appNS)
	t.Logf("kubectl sigscope timeline %s:\n%s", good, text)
	if !strings.Contains(text, "pod "+appNS+"/"+good) || !strings.Contains(text, "graceful") || strings.Contains(text, shellPod) {
		t.Errorf("timeline %s (table) should be its pod view, graceful:\n%s", good, text)
	}
	if text := mustPlugin("timeline", "pod/"+shellPod, "-n", appNS); !strings.Contains(text, "ignored_by_init") || !strings.Contains(text, "node "+c.nodeName) {
		t.Errorf("timeline pod/%s (table):\n%s", shellPod, text)
	}

	top := decodeList[pluginTop](t, mustPlugin("top", "-n", appNS, "-o", "json"))
	if len(top.Items) != 2 {
		t.Fatalf("top -n %s: %d workloads, want 2: %+v", appNS, len(top.Items), top.Items)
	}
	first, second := top.Items[0], top.Items[1]
	if first.Workload.Kind != "Deployment" || first.Workload.Name != deploy || first.Stops != 1 || first.NeedsFix != 1 ||
		first.Exit137 != 1 || first.Outcomes["ignored_by_init"] != 1 || first.Slowest == nil || first.Slowest.Seconds < 1.5 ||
		len(first.Nodes) != 1 || first.Nodes[0] != c.nodeName {
		t.Errorf("top: first row %+v, want Deployment/%s with 1 stop to fix, exit 137, about 2 s", first, deploy)
	}
	if second.Workload.Kind != "Pod" || second.Workload.Name != good || second.Outcomes["graceful"] != 1 || second.NeedsFix != 0 || second.Exit137 != 0 {
		t.Errorf("top: second row %+v, want Pod/%s graceful", second, good)
	}
	table := mustPlugin("top", "-n", appNS)
	t.Logf("kubectl sigscope top -n %s:\n%s", appNS, table)
	if lines := strings.Split(table, "\n"); len(lines) < 3 || !strings.HasPrefix(lines[0], "NAMESPACE") ||
		!strings.Contains(lines[1], "Deployment/"+deploy) || !strings.Contains(lines[2], "Pod/"+good) {
		t.Errorf("top table, worst first:\n%s", table)
	}
	if y := mustPlugin("top", "-n", appNS, "-o", "yaml"); !strings.Contains(y, "kind: WorkloadStopList") || !strings.Contains(y, "name: "+deploy) {
		t.Errorf("top -o yaml:\n%s", y)
	}

	// RBAC. Nobody: cannot even find the agents.
	_, errOut, err := plugin("--as", "sigscope-e2e-nobody", "top", "-A")
	t.Logf("as a user with no permission: %v\n%s", err, errOut)
	if err == nil || !strings.Contains(errOut, `"list" on "pods" in namespace `+agentNS) {
		t.Errorf("a user who may not list the agents' pods: want a failure naming list pods in %s, got %v:\n%s", agentNS, err, errOut)
	}
	// May list pods but not proxy to them.
	rbac := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: list-only, namespace: %[1]s}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: list-only, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: list-only}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: sigscope-e2e-noproxy}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: sigscope-e2e-reader}]
`, agentNS)
	if _, err := c.runInput(t, rbac, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = plugin("--as", "sigscope-e2e-noproxy", "audit", "-A")
	t.Logf("as a user who may list pods but not proxy: %v\n%s", err, errOut)
	if err == nil || !strings.Contains(errOut, `"get" on "pods/proxy" in namespace `+agentNS) {
		t.Errorf("a user without pods/proxy: want a failure naming get pods/proxy in %s, got %v:\n%s", agentNS, err, errOut)
	}
	// The chart's ClusterRole, bound in the agents' namespace only.
	out, errOut, err := plugin("--as", "sigscope-e2e-reader", "timeline", "deploy/"+deploy, "-n", appNS, "-o", "json")
	if err != nil || len(decodeList[pluginEpisode](t, out).Items) != 1 {
		t.Errorf("as a user bound to %s-reader: %v\n%s\n%s", agentNS, err, out, errOut)
	}

	// An agent pod that does not answer (its port closed), beside the real
	// one: named on stderr and in the output, the other still read, exit 0.
	fake := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: silent-agent, namespace: %s, labels: {app.kubernetes.io/name: sigscope}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: sigscope
    image: "sigscope.local/busybox:latest"
    imagePullPolicy: Never
    command: [sleep, "1000"]
    ports: [{name: metrics, containerPort: 10042}]
`, agentNS)
	if _, err := c.runInput(t, fake, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.run(t, "-n", agentNS, "wait", "--for=condition=Ready", "pod/silent-agent", "--timeout=55s"); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = plugin("top", "-n", appNS)
	t.Logf("with a silent agent pod beside the real one: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	if err != nil || !strings.Contains(out, "Deployment/"+deploy) || !strings.Contains(out, "silent-agent") || !strings.Contains(errOut, "silent-agent") {
		t.Errorf("one agent unreachable: want exit 0, the other's rows, and silent-agent named in stdout and stderr")
	}
	l := decodeList[pluginTop](t, mustPlugin("top", "-n", appNS, "-o", "json"))
	unreachable := 0
	for _, a := range l.Agents {
		if strings.HasSuffix(a.Pod, "/silent-agent") && a.Error != "" {
			unreachable++
		}
	}
	if unreachable != 1 || len(l.Items) != 2 {
		t.Errorf("top -o json with a silent agent: agents %+v, %d rows", l.Agents, len(l.Items))
	}

	// The DaemonSet scaled away: only the silent pod is left, nothing can
	// be read, and the plugin fails naming it.
	if _, err := c.run(t, "-n", agentNS, "patch", "daemonset", agentNS, "--type=merge",
		"-p", `{"spec":{"template":{"spec":{"nodeSelector":{"sigscope-e2e":"nowhere"}}}}}`); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(55 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		left, err := c.run(t, "-n", agentNS, "get", "pods", "-l", "app.kubernetes.io/instance=sigscope", "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(left) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the DaemonSet's pods are still there: %s", left)
		}
	}
	out, errOut, err = plugin("timeline", "-n", appNS)
	t.Logf("with the agents scaled away: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	if err == nil || !strings.Contains(errOut, "silent-agent") || !strings.Contains(errOut, "no agent could be read") {
		t.Errorf("nothing readable: want a failure naming silent-agent and saying no agent could be read")
	}
}

// deletePodIn deletes a pod of namespace ns and waits until it is gone.
func deletePodIn(t *testing.T, c *cluster, ns, name string) {
	t.Helper()
	if _, err := c.run(t, "-n", ns, "delete", "pod", name, "--wait=true", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
}
