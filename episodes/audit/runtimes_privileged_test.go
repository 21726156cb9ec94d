package audit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Real language runtimes as PID 1 of a pid namespace, audited through the
// real task iterator, then sent SIGTERM from the host as a container
// runtime sends it: the prediction must be what the kernel and the runtime
// then do (issue 20).

// runtimeInit is a program running as PID 1 of a new pid namespace.
type runtimeInit struct {
	pid  int
	done chan *os.ProcessState // unshare's end, which reports the init's
}

// startRuntimeInit runs argv as PID 1 of a new pid namespace (unshare -p
// -f) and returns once it has printed "ready" on stdout: after that line
// the runtime's handlers are in place. The namespace is killed at cleanup.
func startRuntimeInit(t *testing.T, argv ...string) *runtimeInit {
	t.Helper()
	cmd := exec.Command("unshare", append([]string{"-p", "-f", "--"}, argv...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %v: %v", argv, err)
	}
	ri := &runtimeInit{done: make(chan *os.ProcessState, 1)}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after "ready"
			}
		}
		// unshare exits with the init's status (util-linux: its exit code,
		// or the same signal).
		_ = cmd.Wait()
		ri.done <- cmd.ProcessState
		close(lines)
	}()
	t.Cleanup(func() {
		if ri.pid > 0 {
			_ = syscall.Kill(ri.pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		<-ri.done
	})
	timeout := time.After(60 * time.Second) // a JVM compiling a source file on a busy 2-core VM
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%v ended before printing ready", argv)
			}
			ready = l == "ready"
		case <-timeout:
			t.Fatalf("%v never printed ready", argv)
		}
	}
	kids := testutil.Children(t, cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("unshare has children %v, want the namespace init", kids)
	}
	ri.pid = kids[0]
	return ri
}

// stop sends SIGTERM from the host, as runc does, and says what followed
// within wait: "exit N", "signal S", or "running".
func (ri *runtimeInit) stop(t *testing.T, wait time.Duration) string {
	t.Helper()
	if err := syscall.Kill(ri.pid, syscall.SIGTERM); err != nil {
		t.Fatalf("kill: %v", err)
	}
	select {
	case ps := <-ri.done:
		ri.done <- ps // for the cleanup
		ws := ps.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			return "signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit %d", ws.ExitStatus())
	case <-time.After(wait):
		return "running"
	}
}

// need skips when a runtime is not installed, and fails instead with
// SIGSCOPE_REQUIRE_PRIVILEGED=1: CI installs them all, and must not pass by
// skipping.
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(prog)
	if err != nil {
		msg := fmt.Sprintf("%s not installed (apt-get install -y %s): %v", prog, pkg, err)
		if os.Getenv("SIGSCOPE_REQUIRE_PRIVILEGED") == "1" {
			t.Fatal(msg + "; SIGSCOPE_REQUIRE_PRIVILEGED=1 makes this a failure")
		}
		t.Skip(msg)
	}
	return path
}

// buildGo builds a one-file Go program into the test's temp dir.
func buildGo(t *testing.T, name, src string) string {
	t.Helper()
	goTool := need(t, "go", "golang")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name+".go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command(goTool, "build", "-o", bin, name+".go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	return bin
}

const (
	goPlain = `package main

import (
	"fmt"
	"time"
)

func main() {
	fmt.Println("ready")
	time.Sleep(time.Hour)
}
`
	goNotify = `package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	os.Exit(0)
}
`
	javaMain = `public class Main {
	public static void main(String[] args) throws Exception {
		System.out.println("ready");
		System.out.flush();
		Thread.sleep(3600_000);
	}
}
`
)

func TestAuditRuntimesPrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	// A small JVM: the test shares two cores.
	jvm := []string{"-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k"}
	cases := []struct {
		name    string
		argv    func(t *testing.T) []string
		runtime langrt.Runtime
		predict string
		handled bool   // the kernel shows a SIGTERM handler
		oneShot bool   // ... with SA_RESETHAND
		hintHas string // "" for no hint
		// What SIGTERM from the host does: "exit N", "signal S", or
		// "running" (the init survived it: the stop would end in SIGKILL).
		after string
	}{
		{"node without a listener", func(t *testing.T) []string {
			return []string{need(t, "node", "nodejs"), "-e", `console.log("ready"); setInterval(() => {}, 1000)`}
		}, langrt.NodeJS, IgnoredByInit, true, true, "one-shot (SA_RESETHAND)", "running"},
		{"node with process.on('SIGTERM')", func(t *testing.T) []string {
			return []string{need(t, "node", "nodejs"), "-e", `process.on("SIGTERM", () => process.exit(0)); console.log("ready"); setInterval(() => {}, 1000)`}
		}, langrt.NodeJS, Graceful, true, false, "", "exit 0"},
		{"python3", func(t *testing.T) []string {
			return []string{need(t, "python3", "python3"), "-c", `import time; print("ready", flush=True); time.sleep(100)`}
		}, langrt.CPython, IgnoredByInit, false, false, "signal.signal(signal.SIGTERM", "running"},
		{"go without signal.Notify", func(t *testing.T) []string {
			return []string{buildGo(t, "plain", goPlain)}
		}, langrt.Go, Graceful, true, false, "exits at once with status 2", "exit 2"},
		{"go with signal.NotifyContext", func(t *testing.T) []string {
			return []string{buildGo(t, "notify", goNotify)}
		}, langrt.Go, Graceful, true, false, "exits at once with status 2", "exit 0"},
		{"java", func(t *testing.T) []string {
			return append(append([]string{need(t, "java", "openjdk-17-jre-headless")}, jvm...), javaSource(t))
		}, langrt.JVM, Graceful, true, false, "", "exit 143"},
		{"java -Xrs", func(t *testing.T) []string {
			return append(append([]string{need(t, "java", "openjdk-17-jre-headless"), "-Xrs"}, jvm...), javaSource(t))
		}, langrt.JVM, IgnoredByInit, false, false, "remove `-Xrs`", "running"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			init := startRuntimeInit(t, c.argv(t)...)
			snaps, err := tracer.ReadTaskStates([]int{init.pid})
			if err != nil {
				t.Fatal(err)
			}
			s := snaps[init.pid]
			t.Logf("pid %d: ns init %v, handled %s, one-shot %s", init.pid, s.NSInit(), s.Handled, s.OneShot)
			if !s.NSInit() || s.Handled.Has(sigvocab.SIGTERM) != c.handled || s.OneShot.Has(sigvocab.SIGTERM) != c.oneShot {
				t.Errorf("SIGTERM: handler %v, one-shot %v; want %v, %v", s.Handled.Has(sigvocab.SIGTERM), s.OneShot.Has(sigvocab.SIGTERM), c.handled, c.oneShot)
			}
			l := fakeLister{running: []identity.Running{{Info: identity.Info{Identity: identity.Identity{ID: "c", Name: "c"}}, PID: init.pid}}}
			res, err := RunWith(context.Background(), l, Options{Source: SourceKernel, ReadTaskStates: tracer.ReadTaskStates})
			if err != nil || len(res) != 1 {
				t.Fatalf("audit: %v, %+v", err, res)
			}
			r := res[0]
			t.Logf("audit: %s, runtime %s, fate %s, hint %q", r.Prediction, r.PID1.Runtime, r.Fate, r.Hint)
			if r.Source != SourceKernel || r.PID1.Runtime != c.runtime || r.Prediction != c.predict || !r.NSInit || r.Error != "" {
				t.Errorf("audit %+v: want runtime %s, prediction %s", r, c.runtime, c.predict)
			}
			if c.hintHas != "" && !strings.Contains(r.Hint, c.hintHas) || c.hintHas == "" && r.Hint != "" {
				t.Errorf("hint %q, want %q", r.Hint, c.hintHas)
			}
			// What the prediction stands for, on the real process. An
			// init that survives is "running" after 2 s; one that ends
			// does so in milliseconds (a JVM's shutdown in less than 2 s).
			after := init.stop(t, 2*time.Second)
			t.Logf("after SIGTERM from the host: %s", after)
			if after != c.after {
				t.Errorf("after SIGTERM: %s, want %s", after, c.after)
			}
			switch survived := after == "running"; {
			case survived && c.predict != IgnoredByInit, !survived && c.predict != Graceful:
				t.Errorf("predicted %s, but after SIGTERM: %s", c.predict, after)
			}
		})
	}
}

// javaSource writes Main.java for the single-file source launcher (java
// Main.java, Java 11 and later: no javac needed).
func javaSource(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "Main.java")
	if err := os.WriteFile(p, []byte(javaMain), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
