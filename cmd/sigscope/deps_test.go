package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The binary links in nothing it does not use (issue 13): not client-go's
// clientset or informer factory, which bring every API group's typed
// client, informer, lister and apply configuration (containers/kubeclient
// makes the agent's four requests instead), not the kubectl plugin's
// package, and no test helper.
func TestLinkedPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed %d packages: %s", len(deps), out)
	}
	forbidden := []string{
		"k8s.io/client-go/kubernetes",
		"k8s.io/client-go/informers",
		"k8s.io/client-go/listers",
		"k8s.io/client-go/applyconfigurations",
		"github.com/sigscope/sigscope/cmd/kubectl-sigscope/kubeplugin",
		"github.com/sigscope/sigscope/test/testutil",
		"github.com/sigscope/sigscope/test/dockertest",
		"github.com/sigscope/sigscope/test/critest",
		"github.com/sigscope/sigscope/containers/kubeclient/kubeclienttest",
		"testing",
		"net/http/httptest",
	}
	for _, p := range deps {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				t.Errorf("sigscope links in %s", p)
			}
		}
	}
}
