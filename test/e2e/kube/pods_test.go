package kube

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/container"
	"github.com/sigscope/sigscope/test/testutil"
)

// episode is what these tests read of `sigscope timeline -o json`.
type episode struct {
	Container struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Pod       string `json:"pod"`
		Namespace string `json:"namespace"`
		Image     string `json:"image"`
		Runtime   string `json:"runtime"`
	} `json:"container"`
	// Main is the process the episode follows, with its language runtime.
	Main struct {
		PID     int    `json:"pid"`
		NsPID   int    `json:"ns_pid"`
		Comm    string `json:"comm"`
		Runtime string `json:"runtime"`
	} `json:"main"`
	Outcome    string   `json:"outcome"`
	StopReason string   `json:"stop_reason"`
	StopSignal string   `json:"stop_signal"`
	Grace      *float64 `json:"grace_period_s"`
	KillAfter  *float64 `json:"kill_after_s"`
	GraceFrom  string   `json:"grace_from"`
	ExitStatus *int     `json:"exit_status"`
	PreStop    *struct {
		Kind      string   `json:"kind"`
		Command   []string `json:"command"`
		Duration  *float64 `json:"duration_s"`
		ExitCode  *int     `json:"exit_code"`
		Estimated bool     `json:"estimated"`
		AtKill    *struct {
			Process struct {
				Comm    string `json:"comm"`
				Syscall string `json:"syscall"`
			} `json:"process"`
			Verdict string `json:"verdict"`
		} `json:"at_kill"`
	} `json:"prestop"`
	Hint  string `json:"hint"`
	Steps []struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	} `json:"steps"`
	raw string
}

// liveTimeline runs `sigscope timeline -o json` against the cluster's
// container runtime (CRI_SOCKET) until stop.
type liveTimeline struct {
	*testutil.Running
	c *cluster
}

func startTimeline(t *testing.T, c *cluster) liveTimeline {
	t.Helper()
	testutil.RequirePrivileged(t)
	return liveTimeline{testutil.StartTimeline(t, nil, "--cri-socket", c.criSocket(), "--kubeconfig", c.envVar("KUBECONFIG")), c}
}

// stop ends the timeline and returns its episodes, once it has printed n
// of pod's (a stop's completes a settle time after its main process's
// exit, or later on a loaded machine), and a settle time after that for
// any other. Each of a test pod's (default/sigscope-*) must name the
// kubelet's runtime and a full container ID: sigscope read the container
// from its cgroup and asked that runtime.
func (l liveTimeline) stop(t *testing.T, pod string, n int) []episode {
	t.Helper()
	l.WaitLines(t, fmt.Sprintf("%d episodes of pod %s", n, pod), func(lines [][]byte) bool {
		var eps []episode
		for _, line := range lines {
			var ep episode
			if json.Unmarshal(line, &ep) == nil {
				eps = append(eps, ep)
			}
		}
		return len(podEpisodes(eps, pod)) >= n
	})
	time.Sleep(1500 * time.Millisecond) // past the settle time of the last episode
	var eps []episode
	for _, line := range l.Running.Stop(t) {
		var ep episode
		if err := json.Unmarshal(line, &ep); err != nil {
			t.Fatalf("episode %q: %v", line, err)
		}
		ep.raw = string(line)
		eps = append(eps, ep)
		if ep.Container.Namespace != "default" || !strings.HasPrefix(ep.Container.Pod, "sigscope-") {
			continue
		}
		if ep.Container.Runtime != l.c.runtimeName() || len(ep.Container.ID) != 64 {
			t.Errorf("episode of pod %s: container id %q runtime %q, want a 64-digit ID from %s\n%s",
				ep.Container.Pod, ep.Container.ID, ep.Container.Runtime, l.c.runtimeName(), ep.raw)
		}
	}
	return eps
}

