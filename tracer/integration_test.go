package tracer

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// TestMain lets the test binary act as a signal sender in a child process:
// the tracer drops its own process's signals, so storms must come from elsewhere.
func TestMain(m *testing.M) {
	switch os.Getenv("SIGSCOPE_TEST_HELPER") {
	case "storm":
		os.Exit(storm())
	case "threads":
		threads()
	case "ignore":
		ignore()
	case "allocate":
		allocate()
	case "tcpserver":
		tcpServer()
	case "dialer":
		dialer()
	}
	os.Exit(m.Run())
}

func storm() int {
	pid, _ := strconv.Atoi(os.Getenv("STORM_PID"))
	n, _ := strconv.Atoi(os.Getenv("STORM_N"))
	sig, _ := strconv.Atoi(os.Getenv("STORM_SIG"))
	for range n {
		if err := syscall.Kill(pid, syscall.Signal(sig)); err != nil {
			fmt.Fprintln(os.Stderr, "storm:", err)
			return 1
		}
	}
	return 0
}

// threads parks four locked OS threads and waits to be killed. It sleeps
// rather than blocking forever, which the runtime would call a deadlock.
func threads() {
	started := make(chan struct{})
	for range 4 {
		go func() {
			runtime.LockOSThread()
			started <- struct{}{}
			time.Sleep(time.Hour)
		}()
	}
	for range 4 {
		<-started
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// ignore sets SIG_IGN for SIGTERM, SIGUSR1 and SIGUSR2 (Go's signal.Ignore
// installs SIG_IGN in the kernel) and waits to be killed.
func ignore() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2)
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// collector runs a real tracer and keeps a copy of every event.
type collector struct {
	t      *Tracer
	mu     sync.Mutex
	events []sigvocab.Event
	cancel context.CancelFunc
	done   chan error
}

func startCollector(t *testing.T, opts Options) *collector {
	t.Helper()
	testutil.RequirePrivileged(t)
	tr, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{t: tr, cancel: cancel, done: make(chan error, 1)}
	go func() {
		c.done <- tr.Run(ctx, func(e *sigvocab.Event) error {
			cp := *e
			cp.Raw = slices.Clone(e.Raw)
			c.mu.Lock()
			c.events = append(c.events, cp)
			c.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() { c.stop(t); tr.Close() })
	return c
}

// netShared is the flag a stop signal from the host to StartNSInit's init
// carries where the tracer counts connections: the init has a pid namespace
// of its own but the host's network namespace, as with --network host.
func (c *collector) netShared() sigvocab.Flags {
	if c.t.CountsConnections() {
		return sigvocab.FlagNetShared
	}
	return 0
}

func (c *collector) stop(t *testing.T) {
	if c.cancel == nil {
		return
	}
	c.cancel()
	c.cancel = nil
	if err := <-c.done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// waitFor returns the first event matching match, waiting for it up to
// testutil.Bound.
func (c *collector) waitFor(t *testing.T, what string, match func(*sigvocab.Event) bool) sigvocab.Event {
	t.Helper()
	var e sigvocab.Event
	if !testutil.Poll(10*time.Millisecond, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i := range c.events {
			if match(&c.events[i]) {
				e = c.events[i]
				return true
			}
		}
		return false
	}) {
		c.dump(t)
		t.Fatalf("no event: %s", what)
	}
	recordFixture(t, what, &e)
	return e
}

func (c *collector) all(match func(*sigvocab.Event) bool) []sigvocab.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []sigvocab.Event
	for i := range c.events {
		if match(&c.events[i]) {
			out = append(out, c.events[i])
		}
	}
	return out
}

func (c *collector) index(e sigvocab.Event) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.events {
		if c.events[i].BootNS == e.BootNS && c.events[i].Kind == e.Kind && c.events[i].Target.TID == e.Target.TID {
			return i
		}
	}
	return -1
}

func (c *collector) dump(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.events {
		t.Logf("  %s %s %s sender=%d target=%d ns_pid=%d flags=[%s] exit=%d", e.Kind, e.Signal, e.Result,
			e.Sender.PID, e.Target.PID, e.Target.NsPID, e.Flags, e.ExitCode)
	}
}

// recordFixture saves the raw record of an asserted event when
// SIGSCOPE_RECORD_FIXTURES names a directory; decode_test.go replays them.
func recordFixture(t *testing.T, what string, e *sigvocab.Event) {
	dir := os.Getenv("SIGSCOPE_RECORD_FIXTURES")
	if dir == "" {
		return
	}
	name := filepath.Join(dir, sanitizeName(t.Name()+"__"+what)+".hex")
	if err := os.WriteFile(name, []byte(hex.EncodeToString(e.Raw)+"\n"), 0o644); err != nil {
		t.Errorf("recording fixture: %v", err)
	}
}

func sanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

func isGenerate(sig sigvocab.Signal, target int) func(*sigvocab.Event) bool {
	return func(e *sigvocab.Event) bool {
		return e.Kind == sigvocab.KindGenerate && e.Signal == sig && int(e.Target.PID) == target
	}
}

func assertFlags(t *testing.T, e sigvocab.Event, want sigvocab.Flags) {
	t.Helper()
	if e.Flags != want {
		t.Errorf("%s %s to %d: flags [%s], want [%s]", e.Kind, e.Signal, e.Target.PID, e.Flags, want)
	}
}

// (1) A namespace init with no SIGTERM handler drops SIGTERM from inside its
// namespace and from the host: both ignored, flagged pid1_ignored.
func TestPID1IgnoresSIGTERM(t *testing.T) {
	c := startCollector(t, Options{})
	ns := testutil.StartNSInit(t, "echo ready; read x")

	// From inside: a process that entered the namespace (like docker exec).
	testutil.Run(t, "nsenter", "-t", strconv.Itoa(ns.PID), "-p", "sh", "-c", "kill -TERM 1")
	inside := c.waitFor(t, "inside", func(e *sigvocab.Event) bool {
		return isGenerate(sigvocab.SIGTERM, ns.PID)(e) && e.Sender.PID != uint32(ns.PID) && e.Sender.PidNS == e.Target.PidNS
	})
	if inside.Result != sigvocab.ResultIgnored || inside.Handler != sigvocab.DispDefault {
		t.Errorf("inside: result %s handler %s, want ignored default", inside.Result, inside.Handler)
	}
	assertFlags(t, inside, sigvocab.FlagPID1Ignored|sigvocab.FlagNSInit)
	if inside.Target.NsPID != 1 || inside.Sender.NsPID < 2 {
		t.Errorf("inside: target ns_pid %d sender ns_pid %d, want 1 and >=2", inside.Target.NsPID, inside.Sender.NsPID)
	}

	// From the host, as runc would: the sender has no pid in the namespace.
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(ns.PID))
	host := c.waitFor(t, "host", func(e *sigvocab.Event) bool {
		return isGenerate(sigvocab.SIGTERM, ns.PID)(e) && e.Flags.Has(sigvocab.FlagCrossNS)
	})
	if host.Result != sigvocab.ResultIgnored {
		t.Errorf("host: result %s, want ignored", host.Result)
	}
	assertFlags(t, host, sigvocab.FlagPID1Ignored|sigvocab.FlagNSInit|sigvocab.FlagCrossNS|c.netShared())
	// Boot-time stamps converted to wall-clock time: recent, not 1970 or uptime.
	if d := time.Since(host.Time); d < 0 || d > 10*time.Second || !host.Time.After(inside.Time) {
		t.Errorf("event times %v, %v: want just now, in order", inside.Time, host.Time)
	}
	if host.Sender.PidNS == host.Target.PidNS {
		t.Errorf("host sender in the target's namespace %d", host.Sender.PidNS)
	}
	if host.Code != sigvocab.CodeUser || !host.Group {
		t.Errorf("host: code %s group %v, want user, process-directed", host.Code, host.Group)
	}
	// The init is still alive: nothing delivered it.
	if err := syscall.Kill(ns.PID, 0); err != nil {
		t.Errorf("init died after ignored SIGTERMs: %v", err)
	}
	if d := c.all(func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindDeliver && int(e.Target.PID) == ns.PID }); len(d) != 0 {
		t.Errorf("ignored SIGTERM produced %d deliver events", len(d))
	}
}

