package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every test that runs per engine (forEngine here, forDaemon in
// container/) is in the Makefile's CGROUP2_TESTS, which CI's cgroup v2
// stage runs: CI's make test runs only the host's engine, so a test left
// out of the list would never run on cgroup v2 in CI. No root needed.
func TestCgroup2TestsListed(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CGROUP2_TESTS := \^\(([A-Za-z0-9_|]+)\)\$\$$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no CGROUP2_TESTS := ^(TestA|TestB)$$ line in the Makefile")
	}
	listed := strings.Split(string(m[1]), "|")
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("../../containers/container/*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	perEngine := regexp.MustCompile(`func (Test\w+)\(t \*testing\.T\) \{\n(?:\t[^\n]*\n)*?\t(?:forEngine|forDaemon)\(t, `)
	var found []string
	for _, f := range append(files, more...) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, sm := range perEngine.FindAllSubmatch(src, -1) {
			found = append(found, string(sm[1]))
		}
	}
	if len(found) == 0 {
		t.Fatal("found no test that runs per engine: has forEngine changed its name?")
	}
	for _, name := range found {
		if !slices.Contains(listed, name) {
			t.Errorf("%s runs per engine but is not in the Makefile's CGROUP2_TESTS: CI would never run it on cgroup v2", name)
		}
	}
	t.Logf("per engine: %v", found)
}
