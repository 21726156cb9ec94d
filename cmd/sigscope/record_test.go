package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/containers/identity"
)

func TestContainerFilter(t *testing.T) {
	web := &identity.Info{Identity: identity.Identity{ID: "abcdef", Name: "web", Pod: "web-1", Namespace: "shop"}}
	for _, c := range []struct {
		container, pod string
		in             *identity.Info
		want           bool
	}{
		{"", "", nil, true},
		{"abc", "", web, true},
		{"web", "", web, true},
		{"xyz", "", web, false},
		{"", "shop/web-1", web, true},
		{"", "shop/web-2", web, false},
		{"web", "", nil, false},
	} {
		f, _ := newContainerFilter(c.container, c.pod)
		if got := matchAny(f, nil, c.in); c.in != nil && got != c.want {
			t.Errorf("filter %q %q on the sender %+v: %v", c.container, c.pod, c.in, got)
		}
		f, err := newContainerFilter(c.container, c.pod)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.MatchesInfo(c.in); got != c.want {
			t.Errorf("filter %q %q on %+v: %v", c.container, c.pod, c.in, got)
		}
	}
	if _, err := newContainerFilter("", "nopod"); err == nil {
		t.Error("--pod without a slash accepted")
	}
}

// timeline -f on damaged recordings: the first bad line is named by file
// and line; --skip-invalid goes on and says how many it skipped; a cut-off
// last line is only a note.
func TestTimelineBadRecording(t *testing.T) {
	rec, err := os.ReadFile(filepath.Join("..", "..", "episodes", "timeline", "testdata", "streams", "catatonit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimRight(string(rec), "\n"), "\n")
	if len(lines) < 4 {
		t.Fatalf("recording of %d lines", len(lines))
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.jsonl", strings.Join(lines[:2], "")+"{\"event\": garbage\n"+strings.Join(lines[2:], "")+"\n")
	last := lines[len(lines)-1]
	cut := write("cut.jsonl", strings.Join(lines[:len(lines)-1], "")+last[:len(last)/2])
	run := func(file string, skip bool) (string, string, error) {
		var out, errOut bytes.Buffer
		err := runTimeline(t.Context(), timelineFlags{file: file, skip: skip, output: "json"}, nil, &out, &errOut)
		return out.String(), errOut.String(), err
	}
	if _, _, err := run(bad, false); err == nil || !strings.Contains(err.Error(), bad+":3: ") {
		t.Errorf("a bad line 3: %v, want an error naming %s:3", err, bad)
	}
	out, errOut, err := run(bad, true)
	if err != nil || !strings.Contains(errOut, "skipped 1 invalid line(s)") || !strings.Contains(errOut, bad+":3") || !strings.Contains(out, `"outcome":"graceful"`) {
		t.Errorf("--skip-invalid: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	out, errOut, err = run(cut, false)
	if err != nil || !strings.Contains(errOut, "the last line is cut off") || !strings.Contains(out, `"outcome"`) {
		t.Errorf("a cut-off last line: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if err := runTimeline(t.Context(), timelineFlags{skip: true, output: "text"}, nil, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Errorf("--skip-invalid without -f: no usage error")
	}
}
