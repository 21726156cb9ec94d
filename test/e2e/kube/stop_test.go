package kube

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The kubelet's whole stop path on a real node: grace 6 and preStop
// `exec: sleep 3` on a pod whose PID 1 is a shell. The hook runs about 3 s
// in the container, runc's SIGTERM is dropped, and the SIGKILL comes about
// 3 s later: ignored_by_init, and the episode says how the grace was spent.
func TestKubeletPreStopExec(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-prestop-%d", time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 6, `{"exec": {"command": ["sleep", "3"]}}`, "sh", "-c", "sleep 1000 & sleep 1000 & wait"))
	took := deletePod(t, c, name)
	eps := podEpisodes(l.stop(t, name, 1), name)
	t.Logf("kubectl delete took %v", took.Round(time.Millisecond))
	if len(eps) != 1 {
		t.Fatalf("%d episodes of pod %s, want 1 (not the sandbox's): %+v", len(eps), name, eps)
	}
	ep := eps[0]
	if ep.Outcome != "ignored_by_init" || ep.Container.Name != "app" || ep.ExitStatus == nil || *ep.ExitStatus != 137 {
		t.Errorf("outcome %s container %s exit %v\n%s", ep.Outcome, ep.Container.Name, ep.ExitStatus, ep.raw)
	}
	if p := ep.PreStop; p == nil || p.Kind != "exec" || !near(p.Duration, 3, 0.5) || p.ExitCode == nil || *p.ExitCode != 0 {
		t.Errorf("prestop %+v\n%s", p, ep.raw)
	}
	if !near(ep.Grace, 6, 0) || !near(ep.KillAfter, 3, 0.7) {
		t.Errorf("grace %v kill after %v, want 6 and about 3\n%s", ep.Grace, ep.KillAfter, ep.raw)
	}
	if ep.Steps[0].Kind != "exec" || !strings.Contains(ep.Steps[0].Text, "preStop") {
		t.Errorf("first step %+v, want the hook's exec", ep.Steps[0])
	}
}

// Grace 4 and preStop `exec: sleep 20`: the hook outlives the grace period,
// the kubelet gives the stop signal its 2 s minimum, then SIGKILL.
func TestKubeletPreStopTimeout(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-prestop-to-%d", time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 4, `{"exec": {"command": ["sleep", "20"]}}`, "sh", "-c", "sleep 1000 & wait"))
	deletePod(t, c, name)
	eps := podEpisodes(l.stop(t, name, 1), name)
	if len(eps) != 1 {
		t.Fatalf("%d episodes of pod %s, want 1: %+v", len(eps), name, eps)
	}
	ep := eps[0]
	if ep.Outcome != "prestop_timeout" || !near(ep.KillAfter, 2, 0.7) {
		t.Errorf("outcome %s kill after %v, want prestop_timeout after about 2 s\n%s", ep.Outcome, ep.KillAfter, ep.raw)
	}
	if p := ep.PreStop; p == nil || p.Kind != "exec" || !near(p.Duration, 4, 1) {
		t.Errorf("prestop %+v\n%s", p, ep.raw)
	}
	// The kernel read the hook's process at the SIGKILL: still sleeping.
	if p := ep.PreStop; p == nil || p.AtKill == nil || p.AtKill.Process.Comm != "sleep" ||
		(p.AtKill.Process.Syscall != "clock_nanosleep" && p.AtKill.Process.Syscall != "nanosleep") {
		t.Errorf("the hook's reading at the SIGKILL: %s", ep.raw)
	}
	if !strings.Contains(ep.Hint, "its sleep is longer than the grace period") {
		t.Errorf("hint %q: want the hook's sleep named", ep.Hint)
	}
	t.Logf("episode: %s", ep.raw)
}

// A pod whose PID 1 handles SIGTERM: graceful, exit 0, one episode; the
// sandbox's end is no episode.
func TestKubeletGracefulPod(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-graceful-%d", time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 30, "", "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"))
	took := deletePod(t, c, name)
	eps := podEpisodes(l.stop(t, name, 1), name)
	if len(eps) != 1 || eps[0].Outcome != "graceful" || eps[0].ExitStatus == nil || *eps[0].ExitStatus != 0 || eps[0].Container.Name != "app" {
		t.Fatalf("episodes of pod %s: %+v", name, eps)
	}
	if took > 15*time.Second {
		t.Errorf("a graceful pod took %v to delete", took)
	}
}

