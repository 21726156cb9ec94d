package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MemoryCgroup makes a cgroup limited to limit bytes, on the v1 memory
// controller when there is one (this machine's hybrid layout) or on a
// cgroup2 hierarchy with the memory controller enabled (the test VMs).
func MemoryCgroup(t testing.TB, limit int) (procs string) {
	t.Helper()
	name := fmt.Sprintf("sigscope-oom-test-%d", os.Getpid())
	type hierarchy struct{ root, limitFile, swapFile, swapValue string }
	var found *hierarchy
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		found = &hierarchy{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes", strconv.Itoa(limit)}
	} else {
		for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			b, _ := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
			if slices.Contains(strings.Fields(string(b)), "memory") {
				found = &hierarchy{root, "memory.max", "memory.swap.max", "0"}
				break
			}
		}
	}
	if found == nil {
		t.Fatal("no memory cgroup controller found")
	}
	dir := filepath.Join(found.root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("creating %s: %v", dir, err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, found.limitFile), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Fatalf("limiting memory: %v", err)
	}
	// No swap to escape to (the file is absent when swap accounting is off).
	_ = os.WriteFile(filepath.Join(dir, found.swapFile), []byte(found.swapValue), 0o644)
	return filepath.Join(dir, "cgroup.procs")
}

// StartOOM starts cmd, a helper that prints "ready", waits for a line on
// stdin and then allocates until the OOM killer ends it, in a new cgroup
// limited to limit bytes, and lets it go. It returns the helper's pid.
func StartOOM(t testing.TB, cmd *exec.Cmd, limit int) int {
	t.Helper()
	procs := MemoryCgroup(t, limit)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pid := StartReady(t, cmd)
	if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("moving %d into the cgroup: %v", pid, err)
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	return pid
}
