package audit

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/internal/langrt"
	"github.com/sigscope/sigscope/timeline"
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

// The runtime and the handler's sa_flags decide what a handler at a
// namespace init achieves (issue 20).
func TestPredictRuntime(t *testing.T) {
	var (
		handler = tracer.TaskState{Handler: tracer.DispHandler, NSInit: true}
		oneShot = tracer.TaskState{Handler: tracer.DispHandler, OneShot: true, NSInit: true}
		noInit  = tracer.TaskState{Handler: tracer.DispHandler, OneShot: true}
		none    = tracer.TaskState{NSInit: true}
		blocked = tracer.TaskState{Handler: tracer.DispHandler, OneShot: true, Blocked: true, NSInit: true}
	)
	node := []string{"node", "server.js"}
	cases := []struct {
		name   string
		rt     langrt.Runtime
		source string
		sig    tracer.Signal
		st     tracer.TaskState
		cmd    []string
		want   string
		fate   tracer.Fate
		hint   []string // each in the hint; none: no hint
	}{
		{"Node.js without a listener: its one-shot handler re-raises", langrt.NodeJS, SourceKernel, tracer.SIGTERM, oneShot, node, IgnoredByInit, tracer.FateHandler,
			[]string{"PID 1 (node): its SIGTERM handler is one-shot (SA_RESETHAND): it re-raises the signal with the default action, and the kernel drops that for PID 1", "exit 137", "process.on('SIGTERM'", "tini"}},
		{"Node.js with process.on('SIGTERM')", langrt.NodeJS, SourceKernel, tracer.SIGTERM, handler, node, Graceful, tracer.FateHandler, nil},
		{"Node.js, one-shot and blocked now", langrt.NodeJS, SourceKernel, tracer.SIGTERM, blocked, node, IgnoredByInit, tracer.FateBlocked, []string{"one-shot"}},
		{"Node.js no init: the re-raise kills it", langrt.NodeJS, SourceKernel, tracer.SIGTERM, noInit, node, Graceful, tracer.FateHandler, nil},
		{"Node.js through /proc: inferred from the runtime", langrt.NodeJS, SourceProc, tracer.SIGTERM, handler, node, IgnoredByInit, tracer.FateHandler,
			[]string{"PID 1 (node) is Node.js and has a SIGTERM handler", "/proc does not show", "Inferred from the runtime", "process.on('SIGTERM'"}},
		{"Node.js through /proc, SIGINT", langrt.NodeJS, SourceProc, tracer.SIGINT, handler, node, IgnoredByInit, tracer.FateHandler, []string{"Inferred from the runtime"}},
		{"Node.js through /proc, SIGQUIT: not one it re-raises", langrt.NodeJS, SourceProc, tracer.SIGQUIT, handler, node, Graceful, tracer.FateHandler, nil},
		{"Node.js without a handler for the stop signal", langrt.NodeJS, SourceKernel, tracer.SIGQUIT, none, node, IgnoredByInit, tracer.FateDroppedInit, []string{"no SIGQUIT handler", "process.on("}},
		{"unknown runtime, one-shot handler", langrt.Unknown, SourceKernel, tracer.SIGTERM, oneShot, []string{"/app"}, IgnoredByInit, tracer.FateHandler,
			[]string{"one-shot (SA_RESETHAND)", timeline.FixInit + " (docker run --init)."}},
		{"unknown runtime through /proc, handler", langrt.Unknown, SourceProc, tracer.SIGTERM, handler, []string{"/app"}, Graceful, tracer.FateHandler, nil},
		{"the Go runtime's handler", langrt.Go, SourceKernel, tracer.SIGTERM, handler, []string{"/server"}, Graceful, tracer.FateHandler,
			[]string{"PID 1 (server) runs on the Go runtime", "exits at once with status 2", "exit status 2 rather than 143", "signal.NotifyContext"}},
		{"the Go runtime, through /proc", langrt.Go, SourceProc, tracer.SIGTERM, handler, []string{"/server"}, Graceful, tracer.FateHandler, []string{"status 2"}},
		{"the Go runtime with a one-shot handler still exits", langrt.Go, SourceKernel, tracer.SIGINT, oneShot, []string{"/server"}, Graceful, tracer.FateHandler, []string{"exit status 2 rather than 130"}},
		{"the Go runtime, SIGUSR1: not re-raised", langrt.Go, SourceKernel, tracer.SIGUSR1, handler, []string{"/server"}, Graceful, tracer.FateHandler, nil},
		{"the Go runtime no init", langrt.Go, SourceKernel, tracer.SIGTERM, tracer.TaskState{Handler: tracer.DispHandler}, []string{"/server"}, Graceful, tracer.FateHandler, nil},
		{"CPython leaves SIGTERM at its default", langrt.CPython, SourceKernel, tracer.SIGTERM, none, []string{"python3", "app.py"}, IgnoredByInit, tracer.FateDroppedInit,
			[]string{"no SIGTERM handler", "Install a handler, `signal.signal(signal.SIGTERM", "tini"}},
		{"CPython, a one-shot handler that does not re-raise", langrt.CPython, SourceKernel, tracer.SIGTERM, oneShot, []string{"python3"}, Graceful, tracer.FateHandler, nil},
		{"the JVM with -Xrs", langrt.JVM, SourceKernel, tracer.SIGTERM, none, []string{"java", "-Xrs", "Main"}, IgnoredByInit, tracer.FateDroppedInit, []string{"remove `-Xrs`", "shutdown hook"}},
		{"the JVM's handler", langrt.JVM, SourceKernel, tracer.SIGTERM, handler, []string{"java", "Main"}, Graceful, tracer.FateHandler, nil},
		{"a shell keeps the exec form", langrt.Shell, SourceKernel, tracer.SIGTERM, none, []string{"/bin/sh", "-c", "app"}, IgnoredByInit, tracer.FateDroppedInit,
			[]string{"It is a shell", "Use the exec form of ENTRYPOINT/CMD"}},
		{"a shell by argv[0], runtime not read", langrt.Unknown, SourceKernel, tracer.SIGTERM, none, []string{"/bin/bash", "-c", "app"}, IgnoredByInit, tracer.FateDroppedInit,
			[]string{"It is a shell", "Use the exec form of ENTRYPOINT/CMD"}},
		{"an unknown runtime keeps the generic fix", langrt.Unknown, SourceKernel, tracer.SIGTERM, none, []string{"/app"}, IgnoredByInit, tracer.FateDroppedInit,
			[]string{timeline.FixInit + " (docker run --init)."}},
		{"blocked without a handler: the runtime's fix", langrt.CPython, SourceKernel, tracer.SIGTERM, tracer.TaskState{Blocked: true, NSInit: true}, []string{"python3"}, IgnoredByInit, tracer.FateBlocked,
			[]string{"signal.signal("}},
	}
	for _, c := range cases {
		got, fate, hint := Predict(Facts{Signal: c.sig, State: c.st, Cmdline: c.cmd, Runtime: c.rt, Source: c.source})
		if got != c.want || fate != c.fate {
			t.Errorf("%s: %s (%s), want %s (%s); hint %q", c.name, got, fate, c.want, c.fate, hint)
		}
		for _, h := range c.hint {
			if !strings.Contains(hint, h) {
				t.Errorf("%s: hint %q, want it to say %q", c.name, hint, h)
			}
		}
		if len(c.hint) == 0 && hint != "" {
			t.Errorf("%s: hint %q, want none", c.name, hint)
		}
	}
}