// A pod with a native sidecar (an init container with restartPolicy
// Always): the kubelet stops the main container first and the sidecar
// after it. Both are episodes, in that order.
func TestKubeletNativeSidecarOrder(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-sidecar-%d", time.Now().Unix()%100000)
	trap := `["sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"]`
	spec := fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Never", "terminationGracePeriodSeconds": 10,
    "initContainers": [{"name": "proxy", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "restartPolicy": "Always", "command": %s}],
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never", "command": %s}]
  }
}`, name, c.nodeName, trap, trap)
	runPod(t, c, name, spec)
	deletePod(t, c, name)
	eps := podEpisodes(l.stop(t, name, 2), name)
	if len(eps) != 2 {
		t.Fatalf("%d episodes of pod %s, want 2: %+v", len(eps), name, eps)
	}
	if eps[0].Container.Name != "app" || eps[1].Container.Name != "proxy" || eps[0].Outcome != "graceful" || eps[1].Outcome != "graceful" {
		t.Errorf("episodes in order %s (%s), %s (%s); want app then its sidecar proxy, both graceful", eps[0].Container.Name, eps[0].Outcome, eps[1].Container.Name, eps[1].Outcome)
	}
}

// shareProcessNamespace: the pause process is PID 1 of the pod; each
// container's main process is no namespace init. One handles SIGTERM
// (graceful, 0), the other does not and dies by SIGTERM's default action
// (graceful, 143): neither is ignored_by_init.
func TestKubeletSharedProcessNamespace(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-sharedpid-%d", time.Now().Unix()%100000)
	spec := fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Never", "terminationGracePeriodSeconds": 10,
    "shareProcessNamespace": true,
    "containers": [
      {"name": "trapper", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never", "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"]},
      {"name": "plain", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never", "command": ["sleep", "1000"]}
    ]
  }
}`, name, c.nodeName)
	runPod(t, c, name, spec)
	deletePod(t, c, name)
	eps := podEpisodes(l.stop(t, name, 2), name)
	byName := map[string]episode{}
	for _, ep := range eps {
		byName[ep.Container.Name] = ep
	}
	if len(eps) != 2 {
		t.Fatalf("%d episodes of pod %s, want 2: %+v", len(eps), name, eps)
	}
	if ep := byName["trapper"]; ep.Outcome != "graceful" || ep.ExitStatus == nil || *ep.ExitStatus != 0 {
		t.Errorf("trapper: %s\n%s", ep.Outcome, ep.raw)
	}
	if ep := byName["plain"]; ep.Outcome != "graceful" || ep.ExitStatus == nil || *ep.ExitStatus != 143 {
		t.Errorf("plain: %s\n%s", ep.Outcome, ep.raw)
	}
}

// An HTTP preStop hook is not a process: its kind comes from the kubelet's
// annotation. Nothing listens on its port here, so the kubelet's request
// fails at once and the stop goes on; a shell-form PID 1 then waits the rest
// of the grace period for its SIGKILL, and the hook's time is estimated
// from what the grace period left to the stop signal.
func TestKubeletPreStopHTTP(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-prestop-http-%d", time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 4, `{"httpGet": {"path": "/quit", "port": 1}}`, "sh", "-c", "sleep 1000 & wait"))
	deletePod(t, c, name)
	eps := podEpisodes(l.stop(t, name, 1), name)
	if len(eps) != 1 {
		t.Fatalf("%d episodes of pod %s, want 1: %+v", len(eps), name, eps)
	}
	ep := eps[0]
	if p := ep.PreStop; p == nil || p.Kind != "http" || !p.Estimated || p.Duration == nil || *p.Duration > 1 {
		t.Errorf("prestop %+v, want an http hook, estimated, that took under a second\n%s", p, ep.raw)
	}
	if ep.Outcome != "ignored_by_init" || !near(ep.KillAfter, 4, 1) {
		t.Errorf("outcome %s kill after %v, want ignored_by_init after about 4 s\n%s", ep.Outcome, ep.KillAfter, ep.raw)
	}
}

