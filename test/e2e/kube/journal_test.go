package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/exporter/journal"
	"github.com/sigscope/sigscope/test/testutil"
)

// agentPod returns the name of the agent's one pod that runs and is not
// being deleted, waiting up to 90 s for it to be Ready.
func agentPod(t *testing.T, c *cluster, ns, not string) string {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		out, err := c.run(t, "-n", ns, "get", "pods", "-l", "app.kubernetes.io/name=sigscope", "-o",
			`jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}`)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 1 && f[0] != not {
				if _, err := c.run(t, "-n", ns, "wait", "--for=condition=Ready", "pod/"+f[0], "--timeout=60s"); err == nil {
					return f[0]
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Ready agent pod other than %q in 90 s:\n%s", not, out)
		}
	}
}

// podEpisodesRaw reads, through the API server's pod proxy, the objects
// the agent pod serves for the default namespace's pod.
func podEpisodesRaw(t *testing.T, c *cluster, ns, agent, pod string) []json.RawMessage {
	t.Helper()
	out, err := c.run(t, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:10042/proxy/api/v1/episodes?namespace=default&pod=%s", ns, agent, pod))
	if err != nil {
		t.Fatalf("episodes through the pod proxy: %v", err)
	}
	var eps []json.RawMessage
	if err := json.Unmarshal([]byte(out), &eps); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	return eps
}

// The DaemonSet upgraded on the node (a new pod template, rolled out): the
// episode of a pod deleted before the upgrade is served by the new agent
// pod byte for byte with the same id, from the journal on the node's
// hostPath, which the chart mounts read-write there alone; the pod runs at
// system-node-critical.
func TestAgentJournalAcrossUpgrade(t *testing.T) {
	c := requireCluster(t)
	// A journal directory of this test's own on the node.
	dir := fmt.Sprintf("/var/lib/sigscope-e2e-journal-%d", os.Getpid())
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	installAgent(t, c, agentNS, "journal.hostDir="+dir)
	before := agentPod(t, c, agentNS, "")

	prio, err := c.run(t, "-n", agentNS, "get", "pod", before, "-o", "jsonpath={.spec.priorityClassName} {.spec.priority}")
	if err != nil || prio != "system-node-critical 2000001000" {
		t.Errorf("the agent pod's priority %q (%v), want system-node-critical 2000001000", prio, err)
	}

	name := fmt.Sprintf("sigscope-journal-%d-%d", os.Getpid(), time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 2, "", "sh", "-c", "sleep 1000 & wait"))
	deletePod(t, c, name)
	var ep json.RawMessage
	for deadline := time.Now().Add(testutil.Bound); ep == nil; time.Sleep(500 * time.Millisecond) {
		if eps := podEpisodesRaw(t, c, agentNS, before, name); len(eps) == 1 {
			ep = eps[0]
		} else if time.Now().After(deadline) {
			t.Fatalf("%d episodes of pod %s served %v after its deletion, want 1", len(eps), name, testutil.Bound)
		}
	}
	var head struct {
		ID      uint64 `json:"id"`
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(ep, &head); err != nil || head.ID == 0 || head.Outcome != "ignored_by_init" {
		t.Fatalf("episode %s: want an id and ignored_by_init (%v)", ep, err)
	}
	// On the node, in the journal's directory.
	for deadline := time.Now().Add(testutil.Bound); ; time.Sleep(200 * time.Millisecond) {
		ld, err := journal.Load(dir, 1000)
		if err == nil && ld.LastID >= head.ID {
			break
		}
		if time.Now().After(deadline) {
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			t.Fatalf("episode %d not in the journal at %s on the node (files %v, %v)", head.ID, dir, files, err)
		}
	}

	start := time.Now()
	if _, err := c.run(t, "-n", agentNS, "rollout", "restart", "daemonset/"+agentNS); err != nil {
		t.Fatal(err)
	}
	if _, err := c.run(t, "-n", agentNS, "rollout", "status", "daemonset/"+agentNS, "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	after := agentPod(t, c, agentNS, before)
	t.Logf("upgraded: pod %s replaced by %s, Ready %v after the rollout began", before, after, time.Since(start).Round(100*time.Millisecond))
	got := podEpisodesRaw(t, c, agentNS, after, name)
	if len(got) != 1 || !bytes.Equal(got[0], ep) {
		t.Fatalf("after the upgrade the new agent pod serves for pod %s:\n%s\nwant, as before it:\n%s", name, got, ep)
	}
	info, err := c.run(t, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:10042/proxy/api/v1/info", agentNS, after))
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Episodes struct {
			LastID uint64 `json:"last_id"`
		} `json:"episodes"`
	}
	if err := json.Unmarshal([]byte(info), &in); err != nil || in.Episodes.LastID < head.ID {
		t.Errorf("the new agent's info %s: last_id below %d, the episode from before (%v)", info, head.ID, err)
	}
}
