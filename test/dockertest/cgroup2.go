package dockertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// Cgroup2Name is the name of the cgroup2-only daemon (see
// EnsureCgroup2Daemon): its data root is /var/lib/sigscope-dockertest-cgroup2,
// its socket /run/sigscope-dt-cgroup2.sock.
const Cgroup2Name = "cgroup2"

// Cgroup2Runtime is the name the cgroup2-only daemon knows the runc it
// builds by (--add-runtime), and its default runtime.
const Cgroup2Runtime = "runc-cluster"

var (
	cg2Mu sync.Mutex
	cg2OK *Daemon
)

// EnsureCgroup2Daemon returns a Docker daemon whose containers live in
// cgroup v2 only, run by runc 1.2 or later: most nodes in production are
// so, while this machine's own layout is a v1/v2 hybrid that must not be
// changed. The daemon runs in a mount namespace of its own where
// /sys/fs/cgroup is the unified hierarchy (the v1 tmpfs unmounted lazily
// there, and only there), so `docker info` says "Cgroup Version: 2"; only
// hugetlb is a controller in it (v1 holds the others), so resource limits
// do not apply, but containers run, stop and are killed as on any v2 node.
// Its runc is the one `make cluster` builds (test/cluster/build.sh runc,
// into the pinned builds' cache, testutil.BuildCache("cluster")/bin; built
// here when missing, which takes about a minute). The busybox image of the
// tests is copied into it.
//
// Like the shared daemon it is left running, for the next test binary;
// it has its own data root, exec root, socket, pid file and containerd, as
// StartPrivateDaemon's daemons do. Its pid is Daemon.PIDOfDaemon; a process
// started with `nsenter -t PID -m` sees its cgroup2-only view.
func EnsureCgroup2Daemon(t testing.TB) *Daemon {
	t.Helper()
	testutil.RequirePrivileged(t)
	EnsureDaemon(t) // installs docker.io when missing
	cg2Mu.Lock()
	defer cg2Mu.Unlock()
	if cg2OK == nil {
		d, err := ensureCgroup2(t)
		if err != nil {
			t.Fatalf("dockertest: %v", err)
		}
		cg2OK = d
	}
	return cg2OK
}

func ensureCgroup2(t testing.TB) (*Daemon, error) {
	unlock, err := Lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	p := privatePaths(Cgroup2Name)
	d := &Daemon{Socket: p.socket}
	if pid := processOf(p.pidFile, "dockerd"); pid != 0 {
		if err := Ping(p.socket); err != nil {
			return nil, fmt.Errorf("dockerd %d of %s runs but does not answer on %s (%v); log: %s", pid, p.pidFile, p.socket, err, p.log)
		}
		d.pid = pid
		return d, d.checkCgroup2()
	}
	runc, err := clusterRunc(t)
	if err != nil {
		return nil, err
	}
	bin, err := dockerdPath()
	if err != nil {
		return nil, err
	}
	if err := os.Remove(p.pidFile); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	args := cgroup2Command(bin, runc, p, Cgroup2Name)
	start := time.Now()
	pid, err := startDaemonAt(args, p.socket, p.log)
	if err != nil {
		return nil, err
	}
	d.pid = pid
	t.Logf("dockertest: cgroup2-only dockerd (runtime %s, %s) answered after %v", Cgroup2Runtime, runc, time.Since(start).Round(time.Millisecond))
	return d, d.checkCgroup2()
}

// cgroup2Command is the command line that starts dockerd (bin) as the
// private daemon p named name, with extra flags, in a mount namespace of its
// own whose /sys/fs/cgroup is cgroup2 only, runc its default runtime.
// unshare execs sh, which execs dockerd: the pid started is the daemon's.
// Mounts are private in the new namespace (unshare's default, said again),
// so nothing done there reaches the host.
func cgroup2Command(bin, runc string, p private, name string, extra ...string) []string {
	script := `umount -l /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup && exec "$@"`
	flags := append([]string{"--add-runtime", Cgroup2Runtime + "=" + runc, "--default-runtime", Cgroup2Runtime}, extra...)
	return append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", bin}, p.daemonArgs(name, flags...)...)
}

