package kube

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The kubelet's stops that this node can make beyond a deletion, a probe,
// a restart and a deadline (stop_test.go): each is checked against the API
// server's own record of it (the pod's status, its conditions, the events)
// and the grace the kubelet applied for that reason, which the SIGKILL's
// time after SIGTERM shows (PID 1 ignores SIGTERM).

// eventsOf are the messages of the pod's events of reason, as the API
// server keeps them.
func eventsOf(t *testing.T, c *cluster, pod, reason string) string {
	t.Helper()
	out, err := c.run(t, "-n", "default", "get", "events", "--field-selector", "involvedObject.name="+pod+",reason="+reason, "-o", "jsonpath={.items[*].message}")
	if err != nil {
		t.Fatalf("events of %s: %v", pod, err)
	}
	return out
}

// A container that writes past its ephemeral-storage limit: the kubelet's
// eviction manager evicts the pod itself (no deletion; status reason
// Evicted, an Evicted event) with a grace override of 1 s, which kuberuntime
// raises to 2 s, whatever the pod's 30 s.
func TestKubeletLocalStorageEviction(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-evict-%d", time.Now().Unix()%100000)
	spec := fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": ["sh", "-c", "trap '' TERM; sleep 2; dd if=/dev/zero of=/fill bs=1M count=8 2>/dev/null; sleep 1000 & wait"],
      "resources": {"limits": {"ephemeral-storage": "2Mi"}}}]
  }
}`, name, c.nodeName)
	runPod(t, c, name, spec)
	if _, err := c.run(t, "-n", "default", "wait", "--for=jsonpath={.status.reason}=Evicted", "pod/"+name, "--timeout=90s"); err != nil {
		describe, _ := c.run(t, "-n", "default", "describe", "pod", name)
		t.Fatalf("not evicted: %v\n%s", err, describe)
	}
	msg, _ := c.run(t, "-n", "default", "get", "pod", name, "-o", "jsonpath={.status.message}")
	if !strings.Contains(msg, "ephemeral local storage") {
		t.Errorf("the pod's status message %q: want the local storage limit's", msg)
	}
	eps := killedEpisodes(t, c, l, name) // events outlive the pod
	if ev := eventsOf(t, c, name, "Evicted"); !strings.Contains(ev, "ephemeral local storage") {
		t.Errorf("Evicted events %q", ev)
	}
	checkKubeletStop(t, eps, "evicted", 2, "the kubelet's eviction for a local storage limit (1 s, raised to the kubelet's minimum of 2 s)")
}

// A postStart hook that fails: the kubelet kills the container itself (its
// Killing event "FailedPostStartHook", a FailedPostStartHook event) with
// the pod's grace (3 s).
func TestKubeletPostStartFailed(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-poststart-%d", time.Now().Unix()%100000)
	spec := fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Never", "terminationGracePeriodSeconds": 3,
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": ["sh", "-c", "trap '' TERM; sleep 1000 & wait"],
      "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "sleep 1; exit 3"]}}}}]
  }
}`, name, c.nodeName)
	if _, err := c.runInput(t, spec, "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kubectlCleanup(c, "-n", "default", "delete", "pod", name, "--ignore-not-found", "--grace-period=0", "--force")
	})
	eps := killedEpisodes(t, c, l, name)
	if ev := eventsOf(t, c, name, "Killing"); !strings.Contains(ev, "FailedPostStartHook") {
		t.Errorf("Killing events %q: want the failed postStart hook's", ev)
	}
	checkKubeletStop(t, eps, "poststart_failed", 3, "the pod's terminationGracePeriodSeconds")
}

