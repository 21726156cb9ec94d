package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// Stops of the programs people put in containers: real language runtimes
// from Debian's packages (nodejs, python3, openjdk-17-jre-headless) and a
// Go binary built here, each as the container's main process in exec form
// without a SIGTERM handler of the application's own, with one that exits
// 0, and without one under `docker run --init`. The programs are
// testdata/runtimes/*: each prints "ready" once its handlers are in place.
//
// What the kernel does decides the truth (shared/platforms.md, "Language
// runtimes as PID 1"): a namespace init's signal with the default action is
// dropped, so
//   - Node.js's own one-shot handler (SA_RESETHAND) re-raises SIGTERM and
//     the kernel drops it: SIGKILL at the timeout, 137, ignored_by_init;
//   - CPython leaves SIGTERM at its default: dropped, the same;
//   - the JVM handles SIGTERM (shutdown hooks) and exits 143: graceful;
//     with -Xrs it leaves it at its default: dropped, the same as CPython;
//   - the Go runtime's handler re-raises with the default action, the
//     kernel drops it, and the runtime exits 2 at once: graceful, exit 2;
//   - under --init the runtime is no init: tini forwards, the runtime dies
//     of SIGTERM (or its handler exits 143), tini exits 143: graceful.
//
// Each stop reads the audit's prediction before it, runs the timeline
// during it and records its kernel stream (runStop; stream files
// runtime_*.jsonl with test/e2e/testdata/record.sh).

const runtimesTag = "sigscope-e2e-runtimes:latest"

var (
	runtimesOnce  sync.Once
	runtimesImg   string
	runtimesError error
)

// hostRuntimes are the runtimes from the host's packages, installed when
// missing.
func hostRuntimes(t *testing.T) (node, python, java dockertest.HostRuntime) {
	t.Helper()
	testutil.RequirePrivileged(t)
	node, python, java = dockertest.NodeJS(), dockertest.Python3(), dockertest.Java17(t)
	dockertest.EnsureHostRuntimes(t, node, python, java)
	return node, python, java
}

// runtimesImage is busybox FROM scratch with testdata/runtimes' programs in
// /app and the Go program built static as /app/goapp. Containers run it
// with runtimeArgs.
func runtimesImage(t *testing.T) string {
	t.Helper()
	busyboxImage(t) // skips when not privileged
	hostRuntimes(t)
	runtimesOnce.Do(func() { runtimesImg, runtimesError = buildRuntimesImage(t) })
	if runtimesError != nil {
		t.Fatal(runtimesError)
	}
	return runtimesImg
}

func buildRuntimesImage(t *testing.T) (string, error) {
	dir := t.TempDir()
	for _, f := range []string{"app.js", "app.py", "App.java"} {
		data, err := os.ReadFile(filepath.Join("testdata", "runtimes", f))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return "", err
		}
	}
	// Static: the image has no libc of its own, and a Go binary must not
	// need the host's through the binds to be what most Go images are.
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "goapp"), filepath.Join("testdata", "runtimes", "goapp.go"))
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build testdata/runtimes/goapp.go: %v\n%s", err, out)
	}
	if !dockertest.IsStatic(filepath.Join(dir, "goapp")) {
		return "", fmt.Errorf("goapp built with CGO_ENABLED=0 is not static")
	}
	return dockertest.BuildAppImage(t, runtimesTag, dir), nil
}

// runtimeArgs are docker run's arguments for a container of runtimesImage
// running argv: the host's runtimes bound read-only, then the image.
func runtimeArgs(t *testing.T, init bool, argv ...string) []string {
	t.Helper()
	img := runtimesImage(t)
	node, python, java := hostRuntimes(t)
	args := dockertest.HostRuntimeArgs(node, python, java)
	if init {
		args = append(args, "--init")
	}
	return append(append(args, img), argv...)
}

// appReady waits until the container's program printed "ready": its own
// handlers are in place (and a JVM has compiled App.java).
func appReady(t *testing.T, name string, _ int) {
	t.Helper()
	waitLogged(t, name, "ready")
}

// waitLogged waits until the container has printed what.
func waitLogged(t *testing.T, name, what string) {
	t.Helper()
	var out []byte
	if !testutil.Poll(50*time.Millisecond, func() bool {
		var err error
		if out, err = exec.Command("docker", "logs", name).CombinedOutput(); err != nil {
			t.Fatalf("docker logs %s: %v\n%s", name, err, out)
		}
		return strings.Contains(string(out), what)
	}) {
		t.Fatalf("container %s did not print %s within %v; its output:\n%s", name, what, testutil.Bound, out)
	}
}

// runtimeCase is a stop of one runtime in one shape.
type runtimeCase struct {
	shape string // the subtest: exec, handler, init, xrs
	stopCase
}

func runRuntimeCases(t *testing.T, cases []runtimeCase) {
	for _, c := range cases {
		t.Run(c.shape, func(t *testing.T) {
			c.ready = appReady
			if c.timeout == "" {
				c.timeout = "2"
			}
			if c.signal == "" {
				c.signal = "SIGTERM"
			}
			r := runStopResult(t, c.stopCase)
			if r.audit.Prediction != r.ep.Outcome {
				t.Errorf("the audit predicted %s before the stop, the stop was %s", r.audit.Prediction, r.ep.Outcome)
			}
			if c.outcome == "ignored_by_init" {
				// The audit's hint names the same runtime-specific fix.
				for _, h := range c.hint {
					if !strings.Contains(r.audit.Hint, h) {
						t.Errorf("audit hint %q does not say %q", r.audit.Hint, h)
					}
				}
			}
		})
	}
}

