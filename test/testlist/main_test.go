package main

import (
	"fmt"
	"strings"
	"testing"
)

const pkg = "github.com/sigscope/sigscope/test/e2e/kube"

// record is a go test -json record as the go command writes it: for each
// test (name, action) its run, its output (a log line, a subtest for the
// first, the --- line) and its end; then the package's result.
func record(tests ...[2]string) string {
	var b strings.Builder
	line := func(action, test, output string) {
		switch {
		case output != "":
			fmt.Fprintf(&b, `{"Time":"2026-11-28T23:40:44.578458169Z","Action":"output","Package":%q,"Test":%q,"Output":%q}`+"\n", pkg, test, output)
		case test == "":
			fmt.Fprintf(&b, `{"Time":"2026-11-28T23:40:44.578458169Z","Action":%q,"Package":%q,"Elapsed":12.5}`+"\n", action, pkg)
		default:
			fmt.Fprintf(&b, `{"Time":"2026-11-28T23:40:44.578458169Z","Action":%q,"Package":%q,"Test":%q,"Elapsed":1.25}`+"\n", action, pkg, test)
		}
	}
	line("start", "", "")
	failed := false
	for i, tc := range tests {
		name, action := tc[0], tc[1]
		line("run", name, "")
		line("", name, "=== RUN   "+name+"\n")
		line("", name, "    stop_test.go:42: pod deleted after 2.1s\n")
		if i == 0 {
			line("run", name+"/crio", "")
			line("", name+"/crio", "--- PASS: "+name+"/crio (0.10s)\n") // not indented in -json's output
			line("pass", name+"/crio", "")
		}
		switch action {
		case "pass":
			line("", name, "--- PASS: "+name+" (1.25s)\n")
		case "skip":
			line("", name, "--- SKIP: "+name+" (0.00s)\n")
		case "fail":
			line("", name, "--- FAIL: "+name+" (1.25s)\n")
			failed = true
		case "":
			// started, never ended: the binary panicked
			line("", name, "panic: test timed out after 30m0s\n")
			failed = true
			continue
		}
		line(action, name, "")
	}
	if failed {
		line("", "", "FAIL\n")
		line("", "", "FAIL\t"+pkg+"\t12.5s\n")
		line("fail", "", "")
	} else {
		line("", "", "PASS\n")
		line("", "", "ok  \t"+pkg+"\t12.5s\n")
		line("pass", "", "")
	}
	return b.String()
}

var list = []string{"TestKubeletGracefulPod", "TestClusterRunsAndDeletesPod", "TestPodDeletionTraffic"}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name  string
		tests [][2]string
		fail  []string // in the error's summary, each
	}{
		{name: "all pass", tests: [][2]string{{"TestKubeletGracefulPod", "pass"}, {"TestClusterRunsAndDeletesPod", "pass"}, {"TestPodDeletionTraffic", "pass"}}},
		{name: "one missing", tests: [][2]string{{"TestKubeletGracefulPod", "pass"}, {"TestPodDeletionTraffic", "pass"}},
			fail: []string{"TestClusterRunsAndDeletesPod (not in the run"}},
		{name: "one renamed", tests: [][2]string{{"TestKubeletGracefulPod", "pass"}, {"TestClusterRunsAndDeletesPods", "pass"}, {"TestPodDeletionTraffic", "pass"}},
			fail: []string{"TestClusterRunsAndDeletesPod (not in the run", "ran, not on the list: TestClusterRunsAndDeletesPods"}},
		{name: "one skipped", tests: [][2]string{{"TestKubeletGracefulPod", "pass"}, {"TestClusterRunsAndDeletesPod", "skip"}, {"TestPodDeletionTraffic", "pass"}},
			fail: []string{"TestClusterRunsAndDeletesPod (skipped)"}},
		{name: "one failed", tests: [][2]string{{"TestKubeletGracefulPod", "pass"}, {"TestClusterRunsAndDeletesPod", "pass"}, {"TestPodDeletionTraffic", "fail"}},
			fail: []string{"TestPodDeletionTraffic (failed)"}},
		{name: "no result", tests: [][2]string{{"TestKubeletGracefulPod", "pass"}, {"TestClusterRunsAndDeletesPod", "pass"}, {"TestPodDeletionTraffic", ""}},
			fail: []string{"TestPodDeletionTraffic (started, no result"}},
		{name: "nothing ran", fail: []string{"3 of 3 listed tests did not pass"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			err := check(list, strings.NewReader(record(c.tests...)), &out)
			if len(c.fail) == 0 {
				if err != nil {
					t.Fatalf("check: %v\n%s", err, out.String())
				}
				if !strings.Contains(out.String(), "testlist: all 3 listed tests passed") {
					t.Errorf("no verdict in the summary:\n%s", out.String())
				}
			} else if err == nil {
				t.Fatalf("check passed, want a failure naming %q:\n%s", c.fail, out.String())
			}
			for _, f := range c.fail {
				if !strings.Contains(out.String(), f) {
					t.Errorf("the summary does not say %q:\n%s", f, out.String())
				}
			}
			// The -v lines CI showed, and nothing of === RUN nor the
			// subtests' --- lines.
			if strings.Contains(out.String(), "=== RUN") || strings.Contains(out.String(), "/crio (") {
				t.Errorf("the summary has === RUN or a subtest's --- lines:\n%s", out.String())
			}
			for _, tc := range c.tests {
				if tc[1] != "" && !strings.Contains(out.String(), "--- "+strings.ToUpper(tc[1])+": "+tc[0]+" (") {
					t.Errorf("the summary has no --- line of %s:\n%s", tc[0], out.String())
				}
			}
			if len(c.tests) > 0 && !strings.Contains(out.String(), "    stop_test.go:42: pod deleted after 2.1s\n") {
				t.Errorf("the summary has no test log line:\n%s", out.String())
			}
		})
	}
}

