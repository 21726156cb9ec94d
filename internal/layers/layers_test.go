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
}

// folder is the top-level folder of a package.
func folder(path string) string {
	f, _, _ := strings.Cut(strings.TrimPrefix(path, module), "/")
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
