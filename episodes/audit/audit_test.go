package audit

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func TestPredict(t *testing.T) {
	var (
		dfl     = sigvocab.DispDefault
		ign     = sigvocab.DispIgnore
		handler = sigvocab.DispHandler
	)
	shell := []string{"/bin/sh", "-c", "app"}
	app := []string{"/app"}
	cases := []struct {
		name     string
		sig      sigvocab.Signal
		st       sigvocab.TaskState
		signalfd bool
		cmd      []string
		comm     string
		want     string
		fate     sigvocab.Fate
		hintHas  string
	}{
		// A namespace init.
		{"shell without trap", sigvocab.SIGTERM, sigvocab.TaskState{Handler: dfl, NSInit: true}, false, shell, "sh", IgnoredByInit, sigvocab.FateDroppedInit, "shell-form"},
		{"app without handler", sigvocab.SIGTERM, sigvocab.TaskState{NSInit: true}, false, app, "app", IgnoredByInit, sigvocab.FateDroppedInit, "tini"},
		{"handler", sigvocab.SIGTERM, sigvocab.TaskState{Handler: handler, NSInit: true}, false, app, "app", Graceful, sigvocab.FateHandler, ""},
		{"handler, blocked now", sigvocab.SIGTERM, sigvocab.TaskState{Handler: handler, Blocked: true, NSInit: true}, false, app, "app", Graceful, sigvocab.FateBlocked, "unblocks"},
		{"SIG_IGN (trap '' TERM)", sigvocab.SIGTERM, sigvocab.TaskState{Handler: ign, NSInit: true}, false, shell, "sh", IgnoredByInit, sigvocab.FateDroppedSigIgn, "SIG_IGN"},
		{"SIG_IGN, blocked now", sigvocab.SIGTERM, sigvocab.TaskState{Handler: ign, Blocked: true, NSInit: true}, false, app, "app", IgnoredByInit, sigvocab.FateBlocked, "SIG_IGN"},
		{"stop signal SIGKILL", sigvocab.SIGKILL, sigvocab.TaskState{NSInit: true}, false, app, "app", Killed, sigvocab.FateDefault, "SIGKILL"},
		{"SIGQUIT handled by nginx", sigvocab.SIGQUIT, sigvocab.TaskState{Handler: handler, NSInit: true}, false, []string{"nginx"}, "nginx", Graceful, sigvocab.FateHandler, ""},
		{"tini in sigtimedwait", sigvocab.SIGTERM, sigvocab.TaskState{Waited: true, NSInit: true}, false, []string{"/usr/bin/tini", "-s", "--", "app"}, "tini", Graceful, sigvocab.FateSigwait,
			"PID 1 is tini: it waits for SIGTERM with sigtimedwait and forwards it"},
		{"docker-init, named by comm", sigvocab.SIGTERM, sigvocab.TaskState{Waited: true, NSInit: true}, false, nil, "docker-init", Graceful, sigvocab.FateSigwait, "PID 1 is docker-init"},
		{"an unknown waiter", sigvocab.SIGTERM, sigvocab.TaskState{Waited: true, NSInit: true}, false, app, "app", Graceful, sigvocab.FateSigwait, "sigwaitinfo"},
		// tini as /proc sees it while it waits: SigBlk 0, no handler. The
		// kernel-side rule is right, the facts are not: why the kernel source comes first.
		{"tini seen through /proc", sigvocab.SIGTERM, sigvocab.TaskState{NSInit: true}, false, []string{"tini"}, "tini", IgnoredByInit, sigvocab.FateDroppedInit, "no SIGTERM handler"},
		{"catatonit and its signalfd", sigvocab.SIGTERM, sigvocab.TaskState{Blocked: true, NSInit: true}, true, []string{"catatonit", "--", "app"}, "catatonit", Graceful, sigvocab.FateBlocked,
			"PID 1 is catatonit: it reads SIGTERM from a signalfd and forwards it"},
		{"a signalfd reader", sigvocab.SIGTERM, sigvocab.TaskState{Blocked: true, NSInit: true}, true, app, "app", Graceful, sigvocab.FateBlocked, "signalfd"},
		{"blocked, no handler, no signalfd", sigvocab.SIGTERM, sigvocab.TaskState{Blocked: true, NSInit: true}, false, shell, "sh", IgnoredByInit, sigvocab.FateBlocked, "no signalfd"},
		{"default-ignored stop signal", sigvocab.SIGWINCH, sigvocab.TaskState{NSInit: true}, false, app, "app", IgnoredByInit, sigvocab.FateDroppedDefault, "the default action of SIGWINCH is to do nothing"},
		{"exiting", sigvocab.SIGTERM, sigvocab.TaskState{Exiting: true}, false, app, "app", Unknown, sigvocab.FateDroppedExiting, "exiting"},

		// The main process of a container sharing a pid namespace: no init.
		{"no init, no handler: the default action kills", sigvocab.SIGTERM, sigvocab.TaskState{}, false, []string{"sleep", "1000"}, "sleep", Graceful, sigvocab.FateDefault, "default action ends it"},
		{"no init, handler", sigvocab.SIGTERM, sigvocab.TaskState{Handler: handler}, false, app, "app", Graceful, sigvocab.FateHandler, ""},
		{"no init, SIG_IGN", sigvocab.SIGTERM, sigvocab.TaskState{Handler: ign}, false, []string{"nohup"}, "nohup", Ignored, sigvocab.FateDroppedSigIgn, "The main process (nohup) has set SIGTERM to SIG_IGN"},
		{"no init, blocked without handler", sigvocab.SIGTERM, sigvocab.TaskState{Blocked: true}, false, app, "app", Ignored, sigvocab.FateBlocked, "stays pending"},
		{"no init, blocked with handler", sigvocab.SIGTERM, sigvocab.TaskState{Blocked: true, Handler: handler}, false, app, "app", Graceful, sigvocab.FateBlocked, "the main process unblocks it"},
		{"no init, default-ignored", sigvocab.SIGCHLD, sigvocab.TaskState{}, false, app, "app", Ignored, sigvocab.FateDroppedDefault, "the default action of SIGCHLD is to do nothing"},
		{"no init, stop signal SIGTSTP", sigvocab.Signal(20), sigvocab.TaskState{}, false, app, "app", Ignored, sigvocab.FateDefault, "its default action stops it without ending it"},
		{"no init, SIGKILL", sigvocab.SIGKILL, sigvocab.TaskState{}, false, app, "app", Killed, sigvocab.FateDefault, "The main process (app)"},
	}
	for _, c := range cases {
		p := Predict(Facts{Signal: c.sig, State: c.st, Signalfd: c.signalfd, Cmdline: c.cmd, Comm: c.comm})
		got, fate, hint := string(p.Outcome), p.Fate, p.Hint()
		if got != c.want || fate != c.fate || !strings.Contains(hint, c.hintHas) {
			t.Errorf("%s: %s (%s) %q, want %s (%s) with %q", c.name, got, fate, hint, c.want, c.fate, c.hintHas)
		}
		if c.hintHas == "" && hint != "" {
			t.Errorf("%s: hint %q, want none", c.name, hint)
		}
		if n := strings.Count(hint, "run an init such as tini"); n > 1 {
			t.Errorf("%s: hint %q gives the init fix %d times", c.name, hint, n)
		}
		if f := (Facts{Signal: c.sig, State: c.st, Cmdline: c.cmd, Comm: c.comm}); hint != "" && !c.signalfd && !hasFateWords(hint, fate, f) {
			t.Errorf("%s: hint %q does not say the fate %s in its words (sigvocab.Fate.Reason)", c.name, hint, fate)
		}
	}
}