// Run reads the runtime from /proc (the exe link) and puts it in the
// result and its JSON; the kernel's one-shot bit makes Node.js's handler
// ignored_by_init.
func TestRunRuntime(t *testing.T) {
	proc := t.TempDir()
	writeProc(t, proc, "100", "1", none, "0000000000004000", "node server.js")
	writeProc(t, proc, "200", "1", none, "0000000000004000", "node server.js")
	writeProc(t, proc, "300", "1", none, "0000000000004000", "/app")
	for pid, exe := range map[string]string{"100": "/usr/bin/node", "200": "/usr/local/bin/node", "300": "/app"} {
		if err := os.Symlink(exe, filepath.Join(proc, pid, "exe")); err != nil {
			t.Fatal(err)
		}
	}
	term := tracer.NewSignalSet(tracer.SIGTERM)
	l := fakeLister{running: []container.Running{
		{Info: container.Info{ID: "a", Name: "node-default"}, PID: 100},
		{Info: container.Info{ID: "b", Name: "node-listener"}, PID: 200},
		{Info: container.Info{ID: "c", Name: "app"}, PID: 300},
	}}
	kernel := func([]int) (map[int]tracer.TaskSnapshot, error) {
		return map[int]tracer.TaskSnapshot{
			100: {PID: 100, NSPID: 1, SigFlags: 0x40, Handled: term, OneShot: term},
			200: {PID: 200, NSPID: 1, SigFlags: 0x40, Handled: term},
			300: {PID: 300, NSPID: 1, SigFlags: 0x40, Handled: term},
		}, nil
	}
	res, err := RunWith(context.Background(), l, Options{ProcRoot: proc, ReadTaskStates: kernel})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range res {
		got[r.Container.Name] = r
	}
	if r := got["node-default"]; r.PID1.Runtime != langrt.NodeJS || r.Prediction != IgnoredByInit || !strings.Contains(r.Hint, "one-shot") {
		t.Errorf("node without a listener: %+v", r)
	}
	if r := got["node-listener"]; r.PID1.Runtime != langrt.NodeJS || r.Prediction != Graceful {
		t.Errorf("node with a listener: %+v", r)
	}
	if r := got["app"]; r.PID1.Runtime != langrt.Unknown || r.Prediction != Graceful {
		t.Errorf("app: %+v", r)
	}
	b, err := json.Marshal(got["node-default"])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"pid1":{"pid":100,"ns_pid":1,"cmdline":["node","server.js"],"runtime":"nodejs"}`) {
		t.Errorf("JSON %s, want pid1.runtime", b)
	}
	if b, _ := json.Marshal(got["app"]); !strings.Contains(string(b), `"pid1":{"pid":300,"ns_pid":1,"cmdline":["/app"]}`) {
		t.Errorf("JSON %s: an unknown runtime is left out", b)
	}

	// The same through /proc, which shows no sa_flags: Node.js's handler
	// is taken for its own, from the runtime.
	res, err = RunWith(context.Background(), l, Options{ProcRoot: proc, Source: SourceProc})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		want := IgnoredByInit
		if r.Container.Name == "app" {
			want = Graceful
		}
		if r.Source != SourceProc || r.Prediction != want {
			t.Errorf("/proc: %s predicted %s, want %s: %+v", r.Container.Name, r.Prediction, want, r)
		}
	}
}