// (2) An init with a SIGTERM handler: delivered to the handler, then dequeued.
func TestPID1HandlerDelivery(t *testing.T) {
	c := startCollector(t, Options{})
	ns := testutil.StartNSInit(t, `trap 'echo term; exit 0' TERM; echo ready; read x; read y`)

	testutil.Run(t, "kill", "-TERM", strconv.Itoa(ns.PID))
	gen := c.waitFor(t, "generate", isGenerate(sigvocab.SIGTERM, ns.PID))
	if gen.Result != sigvocab.ResultDelivered || gen.Handler != sigvocab.DispHandler {
		t.Errorf("generate: result %s handler %s, want delivered handler", gen.Result, gen.Handler)
	}
	if gen.Flags.Has(sigvocab.FlagPID1Ignored) || !gen.Flags.Has(sigvocab.FlagNSInit|sigvocab.FlagCrossNS) {
		t.Errorf("generate flags [%s], want ns_init and cross_ns, no pid1_ignored", gen.Flags)
	}
	del := c.waitFor(t, "deliver", func(e *sigvocab.Event) bool {
		return e.Kind == sigvocab.KindDeliver && e.Signal == sigvocab.SIGTERM && int(e.Target.PID) == ns.PID
	})
	if del.Handler != sigvocab.DispHandler || del.Target.NsPID != 1 {
		t.Errorf("deliver: handler %s ns_pid %d, want handler 1", del.Handler, del.Target.NsPID)
	}
	assertFlags(t, del, sigvocab.FlagNSInit)
	if c.index(del) < c.index(gen) {
		t.Errorf("deliver event before its generate event")
	}
	_, _ = ns.Stdin.Write([]byte("\n\n")) // let dash run the trap if it waits for read
	exit := c.waitFor(t, "exit", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindExit && int(e.Target.PID) == ns.PID })
	if exit.Signaled() || exit.ExitCode != 0 {
		t.Errorf("init exit: signal %s code %d, want exit 0", exit.Signal, exit.ExitCode)
	}
}