// hasFateWords reports whether a hint says the signal's fate in the words
// the timeline says it in: sigvocab.Fate.Reason about the process, by name
// or as "it". A handler's hints say what the handler does instead, a
// SIGKILL's that it cannot be handled, and SIG_IGN while blocked is said
// as SIG_IGN.
func hasFateWords(hint string, fate sigvocab.Fate, f Facts) bool {
	if fate == sigvocab.FateHandler || f.State.Handler == sigvocab.DispHandler || f.Signal == sigvocab.SIGKILL {
		return true
	}
	if f.State.Handler == sigvocab.DispIgnore {
		fate = sigvocab.FateDroppedSigIgn
	}
	for _, who := range []string{processName(f), "it"} {
		if strings.Contains(hint, fate.Reason(f.Signal, f.State.Handler, who)) {
			return true
		}
	}
	return false
}

type fakeLister struct {
	running []identity.Running
	err     error
}

func (f fakeLister) ListRunning(context.Context) ([]identity.Running, error) {
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
	l := fakeLister{running: []identity.Running{
		{Info: identity.Info{Identity: identity.Identity{ID: "b", Name: "shell"}}, PID: 200},
		{Info: identity.Info{Identity: identity.Identity{ID: "a", Name: "app"}}, PID: 100},
		{Info: identity.Info{Identity: identity.Identity{ID: "c", Name: "gone"}}, PID: 300},
		{Info: identity.Info{Identity: identity.Identity{ID: "d", Name: "quitter"}, StopSignal: sigvocab.SIGQUIT}, PID: 100},
		{Info: identity.Info{Identity: identity.Identity{ID: "e", Name: "shared"}}, PID: 400},
		{Info: identity.Info{Identity: identity.Identity{ID: "f", Name: "nopid"}}},
	}}
	kernel := func([]int) (map[int]sigvocab.TaskSnapshot, error) {
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
	if _, err := RunWith(context.Background(), fakeLister{err: errors.New("no runtime")}, Options{ProcRoot: proc}); err == nil {
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
	l := fakeLister{running: []identity.Running{
		{Info: identity.Info{Identity: identity.Identity{ID: "a", Name: "tini"}}, PID: 100},
		{Info: identity.Info{Identity: identity.Identity{ID: "b", Name: "shell"}}, PID: 200},
	}}
	var asked []int
	kernel := func(pids []int) (map[int]sigvocab.TaskSnapshot, error) {
		asked = pids
		return map[int]sigvocab.TaskSnapshot{
			100: {PID: 100, NSPID: 1, SigFlags: 0x40, RealBlocked: 0xfffffffe3fcbfa07, Comm: sigvocab.Comm{'t', 'i', 'n', 'i'}},
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

	failing := func([]int) (map[int]sigvocab.TaskSnapshot, error) {
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
// levels records the level of every log line.
type levels struct{ got *[]slog.Level }

func (levels) Enabled(context.Context, slog.Level) bool { return true }
func (h levels) Handle(_ context.Context, r slog.Record) error {
	*h.got = append(*h.got, r.Level)
	return nil
}
func (h levels) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h levels) WithGroup(string) slog.Handler      { return h }

// A caller that audits again and again (the agent) warns of the fallback
// to /proc once; one that keeps no memory of it warns every time.
func TestFallbackWarnsOnce(t *testing.T) {
	proc := t.TempDir()
	writeProc(t, proc, "200", "1", none, none, "/bin/sh -c app")
	l := fakeLister{running: []identity.Running{{Info: identity.Info{Identity: identity.Identity{ID: "b", Name: "shell"}}, PID: 200}}}
	failing := func([]int) (map[int]sigvocab.TaskSnapshot, error) { return nil, errors.New("no CAP_BPF") }
	run := func(warned *atomic.Bool) []slog.Level {
		var got []slog.Level
		log := slog.New(levels{&got})
		for range 3 {
			if _, err := RunWith(context.Background(), l, Options{ProcRoot: proc, ReadTaskStates: failing, Logger: log, FallbackWarned: warned}); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}
	if got := run(new(atomic.Bool)); !slices.Equal(got, []slog.Level{slog.LevelWarn, slog.LevelDebug, slog.LevelDebug}) {
		t.Errorf("with FallbackWarned: %v, want one warning then debug lines", got)
	}
	if got := run(nil); !slices.Equal(got, []slog.Level{slog.LevelWarn, slog.LevelWarn, slog.LevelWarn}) {
		t.Errorf("without: %v, want a warning each time", got)
	}
}

func TestPredictRuntime(t *testing.T) {
	var (
		handler = sigvocab.TaskState{Handler: sigvocab.DispHandler, NSInit: true}
		oneShot = sigvocab.TaskState{Handler: sigvocab.DispHandler, OneShot: true, NSInit: true}
		noInit  = sigvocab.TaskState{Handler: sigvocab.DispHandler, OneShot: true}
		none    = sigvocab.TaskState{NSInit: true}
		blocked = sigvocab.TaskState{Handler: sigvocab.DispHandler, OneShot: true, Blocked: true, NSInit: true}
	)
	node := []string{"node", "server.js"}
	cases := []struct {
		name   string
		rt     langrt.Runtime
		source string
		sig    sigvocab.Signal
		st     sigvocab.TaskState
		cmd    []string
		want   string
		fate   sigvocab.Fate
		hint   []string // each in the hint; none: no hint
	}{
		{"Node.js without a listener: its one-shot handler re-raises", langrt.NodeJS, SourceKernel, sigvocab.SIGTERM, oneShot, node, IgnoredByInit, sigvocab.FateHandler,
			[]string{"PID 1 (node): its SIGTERM handler is one-shot (SA_RESETHAND): it re-raises the signal with the default action, and the kernel drops that for PID 1", "exit 137", "process.on('SIGTERM'", "tini"}},
		{"Node.js with process.on('SIGTERM')", langrt.NodeJS, SourceKernel, sigvocab.SIGTERM, handler, node, Graceful, sigvocab.FateHandler, nil},
		{"Node.js, one-shot and blocked now", langrt.NodeJS, SourceKernel, sigvocab.SIGTERM, blocked, node, IgnoredByInit, sigvocab.FateBlocked, []string{"one-shot"}},
		{"Node.js no init: the re-raise kills it", langrt.NodeJS, SourceKernel, sigvocab.SIGTERM, noInit, node, Graceful, sigvocab.FateHandler, nil},
		{"Node.js through /proc: inferred from the runtime", langrt.NodeJS, SourceProc, sigvocab.SIGTERM, handler, node, IgnoredByInit, sigvocab.FateHandler,
			[]string{"PID 1 (node) is Node.js and has a SIGTERM handler", "/proc does not show", "Inferred from the runtime", "process.on('SIGTERM'"}},
		{"Node.js through /proc, SIGINT", langrt.NodeJS, SourceProc, sigvocab.SIGINT, handler, node, IgnoredByInit, sigvocab.FateHandler, []string{"Inferred from the runtime"}},
		{"Node.js through /proc, SIGQUIT: not one it re-raises", langrt.NodeJS, SourceProc, sigvocab.SIGQUIT, handler, node, Graceful, sigvocab.FateHandler, nil},
		{"Node.js without a handler for the stop signal", langrt.NodeJS, SourceKernel, sigvocab.SIGQUIT, none, node, IgnoredByInit, sigvocab.FateDroppedInit, []string{"no SIGQUIT handler", "process.on("}},
		{"unknown runtime, one-shot handler", langrt.Unknown, SourceKernel, sigvocab.SIGTERM, oneShot, []string{"/app"}, IgnoredByInit, sigvocab.FateHandler,
			[]string{"one-shot (SA_RESETHAND)", timeline.FixInit + " (docker run --init)."}},
		{"unknown runtime through /proc, handler", langrt.Unknown, SourceProc, sigvocab.SIGTERM, handler, []string{"/app"}, Graceful, sigvocab.FateHandler, nil},
		{"the Go runtime's handler", langrt.Go, SourceKernel, sigvocab.SIGTERM, handler, []string{"/server"}, Graceful, sigvocab.FateHandler,
			[]string{"PID 1 (server) runs on the Go runtime", "exits at once with status 2", "exit status 2 rather than 143", "signal.NotifyContext"}},
		{"the Go runtime, through /proc", langrt.Go, SourceProc, sigvocab.SIGTERM, handler, []string{"/server"}, Graceful, sigvocab.FateHandler, []string{"status 2"}},
		{"the Go runtime with a one-shot handler still exits", langrt.Go, SourceKernel, sigvocab.SIGINT, oneShot, []string{"/server"}, Graceful, sigvocab.FateHandler, []string{"exit status 2 rather than 130"}},
		{"the Go runtime, SIGUSR1: not re-raised", langrt.Go, SourceKernel, sigvocab.SIGUSR1, handler, []string{"/server"}, Graceful, sigvocab.FateHandler, nil},
		{"the Go runtime no init", langrt.Go, SourceKernel, sigvocab.SIGTERM, sigvocab.TaskState{Handler: sigvocab.DispHandler}, []string{"/server"}, Graceful, sigvocab.FateHandler, nil},
		{"CPython leaves SIGTERM at its default", langrt.CPython, SourceKernel, sigvocab.SIGTERM, none, []string{"python3", "app.py"}, IgnoredByInit, sigvocab.FateDroppedInit,
			[]string{"no SIGTERM handler", "Install a handler, `signal.signal(signal.SIGTERM", "tini"}},
		{"CPython, a one-shot handler that does not re-raise", langrt.CPython, SourceKernel, sigvocab.SIGTERM, oneShot, []string{"python3"}, Graceful, sigvocab.FateHandler, nil},
		{"the JVM with -Xrs", langrt.JVM, SourceKernel, sigvocab.SIGTERM, none, []string{"java", "-Xrs", "Main"}, IgnoredByInit, sigvocab.FateDroppedInit, []string{"remove `-Xrs`", "shutdown hook"}},
		{"the JVM's handler", langrt.JVM, SourceKernel, sigvocab.SIGTERM, handler, []string{"java", "Main"}, Graceful, sigvocab.FateHandler, nil},
		{"a shell keeps the exec form", langrt.Shell, SourceKernel, sigvocab.SIGTERM, none, []string{"/bin/sh", "-c", "app"}, IgnoredByInit, sigvocab.FateDroppedInit,
			[]string{"It is a shell", "Use the exec form of ENTRYPOINT/CMD"}},
		{"a shell by argv[0], runtime not read", langrt.Unknown, SourceKernel, sigvocab.SIGTERM, none, []string{"/bin/bash", "-c", "app"}, IgnoredByInit, sigvocab.FateDroppedInit,
			[]string{"It is a shell", "Use the exec form of ENTRYPOINT/CMD"}},
		{"an unknown runtime keeps the generic fix", langrt.Unknown, SourceKernel, sigvocab.SIGTERM, none, []string{"/app"}, IgnoredByInit, sigvocab.FateDroppedInit,
			[]string{timeline.FixInit + " (docker run --init)."}},
		{"blocked without a handler: the runtime's fix", langrt.CPython, SourceKernel, sigvocab.SIGTERM, sigvocab.TaskState{Blocked: true, NSInit: true}, []string{"python3"}, IgnoredByInit, sigvocab.FateBlocked,
			[]string{"signal.signal("}},
	}
	for _, c := range cases {
		p := Predict(Facts{Signal: c.sig, State: c.st, Cmdline: c.cmd, Runtime: c.rt, Source: c.source})
		got, fate, hint := string(p.Outcome), p.Fate, p.Hint()
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
	term := sigvocab.NewSignalSet(sigvocab.SIGTERM)
	l := fakeLister{running: []identity.Running{
		{Info: identity.Info{Identity: identity.Identity{ID: "a", Name: "node-default"}}, PID: 100},
		{Info: identity.Info{Identity: identity.Identity{ID: "b", Name: "node-listener"}}, PID: 200},
		{Info: identity.Info{Identity: identity.Identity{ID: "c", Name: "app"}}, PID: 300},
	}}
	kernel := func([]int) (map[int]sigvocab.TaskSnapshot, error) {
		return map[int]sigvocab.TaskSnapshot{
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
