package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cluster is the local node of `make cluster`, reached with its kubectl.
type cluster struct {
	envFile  string
	env      []string // this process's environment with the env file applied
	kubectl  string
	nodeName string
}

// requireCluster finds the local cluster: .cluster/env at the top of this
// tree, or else the env file next to $KUBECONFIG when that names a
// make-cluster kubeconfig (after `. .cluster/env` in another checkout).
// Without one it skips, or fails when SIGSCOPE_REQUIRE_CLUSTER=1. A cluster
// whose env file exists must answer: a stale one is a failure.
func requireCluster(t *testing.T) *cluster {
	t.Helper()
	candidates := []string{filepath.Join("..", "..", "..", ".cluster", "env")}
	if kc := os.Getenv("KUBECONFIG"); kc != "" && !strings.Contains(kc, string(filepath.ListSeparator)) {
		candidates = append(candidates, filepath.Join(filepath.Dir(kc), "env"))
	}
	for _, f := range candidates {
		c, err := loadCluster(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatalf("local cluster (%s): %v", f, err)
		}
		if _, err := c.run(t, "get", "node", c.nodeName, "-o", "name"); err != nil {
			t.Fatalf("local cluster (%s) does not answer: %v; run `make cluster` (as root) again, or `make cluster-down`", f, err)
		}
		return c
	}
	msg := "no local Kubernetes cluster: .cluster/env not found and $KUBECONFIG is not a make-cluster kubeconfig; run `make cluster` as root (docs/cluster.md)"
	if os.Getenv("SIGSCOPE_REQUIRE_CLUSTER") == "1" {
		t.Fatalf("%s, but SIGSCOPE_REQUIRE_CLUSTER=1", msg)
	}
	t.Skipf("skipping: %s; set SIGSCOPE_REQUIRE_CLUSTER=1 to make this a failure", msg)
	return nil
}

// loadCluster reads an env file of `make cluster`: `export NAME=VALUE`
// lines, where VALUE may be double-quoted and refer to $VARIABLES.
func loadCluster(envFile string) (*cluster, error) {
	b, err := os.ReadFile(envFile)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	lookup := func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	for _, line := range strings.Split(string(b), "\n") {
		kv, ok := strings.CutPrefix(strings.TrimSpace(line), "export ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("bad line %q", line)
		}
		vars[k] = os.Expand(strings.Trim(v, `"`), lookup)
	}
	c := &cluster{envFile: envFile, nodeName: vars["NODE_NAME"], env: os.Environ()}
	for _, k := range []string{"KUBECONFIG", "PATH", "NODE_NAME"} {
		if vars[k] == "" {
			return nil, fmt.Errorf("no %s in it", k)
		}
	}
	for k, v := range vars {
		c.env = append(c.env, k+"="+v)
	}
	for _, dir := range filepath.SplitList(vars["PATH"]) {
		p := filepath.Join(dir, "kubectl")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			c.kubectl = p
			break
		}
	}
	if c.kubectl == "" {
		return nil, fmt.Errorf("no kubectl on its PATH %s", vars["PATH"])
	}
	return c, nil
}

// run runs kubectl with args, for at most a minute.
func (c *cluster) run(t *testing.T, args ...string) (string, error) {
	return c.runInput(t, "", args...)
}

func (c *cluster) runInput(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, args...)
	cmd.Env = c.env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// A pod on the node, as the agent's tests will run theirs: pinned to the
// node, host network, the locally imported busybox image (no registry: never
// pull). Its PID 1 is a shell with no SIGTERM handler, so the kubelet's
// SIGTERM is dropped by the kernel and the pod goes only with the SIGKILL at
// the end of its 2 s grace period.
func TestClusterRunsAndDeletesPod(t *testing.T) {
	c := requireCluster(t)
	t.Logf("cluster from %s, node %s", c.envFile, c.nodeName)
	name := fmt.Sprintf("sigscope-smoke-%d-%d", os.Getpid(), time.Now().Unix()%100000)
	pod := fmt.Sprintf(`{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q,
    "hostNetwork": true,
    "restartPolicy": "Never",
    "containers": [{
      "name": "main",
      "image": "sigscope.local/busybox:latest",
      "imagePullPolicy": "Never",
      "command": ["sh", "-c", "sleep 1000 & wait"]
    }]
  }
}`, name, c.nodeName)
	if _, err := c.runInput(t, pod, "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Only when the test failed before its own delete.
		_ = kubectlCleanup(c, "-n", "default", "delete", "pod", name, "--ignore-not-found", "--grace-period=0", "--force")
	})

	start := time.Now()
	if _, err := c.run(t, "-n", "default", "wait", "--for=jsonpath={.status.phase}=Running", "pod/"+name, "--timeout=50s"); err != nil {
		describe, _ := c.run(t, "-n", "default", "describe", "pod", name)
		t.Fatalf("pod not Running: %v\n%s", err, describe)
	}
	t.Logf("pod %s Running after %v", name, time.Since(start).Round(time.Millisecond))

	// The kubelet runs on the runtime .cluster/env says (CLUSTER_RUNTIME,
	// CRI_SOCKET), which the other tests go by: the node reports it, and
	// the container's ID has its scheme.
	rt, err := c.run(t, "get", "node", c.nodeName, "-o", "jsonpath={.status.nodeInfo.containerRuntimeVersion}")
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.run(t, "-n", "default", "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].containerID}")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("runtime %s (CLUSTER_RUNTIME %s, CRI_SOCKET %s), container %s", rt, c.runtime(), c.criSocket(), id)
	if !strings.HasPrefix(rt, c.idScheme()) || !strings.HasPrefix(id, c.idScheme()) {
		t.Errorf("node runtime %q, container ID %q: want %s, as CLUSTER_RUNTIME=%s says", rt, id, c.idScheme(), c.runtime())
	}

	start = time.Now()
	if _, err := c.run(t, "-n", "default", "delete", "pod", name, "--grace-period=2", "--wait=true", "--timeout=50s"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("kubectl delete --grace-period=2 returned after %v", took.Round(time.Millisecond))
	out, err := c.run(t, "-n", "default", "get", "pod", name, "-o", "name")
	if err == nil {
		t.Fatalf("pod still there after delete: %s", out)
	}
	if !strings.Contains(err.Error(), "NotFound") && !strings.Contains(err.Error(), "not found") {
		t.Fatalf("get after delete: want NotFound, got %v", err)
	}
	// sh ignores SIGTERM as PID 1: the pod cannot be gone before the
	// grace period ends, and the SIGKILL must not wait much past it.
	if took < 2*time.Second || took > 30*time.Second {
		t.Errorf("delete with a 2 s grace period of a pod whose PID 1 drops SIGTERM took %v, want 2 s to 30 s", took)
	}
}