// A listed test that passed in a package that failed anyway (TestMain,
// a test outside the list): the stage fails.
func TestCheckPackageFailed(t *testing.T) {
	rec := record([2]string{"TestKubeletGracefulPod", "pass"}, [2]string{"TestClusterRunsAndDeletesPod", "pass"}, [2]string{"TestPodDeletionTraffic", "pass"})
	rec = strings.Replace(rec, `"Action":"pass","Package":"`+pkg+`","Elapsed"`, `"Action":"fail","Package":"`+pkg+`","Elapsed"`, 1)
	var out strings.Builder
	if err := check(list, strings.NewReader(rec), &out); err == nil || !strings.Contains(err.Error(), "the package failed") {
		t.Fatalf("check: %v, want the package's failure\n%s", err, out.String())
	}
}

// A build failure: go's build output is shown, every test is missing.
func TestCheckBuildFailed(t *testing.T) {
	rec := `{"ImportPath":"` + pkg + ` [` + pkg + `.test]","Action":"build-output","Output":"# ` + pkg + `\n"}
{"ImportPath":"` + pkg + ` [` + pkg + `.test]","Action":"build-output","Output":"test/e2e/kube/stop_test.go:3:28: undefined: waitPod\n"}
{"ImportPath":"` + pkg + ` [` + pkg + `.test]","Action":"build-fail"}
{"Time":"2026-11-28T23:40:46.362043316Z","Action":"start","Package":"` + pkg + `"}
{"Time":"2026-11-28T23:40:46.362184811Z","Action":"output","Package":"` + pkg + `","Output":"FAIL\t` + pkg + ` [build failed]\n"}
{"Time":"2026-11-28T23:40:46.362197314Z","Action":"fail","Package":"` + pkg + `","Elapsed":0,"FailedBuild":"` + pkg + ` [` + pkg + `.test]"}
go: some other message on standard error
`
	var out strings.Builder
	err := check(list, strings.NewReader(rec), &out)
	if err == nil {
		t.Fatalf("check passed a failed build:\n%s", out.String())
	}
	for _, want := range []string{"undefined: waitPod", "[build failed]", "go: some other message", "3 of 3 listed tests did not pass"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary does not say %q:\n%s", want, out.String())
		}
	}
}

func TestParseList(t *testing.T) {
	names, err := parseList(strings.NewReader("# CRI-O's subset\n\nTestKubeletGracefulPod\n  TestPodDeletionTraffic  \n"), "list")
	if err != nil || strings.Join(names, ",") != "TestKubeletGracefulPod,TestPodDeletionTraffic" {
		t.Fatalf("parseList = %q, %v", names, err)
	}
	if got := pattern(names); got != "^(TestKubeletGracefulPod|TestPodDeletionTraffic)$" {
		t.Errorf("pattern = %s", got)
	}
	for _, bad := range []string{"", "# only a comment\n", "TestKubelet.*\n", "TestA/sub\n", "TestA\nTestA\n", "Kubelet\n"} {
		if _, err := parseList(strings.NewReader(bad), "list"); err == nil {
			t.Errorf("parseList(%q) took it", bad)
		}
	}
}
