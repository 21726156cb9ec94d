package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ProgramIDs lists the BPF programs a process holds open (the "prog_id"
// lines of /proc/PID/fdinfo): how a test knows another process's tracer is
// attached.
func ProgramIDs(pid int) []uint32 {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	fds, _ := os.ReadDir(dir)
	var ids []uint32
	for _, fd := range fds {
		b, _ := os.ReadFile(filepath.Join(dir, fd.Name()))
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

// WaitPrograms waits until process pid holds at least n BPF programs.
func WaitPrograms(t testing.TB, pid, n int) []uint32 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ids := ProgramIDs(pid)
		if len(ids) >= n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d holds programs %v, want %d", pid, ids, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
