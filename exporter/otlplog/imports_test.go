package otlplog

import (
	"os/exec"
	"strings"
	"testing"
)

// The SDK's log API is beta: this package is its one importer, so that a
// change of that API is a change here only.
func TestOnlyImporterOfTheSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`,
		"github.com/sigscope/sigscope/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("go list listed %d packages:\n%s", len(lines), out)
	}
	const self = "github.com/sigscope/sigscope/exporter/otlplog"
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == self {
			continue
		}
		for _, imp := range f[1:] {
			for _, sdk := range []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "go.opentelemetry.io/otel/log"} {
				if imp == sdk || strings.HasPrefix(imp, sdk+"/") {
					t.Errorf("%s imports %s: only exporter/otlplog may", f[0], imp)
				}
			}
		}
	}
}
