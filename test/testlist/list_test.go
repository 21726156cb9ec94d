package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// CI's CRI-O subset (test/crio-subset.txt) names tests test/e2e/kube has, and
// has every TestKubelet* (the kubelet's stop path, which is what the stage
// is for): a new one not listed would never run on CRI-O in CI, a listed
// one renamed would fail the stage only after a cluster's bring-up. No root
// needed.
func TestCRIOSubsetListed(t *testing.T) {
	names, err := readList("../crio-subset.txt")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../e2e/kube/*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test/e2e/kube tests (%v)", err)
	}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(t \*testing\.T\)`)
	var tests []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			tests = append(tests, string(m[1]))
		}
	}
	for _, n := range names {
		if !slices.Contains(tests, n) {
			t.Errorf("test/crio-subset.txt lists %s, which test/e2e/kube does not have (renamed? removed?)", n)
		}
	}
	kubelet := regexp.MustCompile(`^TestKubelet`)
	for _, n := range tests {
		if kubelet.MatchString(n) && !slices.Contains(names, n) {
			t.Errorf("test/e2e/kube's %s is not in test/crio-subset.txt: CI would never run it on CRI-O (list it there)", n)
		}
	}
}