// A pod of a higher priority that does not fit: the scheduler preempts the
// lower one (its DisruptionTarget condition PreemptionByScheduler, a
// Preempted event) and deletes it with the victim's own grace (3 s).
func TestKubeletPreemption(t *testing.T) {
	c := requireCluster(t)
	alloc, err := c.run(t, "get", "node", c.nodeName, "-o", "jsonpath={.status.allocatable.cpu}")
	if err != nil {
		t.Fatal(err)
	}
	milli := cpuMilli(t, alloc)
	// Each asks 60 % of the node: one fits, not both.
	ask := fmt.Sprintf("%dm", milli*6/10)
	suffix := time.Now().Unix() % 100000
	high := fmt.Sprintf("sigscope-e2e-high-%d", suffix)
	if _, err := c.runInput(t, fmt.Sprintf(`{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
  "metadata": {"name": %q}, "value": 1000000, "description": "sigscope e2e: preempts"}`, high), "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kubectlCleanup(c, "delete", "priorityclass", high, "--ignore-not-found") })
	l := startTimeline(t, c)
	pod := func(name, class string) string {
		prio := ""
		if class != "" {
			prio = fmt.Sprintf(`"priorityClassName": %q,`, class)
		}
		return fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {%s
    "hostNetwork": true, "restartPolicy": "Never", "terminationGracePeriodSeconds": 3,
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": ["sh", "-c", "trap '' TERM; sleep 1000 & wait"],
      "resources": {"requests": {"cpu": %q}}}]
  }
}`, name, prio, ask)
	}
	victim := fmt.Sprintf("sigscope-victim-%d", suffix)
	runPod(t, c, victim, pod(victim, ""))
	winner := fmt.Sprintf("sigscope-preemptor-%d", suffix)
	runPod(t, c, winner, pod(winner, high))
	if _, err := c.run(t, "-n", "default", "wait", "--for=delete", "pod/"+victim, "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	uid, err := c.run(t, "-n", "default", "get", "pod", winner, "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		t.Fatal(err)
	}
	if ev := eventsOf(t, c, victim, "Preempted"); !strings.Contains(ev, "Preempted by") || !strings.Contains(ev, uid) {
		t.Errorf("Preempted events %q: want the preemptor %s (%s)", ev, winner, uid)
	}
	eps := podEpisodes(l.stop(t, victim, 1), victim)
	deletePod(t, c, winner)
	checkKubeletStop(t, eps, "preempted", 3, "the pod's deletion (deletionGracePeriodSeconds)")
}

// cpuMilli is a CPU quantity as the API server writes it ("2", "1500m")
// in millicores.
func cpuMilli(t *testing.T, q string) int64 {
	t.Helper()
	if m, ok := strings.CutSuffix(q, "m"); ok {
		v, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			t.Fatalf("cpu %q: %v", q, err)
		}
		return v
	}
	v, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		t.Fatalf("cpu %q: %v", q, err)
	}
	return v * 1000
}

// An eviction through the API (kubectl drain's, the cluster autoscaler's):
// the API server sets the DisruptionTarget condition EvictionByEvictionAPI
// and deletes the pod with the grace the Eviction asks (2 s here, in a pod
// of 30 s), which the kubelet applies.
func TestKubeletEvictionAPI(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-evictapi-%d", time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 30, "", "sh", "-c", "trap '' TERM; sleep 1000 & wait"))
	eviction := fmt.Sprintf(`{"apiVersion": "policy/v1", "kind": "Eviction",
  "metadata": {"name": %q, "namespace": "default"}, "deleteOptions": {"gracePeriodSeconds": 2}}`, name)
	if _, err := c.runInput(t, eviction, "create", "--raw", "/api/v1/namespaces/default/pods/"+name+"/eviction", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	cond, err := c.run(t, "-n", "default", "get", "pod", name, "-o", `jsonpath={.status.conditions[?(@.type=="DisruptionTarget")].reason}`)
	if err != nil || cond != "EvictionByEvictionAPI" {
		t.Errorf("DisruptionTarget %q (%v): want EvictionByEvictionAPI", cond, err)
	}
	if _, err := c.run(t, "-n", "default", "wait", "--for=delete", "pod/"+name, "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	eps := podEpisodes(l.stop(t, name, 1), name)
	checkKubeletStop(t, eps, "evicted", 2, "the pod's deletion (deletionGracePeriodSeconds)")
}
