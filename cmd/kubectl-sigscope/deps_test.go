package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The plugin runs on the user's machine, macOS included, and never loads
// BPF: it links no BPF loader (cilium/ebpf, package tracer with its embedded
// objects; the event vocabulary is tracer/sigvocab's) and no client-go
// clientset, whose scheme registers every API group (kubeplugin reads pods
// and nodes itself). Together they were 30 MB of its 48 (issue 21). Nor does
// it link the container runtimes' clients, gRPC and the CRI API (issue 29):
// the identities it prints are package containers/identity's, apart from
// package container's resolver. `make build` prints its size and fails
// above its budget.
func TestLinkedPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 || !slices.Contains(deps, "github.com/sigscope/sigscope/cmd/kubectl-sigscope/kubeplugin") {
		t.Fatalf("go list -deps listed %d packages: %s", len(deps), out)
	}
	forbidden := []string{
		"github.com/cilium/ebpf",
		"github.com/sigscope/sigscope/tracer",
		"github.com/sigscope/sigscope/episodes/pipeline",
		"github.com/sigscope/sigscope/cmd/sigscope/agent", // the agent itself; api/v1 is its API's types
		"k8s.io/client-go/kubernetes",
		"k8s.io/client-go/informers",
		"k8s.io/client-go/applyconfigurations",
		"k8s.io/api",
		"github.com/sigscope/sigscope/test/testutil",
		"testing",
		"net/http/httptest",
		// The agent's OpenTelemetry logs (exporter/otlplog).
		"go.opentelemetry.io/otel/sdk",
		"go.opentelemetry.io/otel/exporters",
		// The container runtimes' clients (package container).
		"github.com/sigscope/sigscope/containers/container",
		"google.golang.org/grpc",
		"k8s.io/cri-api",
	}
	// Packages under a forbidden one that the plugin may link.
	allowed := []string{
		"github.com/sigscope/sigscope/api/v1", "github.com/sigscope/sigscope/containers/identity",
		"github.com/sigscope/sigscope/tracer/sigvocab", "github.com/sigscope/sigscope/tracer/procsig",
	}
	for _, p := range deps {
		for _, f := range forbidden {
			if (p == f || strings.HasPrefix(p, f+"/")) && !slices.Contains(allowed, p) {
				t.Errorf("kubectl-sigscope links in %s", p)
			}
		}
	}
}
