package main

import (
	"fmt"
	"io"

	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func TestTableRowEscapesComm(t *testing.T) {
	e := sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultIgnored,
		Flags: sigvocab.FlagPID1Ignored | sigvocab.FlagNSInit, Time: time.Unix(0, 0)}
	e.Sender.PID, e.Target.PID, e.Target.NsPID = 10, 20, 1
	copy(e.Sender.Comm[:], "runc")
	copy(e.Target.Comm[:], "x\x1b[2J\r\xff")
	var b bytes.Buffer
	if err := writeTableRow(&b, &e, nil); err != nil {
		t.Fatal(err)
	}
	row := b.String()
	if strings.ContainsAny(strings.TrimSuffix(row, "\n"), "\x1b\r\n") {
		t.Fatalf("control bytes reach the terminal: %q", row)
	}
	for _, want := range []string{"SIGTERM", "ignored", "pid1_ignored,ns_init", "10 runc", `20 x\x1b[2J\x0d\xff`} {
		if !strings.Contains(row, want) {
			t.Errorf("row %q lacks %q", row, want)
		}
	}
}

func TestTableRowExit(t *testing.T) {
	e := sigvocab.Event{Kind: sigvocab.KindExit, Signal: sigvocab.SIGKILL, ExitCode: -1, CoreDumped: true}
	var b bytes.Buffer
	_ = writeTableRow(&b, &e, nil)
	if !strings.Contains(b.String(), "SIGKILL") || !strings.Contains(b.String(), "killed (core)") {
		t.Errorf("row %q", b.String())
	}
	e = sigvocab.Event{Kind: sigvocab.KindExit, ExitCode: 3}
	b.Reset()
	_ = writeTableRow(&b, &e, nil)
	if !strings.Contains(b.String(), "exit 3") {
		t.Errorf("row %q", b.String())
	}
}

// A blocked reading's row: the task's role and the system call it was in.
func TestTableRowBlocked(t *testing.T) {
	var b strings.Builder
	e := sigvocab.Event{Kind: sigvocab.KindBlocked, Target: sigvocab.Process{PID: 5152, NsPID: 7},
		Task: sigvocab.TaskReading{Role: sigvocab.RoleChild, Syscall: 0, FdKind: sigvocab.FdPipe}}
	copy(e.Target.Comm[:], "sleep")
	if err := writeTableRow(&b, &e, nil); err != nil {
		t.Fatal(err)
	}
	row := b.String()
	for _, want := range []string{"blocked", "child", "in read (pipe)", "5152 sleep"} {
		if !strings.Contains(row, want) {
			t.Errorf("row %q lacks %q", row, want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"trace", "--signals", "BOGUS"},
		{"trace", "-o", "yaml"},
		{"trace", "--no-such-flag"},
		{"trace", "extra-arg"},
		{"--log-level", "loud", "trace"},
		{"serve", "--otlp-endpoint", "collector:4318"}, // no scheme
		{"serve", "--otlp-endpoint", "http://collector:4318", "--otlp-protocol", "http/json"},
	} {
		cmd := newRootCmd()
		cmd.SetArgs(args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.ExecuteContext(context.Background())
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: error %v, want a usage error", args, err)
		}
	}
}

func TestFormatStats(t *testing.T) {
	s := tracer.Stats{PerKind: tracer.PerKind{sigvocab.KindGenerate: {Seen: 10, Emitted: 7, Dropped: 3}}, Read: 7, Missed: 1}
	got := formatStats(s)
	for _, want := range []string{"generate seen=10 emitted=7 dropped=3", "total seen=10 emitted=7 dropped=3 read=7", "missed=1"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}

// The real command against the real kernel: a namespace init drops a host
// SIGTERM, and `trace -o json --pid` reports it; --count stops the run.
func TestTraceCommandJSON(t *testing.T) {
	testutil.RequirePrivileged(t)
	ns := testutil.StartNSInit(t, "echo ready; read x")
	var out, errOut testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runTrace(context.Background(), traceFlags{output: "json", signals: "TERM", pid: uint32(ns.PID),
			count: 1, ringSize: tracer.DefaultRingSize}, &out, &errOut)
	}()
	// Keep sending until the tracer is attached and reports one.
	deadline := time.After(testutil.Bound)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("trace: %v (stderr %s)", err, errOut.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("--count 1 printed %d lines: %s", len(lines), out.String())
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
				t.Fatal(err)
			}
			target := m["target"].(map[string]any)
			if m["event"] != "generate" || m["signal"] != "SIGTERM" || m["result"] != "ignored" ||
				target["pid"] != float64(ns.PID) || target["ns_pid"] != float64(1) {
				t.Errorf("unexpected event %s", lines[0])
			}
			flags := m["flags"].([]any)
			if len(flags) != 3 || flags[0] != "pid1_ignored" {
				t.Errorf("flags %v, want pid1_ignored, cross_ns, ns_init", flags)
			}
			sc := bufio.NewScanner(strings.NewReader(errOut.String()))
			found := false
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "sigscope: events generate seen=") {
					found = true
				}
			}
			if !found {
				t.Errorf("no totals on stderr: %q", errOut.String())
			}
			return
		case <-tick.C:
			testutil.Run(t, "kill", "-TERM", strconv.Itoa(ns.PID))
		case <-deadline:
			t.Fatalf("trace saw nothing; stdout %q stderr %q", out.String(), errOut.String())
		}
	}
}

