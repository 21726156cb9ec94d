package procsig

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func TestPID1SignalsFromStatus(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "42")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A real status of busybox sh with `trap 'exit 0' TERM`, blocked mask
	// added: SIGINT, SIGTERM, SIGCHLD caught; SIGQUIT ignored.
	status := "Name:\tsh\nState:\tS (sleeping)\nPid:\t42\nSigQ:\t0/96343\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n" +
		"SigBlk:\t0000000000004000\nSigIgn:\t0000000000000004\nSigCgt:\t0000000000014002\nCapInh:\t0000000000000000\n"
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte("sh\x00-c\x00trap 'exit 0' TERM; sleep 1000 & wait\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	caught, ignored, blocked, cmdline, err := PID1Signals(root, 42)
	if err != nil {
		t.Fatal(err)
	}
	if want := sigvocab.NewSignalSet(sigvocab.SIGINT, sigvocab.SIGTERM, sigvocab.SIGCHLD); caught != want {
		t.Errorf("caught %s, want %s", caught, want)
	}
	if want := sigvocab.NewSignalSet(sigvocab.SIGQUIT); ignored != want {
		t.Errorf("ignored %s, want %s", ignored, want)
	}
	if want := sigvocab.NewSignalSet(sigvocab.SIGTERM); blocked != want { // 0x4000: bit 14, signal 15
		t.Errorf("blocked %s, want %s", blocked, want)
	}
	if want := []string{"sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"}; !reflect.DeepEqual(cmdline, want) {
		t.Errorf("cmdline %q, want %q", cmdline, want)
	}

	// A zombie has an empty cmdline; a truncated status is an error.
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, cmdline, err := PID1Signals(root, 42); err != nil || cmdline != nil {
		t.Errorf("zombie: cmdline %q, err %v", cmdline, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte("Name:\tsh\nSigCgt:\t0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := PID1Signals(root, 42); err == nil {
		t.Error("a status without SigBlk and SigIgn must be an error")
	}
	if _, _, _, _, err := PID1Signals(root, 43); err == nil {
		t.Error("a missing process must be an error")
	}
}

// The test binary itself: the Go runtime installs handlers for SIGTERM and
// most other signals, and its cmdline is os.Args.
func TestPID1SignalsSelf(t *testing.T) {
	caught, _, _, cmdline, err := PID1Signals("", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !caught.Has(sigvocab.SIGURG) || !caught.Has(sigvocab.SIGTERM) {
		t.Errorf("caught %s: the Go runtime handles SIGURG and SIGTERM", caught)
	}
	if !reflect.DeepEqual(cmdline, os.Args) {
		t.Errorf("cmdline %q, want %q", cmdline, os.Args)
	}
}

func TestReadProcSignals(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "42")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// tini as PID 1 of a namespace two levels down, while it waits in
	// sigtimedwait: nothing blocked, nothing caught.
	status := "Name:\ttini\nNSpid:\t42\t17\t1\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n"
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte("/usr/bin/tini\x00--\x00app\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := ReadProcSignals(root, 42)
	if err != nil {
		t.Fatal(err)
	}
	if p.NSPID != 1 || !p.NSInit() || p.Comm != "tini" || len(p.Cmdline) != 3 {
		t.Errorf("%+v: want ns pid 1, comm tini, 3 arguments", p)
	}
	// What /proc cannot show: the waited SIGTERM. The state is an init with SIG_DFL.
	if st := p.State(sigvocab.SIGTERM); st != (sigvocab.TaskState{NSInit: true}) {
		t.Errorf("state %+v", st)
	}
	status = "Name:\tsleep\nNSpid:\t42\t7\nSigBlk:\t0000000000004000\nSigIgn:\t0000000000004000\nSigCgt:\t0000000000000000\n"
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err = ReadProcSignals(root, 42); err != nil || p.NSInit() || p.NSPID != 7 {
		t.Fatalf("%+v, %v: want ns pid 7, no init", p, err)
	}
	if st := p.State(sigvocab.SIGTERM); st != (sigvocab.TaskState{Handler: sigvocab.DispIgnore, Blocked: true}) {
		t.Errorf("state %+v", st)
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte("Name:\tx\nNSpid:\t\nSigBlk:\t0\nSigIgn:\t0\nSigCgt:\t0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadProcSignals(root, 42); err == nil {
		t.Error("an empty NSpid must be an error")
	}
}

// A fake fd table: a signalfd watching SIGTERM and SIGINT, another watching
// SIGHUP, and a pipe whose fdinfo has a sigmask-like line it must not count.
func TestSignalfdMask(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "42")
	for _, d := range []string{"fd", "fdinfo"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fds := []struct{ fd, link, info string }{
		{"3", "anon_inode:[signalfd]", "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\nsigmask:\t0000000000004002\n"},
		{"4", "pipe:[1234]", "pos:\t0\nsigmask:\tffffffffffffffff\n"},
		{"5", "anon_inode:[signalfd]", "pos:\t0\nsigmask:\t0000000000000001\n"},
	}
	for _, f := range fds {
		if err := os.Symlink(f.link, filepath.Join(dir, "fd", f.fd)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "fdinfo", f.fd), []byte(f.info), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := SignalfdMask(root, 42)
	if err != nil {
		t.Fatal(err)
	}
	if want := sigvocab.NewSignalSet(sigvocab.SIGHUP, sigvocab.SIGINT, sigvocab.SIGTERM); set != want {
		t.Errorf("watched %s, want %s", set, want)
	}
	if _, err := SignalfdMask(root, 43); err == nil {
		t.Error("a missing process must be an error")
	}
}

// A permission error on /proc/PID/ns or /proc/PID/fd names the capability
// that passes the kernel's ptrace access check; other errors stay as they
// are. (The real refusal needs a process without CAP_SYS_PTRACE:
// test/e2e/privilege_test.go.)
func TestNeedsPtrace(t *testing.T) {
	denied := &fs.PathError{Op: "readlink", Path: "/proc/1/ns/pid", Err: syscall.EACCES}
	err := NeedsPtrace(denied)
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "CAP_SYS_PTRACE") || !strings.HasPrefix(err.Error(), denied.Error()) {
		t.Errorf("NeedsPtrace(EACCES) = %v", err)
	}
	gone := &fs.PathError{Op: "readlink", Path: "/proc/1/ns/pid", Err: syscall.ENOENT}
	if err := NeedsPtrace(gone); err != gone {
		t.Errorf("NeedsPtrace(ENOENT) = %v, want it unchanged", err)
	}
}
