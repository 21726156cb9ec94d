package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/tracer"
)

func TestPredict(t *testing.T) {
	cases := []struct {
		name                    string
		sig                     tracer.Signal
		catches, ignores, block bool
		cmd                     []string
		want, hintHas           string
	}{
		{"shell without trap", tracer.SIGTERM, false, false, false, []string{"/bin/sh", "-c", "app"}, IgnoredByInit, "shell-form"},
		{"app without handler", tracer.SIGTERM, false, false, false, []string{"/app"}, IgnoredByInit, "tini"},
		{"handler", tracer.SIGTERM, true, false, false, []string{"/app"}, Graceful, ""},
		{"handler, blocked now", tracer.SIGTERM, true, false, true, []string{"/app"}, Graceful, "unblocks"},
		{"SIG_IGN", tracer.SIGTERM, false, true, false, []string{"/app"}, IgnoredByInit, "SIG_IGN"},
		{"stop signal SIGKILL", tracer.SIGKILL, false, false, false, []string{"/app"}, Killed, "SIGKILL"},
		{"SIGQUIT handled by nginx", tracer.SIGQUIT, true, false, false, []string{"nginx"}, Graceful, ""},
	}
	for _, c := range cases {
		got, hint := Predict(c.sig, c.catches, c.ignores, c.block, c.cmd)
		if got != c.want || !strings.Contains(hint, c.hintHas) {
			t.Errorf("%s: %s %q, want %s with %q", c.name, got, hint, c.want, c.hintHas)
		}
	}
}

type fakeLister struct {
	running []container.Running
	err     error
}

func (f fakeLister) ListRunning(context.Context) ([]container.Running, error) {
	return f.running, f.err
}

// A fake /proc with two inits: one catches SIGTERM (bit 14), one does not.
func TestRunReadsProc(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, cgt, cmd string) {
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		status := "Name:\tx\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t" + cgt + "\n"
		_ = os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.ReplaceAll(cmd, " ", "\x00")+"\x00"), 0o644)
	}
	write("100", "0000000000004000", "/app serve")
	write("200", "0000000000000000", "/bin/sh -c app")
	l := fakeLister{running: []container.Running{
		{Info: container.Info{ID: "b", Name: "shell"}, PID: 200},
		{Info: container.Info{ID: "a", Name: "app"}, PID: 100},
		{Info: container.Info{ID: "c", Name: "gone"}, PID: 300},
		{Info: container.Info{ID: "d", Name: "quitter", StopSignal: tracer.SIGQUIT}, PID: 100},
	}}
	res, err := Run(context.Background(), l, proc)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range res {
		got[r.Container.Name] = r
	}
	if r := got["app"]; r.Prediction != Graceful || !r.Catches || r.PID1.Cmdline[0] != "/app" {
		t.Errorf("app: %+v", r)
	}
	if r := got["shell"]; r.Prediction != IgnoredByInit || r.Catches || r.StopSignal != "SIGTERM" {
		t.Errorf("shell: %+v", r)
	}
	if r := got["gone"]; r.Prediction != Unknown || r.Error == "" {
		t.Errorf("gone: %+v", r)
	}
	if r := got["quitter"]; r.Prediction != IgnoredByInit || r.StopSignal != "SIGQUIT" {
		t.Errorf("quitter (stop signal SIGQUIT, only TERM caught): %+v", r)
	}
	if _, err := Run(context.Background(), fakeLister{err: errors.New("no runtime")}, proc); err == nil {
		t.Error("no runtime and no containers: want the error")
	}
}
