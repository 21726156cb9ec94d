// Command testlist runs a fixed list of tests and holds the run to it: CI's
// stage of test/e2e/kube on CRI-O runs a subset of the suite, and a test of that
// subset renamed, removed or skipped must fail the stage instead of
// shrinking it unseen.
//
//	testlist -run LIST
//	    prints the -run pattern of go test for LIST's tests: ^(A|B|...)$
//	testlist -check LIST [FILE]
//	    reads the run's record (go test -json, from FILE or standard input),
//	    prints its summary (the lines CI showed of a -v run: each top-level
//	    test's --- PASS/FAIL/SKIP, PASS, FAIL, ok, panics and the tests'
//	    own log lines, FILE_test.go:LINE: ..., and any build output or
//	    other line that is not test2json's), and
//	    fails unless every test of LIST ended with action "pass" as a
//	    top-level test
//
// LIST is a file of test names, one a line; blank lines and lines starting
// with # are ignored.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

func main() {
	run := flag.String("run", "", "print go test's -run pattern for the tests of this list file")
	chk := flag.String("check", "", "check a go test -json record (FILE or standard input) against this list file")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: testlist -run LIST | testlist -check LIST [FILE]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	switch {
	case *run != "" && *chk == "" && flag.NArg() == 0:
		names, err := readList(*run)
		if err != nil {
			fatal(err)
		}
		fmt.Println(pattern(names))
	case *chk != "" && *run == "" && flag.NArg() <= 1:
		names, err := readList(*chk)
		if err != nil {
			fatal(err)
		}
		in := io.Reader(os.Stdin)
		if flag.NArg() == 1 {
			f, err := os.Open(flag.Arg(0))
			if err != nil {
				fatal(err)
			}
			defer f.Close()
			in = f
		}
		if err := check(names, in, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "testlist: %v\n", err)
			os.Exit(1)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "testlist: %v\n", err)
	os.Exit(2)
}

// A name of the list is a top-level test's: no pattern, no subtest.
var testName = regexp.MustCompile(`^Test[A-Za-z0-9_]*$`)

// readList reads a list file.
func readList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseList(f, path)
}

// parseList reads test names, one a line, without blank lines and #
// comments; each must be a top-level test's name, listed once.
func parseList(r io.Reader, path string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !testName.MatchString(line) {
			return nil, fmt.Errorf("%s:%d: %q is not a test's name (TestXxx)", path, n, line)
		}
		if seen[line] {
			return nil, fmt.Errorf("%s:%d: %s is listed twice", path, n, line)
		}
		seen[line] = true
		names = append(names, line)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s lists no test", path)
	}
	return names, nil
}

// pattern is go test's -run pattern for exactly names (top-level; their
// subtests run with them).
func pattern(names []string) string {
	return "^(" + strings.Join(names, "|") + ")$"
}

// event is a line of go test -json (cmd/test2json), and a build's output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// summaryLine: the lines of a -v run's output CI showed of the suite
// (grep -E '^(--- |PASS|FAIL|ok|panic)|_test.go:').
var summaryLine = regexp.MustCompile(`^(--- |PASS|FAIL|ok|panic)|_test\.go:`)

// check reads a go test -json record from r, writes its summary to w, and
// returns an error naming each test of names that did not end with action
// "pass" as a top-level test: missing from the record (renamed, removed,
// not matched), skipped, failed, or started with no result (a panic, a
// timeout).
func check(names []string, r io.Reader, w io.Writer) error {
	result := map[string]string{} // top-level test -> run, pass, fail, skip
	var order []string            // top-level tests in the order they started
	pkgFailed := false
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for s.Scan() {
		line := s.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			// Not test2json's: go's own messages on standard error.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		switch e.Action {
		case "output":
			sub := strings.Contains(e.Test, "/")
			for _, l := range strings.SplitAfter(e.Output, "\n") {
				// A subtest's --- line, indented in -v's output, is not
				// in -json's: left out, as the grep did.
				if l != "" && summaryLine.MatchString(l) && !(sub && strings.HasPrefix(l, "--- ")) {
					fmt.Fprint(w, l)
				}
			}
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "build-fail":
			pkgFailed = true
		case "run", "pass", "fail", "skip":
			if e.Test == "" {
				if e.Action == "fail" {
					pkgFailed = true
				}
				break
			}
			if strings.Contains(e.Test, "/") {
				break // a subtest: its parent's result counts
			}
			if _, ok := result[e.Test]; !ok {
				order = append(order, e.Test)
			}
			result[e.Test] = e.Action
		}
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("reading the record: %w", err)
	}
	var bad []string
	listed := map[string]bool{}
	for _, n := range names {
		listed[n] = true
		switch result[n] {
		case "pass":
		case "":
			bad = append(bad, n+" (not in the run: renamed, removed or not matched?)")
		case "run":
			bad = append(bad, n+" (started, no result: a panic or a timeout?)")
		case "skip":
			bad = append(bad, n+" (skipped)")
		case "fail":
			bad = append(bad, n+" (failed)")
		}
	}
	var extra []string
	for _, n := range order {
		if !listed[n] {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		fmt.Fprintf(w, "testlist: ran, not on the list: %s\n", strings.Join(extra, " "))
	}
	if len(bad) > 0 {
		fmt.Fprintf(w, "testlist: %d of %d listed tests did not pass:\n", len(bad), len(names))
		for _, b := range bad {
			fmt.Fprintf(w, "  %s\n", b)
		}
		return fmt.Errorf("%d of %d listed tests did not pass (above)", len(bad), len(names))
	}
	if pkgFailed {
		return errors.New("every listed test passed, but the package failed (its own output above)")
	}
	fmt.Fprintf(w, "testlist: all %d listed tests passed\n", len(names))
	return nil
}
