package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/audit"
)

// The table has a RUNTIME column ("-" when not recognised), and what a
// remote agent sent is escaped like the rest of the row.
func TestWriteAuditTable(t *testing.T) {
	results := []audit.Result{
		{Container: identity.Summary{Identity: identity.Identity{ID: "a1", Name: "web"}}, PID1: audit.PID1{PID: 4242, Cmdline: []string{"node", "server.js"}, Runtime: "nodejs"},
			StopSignal: "SIGTERM", Source: audit.SourceKernel, Catches: true, Prediction: audit.IgnoredByInit, Hint: "PID 1 (node): its SIGTERM handler is one-shot"},
		{Container: identity.Summary{Identity: identity.Identity{ID: "b2", Name: "app"}}, PID1: audit.PID1{PID: 17, Cmdline: []string{"/app"}},
			StopSignal: "SIGTERM", Source: audit.SourceProc, Prediction: audit.Graceful},
		{Container: identity.Summary{Identity: identity.Identity{ID: "c3", Name: "evil"}}, PID1: audit.PID1{PID: 18, Cmdline: []string{"/x"}, Runtime: "go\x1b[2J"},
			StopSignal: "SIGTERM", Prediction: audit.Graceful},
	}
	var out bytes.Buffer
	if err := writeAudit(&out, "table", results); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	t.Logf("\n%s", out.String())
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "CONTAINER PID COMMAND RUNTIME SIGNAL CATCHES SOURCE PREDICTION" {
		t.Errorf("header %q", lines[0])
	}
	for i, want := range [][]string{
		{"web", "4242", "node", "server.js", "nodejs", "SIGTERM", "true", "kernel", "ignored_by_init"},
		{"app", "17", "/app", "-", "SIGTERM", "false", "proc", "graceful"},
	} {
		if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %d: %q, want %q", i+1, got, want)
		}
	}
	if strings.Contains(out.String(), "\x1b") || !strings.Contains(lines[3], `go\x1b[2J`) {
		t.Errorf("a hostile runtime is not escaped: %q", lines[3])
	}
	if !strings.Contains(out.String(), "\nweb: PID 1 (node): its SIGTERM handler is one-shot\n") {
		t.Errorf("hint missing:\n%s", out.String())
	}

	out.Reset()
	if err := writeAudit(&out, "json", results[:1]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"runtime":"nodejs"`) {
		t.Errorf("JSON %s, want pid1.runtime", out.String())
	}
}
