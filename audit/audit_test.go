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
	var (
		dfl     = tracer.DispDefault
		ign     = tracer.DispIgnore
		handler = tracer.DispHandler
	)
	shell := []string{"/bin/sh", "-c", "app"}
	app := []string{"/app"}
	cases := []struct {
		name     string
		sig      tracer.Signal
		st       tracer.TaskState
		signalfd bool
		cmd      []string
		comm     string
		want     string
		fate     tracer.Fate
		hintHas  string
	}{
		// A namespace init.
		{"shell without trap", tracer.SIGTERM, tracer.TaskState{Handler: dfl, NSInit: true}, false, shell, "sh", IgnoredByInit, tracer.FateDroppedInit, "shell-form"},
		{"app without handler", tracer.SIGTERM, tracer.TaskState{NSInit: true}, false, app, "app", IgnoredByInit, tracer.FateDroppedInit, "tini"},
		{"handler", tracer.SIGTERM, tracer.TaskState{Handler: handler, NSInit: true}, false, app, "app", Graceful, tracer.FateHandler, ""},
		{"handler, blocked now", tracer.SIGTERM, tracer.TaskState{Handler: handler, Blocked: true, NSInit: true}, false, app, "app", Graceful, tracer.FateBlocked, "unblocks"},
		{"SIG_IGN (trap '' TERM)", tracer.SIGTERM, tracer.TaskState{Handler: ign, NSInit: true}, false, shell, "sh", IgnoredByInit, tracer.FateDroppedSigIgn, "SIG_IGN"},
		{"SIG_IGN, blocked now", tracer.SIGTERM, tracer.TaskState{Handler: ign, Blocked: true, NSInit: true}, false, app, "app", IgnoredByInit, tracer.FateBlocked, "SIG_IGN"},
		{"stop signal SIGKILL", tracer.SIGKILL, tracer.TaskState{NSInit: true}, false, app, "app", Killed, tracer.FateDefault, "SIGKILL"},
		{"SIGQUIT handled by nginx", tracer.SIGQUIT, tracer.TaskState{Handler: handler, NSInit: true}, false, []string{"nginx"}, "nginx", Graceful, tracer.FateHandler, ""},
		{"tini in sigtimedwait", tracer.SIGTERM, tracer.TaskState{Waited: true, NSInit: true}, false, []string{"/usr/bin/tini", "-s", "--", "app"}, "tini", Graceful, tracer.FateSigwait,
			"PID 1 is tini: it waits for SIGTERM with sigtimedwait and forwards it"},
		{"docker-init, named by comm", tracer.SIGTERM, tracer.TaskState{Waited: true, NSInit: true}, false, nil, "docker-init", Graceful, tracer.FateSigwait, "PID 1 is docker-init"},
		{"an unknown waiter", tracer.SIGTERM, tracer.TaskState{Waited: true, NSInit: true}, false, app, "app", Graceful, tracer.FateSigwait, "sigwaitinfo"},
		// tini as /proc sees it while it waits: SigBlk 0, no handler. The
		// kernel-side rule is right, the facts are not: why the kernel source comes first.
		{"tini seen through /proc", tracer.SIGTERM, tracer.TaskState{NSInit: true}, false, []string{"tini"}, "tini", IgnoredByInit, tracer.FateDroppedInit, "no SIGTERM handler"},
		{"catatonit and its signalfd", tracer.SIGTERM, tracer.TaskState{Blocked: true, NSInit: true}, true, []string{"catatonit", "--", "app"}, "catatonit", Graceful, tracer.FateBlocked,
			"PID 1 is catatonit: it reads SIGTERM from a signalfd and forwards it"},
		{"a signalfd reader", tracer.SIGTERM, tracer.TaskState{Blocked: true, NSInit: true}, true, app, "app", Graceful, tracer.FateBlocked, "signalfd"},
		{"blocked, no handler, no signalfd", tracer.SIGTERM, tracer.TaskState{Blocked: true, NSInit: true}, false, shell, "sh", IgnoredByInit, tracer.FateBlocked, "no signalfd"},
		{"default-ignored stop signal", tracer.SIGWINCH, tracer.TaskState{NSInit: true}, false, app, "app", IgnoredByInit, tracer.FateDroppedDefault, "default action of SIGWINCH"},
		{"exiting", tracer.SIGTERM, tracer.TaskState{Exiting: true}, false, app, "app", Unknown, tracer.FateDroppedExiting, "exiting"},

		// The main process of a container sharing a pid namespace: no init.
		{"no init, no handler: the default action kills", tracer.SIGTERM, tracer.TaskState{}, false, []string{"sleep", "1000"}, "sleep", Graceful, tracer.FateDefault, "default action ends it"},
		{"no init, handler", tracer.SIGTERM, tracer.TaskState{Handler: handler}, false, app, "app", Graceful, tracer.FateHandler, ""},
		{"no init, SIG_IGN", tracer.SIGTERM, tracer.TaskState{Handler: ign}, false, []string{"nohup"}, "nohup", Ignored, tracer.FateDroppedSigIgn, "The main process (nohup) ignores SIGTERM (SIG_IGN)"},
		{"no init, blocked without handler", tracer.SIGTERM, tracer.TaskState{Blocked: true}, false, app, "app", Ignored, tracer.FateBlocked, "stays pending"},
		{"no init, blocked with handler", tracer.SIGTERM, tracer.TaskState{Blocked: true, Handler: handler}, false, app, "app", Graceful, tracer.FateBlocked, "the main process unblocks it"},
		{"no init, default-ignored", tracer.SIGCHLD, tracer.TaskState{}, false, app, "app", Ignored, tracer.FateDroppedDefault, "ignore it"},
		{"no init, stop signal SIGTSTP", tracer.Signal(20), tracer.TaskState{}, false, app, "app", Ignored, tracer.FateDefault, "stopped by SIGTSTP"},
		{"no init, SIGKILL", tracer.SIGKILL, tracer.TaskState{}, false, app, "app", Killed, tracer.FateDefault, "The main process (app)"},
	}
	for _, c := range cases {
		got, fate, hint := Predict(Facts{Signal: c.sig, State: c.st, Signalfd: c.signalfd, Cmdline: c.cmd, Comm: c.comm})
		if got != c.want || fate != c.fate || !strings.Contains(hint, c.hintHas) {
			t.Errorf("%s: %s (%s) %q, want %s (%s) with %q", c.name, got, fate, hint, c.want, c.fate, c.hintHas)
		}
		if c.hintHas == "" && hint != "" {
			t.Errorf("%s: hint %q, want none", c.name, hint)
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

// writeProc writes a fake /proc/PID with a status and a cmdline.
func writeProc(t *testing.T, proc, pid, nspid, blk, cgt, cmd string) {
	t.Helper()
	dir := filepath.Join(proc, pid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	status := "Name:\t" + filepath.Base(strings.Fields(cmd)[0]) + "\nNSpid:\t" + pid + "\t" + nspid +
		"\nSigBlk:\t" + blk + "\nSigIgn:\t0000000000000000\nSigCgt:\t" + cgt + "\n"
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.ReplaceAll(cmd, " ", "\x00")+"\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
}

const none = "0000000000000000"

// A fake /proc with two inits (one catches SIGTERM, bit 14, one does not)
// and a main process that is no init; the kernel source is off.
func TestRunReadsProc(t *testing.T) {
	proc := t.TempDir()
	writeProc(t, proc, "100", "1", none, "0000000000004000", "/app serve")
	writeProc(t, proc, "200", "1", none, none, "/bin/sh -c app")
	writeProc(t, proc, "400", "7", none, none, "/app serve")
	l := fakeLister{running: []container.Running{
		{Info: container.Info{ID: "b", Name: "shell"}, PID: 200},
		{Info: container.Info{ID: "a", Name: "app"}, PID: 100},
		{Info: container.Info{ID: "c", Name: "gone"}, PID: 300},
		{Info: container.Info{ID: "d", Name: "quitter", StopSignal: tracer.SIGQUIT}, PID: 100},
		{Info: container.Info{ID: "e", Name: "shared"}, PID: 400},
		{Info: container.Info{ID: "f", Name: "nopid"}},
	}}
	kernel := func([]int) (map[int]tracer.TaskSnapshot, error) {
		t.Error("the kernel was read with Source proc")
		return nil, nil
	}
	res, err := RunWith(context.Background(), l, Options{ProcRoot: proc, Source: SourceProc, ReadTaskStates: kernel})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	var order []string
	for _, r := range res {
		got[r.Container.Name] = r
		order = append(order, r.Container.Name)
	}
	if want := "app gone nopid quitter shared shell"; strings.Join(order, " ") != want {
		t.Errorf("order %q, want %q", order, want)
	}
	if r := got["app"]; r.Prediction != Graceful || !r.Catches || r.PID1.Cmdline[0] != "/app" || r.Source != SourceProc || !r.NSInit || r.Fate != "handler" || r.PID1.NSPID != 1 {
		t.Errorf("app: %+v", r)
	}
	if r := got["shell"]; r.Prediction != IgnoredByInit || r.Catches || r.StopSignal != "SIGTERM" || r.Fate != "pid1_ignored" {
		t.Errorf("shell: %+v", r)
	}
	if r := got["gone"]; r.Prediction != Unknown || r.Error == "" || r.Source != "" || r.Fate != "unknown" || r.StopSignal != "SIGTERM" {
		t.Errorf("gone: %+v", r)
	}
	if r := got["nopid"]; r.Prediction != Unknown || r.Error == "" || r.StopSignal != "SIGTERM" {
		t.Errorf("nopid: %+v", r)
	}
	if r := got["quitter"]; r.Prediction != IgnoredByInit || r.StopSignal != "SIGQUIT" {
		t.Errorf("quitter (stop signal SIGQUIT, only TERM caught): %+v", r)
	}
	if r := got["shared"]; r.Prediction != Graceful || r.NSInit || r.Fate != "delivered" || r.PID1.NSPID != 7 {
		t.Errorf("shared (ns pid 7, no handler: the default action kills it): %+v", r)
	}
	if _, err := Run(context.Background(), fakeLister{err: errors.New("no runtime")}, proc); err == nil {
		t.Error("no runtime and no containers: want the error")
	}
}

// The kernel comes first: what it says wins over /proc, a process it did
// not see is read from /proc, and when it cannot be read at all every
// process is.
func TestRunPrefersKernel(t *testing.T) {
	proc := t.TempDir()
	// tini while it waits: /proc shows nothing blocked, nothing caught.
	writeProc(t, proc, "100", "1", none, none, "/usr/bin/tini -s -- app")
	writeProc(t, proc, "200", "1", none, none, "/bin/sh -c app")
	l := fakeLister{running: []container.Running{
		{Info: container.Info{ID: "a", Name: "tini"}, PID: 100},
		{Info: container.Info{ID: "b", Name: "shell"}, PID: 200},
	}}
	var asked []int
	kernel := func(pids []int) (map[int]tracer.TaskSnapshot, error) {
		asked = pids
		return map[int]tracer.TaskSnapshot{
			100: {PID: 100, NSPID: 1, SigFlags: 0x40, RealBlocked: 0xfffffffe3fcbfa07, Comm: tracer.Comm{'t', 'i', 'n', 'i'}},
		}, nil
	}
	res, err := RunWith(context.Background(), l, Options{ProcRoot: proc, ReadTaskStates: kernel})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 {
		t.Errorf("kernel asked for %v, want both pids in one read", asked)
	}
	if r := res[1]; r.Container.Name != "tini" || r.Source != SourceKernel || r.Prediction != Graceful || r.Fate != "sigwait" ||
		!strings.Contains(r.Hint, "PID 1 is tini") || r.PID1.Cmdline[0] != "/usr/bin/tini" {
		t.Errorf("tini: %+v", r)
	}
	if r := res[0]; r.Container.Name != "shell" || r.Source != SourceProc || r.Prediction != IgnoredByInit {
		t.Errorf("shell, not seen by the iterator: %+v", r)
	}

	failing := func([]int) (map[int]tracer.TaskSnapshot, error) {
		return nil, errors.New("cannot trace: this process lacks CAP_BPF")
	}
	res, err = RunWith(context.Background(), l, Options{ProcRoot: proc, ReadTaskStates: failing})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Source != SourceProc || r.Prediction != IgnoredByInit || r.Error != "" {
			t.Errorf("fallback: %+v", r)
		}
	}
	res, _ = RunWith(context.Background(), l, Options{ProcRoot: proc, Source: SourceKernel, ReadTaskStates: failing})
	for _, r := range res {
		if r.Prediction != Unknown || !strings.Contains(r.Error, "CAP_BPF") {
			t.Errorf("kernel forced: %+v", r)
		}
	}
}
