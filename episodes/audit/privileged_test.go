package audit

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/procsig"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The privileged tests start real processes as PID 1 of new pid namespaces
// and audit them through the real task iterator, as `sigscope audit` does.

// startInit runs args as PID 1 of a new pid namespace (unshare, util-linux
// or busybox) and returns its host pid once it runs comm. Killing the init
// at cleanup kills the whole namespace.
func startInit(t *testing.T, comm string, args ...string) int {
	t.Helper()
	if _, err := exec.LookPath(args[0]); err != nil {
		t.Skipf("%s not installed (apt-get install -y tini catatonit): %v", args[0], err)
	}
	cmd := exec.Command("unshare", append([]string{"-p", "-f", "--mount-proc"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting unshare: %v", err)
	}
	var pid int
	t.Cleanup(func() {
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	testutil.WaitFor(t, "PID 1 "+comm, func() bool {
		kids := testutil.Children(t, cmd.Process.Pid)
		if len(kids) == 1 && commOf(kids[0]) == comm {
			pid = kids[0]
		}
		return pid > 0
	})
	return pid
}

// childOf waits for the one child of pid running comm.
func childOf(t *testing.T, pid int, comm string) int {
	t.Helper()
	var child int
	testutil.WaitFor(t, "a child "+comm+" of "+strconv.Itoa(pid), func() bool {
		for _, k := range testutil.Children(t, pid) {
			if commOf(k) == comm {
				child = k
			}
		}
		return child > 0
	})
	return child
}

func commOf(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// auditOne audits a container whose main process is pid.
func auditOne(t *testing.T, pid int, source string) Result {
	t.Helper()
	l := fakeLister{running: []identity.Running{{Info: identity.Info{Identity: identity.Identity{ID: "c", Name: "c"}}, PID: pid}}}
	res, err := RunWith(context.Background(), l, Options{Source: source, ReadTaskStates: tracer.ReadTaskStates})
	if err != nil || len(res) != 1 {
		t.Fatalf("audit: %v, %+v", err, res)
	}
	return res[0]
}

// auditUntil audits pid until the prediction is want: an init is audited
// as soon as it runs, before it has set up its signal handling.
func auditUntil(t *testing.T, pid int, source, want string) Result {
	t.Helper()
	var r Result
	testutil.WaitFor(t, "prediction "+want, func() bool {
		r = auditOne(t, pid, source)
		return r.Prediction == want
	})
	return r
}

func check(t *testing.T, r Result, source, prediction, fate string, nsInit bool, hintHas string) {
	t.Helper()
	if r.Source != source || r.Prediction != prediction || r.Fate != fate || r.NSInit != nsInit || !strings.Contains(r.Hint, hintHas) || r.Error != "" {
		t.Errorf("%+v\nwant source %s, prediction %s, fate %s, ns_init %v, hint with %q", r, source, prediction, fate, nsInit, hintHas)
	}
}

// (a) tini waits for every signal in sigtimedwait: the kernel queues
// SIGTERM for it. /proc cannot see the wait (SigBlk 0, SigCgt 0), so the
// /proc source, forced, predicts what it would for a shell: ignored_by_init.
// That wrong answer is why the kernel source comes first.
func TestAuditTiniPrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	init := startInit(t, "tini", "tini", "-s", "--", "sleep", "1000")
	childOf(t, init, "sleep")
	r := auditUntil(t, init, "", Graceful)
	check(t, r, SourceKernel, Graceful, "sigwait", true, "PID 1 is tini: it waits for SIGTERM with sigtimedwait and forwards it")
	if r.PID1.NSPID != 1 || r.PID1.Cmdline[0] != "tini" {
		t.Errorf("pid1 %+v", r.PID1)
	}

	p := auditOne(t, init, SourceProc)
	// Read between two waits, tini blocks everything (fate blocked); during
	// one, nothing (pid1_ignored). Either way /proc gets it wrong.
	if p.Source != SourceProc || p.Prediction != IgnoredByInit || (p.Fate != "pid1_ignored" && p.Fate != "blocked") {
		t.Errorf("/proc forced: %+v, want ignored_by_init (it cannot see real_blocked)", p)
	}
}

// (b) a shell as PID 1 with no trap: the kernel drops SIGTERM.
// (c) its background sleep, the main process of a container sharing that
// namespace, is no init: SIG_DFL SIGTERM kills it.
func TestAuditShellPrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	init := startInit(t, "sh", "sh", "-c", "sleep 1000 & wait")
	child := childOf(t, init, "sleep")

	r := auditOne(t, init, "")
	check(t, r, SourceKernel, IgnoredByInit, r.Fate, true, "It is a shell")
	if r.Fate != "pid1_ignored" && r.Fate != "blocked" { // a shell in `wait` may block SIGTERM
		t.Errorf("shell fate %s", r.Fate)
	}
	c := auditOne(t, child, "")
	check(t, c, SourceKernel, Graceful, "delivered", false, "default action ends it")
	if c.PID1.NSPID < 2 {
		t.Errorf("sleep's ns pid %d, want >= 2", c.PID1.NSPID)
	}
}

// (d) catatonit blocks every signal and reads them from a signalfd.
func TestAuditCatatonitPrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	init := startInit(t, "catatonit", "catatonit", "--", "sleep", "1000")
	childOf(t, init, "sleep")
	r := auditUntil(t, init, "", Graceful)
	check(t, r, SourceKernel, Graceful, "blocked", true, "PID 1 is catatonit: it reads SIGTERM from a signalfd and forwards it")
	if !r.Blocks || !r.Signalfd || r.Catches {
		t.Errorf("catatonit: blocks %v signalfd %v catches %v, want blocked, watched, no handler", r.Blocks, r.Signalfd, r.Catches)
	}
	set, err := procsig.SignalfdMask("", init)
	if err != nil || !set.Has(sigvocab.SIGTERM) {
		t.Errorf("fdinfo: signalfd watches %s (%v), want SIGTERM among them", set, err)
	}
	// Here /proc agrees: the signal is blocked, not waited for.
	check(t, auditOne(t, init, SourceProc), SourceProc, Graceful, "blocked", true, "catatonit")
}

// (e) a shell PID 1 that ignores SIGTERM: dropped for SIG_IGN.
func TestAuditTrapIgnorePrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	init := startInit(t, "sh", "sh", "-c", "trap '' TERM; sleep 1000 & wait")
	childOf(t, init, "sleep")
	r := auditUntil(t, init, "", IgnoredByInit)
	check(t, r, SourceKernel, IgnoredByInit, "sig_ign", true, "SIG_IGN")
	if !r.Ignores {
		t.Errorf("ignores false: %+v", r)
	}
}
