package tracer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// cgroup2Root finds a cgroup2 hierarchy whose cgroups have cgroup.kill
// (5.14+): the unified mount of a hybrid host, or /sys/fs/cgroup on a v2 one.
func cgroup2Root(t *testing.T) string {
	t.Helper()
	for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.subtree_control")); err == nil {
			return root
		}
	}
	t.Fatal("no cgroup2 hierarchy mounted")
	return ""
}

// runc 1.2+ ends a container that has no pid namespace of its own by
// writing cgroup.kill: the kernel then SIGKILLs each process of the cgroup
// on behalf of the writer, thread-directed with SEND_SIG_NOINFO. Those kills
// carry cgroup_kill, and a kill(2) SIGKILL does not.
func TestCgroupKill(t *testing.T) {
	c := startCollector(t, Options{})
	dir := filepath.Join(cgroup2Root(t), fmt.Sprintf("sigscope-kill-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	// Nothing can send these kills where the kernel has no cgroup.kill
	// (Debian 11's 5.10): runc signals each process with kill(2) there.
	_, err := os.Stat(filepath.Join(dir, "cgroup.kill"))
	requireKernel(t, err == nil, "cgroup.kill", "5.14")
	var pids []int
	for range 2 {
		pid := testutil.StartReady(t, exec.Command("sh", "-c", "echo ready; exec sleep 1000"))
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatalf("moving %d: %v", pid, err)
		}
		pids = append(pids, pid)
	}
	// Another process writes the file: the tracer drops its own signals.
	testutil.Run(t, "sh", "-c", "echo 1 > "+filepath.Join(dir, "cgroup.kill"))
	for _, pid := range pids {
		gen := c.waitFor(t, "cgroup-kill", isGenerate(sigvocab.SIGKILL, pid))
		if gen.Result != sigvocab.ResultDelivered || gen.Group || gen.Sender.Comm.String() != "sh" {
			t.Errorf("SIGKILL to %d: result %s group %v sender %q", pid, gen.Result, gen.Group, gen.Sender.Comm)
		}
		assertFlags(t, gen, sigvocab.FlagCgroupKill)
	}
	other := testutil.StartReady(t, exec.Command("sh", "-c", "echo ready; exec sleep 1000"))
	testutil.Run(t, "kill", "-KILL", strconv.Itoa(other))
	assertFlags(t, c.waitFor(t, "plain-kill", isGenerate(sigvocab.SIGKILL, other)), 0)
}

// requireKernel skips t when the kernel lacks a feature the test exercises
// and sigscope does not need. The message carries a marker that
// test/kernels/run.sh counts: a skip without one fails the kernel matrix,
// and the matrix lists each kernel's missing features.
func requireKernel(t *testing.T, have bool, feature, since string) {
	t.Helper()
	if !have {
		t.Skipf("SIGSCOPE_KERNEL_LACKS %s (Linux %s and later)", feature, since)
	}
}
