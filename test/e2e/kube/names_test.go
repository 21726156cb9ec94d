package kube

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// TestKubeletNamesWhileCRIStalls: every request of sigscope to the
// kubelet's runtime (containerd or CRI-O, through its CRI socket) is held
// for a minute while a pod starts and the kubelet deletes it (issue 35).
// The timeline asks no API server (no --kubeconfig): the container's name,
// image, pod and namespace can come only from the runtime, and the runtime
// only from its own files (the OCI bundle containerd hands runc, CRI-O's
// container record), which the episode says.
func TestKubeletNamesWhileCRIStalls(t *testing.T) {
	c := requireCluster(t)
	testutil.RequirePrivileged(t)
	proxy := testutil.NewStallProxy(t, c.criSocket())
	l := liveTimeline{testutil.StartTimeline(t, nil, "--cri-socket", proxy.Path), c}
	const stall = 60 * time.Second
	proxy.Stall(stall)
	name := fmt.Sprintf("sigscope-stall-%d", time.Now().Unix()%100000)
	runPod(t, c, name, podSpec(c, name, 5, "", "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"))
	deletePod(t, c, name)
	eps := podEpisodes(l.stop(t, name, 1), name)
	if time.Now().After(proxy.Until()) {
		t.Fatalf("the episode came after the %v stall: its name may be the API's", stall)
	}
	if proxy.HeldRequests() == 0 {
		t.Fatal("the stall held no request of sigscope's: the test did not test it")
	}
	if len(eps) != 1 {
		t.Fatalf("%d episodes of pod %s, want 1", len(eps), name)
	}
	ep := eps[0]
	var from struct {
		Container struct {
			IdentityFrom string `json:"identity_from"`
			NotInFiles   string `json:"not_in_files"`
		} `json:"container"`
	}
	if err := json.Unmarshal([]byte(ep.raw), &from); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", c.runtime(), ep.raw)
	if ep.Container.Name != "app" || ep.Container.Pod != name || ep.Container.Namespace != "default" ||
		ep.Container.Image == "" || ep.Outcome != "graceful" || from.Container.IdentityFrom != "runtime_files" || from.Container.NotInFiles != "" {
		t.Errorf("episode of pod %s while %s's API stalled: container %+v, outcome %s, identity_from %q, not_in_files %q; want app of default/%s with its image, graceful, from runtime_files",
			name, c.runtime(), ep.Container, ep.Outcome, from.Container.IdentityFrom, from.Container.NotInFiles, name)
	}
}