// kubectl delete --grace-period=1 on a pod whose spec says 30: the kubelet
// applies the deletion's grace (raised to its 2 s minimum), and the episode
// says the pod was deleted, with the grace period the deletion gave.
func TestKubeletDeleteGracePeriod1(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-grace1-%d", time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 30, "", "sh", "-c", "sleep 1000 & wait"))
	deletePod(t, c, name, "--grace-period=1")
	eps := podEpisodes(l.stop(t, name, 1), name)
	if len(eps) != 1 {
		t.Fatalf("%d episodes of pod %s, want 1: %+v", len(eps), name, eps)
	}
	ep := eps[0]
	if ep.Outcome != "ignored_by_init" || ep.StopReason != "deleted" || !near(ep.Grace, 1, 0) || !near(ep.KillAfter, 2, 0.7) {
		t.Errorf("outcome %s reason %q, want ignored_by_init, deleted, grace 1, SIGKILL about 2 s after SIGTERM\n%s",
			ep.Outcome, ep.StopReason, ep.raw)
	}
}

// A liveness probe that fails: the kubelet restarts the container. The
// episode of the stopped container says why.
func TestKubeletLivenessProbeFailed(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-probe-%d", time.Now().Unix()%100000)
	spec := fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Always", "terminationGracePeriodSeconds": 3,
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"],
      "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1, "initialDelaySeconds": 2}}]
  }
}`, name, c.nodeName)
	runPod(t, c, name, spec)
	// The first restart: the probe fails after 2 s.
	if _, err := c.run(t, "-n", "default", "wait", "--for=jsonpath={.status.containerStatuses[0].restartCount}=1", "pod/"+name, "--timeout=40s"); err != nil {
		t.Fatal(err)
	}
	deletePod(t, c, name)
	eps := podEpisodes(l.stop(t, name, 1), name)
	var probed bool
	for _, ep := range eps {
		if ep.StopReason == "probe_failed" && ep.Outcome == "graceful" {
			probed = true
		}
	}
	if !probed {
		for _, ep := range eps {
			t.Logf("episode %s reason %q: %s", ep.Outcome, ep.StopReason, ep.raw)
		}
		t.Errorf("no graceful episode with stop_reason probe_failed among %d", len(eps))
	}
}

// A liveness probe with a terminationGracePeriodSeconds of its own (2 s, the
// pod's 30 s): the kubelet stops the container with the probe's grace,
// which the episode reports with where it came from, and which the SIGKILL's
// own time confirms (PID 1 ignores SIGTERM, so only the grace ends it).
func TestKubeletProbeGrace(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-probegrace-%d", time.Now().Unix()%100000)
	spec := fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": ["sh", "-c", "trap '' TERM; sleep 1000 & wait"],
      "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1, "initialDelaySeconds": 2,
        "terminationGracePeriodSeconds": 2}}]
  }
}`, name, c.nodeName)
	runPod(t, c, name, spec)
	if _, err := c.run(t, "-n", "default", "wait", "--for=jsonpath={.status.containerStatuses[0].restartCount}=1", "pod/"+name, "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	// The API server's record of the stop: the kubelet's Killing event.
	if out, err := c.run(t, "-n", "default", "get", "events", "--field-selector", "involvedObject.name="+name+",reason=Killing", "-o", "jsonpath={.items[*].message}"); err != nil ||
		!strings.Contains(out, "failed liveness probe") {
		t.Errorf("the kubelet's Killing event: %q, %v", out, err)
	}
	// The deletion, a stop of its own, is not this test's: with the pod's
	// 30 s, PID 1 ignoring SIGTERM would hold it for all of them.
	deletePod(t, c, name, "--grace-period=1")
	eps := podEpisodes(l.stop(t, name, 1), name)
	checkKubeletStop(t, eps, "probe_failed", 2, "the liveness probe's terminationGracePeriodSeconds")
}

// checkKubeletStop holds the episodes of a stop the kubelet made for
// reason to the grace it applied and where it came from: the episode's
// grace_period_s and grace_from, and the SIGKILL's own time after SIGTERM
// (PID 1 ignores SIGTERM, so only the grace ends it).
func checkKubeletStop(t *testing.T, eps []episode, reason string, grace float64, from string) {
	t.Helper()
	found := false
	for _, ep := range eps {
		if ep.StopReason != reason {
			continue
		}
		found = true
		t.Logf("%s", ep.raw)
		if ep.Grace == nil || *ep.Grace != grace || ep.GraceFrom != from {
			t.Errorf("grace %v from %q: want %v s from %s", ep.Grace, ep.GraceFrom, grace, from)
		}
		if ep.KillAfter == nil || *ep.KillAfter < grace-0.5 || *ep.KillAfter > grace+3 {
			t.Errorf("SIGKILL %v s after SIGTERM: want about the %v s grace", ep.KillAfter, grace)
		}
	}
	if !found {
		t.Errorf("no episode with stop_reason %s among %d", reason, len(eps))
	}
}