// (3) An init exits with three children: its exit event comes first, then
// one SIGKILL per child from the exiting init, flagged ns_cascade.
func TestNamespaceCascade(t *testing.T) {
	c := startCollector(t, Options{})
	ns := testutil.StartNSInit(t, "sleep 60 & sleep 60 & sleep 60 & echo ready; read x; exit 7")
	kids := testutil.Children(t, ns.PID)
	if len(kids) != 3 {
		t.Fatalf("init has children %v, want 3", kids)
	}
	if _, err := ns.Stdin.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	exit := c.waitFor(t, "init-exit", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindExit && int(e.Target.PID) == ns.PID })
	if exit.ExitCode != 7 || exit.Target.NsPID != 1 || !exit.Flags.Has(sigvocab.FlagNSInit) {
		t.Errorf("init exit: code %d ns_pid %d flags [%s], want 7, 1, ns_init", exit.ExitCode, exit.Target.NsPID, exit.Flags)
	}
	for _, kid := range kids {
		kill := c.waitFor(t, "cascade-"+strconv.Itoa(len(kids)), isGenerate(sigvocab.SIGKILL, kid))
		if int(kill.Sender.PID) != ns.PID || kill.Sender.NsPID != 1 || !kill.SenderExiting {
			t.Errorf("cascade to %d: sender %d (ns_pid %d, exiting %v), want the exiting init %d",
				kid, kill.Sender.PID, kill.Sender.NsPID, kill.SenderExiting, ns.PID)
		}
		if kill.Result != sigvocab.ResultDelivered || kill.Code != sigvocab.CodeKernel {
			t.Errorf("cascade to %d: result %s code %s, want delivered kernel", kid, kill.Result, kill.Code)
		}
		assertFlags(t, kill, sigvocab.FlagNSCascade)
		if c.index(kill) < c.index(exit) {
			t.Errorf("cascade kill of %d recorded before the init's exit", kid)
		}
		died := c.waitFor(t, "child-exit", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindExit && int(e.Target.PID) == kid })
		if died.Signal != sigvocab.SIGKILL {
			t.Errorf("child %d ended by %s, want SIGKILL", kid, died.Signal)
		}
	}
	if n := len(c.all(func(e *sigvocab.Event) bool {
		return e.Flags.Has(sigvocab.FlagNSCascade) && int(e.Sender.PID) == ns.PID
	})); n != 3 {
		t.Errorf("%d cascade kills, want 3", n)
	}
	// The init tells its parent only once the namespace is empty: the
	// record comes after every exit of it, whatever the signal mask (the
	// parent's SIGCHLD is not traced here).
	empty := c.waitFor(t, "ns-empty", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindNSEmpty && int(e.Target.PID) == ns.PID })
	if empty.Target.NsPID != 1 || empty.Target.PidNS != exit.Target.PidNS || empty.Signal != sigvocab.SIGCHLD || empty.Sender.PID == 0 ||
		empty.Sender.PidNS == empty.Target.PidNS {
		t.Errorf("ns_empty: target %+v sender %+v signal %s, want the init (ns_pid 1) and its parent outside, SIGCHLD",
			empty.Target, empty.Sender, empty.Signal)
	}
	for _, kid := range kids {
		died := c.waitFor(t, "child-exit", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindExit && int(e.Target.PID) == kid })
		if c.index(empty) < c.index(died) {
			t.Errorf("ns_empty recorded before the exit of %d", kid)
		}
	}
	if n := len(c.all(func(e *sigvocab.Event) bool {
		return e.Kind == sigvocab.KindNSEmpty && e.Target.PidNS == exit.Target.PidNS
	})); n != 1 {
		t.Errorf("%d ns_empty records for the namespace, want 1", n)
	}
}

