package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// removeCgroupParent removes, at cleanup, the cgroup parent the runtime
// made under every hierarchy for the test's containers (empty by then:
// registered before them, it runs after they are removed), so that the
// host's cgroup tree is left as it was.
func removeCgroupParent(t *testing.T, parent string) {
	t.Helper()
	testutil.RequirePrivileged(t)
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parent)) // a cgroup2-only host
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("removing the test's cgroup %s: %v", d, err)
			}
		}
	})
}

// cgroupOf is a process's v1 memory and cgroup2 paths, for checking that a
// test's container has the layout it means to cover.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "0::") || strings.Contains(l, ":memory:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

// checkStopped checks a container's stop episode: named, by Docker, with
// the outcome and the exit status Docker reports.
func checkStopped(t *testing.T, eps []episode, id, name, outcome string, exit int) {
	t.Helper()
	ep := episodeOf(t, eps, id)
	if ep.Container.Name != name || ep.Container.Runtime != "docker" {
		t.Errorf("%s: episode container %+v, want %s by docker\n%s", name, ep.Container, name, string(ep.raw))
	}
	if ep.Outcome != outcome || ep.StopSignal != "SIGTERM" || ep.KillAt != "" {
		t.Errorf("%s: outcome %s stop signal %s kill_at %q, want %s after SIGTERM\n%s", name, ep.Outcome, ep.StopSignal, ep.KillAt, outcome, string(ep.raw))
	}
	if ep.ExitStatus == nil || *ep.ExitStatus != exit {
		t.Errorf("%s: exit status %v, want %d as Docker reports\n%s", name, ep.ExitStatus, exit, string(ep.raw))
	}
}

// `docker run --cgroup-parent` puts a container's cgroup where no pattern
// names it (/sigscope-e2e-parent/<id>): sigscope finds it through Docker's
// list of containers and their main pids. Its stop gets an episode with
// its name, and so does the stop of a --pid host container there, whose
// main process is no namespace init (without the container, that one had
// no episode at all), whether it ran before sigscope or started after. On
// every engine: on the cgroup2-only one the containers' cgroups are in the
// unified hierarchy only.
func TestDockerCgroupParent(t *testing.T) {
	forEngine(t, func(t *testing.T, e *engine) {
		img := e.image(t, busyboxImage(t))
		const parent = "/sigscope-e2e-parent"
		removeCgroupParent(t, parent)
		init := e.runContainer(t, "e2e-cgparent", "--cgroup-parent", parent, img, "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait")
		host := e.runContainer(t, "e2e-cgparent-pidhost", "--cgroup-parent", parent, "--pid", "host", img, "sleep", "1000")
		for _, c := range []struct{ name, id string }{{"e2e-cgparent", init}, {"e2e-cgparent-pidhost", host}} {
			if cg := cgroupOf(t, e.mainPID(t, c.name)); !strings.Contains(cg, parent+"/"+c.id) {
				t.Fatalf("%s: cgroups %q, want %s/<id>", c.name, cg, parent)
			}
		}
		if pidNSOf(t, e.mainPID(t, "e2e-cgparent-pidhost")) != pidNSOf(t, os.Getpid()) {
			t.Fatal("the --pid host container is not in the host's pid namespace")
		}
		l := e.startTimeline(t)
		// One more started while sigscope runs: known before its first
		// event, which is its stop.
		late := e.runContainer(t, "e2e-cgparent-late", "--cgroup-parent", parent, "--pid", "host", img, "sleep", "1000")
		time.Sleep(1500 * time.Millisecond) // the runtime lists it once it runs; sigscope looks every second
		e.docker(t, "stop", "-t", "5", "e2e-cgparent", "e2e-cgparent-pidhost", "e2e-cgparent-late")
		eps := l.stop(t, init, host, late)
		exit := func(name string) int { return atoi(t, e.exitCode(t, name)) }
		checkStopped(t, eps, init, "e2e-cgparent", "graceful", exit("e2e-cgparent"))
		checkStopped(t, eps, host, "e2e-cgparent-pidhost", "graceful", exit("e2e-cgparent-pidhost"))
		checkStopped(t, eps, late, "e2e-cgparent-late", "graceful", exit("e2e-cgparent-late"))
		if t.Failed() {
			t.Logf("timeline stderr:\n%s", l.Stderr())
		}
	})
}

