package testutil

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Bound is how long a test waits for something before it calls it a hang:
// a guard, never an expected time. Every wait follows what it waits for (a
// line, a bit in /proc, a child, a record) and ends as soon as that comes;
// the bound is only reached when it never comes, so it is set far above
// what the slowest machine the suite runs on takes (a 2-core VM beside a
// Kubernetes build, load 20, where starting a container took over 10 s).
const Bound = 2 * time.Minute

// Poll calls cond every interval until it holds, and says whether it did
// within Bound. For a wait whose caller reports the failure itself (with
// what it last saw) or cannot fail the test (a goroutine, a helper that
// returns an error).
func Poll(every time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(Bound); ; time.Sleep(every) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// WaitFor polls cond every 10 ms and fails the test when it has not held
// within Bound.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Poll(10*time.Millisecond, cond) {
		t.Fatalf("timed out waiting for %s (%v)", what, Bound)
	}
}

// SigMask reads field ("SigCgt", "SigBlk", "SigIgn", "SigPnd", "ShdPnd")
// of /proc/PID/status: bit sig-1 is signal sig.
func SigMask(pid int, field string) (uint64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return SigMaskOf(status, field)
}

// SigMaskOf reads field from the text of a /proc/PID/status.
func SigMaskOf(status []byte, field string) (uint64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/PID/status", field)
}

// HasSig says whether mask, as SigMask reads it, has signal sig.
func HasSig(mask uint64, sig syscall.Signal) bool { return mask&(1<<(uint(sig)-1)) != 0 }

// WaitSigMask waits until field ("SigCgt", "SigBlk", "SigIgn") of
// /proc/PID/status has signal sig: a script's trap, a program's handler or
// its sigprocmask is in place. A process that is gone fails the test at
// once.
func WaitSigMask(t testing.TB, pid int, field string, sig syscall.Signal) {
	t.Helper()
	var mask uint64
	var err error
	if !Poll(10*time.Millisecond, func() bool {
		mask, err = SigMask(pid, field)
		return err != nil || HasSig(mask, sig)
	}) {
		t.Fatalf("pid %d: %s never had %v within %v (%s %016x)", pid, field, sig, Bound, field, mask)
	}
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
}

// WaitChildren waits until process pid has at least n children (of its
// main thread), and returns them: a script that starts one in the
// background has run every line before it (its traps). A process that is
// gone fails the test at once.
func WaitChildren(t testing.TB, pid, n int) []int {
	t.Helper()
	var kids []int
	var err error
	if !Poll(10*time.Millisecond, func() bool {
		var b []byte
		b, err = os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		kids = kids[:0]
		for _, f := range strings.Fields(string(b)) {
			if kid, err := strconv.Atoi(f); err == nil {
				kids = append(kids, kid)
			}
		}
		return err != nil || len(kids) >= n
	}) {
		t.Fatalf("pid %d has children %v after %v, want %d", pid, kids, Bound, n)
	}
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	return kids
}

// Syscall names the system call pid sleeps in, as /proc/PID/syscall gives
// its number and sigvocab names a blocked record's ("wait4",
// "rt_sigsuspend", "syscall 333"); "running" when it runs.
func Syscall(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "", fmt.Errorf("pid %d: empty /proc/PID/syscall", pid)
	}
	nr, err := strconv.ParseInt(f[0], 10, 32)
	if err != nil {
		return f[0], nil // "running"
	}
	return sigvocab.SyscallName(int32(nr)), nil
}

// WaitInSyscall waits until pid sleeps in one of the system calls named
// (Syscall's names): a process that has got where the test reads it, a
// shell waiting for its child. A process that is gone fails the test at
// once.
func WaitInSyscall(t testing.TB, pid int, names ...string) {
	t.Helper()
	var got string
	var err error
	if !Poll(5*time.Millisecond, func() bool {
		got, err = Syscall(pid)
		return err != nil || slices.Contains(names, got)
	}) {
		t.Fatalf("process %d never in %v within %v: %s", pid, names, Bound, got)
	}
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
}
