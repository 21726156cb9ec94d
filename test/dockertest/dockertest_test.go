package dockertest

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestBusyboxContainer proves the harness end to end: a daemon answers, an
// image built FROM scratch runs a shell with no network.
func TestBusyboxContainer(t *testing.T) {
	d := EnsureDaemon(t)
	img := BuildBusyboxImage(t, "sigscope-dockertest:latest", `LABEL sigscope.test=harness`)
	out := d.Docker(t, "run", "--rm", "--network", "none", img, "sh", "-c", "echo hello from $(uname -s)")
	if out != "hello from Linux" {
		t.Fatalf("container printed %q", out)
	}
	id := d.RunContainer(t, img, "sleep", "1000")
	if pid := d.PID(t, id); pid <= 1 {
		t.Fatalf("pid %d", pid)
	}
	if got := d.Docker(t, "inspect", "--format", "{{index .Config.Labels \"sigscope.test\"}}", img); !strings.Contains(got, "harness") {
		t.Fatalf("image label %q", got)
	}
}

// The cgroup2-only daemon: its containers are in the unified hierarchy
// only (0::/docker/<id>; their v1 lines are the daemon's, not theirs),
// under runc 1.2+, and its mount namespace sees cgroup2 at /sys/fs/cgroup
// while the host's layout is unchanged.
func TestCgroup2Daemon(t *testing.T) {
	if !EngineWanted(Cgroup2Name) {
		t.Skip("SIGSCOPE_ENGINES leaves out cgroup2")
	}
	d := EnsureCgroup2Daemon(t)
	d.CopyImage(t, EnsureDaemon(t), BuildBusyboxImage(t, "sigscope-dockertest:latest", `LABEL sigscope.test=harness`))
	v := d.RuncVersion(t)
	if major, minor, ok := parseVersion(v); !ok || major < 1 || major == 1 && minor < 2 {
		t.Fatalf("runc %q, want 1.2 or later", v)
	}
	id := d.RunContainer(t, "sigscope-dockertest:latest", "sleep", "1000")
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", d.PID(t, id)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cg), "0::/docker/"+id+"\n") || strings.Contains(string(cg), ":memory:/docker/"+id) {
		t.Errorf("container's /proc/PID/cgroup, want 0::/docker/<id> and no v1 cgroup of its own:\n%s", cg)
	}
	inside, err := exec.Command("nsenter", "-t", strconv.Itoa(d.PIDOfDaemon()), "-m", "cat", "/sys/fs/cgroup/cgroup.controllers").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: cat /sys/fs/cgroup/cgroup.controllers: %v\n%s", err, inside)
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		t.Errorf("the host's /sys/fs/cgroup is cgroup2 now: the daemon's mount leaked out of its namespace")
	}
	t.Logf("runc %s; controllers of the cgroup2-only view: %q", v, strings.TrimSpace(string(inside)))
}

func parseVersion(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}
