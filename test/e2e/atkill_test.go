package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/test/testutil"
)

// atKillJSON is the episode's "at_kill" object, as the tests check it.
type atKillJSON struct {
	Main struct {
		Comm    string   `json:"comm"`
		Syscall string   `json:"syscall"`
		CPUS    *float64 `json:"cpu_s"`
	} `json:"main"`
	Children []struct {
		Comm    string `json:"comm"`
		NsPID   uint32 `json:"ns_pid"`
		Syscall string `json:"syscall"`
		Ignores bool   `json:"ignores_stop_signal"`
	} `json:"children"`
	Threads []struct {
		Syscall string `json:"syscall"`
	} `json:"threads"`
	SinceS  *float64 `json:"since_s"`
	Verdict string   `json:"verdict"`
}

// TestStopAtKill stops real containers whose stop-signal handler does not
// finish within the grace period, each for its own reason, and holds what
// the kernel read at the SIGKILL, the verdict and the hint to that reason:
// a shell trap behind a foreground command (the fix is the background-and-
// wait pattern or exec, not more grace), a handler waiting for a child
// that ignores the signal (forward one it acts on), and a handler still
// working when the grace ran out (the only case where more grace helps).
func TestStopAtKill(t *testing.T) {
	img := busyboxImage(t)
	for _, tc := range []struct {
		name, script         string
		syscall, child       string
		childIgnores         bool
		verdict, hint, avoid string
		progress             bool
	}{
		{name: "trap-behind-command", script: "trap 'echo bye; exit 0' TERM; sleep 1000",
			syscall: "wait4", child: "sleep", verdict: "a shell runs its SIGTERM trap only after the foreground command ends",
			hint: "cmd & wait $!", avoid: "raise the grace period"},
		{name: "child-ignores", script: "sh -c 'trap \"\" TERM; exec sleep 1000' & pid=$!; trap 'kill -TERM $pid; wait $pid; exit 0' TERM; wait",
			syscall: "rt_sigsuspend", child: "sleep", childIgnores: true, verdict: "the child ignores SIGTERM",
			hint: "which ignores SIGTERM: signal the child with one it acts on", avoid: "raise the grace period"},
		{name: "still-working", script: "trap 'while :; do :; done' TERM; sleep 1000 & wait",
			verdict: "was still working when the SIGKILL came", hint: "was making progress", progress: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "e2e-atkill-" + tc.name
			id := runContainer(t, name, img, "sh", "-c", tc.script)
			if tc.child != "" {
				// The child runs its program (after its own trap, for one
				// that ignores SIGTERM).
				kid := testutil.WaitChildren(t, mainPID(t, name), 1)[0]
				testutil.WaitFor(t, "the child to run "+tc.child, func() bool {
					comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", kid))
					return strings.TrimSpace(string(comm)) == tc.child
				})
			}
			l := startTimeline(t)
			docker(t, "stop", "-t", "2", name)
			ep := episodeOf(t, l.stop(t, id), id)
			var with struct {
				AtKill *atKillJSON `json:"at_kill"`
			}
			if err := json.Unmarshal(ep.raw, &with); err != nil || with.AtKill == nil {
				t.Fatalf("no at_kill (%v): %s", err, ep.raw)
			}
			a := with.AtKill
			t.Logf("%s", ep.raw)
			if ep.Outcome != "handler_timeout" {
				t.Errorf("outcome %s, want handler_timeout", ep.Outcome)
			}
			if a.Main.Comm != "sh" || a.SinceS == nil || a.Main.CPUS == nil {
				t.Errorf("main %+v since %v: want sh, with the CPU time since the stop signal", a.Main, a.SinceS)
			}
			if tc.syscall != "" && a.Main.Syscall != tc.syscall {
				t.Errorf("main thread in %q, want %q", a.Main.Syscall, tc.syscall)
			}
			if tc.child != "" {
				found := false
				for _, c := range a.Children {
					if c.Comm == tc.child && c.Ignores == tc.childIgnores {
						found = true
					}
				}
				if !found {
					t.Errorf("children %+v: want %s (ignoring SIGTERM: %v)", a.Children, tc.child, tc.childIgnores)
				}
			}
			if tc.progress != (a.Main.CPUS != nil && a.SinceS != nil && *a.Main.CPUS*4 >= *a.SinceS) {
				t.Errorf("CPU %v of %v: progress should be %v", a.Main.CPUS, a.SinceS, tc.progress)
			}
			if !strings.Contains(a.Verdict, tc.verdict) || !strings.Contains(ep.Hint, tc.hint) || tc.avoid != "" && strings.Contains(ep.Hint, tc.avoid) {
				t.Errorf("verdict %q\nhint %q\nwant %q, %q and not %q", a.Verdict, ep.Hint, tc.verdict, tc.hint, tc.avoid)
			}
		})
	}
}

// TestStopAtKillRuntimes: the same for a Node.js server whose SIGTERM
// listener calls server.close() while a slow request is in flight, and a
// JVM whose shutdown hook waits on a lock another thread holds for ever.
// Neither is short of time: the hints name what they wait for, and do not
// ask for more grace.
func TestStopAtKillRuntimes(t *testing.T) {
	node, _, java := hostRuntimes(t)
	for _, tc := range []struct {
		name     string
		argv     []string
		request  bool
		syscalls []string
		hint     string
		threads  bool // other threads read and summarised in the verdict
	}{
		{name: "node-close", argv: []string{node.Path, "/app/app.js", "close"}, request: true,
			syscalls: []string{"epoll_wait", "epoll_pwait", "epoll_pwait2"}, hint: "server.closeIdleConnections()"},
		{name: "jvm-hook", argv: []string{java.Path, "/app/App.java", "hook"},
			syscalls: []string{"futex"}, hint: "jcmd PID Thread.print", threads: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "e2e-atkill-" + tc.name
			id := runContainer(t, name, runtimeArgs(t, false, tc.argv...)...)
			appReady(t, name, 0)
			if tc.request {
				// A request the server answers after 60 s: in flight at the stop.
				docker(t, "exec", "-d", name, "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8081/")
				waitLogged(t, name, "request")
			}
			l := startTimeline(t)
			docker(t, "stop", "-t", "2", name)
			ep := episodeOf(t, l.stop(t, id), id)
			var with struct {
				AtKill *atKillJSON `json:"at_kill"`
			}
			if err := json.Unmarshal(ep.raw, &with); err != nil || with.AtKill == nil {
				t.Fatalf("no at_kill (%v): %s", err, ep.raw)
			}
			a := with.AtKill
			t.Logf("verdict: %s\nhint: %s", a.Verdict, ep.Hint)
			if ep.Outcome != "handler_timeout" {
				t.Errorf("outcome %s, want handler_timeout", ep.Outcome)
			}
			if !slices.Contains(tc.syscalls, a.Main.Syscall) {
				t.Errorf("main thread in %q, want one of %v: %s", a.Main.Syscall, tc.syscalls, ep.raw)
			}
			if !strings.Contains(ep.Hint, tc.hint) || strings.Contains(ep.Hint, "raise the grace period") {
				t.Errorf("hint %q: want %q, and no more grace", ep.Hint, tc.hint)
			}
			if tc.threads && (len(a.Threads) == 0 || !strings.Contains(a.Verdict, "; its other threads: ")) {
				t.Errorf("other threads %+v, verdict %q: want them read and summarised", a.Threads, a.Verdict)
			}
		})
	}
}
