package layers

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sigscope/sigscope/"

// rank is each top-level folder's place in the flow (doc.go); a package may
// import packages of its own rank or lower.
var rank = map[string]int{
	"internal":   0,
	"bpf":        1,
	"tracer":     2,
	"containers": 3,
	"episodes":   4,
	"api":        5,
	"exporter":   6,
	"cmd":        7,
	"deploy":     8,
	"test":       8,
	// The test harnesses under internal/ stand on top with the tests
	// (doc.go): they may use any stage, and no stage imports them.
	"internal/testutil":   8,
	"internal/dockertest": 8,
	"internal/critest":    8,
}

// folder is the place of a package in rank: its top-level folder, or the
// harness under internal/ it belongs to.
func folder(path string) string {
	rel := strings.TrimPrefix(path, module)
	for f := range rank {
		if strings.Contains(f, "/") && (rel == f || strings.HasPrefix(rel, f+"/")) {
			return f
		}
	}
	f, _, _ := strings.Cut(rel, "/")
	return f
}

// TestNoImportRunsUp lists every package's non-test imports with go list
// and fails on an import from a folder to one later in the flow, and on a
// top-level folder the rule does not place.
func TestNoImportRunsUp(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		from := folder(fields[0])
		r, ok := rank[from]
		if !ok {
			t.Errorf("%s: top-level folder %s/ has no place in the flow (internal/layers)", fields[0], from)
			continue
		}
		pkgs++
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := folder(imp)
			if rank[to] > r {
				t.Errorf("%s imports %s: %s/ comes after %s/ in the flow", fields[0], imp, to, from)
			}
		}
	}
	if pkgs < 30 {
		t.Fatalf("go list named %d packages of the module, want all of them", pkgs)
	}
}
