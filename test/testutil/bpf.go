package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// AttachedPrograms lists the programs a process has attached: those of
// its BPF link fds (fdinfo with a "link_type:" line). A tracer loads all
// its programs before it attaches the first, so holding a program says
// nothing yet of what it sees.
func AttachedPrograms(pid int) []uint32 {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	fds, _ := os.ReadDir(dir)
	var ids []uint32
	for _, fd := range fds {
		b, _ := os.ReadFile(filepath.Join(dir, fd.Name()))
		if !strings.Contains(string(b), "link_type:") {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "prog_id:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					ids = append(ids, uint32(n))
				}
			}
		}
	}
	return ids
}

// WaitPrograms waits until process pid has attached at least n BPF
// programs, and returns their ids. sigscope attaches its five signal
// programs (generate, deliver, exit, oom, exec) first, then, with a
// timeline, the three that count a stop's connections.
func WaitPrograms(t testing.TB, pid, n int) []uint32 {
	t.Helper()
	var ids []uint32
	gone := false
	if !Poll(20*time.Millisecond, func() bool {
		ids = AttachedPrograms(pid)
		gone = !Alive(pid)
		return gone || len(ids) >= n
	}) {
		t.Fatalf("process %d holds programs %v after %v, want %d", pid, ids, Bound, n)
	}
	if gone && len(ids) < n {
		t.Fatalf("process %d exited holding programs %v, want %d", pid, ids, n)
	}
	return ids
}

// KernelAtLeast reports whether the running kernel's release (uname -r)
// is major.minor or later; false when the release cannot be read.
func KernelAtLeast(major, minor int) bool {
	var uts unix.Utsname
	if unix.Uname(&uts) != nil {
		return false
	}
	var maj, min int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(uts.Release[:]), "%d.%d", &maj, &min); err != nil {
		return false
	}
	return maj > major || maj == major && min >= minor
}
