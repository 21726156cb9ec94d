package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// Socket is where the tests expect, and start, the Docker daemon.
const Socket = "/var/run/docker.sock"

// lockPath serialises installing and starting the daemons across test
// binaries (Lock): `go test ./...` runs packages in parallel, and two
// binaries racing to start dockerd would fight over its pid file.
const lockPath = "/run/sigscope-dockertest.lock"

// Daemon is a Docker daemon that answered /_ping.
type Daemon struct {
	Socket string // unix socket path
	pid    int    // the private daemons' (PIDOfDaemon)
}

var (
	ensureMu  sync.Mutex
	ensuredOK *Daemon
)

// EnsureDaemon returns a running Docker daemon, installing docker.io and
// starting dockerd when needed. The daemon is left running afterwards.
func EnsureDaemon(t testing.TB) *Daemon {
	t.Helper()
	testutil.RequirePrivileged(t)
	ensureMu.Lock()
	defer ensureMu.Unlock()
	if ensuredOK != nil {
		return ensuredOK
	}
	if Ping(Socket) == nil {
		ensuredOK = &Daemon{Socket: Socket}
		return ensuredOK
	}

	unlock, err := Lock()
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	defer unlock()
	// Another test binary may have started it while we waited for the lock.
	if Ping(Socket) == nil {
		ensuredOK = &Daemon{Socket: Socket}
		return ensuredOK
	}

	if _, err := dockerdPath(); err != nil {
		start := time.Now()
		AptInstall(t, "docker.io")
		t.Logf("dockertest: installed docker.io in %v", time.Since(start).Round(time.Millisecond))
	}
	start := time.Now()
	if err := startDockerd(); err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	t.Logf("dockertest: dockerd answered after %v", time.Since(start).Round(time.Millisecond))
	ensuredOK = &Daemon{Socket: Socket}
	return ensuredOK
}

// Ping reports whether a Docker daemon answers GET /_ping on socket.
func Ping(socket string) error {
	c := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://docker/_ping")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /_ping on %s: %s", socket, resp.Status)
	}
	return nil
}

func dockerdPath() (string, error) {
	if p, err := exec.LookPath("dockerd"); err == nil {
		return p, nil
	}
	// Root's PATH in a test runner may lack /usr/sbin.
	for _, p := range []string{"/usr/sbin/dockerd", "/usr/bin/dockerd"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("dockerd not found")
}

// logPath is where the started daemon writes its log, kept after the tests
// so a failure can be read.
func logPath() string { return filepath.Join(os.TempDir(), "sigscope-dockerd.log") }

func startDockerd() error {
	bin, err := dockerdPath()
	if err != nil {
		return err
	}
	// No bridge and no iptables: this machine has no use for container
	// networking and the tests must not change the host's firewall.
	return startDaemon([]string{bin, "--iptables=false", "--bridge=none", "--host=unix://" + Socket})
}

// startDaemon starts the dockerd command line args and waits until it
// answers on Socket.
func startDaemon(args []string) error {
	_, err := startDaemonAt(args, Socket, logPath())
	return err
}

// startDaemonAt starts the dockerd command line args, logging to log, and
// waits until it answers on socket; it returns the daemon's pid.
func startDaemonAt(args []string, socket, log string) (int, error) {
	bin := args[0]
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	closeInheritedFiles()
	cmd := exec.Command(bin, args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: the daemon outlives the test binary, and a Ctrl-C
	// in the test's terminal must not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if Ping(socket) == nil {
			return cmd.Process.Pid, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("dockerd exited early (%v); log: %s\n%s", err, log, tail(log))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("dockerd did not answer on %s within 60s; log: %s\n%s", socket, log, tail(log))
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Lock takes the lock that serialises installing and starting the tests'
// daemons across test binaries (the Docker daemons here, critest's
// containerd and CRI-O); unlock releases it.
func Lock() (unlock func(), err error) {
	path := lockPath
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

var (
	aptMu      sync.Mutex
	aptUpdated bool
)

// AptInstall installs Debian packages, running apt-get update first (once
// per test binary): a fresh machine's package lists may be empty.
func AptInstall(t testing.TB, pkgs ...string) {
	t.Helper()
	aptMu.Lock()
	defer aptMu.Unlock()
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if !aptUpdated {
		cmd := exec.Command("apt-get", "update", "-qq")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dockertest: apt-get update: %v\n%s", err, out)
		}
		aptUpdated = true
	}
	args := append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)
	cmd := exec.Command("apt-get", args...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dockertest: apt-get install %v: %v\n%s", pkgs, err, out)
	}
}

// Docker runs the docker CLI against the daemon and returns its trimmed
// standard output; it fails the test when the command fails.
func (d *Daemon) Docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := d.DockerErr(args...)
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// DockerErr runs the docker CLI and returns its trimmed standard output, or
// an error carrying its standard error.
func (d *Daemon) DockerErr(args ...string) (string, error) {
	cmd := exec.Command("docker", append([]string{"--host", "unix://" + d.Socket}, args...)...)
	// The legacy builder: docker.io from Debian ships no buildx plugin.
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(stdout.String()), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// RunContainer runs `docker run -d --network none args...` and returns the
// container's full ID. The container is removed at cleanup.
func (d *Daemon) RunContainer(t testing.TB, args ...string) string {
	t.Helper()
	id := d.Docker(t, append([]string{"run", "-d", "--network", "none"}, args...)...)
	if len(id) != 64 {
		t.Fatalf("docker run printed %q, want a 64-hex container ID", id)
	}
	t.Cleanup(func() { _, _ = d.DockerErr("rm", "-f", id) })
	return id
}

// PID returns the host pid of a running container's PID 1.
func (d *Daemon) PID(t testing.TB, id string) int {
	t.Helper()
	out := d.Docker(t, "inspect", "--format", "{{.State.Pid}}", id)
	pid, err := strconv.Atoi(out)
	if err != nil || pid <= 0 {
		t.Fatalf("container %s has pid %q, want a running container", id, out)
	}
	return pid
}

// StartDaemonWait starts argv as a daemon (critest's containerd and CRI-O) in a session of its own, its
// output appended to /tmp/sigscope-NAME.log and its pid written to
// pidFile (unless ""), and waits until ready succeeds: at most timeout,
// and not once the daemon has exited.
func StartDaemonWait(name, socket, pidFile string, timeout time.Duration, ready func() error, argv ...string) error {
	log := filepath.Join(os.TempDir(), "sigscope-"+name+".log")
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	closeInheritedFiles()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	if pidFile != "" {
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			return err
		}
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(timeout)
	for ready() != nil {
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited early (%v); log: %s\n%s", name, err, log, tail(log))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer on %s within %v; log: %s\n%s", name, socket, timeout, log, tail(log))
		}
	}
	return nil
}