// envVar is name's value in the cluster's environment: the env file's, which
// comes after this process's own in c.env (a shell that sourced the env file
// of an earlier cluster keeps its values), as kubectl's environment takes it.
func (c *cluster) envVar(name string) string {
	for i := len(c.env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(c.env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// criSocket is the CRI socket of the kubelet's runtime (CRI_SOCKET).
func (c *cluster) criSocket() string {
	if v := c.envVar("CRI_SOCKET"); v != "" {
		return strings.TrimPrefix(v, "unix://")
	}
	return "/run/containerd/containerd.sock"
}

// runtime is the kubelet's container runtime as make cluster says
// (CLUSTER_RUNTIME): containerd or crio; containerd for an env file from
// before there was a choice.
func (c *cluster) runtime() string {
	if v := c.envVar("CLUSTER_RUNTIME"); v != "" {
		return v
	}
	return "containerd"
}

// runtimeName is the runtime's name as sigscope reports it
// (container.runtime.name, the episode's container.runtime), and
// idScheme the scheme of the kubelet's container IDs on it
// (status.containerStatuses[].containerID).
func (c *cluster) runtimeName() string {
	if c.runtime() == "crio" {
		return container.RuntimeCRIO
	}
	return container.RuntimeContainerd
}

func (c *cluster) idScheme() string {
	if c.runtime() == "crio" {
		return "cri-o://"
	}
	return "containerd://"
}

// podSpec is a pod of one container "app" on the node, from the local
// busybox image, with a grace period and an optional preStop handler (JSON).
func podSpec(c *cluster, name string, grace int, preStop string, command ...string) string {
	cmd, _ := json.Marshal(command)
	lifecycle := ""
	if preStop != "" {
		lifecycle = fmt.Sprintf(`, "lifecycle": {"preStop": %s}`, preStop)
	}
	return fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Never",
    "terminationGracePeriodSeconds": %d,
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": %s%s}]
  }
}`, name, c.nodeName, grace, cmd, lifecycle)
}

// runPod creates the pod and waits until its container runs.
func runPod(t *testing.T, c *cluster, name, spec string) {
	t.Helper()
	if _, err := c.runInput(t, spec, "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kubectlCleanup(c, "-n", "default", "delete", "pod", name, "--ignore-not-found", "--grace-period=0", "--force")
	})
	if _, err := c.run(t, "-n", "default", "wait", "--for=jsonpath={.status.phase}=Running", "pod/"+name, "--timeout=50s"); err != nil {
		describe, _ := c.run(t, "-n", "default", "describe", "pod", name)
		t.Fatalf("pod not Running: %v\n%s", err, describe)
	}
	waitCommands(t, c, "default", name) // the shell's traps are set
	time.Sleep(time.Second)             // the resolver knows the container
}

// waitCommands waits until each container of pod ns/name that has a
// process runs its command (testutil.WaitCommand: a shell's traps are
// set), found by its ID in its cgroup.
func waitCommands(t *testing.T, c *cluster, ns, name string) {
	t.Helper()
	ids, err := c.run(t, "-n", ns, "get", "pod", name, "-o", "jsonpath={.status.initContainerStatuses[*].containerID} {.status.containerStatuses[*].containerID}")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Fields(ids) {
		_, id, _ = strings.Cut(id, "://")
		if pid := testutil.MainProcess(id); pid != 0 {
			testutil.WaitCommand(t, fmt.Sprintf("container %.12s of pod %s/%s", id, ns, name), pid)
		}
	}
}

func deletePod(t *testing.T, c *cluster, name string, args ...string) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.run(t, append([]string{"-n", "default", "delete", "pod", name, "--wait=true", "--timeout=60s"}, args...)...); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

func podEpisodes(eps []episode, pod string) []episode {
	var out []episode
	for _, ep := range eps {
		if ep.Container.Pod == pod && ep.Container.Namespace == "default" {
			out = append(out, ep)
		}
	}
	return out
}

func near(v *float64, want, slack float64) bool {
	return v != nil && *v >= want-slack && *v <= want+slack
}