// killedEpisodes waits until the kubelet has SIGKILLed the pod's container
// (exit 137), then ends the timeline and deletes the pod: the pod's
// episodes.
func killedEpisodes(t *testing.T, c *cluster, l liveTimeline, name string) []episode {
	t.Helper()
	if _, err := c.run(t, "-n", "default", "wait", "--for=jsonpath={.status.containerStatuses[0].state.terminated.exitCode}=137", "pod/"+name, "--timeout=60s"); err != nil {
		describe, _ := c.run(t, "-n", "default", "describe", "pod", name)
		t.Fatalf("not killed: %v\n%s", err, describe)
	}
	eps := podEpisodes(l.stop(t, name, 1), name)
	deletePod(t, c, name)
	return eps
}

// A pod that outlives its activeDeadlineSeconds: the kubelet fails it and
// stops its container itself, with no deletion, and the pod's grace (3 s;
// PID 1 ignores SIGTERM, so the SIGKILL shows the grace). The API server's
// record: the pod's status reason DeadlineExceeded.
func TestKubeletActiveDeadline(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-deadline-%d", time.Now().Unix()%100000)
	spec := fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Never", "terminationGracePeriodSeconds": 3, "activeDeadlineSeconds": 4,
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": ["sh", "-c", "trap '' TERM; sleep 1000 & wait"]}]
  }
}`, name, c.nodeName)
	runPod(t, c, name, spec)
	if _, err := c.run(t, "-n", "default", "wait", "--for=jsonpath={.status.reason}=DeadlineExceeded", "pod/"+name, "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	eps := killedEpisodes(t, c, l, name)
	checkKubeletStop(t, eps, "deadline_exceeded", 3, "the pod's terminationGracePeriodSeconds")
}

// A running pod's container image changed (kubectl patch): the kubelet
// restarts the container itself, with the pod's grace (3 s; PID 1 ignores
// SIGTERM, so the SIGKILL shows it). The API server's record: the
// kubelet's Killing event "definition changed, will be restarted".
func TestKubeletSpecChangeRestart(t *testing.T) {
	c := requireCluster(t)
	l := startTimeline(t, c)
	name := fmt.Sprintf("sigscope-respec-%d", time.Now().Unix()%100000)
	spec := fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default", "labels": {"app.kubernetes.io/name": "sigscope-e2e-kube"}},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "restartPolicy": "Always", "terminationGracePeriodSeconds": 3,
    "containers": [{"name": "app", "image": "sigscope.local/busybox:latest", "imagePullPolicy": "Never",
      "command": ["sh", "-c", "trap '' TERM; sleep 1000 & wait"]}]
  }
}`, name, c.nodeName)
	runPod(t, c, name, spec)
	if _, err := c.run(t, "-n", "default", "patch", "pod", name, "--type=json",
		"-p", `[{"op":"replace","path":"/spec/containers/0/image","value":"sigscope.local/node:host"}]`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := c.run(t, "-n", "default", "get", "events", "--field-selector", "involvedObject.name="+name+",reason=Killing", "-o", "jsonpath={.items[*].message}")
		if err == nil && strings.Contains(out, "definition changed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Killing event for the changed definition: %q, %v", out, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	eps := podEpisodes(l.stop(t, name, 1), name) // the grace, the SIGKILL and the settle
	deletePod(t, c, name)
	var changed []episode
	for _, ep := range eps {
		if ep.Container.Image != "sigscope.local/busybox:latest" {
			// The new image's containers cannot start here (no shell in
			// it): each ends by itself, and is restarted, with no grace.
			if ep.Grace != nil || ep.GraceFrom != "" {
				t.Errorf("a container that ended by itself shows grace %v from %q: %s", ep.Grace, ep.GraceFrom, ep.raw)
			}
			continue
		}
		if ep.StopReason != "restarted" {
			t.Errorf("the changed container's stop: reason %q, want restarted", ep.StopReason)
		}
		changed = append(changed, ep)
	}
	checkKubeletStop(t, changed, "restarted", 3, "the pod's terminationGracePeriodSeconds")
}