// A container under a custom --cgroup-parent is known by its main
// process's cgroups; only those its runtime made for it name it. A
// cgroup2-only runtime on a hybrid host leaves its containers in the v1
// cgroups of the daemon that started them (here the test's own): a host
// process there, signalled, is no container's, though it shares that v1
// cgroup with the container's main process.
func TestDockerCgroupParentHostProcess(t *testing.T) {
	forEngine(t, func(t *testing.T, e *engine) {
		img := e.image(t, busyboxImage(t))
		const parent = "/sigscope-e2e-parent-one"
		removeCgroupParent(t, parent)
		id := e.runContainer(t, "e2e-cgparent-one", "--cgroup-parent", parent, "--pid", "host", img, "sleep", "1000")
		pid := e.mainPID(t, "e2e-cgparent-one")
		t.Logf("container's cgroups: %s; the test's: %s", cgroupOf(t, pid), cgroupOf(t, os.Getpid()))
		rec := e.startTrace(t, "--signals", "TERM,KILL")
		time.Sleep(1500 * time.Millisecond) // the owners are listed once the container's cgroup is seen
		sleep := exec.Command("sleep", "1000")
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, "the sleep's exec", func() bool {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sleep.Process.Pid))
			return string(comm) == "sleep\n"
		})
		if err := sleep.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = sleep.Wait()
		e.docker(t, "kill", "e2e-cgparent-one")
		rec.WaitLine(t, "the container's exit", func(line []byte) bool {
			l := parseTraceLine(t, string(line))
			return l.Event == "exit" && l.Target.PID == uint32(pid)
		})
		var mine, theirs int
		for _, line := range rec.stop(t) {
			l := parseTraceLine(t, line)
			switch {
			case l.Event == "generate" && l.Target.PID == uint32(sleep.Process.Pid):
				mine++
				if l.Container != nil {
					t.Errorf("the test's own sleep was taken for container %s: %s", l.Container.ID, line)
				}
			case l.Event == "generate" && l.Container != nil && l.Container.ID == id:
				theirs++
			}
		}
		if mine != 1 || theirs == 0 {
			t.Errorf("%d signals to the test's sleep (want 1), %d to the container (want docker kill's)", mine, theirs)
		}
	})
}

// A dockerd started with --cgroup-parent puts every container under it.
// Its containers are named and their stops get episodes, a --pid host one's
// too; on every engine (a private daemon of the engine's kind).
func TestDockerDaemonCgroupParent(t *testing.T) {
	forEngine(t, func(t *testing.T, e *engine) {
		img := busyboxImage(t)
		const parent = "/sigscope-e2e-daemon"
		removeCgroupParent(t, parent)
		var d *dockertest.Daemon
		if e.v2Only {
			d = dockertest.StartPrivateCgroup2Daemon(t, "cgparent-v2", "--cgroup-parent", parent)
		} else {
			d = dockertest.StartPrivateDaemon(t, "cgparent", "--cgroup-parent", parent)
		}
		d.CopyImage(t, dockertest.EnsureDaemon(t), img)
		e = e.on(d)
		init := d.RunContainer(t, "--name", "e2e-daemon-parent", img, "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait")
		host := d.RunContainer(t, "--name", "e2e-daemon-parent-pidhost", "--pid", "host", img, "sleep", "1000")
		initPID := d.PID(t, init)
		testutil.WaitChildren(t, initPID, 1) // the trap is set before the background sleep starts
		for _, c := range []struct {
			id  string
			pid int
		}{{init, initPID}, {host, d.PID(t, host)}} {
			if cg := cgroupOf(t, c.pid); !strings.Contains(cg, parent+"/"+c.id) {
				t.Fatalf("container %s: cgroups %q, want %s/<id>", c.id[:12], cg, parent)
			}
		}
		l := e.startTimeline(t)
		d.Docker(t, "stop", "-t", "5", init, host)
		eps := l.stop(t, init, host)
		exit := func(id string) int { return atoi(t, d.Docker(t, "inspect", "-f", "{{.State.ExitCode}}", id)) }
		checkStopped(t, eps, init, "e2e-daemon-parent", "graceful", exit(init))
		checkStopped(t, eps, host, "e2e-daemon-parent-pidhost", "graceful", exit(host))
		if t.Failed() {
			t.Logf("timeline stderr:\n%s", l.Stderr())
		}
	})
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
