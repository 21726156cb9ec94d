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

	"github.com/sigscope/sigscope/test/testutil"
)

// Where dockerd writes its pid (its --pidfile default), and where the
// containerd it runs writes its own (under its default --exec-root).
const (
	pidFile           = "/var/run/docker.pid"
	containerdPIDFile = "/var/run/docker/containerd/containerd.pid"
)

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
	unlock, err := Lock()
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	defer unlock()
	pid, args, err := daemonProcess()
	if err != nil {
		t.Fatalf("dockertest: restart: %v", err)
	}
	containerd := processOf(containerdPIDFile, "containerd")
	var o Outage
	start := time.Now()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("dockertest: signalling dockerd %d: %v", pid, err)
	}
	// dockerd was started in its own session by EnsureDaemon or by a
	// service manager: it is not this process's child, so poll for its end.
	// Its containerd goes too (dockerd stops it, or the kernel kills it
	// when dockerd dies).
	for _, p := range []struct {
		pid  int
		name string
		file string
	}{{pid, "dockerd", pidFile}, {containerd, "its containerd", containerdPIDFile}} {
		if p.pid == 0 {
			continue
		}
		for testutil.Alive(p.pid) {
			if time.Since(start) > 90*time.Second {
				t.Fatalf("dockertest: %s (%d) still running 90s after %v to dockerd", p.name, p.pid, sig)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Dead, but after a crash maybe a zombie until init reaps it,
		// and its pid file left behind: a new dockerd would take it for
		// alive (it refuses to start; it waits for that containerd's
		// socket, times out and exits). Remove what names the dead.
		if processOf(p.file, "") == p.pid {
			if err := os.Remove(p.file); err != nil && !os.IsNotExist(err) {
				t.Fatalf("dockertest: %v", err)
			}
		}
	}
	o.Stopped = time.Since(start)
	if err := Ping(d.Socket); err == nil {
		t.Fatalf("dockertest: a daemon still answers on %s after dockerd %d ended", d.Socket, pid)
	}
	// Other tests share this daemon: it comes back even when down fails
	// the test.
	started := false
	defer func() {
		if !started {
			if err := restartDaemon(args); err != nil {
				t.Errorf("dockertest: restart: %v", err)
			}
		}
	}()
	if down != nil {
		down()
	}
	start = time.Now()
	started = true
	if err := restartDaemon(args); err != nil {
		t.Fatalf("dockertest: restart: %v", err)
	}
	o.Started = time.Since(start)
	return o
}

// restartDaemon starts dockerd, and tries once more when it fails: the
// machine is not to be left without Docker.
func restartDaemon(args []string) error {
	err := startDaemon(args)
	if err == nil {
		return nil
	}
	if err2 := startDaemon(args); err2 != nil {
		return fmt.Errorf("%v; and again: %v", err, err2)
	}
	return nil
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

// processOf is the pid in file when it is a process named comm, 0
// otherwise; with comm "", whatever pid file names.
func processOf(file, comm string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	if comm == "" {
		return pid
	}
	c, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil || strings.TrimSpace(string(c)) != comm {
		return 0
	}
	return pid
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
