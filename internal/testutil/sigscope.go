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
	stdout, stderr bytes.Buffer
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
	var lines [][]byte
	sc := bufio.NewScanner(&r.stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			lines = append(lines, append([]byte(nil), line...))
		}
	}
	return lines
}

// Stderr is what the command wrote on its standard error so far (read it
// after Stop: sigscope writes its end-of-run totals there).
func (r *Running) Stderr() string { return r.stderr.String() }
