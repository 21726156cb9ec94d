package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Sigscope builds the sigscope command once per test binary and returns
// its path.
func Sigscope(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sigscope-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sigscope")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/sigscope/sigscope/cmd/sigscope").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Running is a sigscope command running in the background until Stop.
type Running struct {
	name           string
	Cmd            *exec.Cmd
	stdout, stderr SyncBuffer
}

// SyncBuffer is a buffer that one goroutine (a command's output, a
// logger) writes while another reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines are the non-empty lines written so far; without complete, not
// the last one while it has no newline yet (it is being written).
func (b *SyncBuffer) lines(complete bool) [][]byte {
	text := []byte(b.String())
	if !complete {
		text = text[:bytes.LastIndexByte(text, '\n')+1]
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			lines = append(lines, append([]byte(nil), line...))
		}
	}
	return lines
}

// StartSigscope starts `sigscope ARGS...` and waits until its 5 BPF
// programs are attached. It is killed at cleanup.
func StartSigscope(t testing.TB, args ...string) *Running {
	t.Helper()
	return StartSigscopeUnder(t, nil, args...)
}

// StartSigscopeUnder is StartSigscope run through wrapper, a command that
// ends by exec'ing its arguments in the same process (setpriv, unshare, a
// shell that joins a cgroup first), so that the pid whose programs are
// waited for is sigscope's.
func StartSigscopeUnder(t testing.TB, wrapper []string, args ...string) *Running {
	t.Helper()
	r := &Running{name: "sigscope " + args[0]}
	argv := append(append(append([]string(nil), wrapper...), Sigscope(t)), args...)
	r.Cmd = exec.Command(argv[0], argv[1:]...)
	r.Cmd.Stdout, r.Cmd.Stderr = &r.stdout, &r.stderr
	if err := r.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Cmd.Process.Kill(); _, _ = r.Cmd.Process.Wait() })
	WaitPrograms(t, r.Cmd.Process.Pid, 5)
	return r
}

// Stop ends the command (Ctrl-C) and returns the non-empty lines it printed.
func (r *Running) Stop(t testing.TB) [][]byte {
	t.Helper()
	_ = r.Cmd.Process.Signal(syscall.SIGINT)
	if err := r.Cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", r.name, err, r.stderr.String())
	}
	return r.stdout.lines(true)
}

// WaitLine waits until the command has printed a line that match accepts,
// while it runs, and returns that line: what a test waits for before it
// stops the command. The test fails when the command exits first, or
// after Bound.
func (r *Running) WaitLine(t testing.TB, what string, match func(line []byte) bool) []byte {
	t.Helper()
	var found []byte
	r.WaitLines(t, what, func(lines [][]byte) bool {
		for _, line := range lines {
			if match(line) {
				found = line
				return true
			}
		}
		return false
	})
	return found
}

// WaitLines is WaitLine for what the lines printed so far say together
// (how many are of one kind).
func (r *Running) WaitLines(t testing.TB, what string, ok func(lines [][]byte) bool) {
	t.Helper()
	done, exited := false, false
	if !Poll(20*time.Millisecond, func() bool {
		exited = !Alive(r.Cmd.Process.Pid)
		done = ok(r.stdout.lines(false))
		return done || exited
	}) {
		t.Fatalf("%s printed no %s within %v\n%s", r.name, what, Bound, r.stderr.String())
	}
	if !done {
		t.Fatalf("%s exited before it printed %s\n%s", r.name, what, r.stderr.String())
	}
}

// Stderr is what the command wrote on its standard error so far (read it
// after Stop: sigscope writes its end-of-run totals there).
func (r *Running) Stderr() string { return r.stderr.String() }

// StartTimeline starts `sigscope timeline -o json` with args (through
// wrapper, as StartSigscopeUnder): the episodes as JSON lines, read with
// Running's WaitLines and Stop.
func StartTimeline(t testing.TB, wrapper []string, args ...string) *Running {
	t.Helper()
	return StartSigscopeUnder(t, wrapper, append([]string{"timeline", "-o", "json"}, args...)...)
}