// Node.js: `node app.js` as PID 1 with no SIGTERM listener: Node.js's own
// handler (SA_RESETHAND) resets the terminal and re-raises SIGTERM, which
// the kernel drops for a namespace init.
func TestRuntimeNodeJS(t *testing.T) {
	node, _, _ := hostRuntimes(t)
	runRuntimeCases(t, []runtimeCase{
		{"exec", stopCase{
			name: "e2e-rt-node", stream: "runtime_node",
			args:       runtimeArgs(t, false, node.Path, "/app/app.js"),
			prediction: "ignored_by_init", outcome: "ignored_by_init", exitStatus: 137, killed: true,
			runtime: "nodejs", hint: []string{"process.on('SIGTERM'"},
			summary: []string{"re-rais"},
		}},
		{"handler", stopCase{
			name: "e2e-rt-node-handler", stream: "runtime_node_handler",
			args:       runtimeArgs(t, false, node.Path, "/app/app.js", "handle"),
			prediction: "graceful", outcome: "graceful", exitStatus: 0,
			runtime: "nodejs",
		}},
		{"init", stopCase{
			name: "e2e-rt-node-init", stream: "runtime_node_init",
			args: runtimeArgs(t, true, node.Path, "/app/app.js"),
			// Not an init, Node.js dies of its re-raised SIGTERM; tini
			// exits 128+15.
			prediction: "graceful", outcome: "graceful", exitStatus: 143,
			runtime: "init",
		}},
	})
}

// CPython: `python3 app.py` leaves SIGTERM at its default action.
func TestRuntimeCPython(t *testing.T) {
	_, python, _ := hostRuntimes(t)
	runRuntimeCases(t, []runtimeCase{
		{"exec", stopCase{
			name: "e2e-rt-python", stream: "runtime_python",
			args:       runtimeArgs(t, false, python.Path, "/app/app.py"),
			prediction: "ignored_by_init", outcome: "ignored_by_init", exitStatus: 137, killed: true,
			runtime: "cpython", hint: []string{"signal.signal"},
		}},
		{"handler", stopCase{
			name: "e2e-rt-python-handler", stream: "runtime_python_handler",
			args:       runtimeArgs(t, false, python.Path, "/app/app.py", "handle"),
			prediction: "graceful", outcome: "graceful", exitStatus: 0,
			runtime: "cpython",
		}},
		{"init", stopCase{
			name: "e2e-rt-python-init", stream: "runtime_python_init",
			args:       runtimeArgs(t, true, python.Path, "/app/app.py"),
			prediction: "graceful", outcome: "graceful", exitStatus: 143,
			runtime: "init",
		}},
	})
}

// OpenJDK 17: `java App.java`. The JVM handles SIGTERM itself: it runs the
// shutdown hooks and exits 143, an exit, not a death by signal. -Xrs
// leaves SIGTERM at its default action.
func TestRuntimeJVM(t *testing.T) {
	_, _, java := hostRuntimes(t)
	runRuntimeCases(t, []runtimeCase{
		{"exec", stopCase{
			name: "e2e-rt-java", stream: "runtime_java",
			args:       runtimeArgs(t, false, java.Path, "/app/App.java"),
			prediction: "graceful", outcome: "graceful", exitStatus: 143,
			runtime: "jvm",
		}},
		{"xrs", stopCase{
			name: "e2e-rt-java-xrs", stream: "runtime_java_xrs",
			args:       runtimeArgs(t, false, java.Path, "-Xrs", "/app/App.java"),
			prediction: "ignored_by_init", outcome: "ignored_by_init", exitStatus: 137, killed: true,
			runtime: "jvm", hint: []string{"-Xrs"},
		}},
		{"handler", stopCase{
			name: "e2e-rt-java-handler", stream: "runtime_java_handler",
			args:       runtimeArgs(t, false, java.Path, "/app/App.java", "handle"),
			prediction: "graceful", outcome: "graceful", exitStatus: 0,
			runtime: "jvm",
		}},
		{"init", stopCase{
			name: "e2e-rt-java-init", stream: "runtime_java_init",
			args:       runtimeArgs(t, true, java.Path, "/app/App.java"),
			prediction: "graceful", outcome: "graceful", exitStatus: 143,
			runtime: "init",
		}},
	})
}

// A Go binary (static, as FROM scratch images hold them). Without
// signal.Notify the Go runtime's handler restores SIGTERM's default action
// and re-raises; the kernel drops that for a namespace init and the runtime
// exits 2 at once: a graceful stop whose exit status is not 143, and the
// episode says why.
func TestRuntimeGo(t *testing.T) {
	runRuntimeCases(t, []runtimeCase{
		{"exec", stopCase{
			name: "e2e-rt-go", stream: "runtime_go",
			args:       runtimeArgs(t, false, "/app/goapp"),
			prediction: "graceful", outcome: "graceful", exitStatus: 2,
			runtime: "go",
			summary: []string{"re-rais"},
		}},
		{"handler", stopCase{
			name: "e2e-rt-go-handler", stream: "runtime_go_handler",
			args:       runtimeArgs(t, false, "/app/goapp", "handle"),
			prediction: "graceful", outcome: "graceful", exitStatus: 0,
			runtime: "go",
		}},
		{"init", stopCase{
			name: "e2e-rt-go-init", stream: "runtime_go_init",
			args:       runtimeArgs(t, true, "/app/goapp"),
			prediction: "graceful", outcome: "graceful", exitStatus: 143,
			runtime: "init",
		}},
	})
}
