package e2e

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// engine is a Docker daemon the end-to-end tests run against, and where
// sigscope runs to watch it. The tests that matter on every platform take
// one and run once per engine (forEngine): the host's own Docker (20.10,
// runc 1.1, the v1/v2 hybrid), and a cgroup2-only Docker with runc 1.2+
// (dockertest.EnsureCgroup2Daemon) watched twice, by a sigscope on the
// host's hybrid view (as an agent beside such a runtime would be when its
// /sys/fs/cgroup differs from the runtime's) and by one in the daemon's
// own mount namespace (the cgroup2-only view every v2 node has).
type engine struct {
	name string
	d    *dockertest.Daemon
	// socket is sigscope's --docker-socket; "" for its default (the host's
	// daemon).
	socket string
	// wrap is how sigscope is started: nsenter into the daemon's mount
	// namespace; nil on the host.
	wrap []string
	// cgroupKill: the runtime (runc 1.2+ on cgroup v2) ends what is left
	// of a container without a pid namespace of its own by writing
	// cgroup.kill, which the kernel turns into one SIGKILL per process.
	cgroupKill bool
	// v2Only: the containers' cgroups are in the unified hierarchy only
	// (their v1 lines are the daemon's).
	v2Only bool
}

// hostEngine is the host's Docker daemon, which the tests that run on one
// platform only use through the package's helpers (docker, runContainer).
var hostEngine = &engine{name: "host"}

// forEngine runs f as a subtest per engine: "host", "cgroup2" and
// "cgroup2-inside" (SIGSCOPE_ENGINES chooses: dockertest.EngineWanted).
// A test that calls it belongs in the Makefile's CGROUP2_TESTS, which
// make test-cgroup2 (a CI stage of its own) runs.
func forEngine(t *testing.T, f func(t *testing.T, e *engine)) {
	t.Helper()
	testutil.RequirePrivileged(t)
	if dockertest.EngineWanted(hostEngine.name) {
		t.Run(hostEngine.name, func(t *testing.T) { f(t, hostEngine) })
	}
	for _, inside := range []bool{false, true} {
		name := "cgroup2"
		if inside {
			name = "cgroup2-inside"
		}
		if !dockertest.EngineWanted(name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			d := dockertest.EnsureCgroup2Daemon(t)
			e := &engine{name: name, d: d, socket: d.Socket, cgroupKill: true, v2Only: true}
			if inside {
				e.wrap = nsenter(d)
			}
			f(t, e)
			t.Logf("%s: %v (runc %s on cgroup v2)", name, time.Since(start).Round(time.Millisecond), d.RuncVersion(t))
		})
	}
}

// nsenter is the wrapper that starts sigscope in d's mount namespace.
func nsenter(d *dockertest.Daemon) []string {
	return []string{"nsenter", "-t", strconv.Itoa(d.PIDOfDaemon()), "-m", "--"}
}

// on is e with its daemon replaced by d, a private daemon of the test's
// own of the same kind (dockertest.StartPrivateDaemon on the host's view,
// StartPrivateCgroup2Daemon on the cgroup2-only one).
func (e *engine) on(d *dockertest.Daemon) *engine {
	c := *e
	c.d, c.socket = d, d.Socket
	if e.wrap != nil {
		c.wrap = nsenter(d)
	}
	return &c
}

// image makes the shared daemon's image tag available to the engine.
func (e *engine) image(t *testing.T, tag string) string {
	t.Helper()
	if e.d != nil {
		e.d.CopyImage(t, dockertest.EnsureDaemon(t), tag)
	}
	return tag
}

// docker runs the docker CLI against the engine's daemon.
func (e *engine) docker(t *testing.T, args ...string) string {
	t.Helper()
	if e.d != nil {
		args = append([]string{"--host", "unix://" + e.d.Socket}, args...)
	}
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (e *engine) rm(name string) {
	args := []string{"rm", "-f", name}
	if e.d != nil {
		args = append([]string{"--host", "unix://" + e.d.Socket}, args...)
	}
	_ = exec.Command("docker", args...).Run()
}

// runContainer starts a detached container (no network: the test daemons
// have no bridge) and removes it at cleanup. It returns the full ID.
func (e *engine) runContainer(t *testing.T, name string, args ...string) string {
	t.Helper()
	e.rm(name)
	full := []string{"run", "-d", "--name", name}
	if !slices.Contains(args, "--network") {
		full = append(full, "--network", "none")
	}
	full = append(full, args...)
	id := e.docker(t, full...)
	t.Cleanup(func() { e.rm(name) })
	if !testutil.Poll(50*time.Millisecond, func() bool { return e.docker(t, "inspect", "-f", "{{.State.Running}}", name) == "true" }) {
		t.Fatalf("container %s never ran", name)
	}
	testutil.WaitCommand(t, "container "+name, e.mainPID(t, name))
	return id
}

func (e *engine) exitCode(t *testing.T, name string) string {
	return e.docker(t, "inspect", "-f", "{{.State.ExitCode}}", name)
}

// mainPID is the host pid of a running container's main process.
func (e *engine) mainPID(t *testing.T, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(e.docker(t, "inspect", "-f", "{{.State.Pid}}", name))
	if err != nil || pid <= 0 {
		t.Fatalf("container %s: no pid (%v)", name, err)
	}
	return pid
}

// sigscopeArgs adds the engine's daemon to a sigscope command line.
func (e *engine) sigscopeArgs(args ...string) []string {
	if e.socket != "" {
		args = append(args, "--docker-socket", e.socket)
	}
	return args
}

func (e *engine) startTimeline(t *testing.T, args ...string) live {
	t.Helper()
	return live{testutil.StartTimeline(t, e.wrap, e.sigscopeArgs(args...)...)}
}

// startTimelineText starts `sigscope timeline` with its text output, for
// what only the text says (the outcome line's summary).
func (e *engine) startTimelineText(t *testing.T) live {
	t.Helper()
	return live{testutil.StartSigscopeUnder(t, e.wrap, e.sigscopeArgs("timeline", "-o", "text")...)}
}

func (e *engine) startTrace(t *testing.T, args ...string) recorder {
	t.Helper()
	return recorder{testutil.StartSigscopeUnder(t, e.wrap, e.sigscopeArgs(append([]string{"trace", "-o", "json"}, args...)...)...)}
}

// auditOf runs `sigscope audit -o json [flags]` and returns the
// container's line.
func (e *engine) auditOf(t *testing.T, id string, flags ...string) auditLine {
	t.Helper()
	argv := append(append(append([]string(nil), e.wrap...), sigscope(t)), e.sigscopeArgs(append([]string{"audit", "-o", "json"}, flags...)...)...)
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatalf("sigscope audit: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var a auditLine
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if a.Container.ID == id {
			return a
		}
	}
	t.Fatalf("container %s not in audit output:\n%s", id[:12], out)
	return auditLine{}
}