// (4) A plain process with SIG_IGN: ignored with sig_ign, never pid1_ignored.
func TestSigIgnPlainProcess(t *testing.T) {
	c := startCollector(t, Options{})
	pid := testutil.StartReady(t, exec.Command("sh", "-c", `trap '' TERM; echo ready; exec sleep 60`))
	// SIG_IGN survives exec, so the verdict is the same before and after it.
	testutil.WaitSigMask(t, pid, "SigIgn", syscall.SIGTERM)
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(pid))
	e := c.waitFor(t, "sig_ign", isGenerate(sigvocab.SIGTERM, pid))
	if e.Result != sigvocab.ResultIgnored || e.Handler != sigvocab.DispIgnore {
		t.Errorf("result %s handler %s, want ignored ignore", e.Result, e.Handler)
	}
	assertFlags(t, e, sigvocab.FlagSigIgn)
}

// (5) SIGKILL from the host reaches an init (the kernel forces it from an
// ancestor namespace) and the exit event says SIGKILL.
func TestHostSIGKILLToInit(t *testing.T) {
	c := startCollector(t, Options{})
	ns := testutil.StartNSInit(t, "echo ready; read x")
	testutil.Run(t, "kill", "-KILL", strconv.Itoa(ns.PID))
	gen := c.waitFor(t, "kill", isGenerate(sigvocab.SIGKILL, ns.PID))
	if gen.Result != sigvocab.ResultDelivered {
		t.Errorf("result %s, want delivered", gen.Result)
	}
	assertFlags(t, gen, sigvocab.FlagNSInit|sigvocab.FlagCrossNS|c.netShared())
	exit := c.waitFor(t, "exit", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindExit && int(e.Target.PID) == ns.PID })
	if exit.Signal != sigvocab.SIGKILL || exit.ExitCode != -1 || exit.CoreDumped {
		t.Errorf("exit: signal %s code %d core %v, want SIGKILL", exit.Signal, exit.ExitCode, exit.CoreDumped)
	}
}

// A group exit makes every thread of the dying process pass signal_deliver
// with (SIGKILL, SEND_SIG_NOINFO): no signal was dequeued, so no deliver
// event may appear. The exit event carries the cause.
func TestGroupExitIsNotADelivery(t *testing.T) {
	c := startCollector(t, Options{})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=threads")
	pid := testutil.StartReady(t, cmd)
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if len(tasks) < 5 {
		t.Fatalf("helper has %d threads, want at least 5", len(tasks))
	}
	testutil.Run(t, "kill", "-KILL", strconv.Itoa(pid))
	c.waitFor(t, "kill", isGenerate(sigvocab.SIGKILL, pid))
	exit := c.waitFor(t, "exit", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindExit && int(e.Target.PID) == pid })
	if exit.Signal != sigvocab.SIGKILL {
		t.Errorf("exit by %s, want SIGKILL", exit.Signal)
	}
	if d := c.all(func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindDeliver && int(e.Target.PID) == pid }); len(d) != 0 {
		t.Errorf("%d deliver events for a group exit of %d threads, want none", len(d), len(tasks))
	}
}

// With SIGCHLD traced, the init's notification of its parent is a generate
// record too, and the namespace's end follows it at once.
func TestNSEmptyWithSIGCHLDTraced(t *testing.T) {
	c := startCollector(t, Options{Signals: sigvocab.AllSignals})
	ns := testutil.StartNSInit(t, "echo ready; read x; exit 3")
	if _, err := ns.Stdin.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	empty := c.waitFor(t, "ns-empty-traced", func(e *sigvocab.Event) bool { return e.Kind == sigvocab.KindNSEmpty && int(e.Target.PID) == ns.PID })
	chld := c.waitFor(t, "sigchld", func(e *sigvocab.Event) bool {
		return e.Kind == sigvocab.KindGenerate && e.Signal == sigvocab.SIGCHLD && int(e.Sender.PID) == ns.PID
	})
	if chld.Target.PID != empty.Sender.PID || c.index(chld) > c.index(empty) {
		t.Errorf("SIGCHLD to %d at %d, ns_empty (parent %d) at %d: want the same parent, SIGCHLD first",
			chld.Target.PID, c.index(chld), empty.Sender.PID, c.index(empty))
	}
}
