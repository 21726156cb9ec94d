package dockertest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// StartPrivateDaemon starts a Docker daemon of the test's own beside the
// shared one, with extra flags (such as --cgroup-parent), and stops it at
// cleanup, after the containers it ran. It has its own data root
// (/var/lib/sigscope-dockertest-NAME), exec root, socket and pid file
// (/run/sigscope-dt-NAME*), its own containerd (started by dockerd under
// the exec root) with namespaces of its own, no bridge and no iptables
// rules: it shares nothing with the shared daemon but the kernel and the
// Docker binaries. Its images are its own: see [Daemon.CopyImage].
//
// A daemon of the same name left by an earlier run that crashed is
// reused.
func StartPrivateDaemon(t testing.TB, name string, extra ...string) *Daemon {
	t.Helper()
	return startPrivate(t, name, func(bin string, p private) ([]string, error) {
		return append([]string{bin}, p.daemonArgs(name, extra...)...), nil
	}, extra)
}

// startPrivate is StartPrivateDaemon with the command line command makes
// from the dockerd binary and the daemon's paths.
func startPrivate(t testing.TB, name string, command func(bin string, p private) ([]string, error), extra []string) *Daemon {
	t.Helper()
	EnsureDaemon(t) // installs docker.io when missing
	bin, err := dockerdPath()
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	p := privatePaths(name)
	d := &Daemon{Socket: p.socket}
	pid := processOf(p.pidFile, "dockerd")
	if pid == 0 || Ping(p.socket) != nil {
		if pid != 0 {
			t.Fatalf("dockertest: dockerd %d of %s runs but does not answer on %s; log: %s", pid, p.pidFile, p.socket, p.log)
		}
		// A pid file naming no dockerd is a dead run's: dockerd would
		// refuse to start.
		if err := os.Remove(p.pidFile); err != nil && !os.IsNotExist(err) {
			t.Fatalf("dockertest: %v", err)
		}
		args, err := command(bin, p)
		if err != nil {
			t.Fatalf("dockertest: %v", err)
		}
		start := time.Now()
		pid, err = startDaemonAt(args, p.socket, p.log)
		if err != nil {
			t.Fatalf("dockertest: %v", err)
		}
		t.Logf("dockertest: private dockerd %s (%s) answered after %v", name, strings.Join(extra, " "), time.Since(start).Round(time.Millisecond))
	}
	d.pid = pid
	t.Cleanup(func() { d.stopPrivate(t, pid) })
	return d
}

// private are the paths of a private daemon.
type private struct {
	dataRoot, execRoot, socket, pidFile, log string
}

func privatePaths(name string) private {
	execRoot := "/run/sigscope-dt-" + name
	return private{
		dataRoot: "/var/lib/sigscope-dockertest-" + name,
		execRoot: execRoot,
		socket:   execRoot + ".sock",
		pidFile:  execRoot + ".pid",
		log:      filepath.Join(os.TempDir(), "sigscope-dockerd-"+name+".log"),
	}
}

// daemonArgs are dockerd's arguments (after the binary) for the private
// daemon name, with extra flags.
func (p private) daemonArgs(name string, extra ...string) []string {
	return append([]string{
		"--data-root", p.dataRoot, "--exec-root", p.execRoot,
		"--host", "unix://" + p.socket, "--pidfile", p.pidFile,
		"--iptables=false", "--bridge=none",
		"--containerd-namespace", "sigscope-" + name,
		"--containerd-plugins-namespace", "sigscope-" + name + "-plugins",
	}, extra...)
}

// stopPrivate removes every container of a private daemon, then stops it
// with SIGTERM (it stops its containerd too) and waits for its end.
func (d *Daemon) stopPrivate(t testing.TB, pid int) {
	if ids, err := d.DockerErr("ps", "-aq"); err == nil && ids != "" {
		if _, err := d.DockerErr(append([]string{"rm", "-f"}, strings.Fields(ids)...)...); err != nil {
			t.Errorf("dockertest: removing the private daemon's containers: %v", err)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Errorf("dockertest: stopping the private dockerd %d: %v", pid, err)
		return
	}
	for deadline := time.Now().Add(60 * time.Second); testutil.Alive(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("dockertest: the private dockerd %d still runs 60 s after SIGTERM", pid)
			return
		}
	}
}

// CopyImage copies tag from the daemon from into d (docker save, docker
// load): a private daemon has no image of its own, and no registry is
// reachable.
func (d *Daemon) CopyImage(t testing.TB, from *Daemon, tag string) {
	t.Helper()
	if _, err := d.DockerErr("image", "inspect", tag); err == nil {
		return
	}
	tar := filepath.Join(t.TempDir(), "image.tar")
	from.Docker(t, "save", "--output", tar, tag)
	d.Docker(t, "load", "--quiet", "--input", tar)
}
