package dockertest

import (
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