// Without CAP_BPF or CAP_PERFMON the error names the missing capability;
// with both, a non-root user can trace.
func TestMissingCapabilityIsNamed(t *testing.T) {
	testutil.RequirePrivileged(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed: %v", err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sigscope")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, c := range []struct{ caps, want string }{
		{"", "lacks CAP_BPF and CAP_PERFMON"},
		{"+bpf", "lacks CAP_PERFMON"},
		{"+perfmon", "lacks CAP_BPF"},
		{"+bpf,+perfmon", "sigscope: events generate seen="},
	} {
		args := []string{"--reuid=65534", "--regid=65534", "--clear-groups"}
		if c.caps != "" {
			args = append(args, "--inh-caps="+c.caps, "--ambient-caps="+c.caps)
		}
		args = append(args, bin, "trace", "--duration", "100ms", "-o", "json")
		out, err := exec.Command("setpriv", args...).CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("caps %q: %v\n%s\nwant %q", c.caps, err, out, c.want)
		}
		if (c.caps == "+bpf,+perfmon") != (err == nil) {
			t.Errorf("caps %q: exit error %v", c.caps, err)
		}
	}
}

// Ctrl-C (SIGINT) ends a run cleanly: exit 0, totals on stderr, and none of
// our programs left loaded in the kernel.
func TestInterruptDetaches(t *testing.T) {
	testutil.RequirePrivileged(t)
	bin := filepath.Join(t.TempDir(), "sigscope")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "trace", "-o", "json")
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the child holds its programs (generate, deliver, exit, oom).
	ids := testutil.WaitPrograms(t, cmd.Process.Pid, 5)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, stderr.String())
	}
	var seen, emitted, dropped, read uint64
	tot := stderr.String()
	if i := strings.Index(tot, "total "); i < 0 {
		t.Fatalf("no totals on stderr: %q", tot)
	} else if _, err := fmt.Sscanf(tot[i:], "total seen=%d emitted=%d dropped=%d read=%d", &seen, &emitted, &dropped, &read); err != nil {
		t.Fatalf("totals %q: %v", tot[i:], err)
	}
	// Interrupting drains: everything the kernel wrote was read.
	if read != emitted || seen != emitted+dropped {
		t.Errorf("after SIGINT: seen %d emitted %d dropped %d read %d", seen, emitted, dropped, read)
	}
	// The kernel frees a detached program after an RCU grace period.
	for _, id := range ids {
		if !testutil.Poll(50*time.Millisecond, func() bool {
			p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
			if err != nil {
				return true // gone
			}
			p.Close()
			return false
		}) {
			t.Fatalf("program %d still loaded %v after the process exited", id, testutil.Bound)
		}
	}
}