// StartPrivateCgroup2Daemon is StartPrivateDaemon on a cgroup2-only view,
// as EnsureCgroup2Daemon's daemon: a daemon of the test's own with extra
// flags (such as --cgroup-parent), stopped at cleanup.
func StartPrivateCgroup2Daemon(t testing.TB, name string, extra ...string) *Daemon {
	t.Helper()
	testutil.RequirePrivileged(t)
	d := startPrivate(t, name, func(bin string, p private) ([]string, error) {
		runc, err := clusterRunc(t)
		if err != nil {
			return nil, err
		}
		return cgroup2Command(bin, runc, p, name, extra...), nil
	}, extra)
	if err := d.checkCgroup2(); err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	return d
}

// checkCgroup2 checks that the daemon sees cgroup v2 and runs the built
// runc, so that a test meant for that platform never passes on another.
func (d *Daemon) checkCgroup2() error {
	out, err := d.DockerErr("info", "--format", "{{.CgroupVersion}} {{.DefaultRuntime}}")
	if err != nil {
		return err
	}
	if out != "2 "+Cgroup2Runtime {
		return fmt.Errorf("the cgroup2 daemon on %s reports cgroup version and default runtime %q, want \"2 %s\"", d.Socket, out, Cgroup2Runtime)
	}
	return nil
}

// PIDOfDaemon is the daemon's pid, when this package started or found it
// (the shared daemon's is not kept: 0).
func (d *Daemon) PIDOfDaemon() int { return d.pid }

// RuncVersion is the version the daemon's default runtime reports
// ("1.5.2"), read from the runtime's binary.
func (d *Daemon) RuncVersion(t testing.TB) string {
	t.Helper()
	path := d.Docker(t, "info", "--format", "{{with index .Runtimes .DefaultRuntime}}{{.Path}}{{end}}")
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", path, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimPrefix(first, "runc version ")
}

// RepoRoot is the top of the source tree the tests run from (where go.mod
// and test/cluster are): a test's working directory is its package's.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "test", "cluster", "build.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no test/cluster/build.sh above the working directory")
		}
		dir = parent
	}
}

// clusterRunc returns the runc `make cluster` builds (the version that
// test/cluster/versions.sh pins), building it with test/cluster/build.sh
// when it is missing or was built from another recipe: one recipe for the
// cluster and the tests, and one cache, outside the tree and shared by
// every clone on the machine (testutil.BuildCache("cluster")/bin). The
// script says how long the build took; so does the test log.
func clusterRunc(t testing.TB) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	start := time.Now()
	cmd := exec.Command("bash", filepath.Join(root, "test", "cluster", "build.sh"), "runc")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("test/cluster/build.sh runc: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "==> build runc") {
		// The script's stage lines, with their times; not the modules
		// it downloaded.
		var stages []string
		for _, l := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(l, "go: ") && strings.TrimSpace(l) != "" {
				stages = append(stages, l)
			}
		}
		t.Logf("dockertest: built runc with test/cluster/build.sh in %v:\n%s", time.Since(start).Round(time.Second), strings.Join(stages, "\n"))
	}
	cache, err := testutil.BuildCache("cluster")
	if err != nil {
		return "", err
	}
	// build.sh resolves the cache through symbolic links; so does this.
	bin, err := filepath.EvalSymlinks(filepath.Join(cache, "bin", "runc"))
	if err != nil {
		return "", fmt.Errorf("test/cluster/build.sh runc left no runc: %v\n%s", err, out)
	}
	return bin, nil
}

// EngineWanted reports whether the tests parameterised over engines (the
// host's Docker "host", the cgroup2-only "cgroup2" and its variants
// "cgroup2-...") run the engine name: all of them unless
// SIGSCOPE_ENGINES lists some (comma-separated; "cgroup2" takes its
// variants too). CI runs the cgroup2 ones as a stage of their own
// (make test-cgroup2), then make test with the host's only, so that
// each runs once and the stage's time is the cgroup v2 suite's.
func EngineWanted(name string) bool {
	list := os.Getenv("SIGSCOPE_ENGINES")
	if list == "" {
		return true
	}
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" && (name == e || strings.HasPrefix(name, e+"-")) {
			return true
		}
	}
	return false
}
