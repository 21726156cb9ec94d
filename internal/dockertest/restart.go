package dockertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pidFile is where dockerd writes its pid (its --pidfile default).
const pidFile = "/var/run/docker.pid"

// Outage says how a Restart went: how long the daemon took to go (with
// live-restore off it stops every running container first, each within
// its stop timeout) and to answer again once started.
type Outage struct {
	Stopped time.Duration // from the signal to the daemon's exit
	Started time.Duration // from the start to /_ping answering
}

// Restart stops the Docker daemon and starts it again with the command line
// it ran with, for fault tests. sig is how it is stopped: SIGTERM is what a
// service manager does (dockerd closes its API, stops every running
// container as docker stop would, since live-restore is off here, stops
// its containerd and removes its socket); SIGKILL is a crash (its
// containerd goes with it, the containers' shims and processes stay, and
// the socket file is left behind, refusing connections). down runs while
// the daemon is gone. The lock that serialises starting daemons is held
// throughout, so another test binary's EnsureDaemon waits for the restart
// instead of starting a second dockerd.
func (d *Daemon) Restart(t testing.TB, sig syscall.Signal, down func()) Outage {
	t.Helper()
	unlock, err := lockFile(lockPath)
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	defer unlock()
	pid, args, err := daemonProcess()
	if err != nil {
		t.Fatalf("dockertest: restart: %v", err)
	}
	var o Outage
	start := time.Now()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("dockertest: signalling dockerd %d: %v", pid, err)
	}
	// dockerd was started in its own session by EnsureDaemon or by a
	// service manager: it is not this process's child, so poll for its end.
	for syscall.Kill(pid, 0) == nil {
		if time.Since(start) > 90*time.Second {
			t.Fatalf("dockertest: dockerd %d still running 90s after %v", pid, sig)
		}
		time.Sleep(20 * time.Millisecond)
	}
	o.Stopped = time.Since(start)
	if err := Ping(d.Socket); err == nil {
		t.Fatalf("dockertest: a daemon still answers on %s after dockerd %d ended", d.Socket, pid)
	}
	if down != nil {
		down()
	}
	start = time.Now()
	if err := startDaemon(args); err != nil {
		t.Fatalf("dockertest: restart: %v", err)
	}
	o.Started = time.Since(start)
	return o
}

// daemonProcess is the running dockerd's pid and command line, from its
// pid file.
func daemonProcess() (int, []string, error) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, nil, fmt.Errorf("no dockerd pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, nil, fmt.Errorf("%s: %q is no pid", pidFile, b)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return 0, nil, fmt.Errorf("dockerd %d from %s: %w", pid, pidFile, err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if filepath.Base(args[0]) != "dockerd" {
		return 0, nil, fmt.Errorf("pid %d from %s runs %q, not dockerd", pid, pidFile, args[0])
	}
	return pid, args, nil
}

// closeInheritedFiles marks every descriptor above stderr close-on-exec.
// Go opens its own files so; the ones inherited from whatever ran the tests
// are not, and a daemon that outlives the test would keep them: a
// `flock LOCK go test` runner's lock would then stay held by dockerd for
// as long as it runs.
func closeInheritedFiles() {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, f := range fds {
		if fd, err := strconv.Atoi(f.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
