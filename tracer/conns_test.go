package tracer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
	"golang.org/x/sys/unix"
)

// tcpServer is a TCP server for TestConnectionFates, run in a network
// namespace of its own: it listens on 127.0.0.1:8080, accepts every
// connection, survives SIGTERM, and obeys one command per line on stdin:
// "close I" closes the I-th connection with a FIN, "reset I" with a RST
// (linger 0), "unlisten" closes the listener, "count N" waits until N
// connections were accepted, "defer" listens on 127.0.0.1:8081 with
// TCP_DEFER_ACCEPT (the kernel holds a connection as a handshake under way
// until its client sends data, though the client's connect() returned)
// and "undefer" closes that listener; each answers "ok".
func tcpServer() {
	signal.Ignore(syscall.SIGTERM) // survives the stop signal; SIG_IGN in the kernel
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		fmt.Fprintln(os.Stderr, "lo up:", err, string(out))
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	accepted := make(chan *net.TCPConn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c.(*net.TCPConn)
		}
	}()
	var (
		conns    []*net.TCPConn
		deferred net.Listener
	)
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		n, _ := strconv.Atoi(arg)
		switch cmd {
		case "count":
			for len(conns) < n {
				conns = append(conns, <-accepted)
			}
		case "close":
			conns[n].Close()
		case "reset":
			conns[n].SetLinger(0)
			conns[n].Close()
		case "unlisten":
			ln.Close()
		case "defer":
			lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
				var serr error
				if err := c.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 30)
				}); err != nil {
					return err
				}
				return serr
			}}
			var err error
			if deferred, err = lc.Listen(context.Background(), "tcp", "127.0.0.1:8081"); err != nil {
				fmt.Fprintln(os.Stderr, "defer:", err)
				os.Exit(1)
			}
		case "undefer":
			deferred.Close()
		case "read": // a request
			buf := make([]byte, 512)
			if _, err := conns[n].Read(buf); err != nil {
				fmt.Fprintln(os.Stderr, "read:", err)
			}
		case "answer":
			if _, err := conns[n].Write(make([]byte, 300)); err != nil {
				fmt.Fprintln(os.Stderr, "answer:", err)
			}
		}
		fmt.Println("ok")
	}
	time.Sleep(time.Hour)
}

// dialer is a prober's stand-in (the kubelet's probes): a process of its
// own, in the server's network namespace (nsenter), that dials
// 127.0.0.1:8080 on "dial" and says "ok" or "refused", and closes what it
// dialled on "close" ("ok").
func dialer() {
	var conns []net.Conn
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "dial":
			c, err := net.DialTimeout("tcp", "127.0.0.1:8080", 2*time.Second)
			if err != nil {
				fmt.Println("refused")
				continue
			}
			conns = append(conns, c)
		case "close":
			for _, c := range conns {
				c.Close()
			}
			conns = nil
		}
		fmt.Println("ok")
	}
}

// inNetNS runs fn on a thread that entered the network namespace of pid;
// the thread is thrown away after (it stays locked).
func inNetNS(t *testing.T, pid int, fn func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		fn()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatalf("entering the network namespace of %d: %v", pid, err)
	}
}

// startTCPServer runs tcpServer in a network namespace of its own (in the
// cgroup v2 cgDir, unless ""), waits until it listens, and returns its pid,
// its namespace, say, which sends it a command and waits for its "ok", and
// wait, which waits for its end.
func startTCPServer(t *testing.T, cgDir string) (pid int, netns uint32, say func(cmd string), wait func() error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command("unshare", "-n", self)
	if cgDir != "" {
		srv = exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec unshare -n "$2"`, "sh", cgDir, self)
	}
	srv.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=tcpserver")
	stdin, _ := srv.StdinPipe()
	stdoutPipe, _ := srv.StdoutPipe()
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	stdout := bufio.NewReader(stdoutPipe)
	if line, err := stdout.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("server: %q, %v", line, err)
	}
	// unshare (and sh) exec: the server is srv's process.
	pid = srv.Process.Pid
	say = func(cmd string) {
		t.Helper()
		if _, err := io.WriteString(stdin, cmd+"\n"); err != nil {
			t.Fatal(err)
		}
		if line, err := stdout.ReadString('\n'); err != nil || line != "ok\n" {
			t.Fatalf("server after %q: %q, %v", cmd, line, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
		t.Fatal(err)
	}
	return pid, uint32(st.Ino), say, srv.Wait
}

// TestConnectionFates drives a server in a network namespace of its own
// through every fate the kernel counts, from a client in that namespace,
// and holds the kernel's counts to what the test did: connections made
// before the stop signal are not accepted ones, the stop signal from the
// host begins the count, a client's connect() is no inbound connection.
func TestConnectionFates(t *testing.T) {
	c := startCollector(t, Options{})
	if !c.t.CountsConnections() {
		t.Fatal("the tracer does not count connections on this kernel")
	}
	// The server in a cgroup v2 of its own, as a container's processes
	// are: its sockets carry that cgroup, which splits the counts.
	cgDir := filepath.Join(cgroup2Root(t), fmt.Sprintf("sigscope-conns-test-%d", os.Getpid()))
	if err := os.Mkdir(cgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50 && os.Remove(cgDir) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	var cgSt unix.Stat_t
	if err := unix.Stat(cgDir, &cgSt); err != nil {
		t.Fatal(err)
	}
	pid, netns, say, wait := startTCPServer(t, cgDir)

	var clients []net.Conn
	dialAt := func(addr string, n int) (refused int) {
		inNetNS(t, pid, func() {
			for range n {
				conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
				if errors.Is(err, syscall.ECONNREFUSED) {
					refused++
					continue
				}
				if err != nil {
					t.Errorf("dial: %v", err)
					continue
				}
				clients = append(clients, conn)
			}
		})
		return refused
	}
	dial := func(n int) int { return dialAt("127.0.0.1:8080", n) }

	// The client's side of a request and its answer.
	request := func(i int) {
		t.Helper()
		if _, err := clients[i].Write([]byte("GET")); err != nil {
			t.Fatalf("request on %d: %v", i, err)
		}
	}
	answered := func(i int) {
		t.Helper()
		clients[i].SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(clients[i], make([]byte, 300)); err != nil {
			t.Fatalf("answer on %d: %v", i, err)
		}
	}

	// Three connections before the stop: open, not counted as accepted.
	dial(3)
	say("count 3")
	// From another process: the tracer drops its own process's signals.
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(pid))
	term := c.waitFor(t, "SIGTERM", isGenerate(sigvocab.SIGTERM, pid))
	if term.NetNS != netns {
		t.Fatalf("SIGTERM from the host: netns %d, want the server's %d", term.NetNS, netns)
	}
	dial(6) // accepted after the stop began
	say("count 9")
	say("close 0") // closed by the server, nothing said on it: closed
	say("reset 1") // reset by the server
	clients[3].(*net.TCPConn).SetLinger(0)
	clients[3].Close() // reset by the client
	// 5: a request answered, then, after an idle spell, another read and
	// never answered before the server closes: the keep-alive race,
	// unanswered.
	request(5)
	say("read 5")
	say("answer 5")
	answered(5)
	time.Sleep(50 * time.Millisecond) // past CrossWindow
	request(5)
	say("read 5")
	say("close 5")
	// 8: the client's data crosses the answer (a request's body behind
	// its headers, sent as the answer goes out), read, then the close:
	// who spoke last cannot be told, undecided.
	request(8)
	say("read 8")
	say("answer 8")
	request(8)
	say("read 8")
	say("close 8")
	// 6: a request answered, the connection idle (the client's ACK of
	// the answer arrives), closed by the server, then the client's next
	// request: after_close, and no longer closed.
	request(6)
	say("read 6")
	say("answer 6")
	answered(6)
	time.Sleep(100 * time.Millisecond)
	say("close 6")
	time.Sleep(50 * time.Millisecond)
	request(6)
	// 9 and 10: connected to a listener that holds them as handshakes
	// under way (TCP_DEFER_ACCEPT) when it closes: reset by the
	// application, though nothing ever had a socket of them to close.
	// Each request then meets no socket, and the RST that answers it is
	// not counted again; each client's RST is its own call reset.
	say("defer")
	if refused := dialAt("127.0.0.1:8081", 2); refused != 0 {
		t.Fatalf("%d of 2 connections to the deferring listener refused", refused)
	}
	say("undefer")
	for _, i := range []int{9, 10} {
		request(i)
		clients[i].SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := clients[i].Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a request on %d, a handshake its listener's close dropped: %v, want a reset", i, err)
		}
	}
	// 7: answered and idle at the SIGKILL: idle_at_exit. 2: a request
	// read, not answered at the SIGKILL, and 4: a request never read:
	// both cut.
	request(7)
	say("read 7")
	say("answer 7")
	answered(7)
	firstLate := time.Now()
	request(2)
	say("read 2")
	request(4)
	// The clients' last data: connection 4's request, the kernel's time
	// of it taken when its connection ends at the SIGKILL, more than
	// 100 ms later.
	lastSent := time.Now()
	time.Sleep(100 * time.Millisecond)
	say("unlisten")
	refused := dial(2)
	if refused != 2 {
		t.Fatalf("%d of 2 connection attempts refused after the listener closed", refused)
	}
	// Connections 2, 4 and 7 are still open at the SIGKILL.
	testutil.Run(t, "kill", "-KILL", strconv.Itoa(pid))
	_ = wait()
	kill := c.waitFor(t, "SIGKILL", isGenerate(sigvocab.SIGKILL, pid))
	if kill.NetNS != netns {
		t.Errorf("SIGKILL: netns %d, want %d (the count goes on)", kill.NetNS, netns)
	}

	got, err := c.t.Connections(netns)
	if err != nil || got == nil {
		t.Fatalf("Connections(%d) = %v, %v", netns, got, err)
	}
	want := map[sigvocab.NetKind]uint64{
		sigvocab.NetAccepted: 6, sigvocab.NetClosed: 1, sigvocab.NetResetSent: 3, sigvocab.NetResetReceived: 1,
		sigvocab.NetCut: 2, sigvocab.NetListenerClosed: 2, sigvocab.NetRefused: 0,
		sigvocab.NetUnanswered: 1, sigvocab.NetAfterClose: 1, sigvocab.NetIdleAtExit: 1, sigvocab.NetUndecided: 1,
		// The clients are sockets of the namespace: their attempts the
		// namespace refused are its own calls (self_refused), and the
		// resets they got (1's, 6's after its close, 9's and 10's,
		// 4's at the death) are its own calls reset (out_reset). Which
		// container's they were is user space's to tell, by the split.
		sigvocab.NetSelfRefused: 2, sigvocab.NetOutReset: 5,
	}
	if !got.SeesLastSpeaker {
		t.Errorf("the counts do not tell who spoke last")
	}
	if !got.SeesRefused {
		// Linux 6.10 and later trace a RST sent with no socket: a
		// tracer that says it cannot see them there has lost them.
		if testutil.KernelAtLeast(6, 10) {
			t.Errorf("this kernel (6.10 or later) reports refused attempts, the tracer says it cannot")
		}
		// Nor the RST of a timewait socket: connection 6's request
		// after the close is not counted, and its close stays closed.
		// A refusal it cannot see cannot be told its own: out_refused.
		want[sigvocab.NetRefused], want[sigvocab.NetAfterClose], want[sigvocab.NetClosed] = 0, 0, 2
		want[sigvocab.NetSelfRefused], want[sigvocab.NetOutRefused] = 0, 2
		t.Logf("this kernel does not report refused attempts, nor requests after a close")
	}
	for k := range sigvocab.NumNetKinds {
		n := got.Counts[k]
		if n.N != want[sigvocab.NetKind(k)] {
			t.Errorf("%s: %d, want %d", sigvocab.NetKind(k), n.N, want[sigvocab.NetKind(k)])
		}
		if n.N > 0 && (n.First.Before(got.Since) || n.Last.Before(n.First)) {
			t.Errorf("%s: first %v, last %v, since %v", sigvocab.NetKind(k), n.First, n.Last, got.Since)
		}
	}
	// When the clients' data last came: connection 4's request (2's a
	// moment before it), not the close at the SIGKILL, nor 6's request
	// after its close (a RST's, counted apart); at a tick's resolution.
	if tick, err := kernelTick(); err != nil || !got.SeesData {
		t.Errorf("the clients' data is not timed: tick %v, %v", tick, err)
	} else if got.LastData.Before(firstLate.Add(-tick)) || got.LastData.After(lastSent.Add(tick+5*time.Millisecond)) {
		t.Errorf("the clients' last data at %v, want between %v and %v (its tick %v)", got.LastData, firstLate, lastSent, tick)
	}
	// Who lost requests: every client is 127.0.0.1, with the namespace's
	// lost kinds; its refused attempts moved to its own calls, and off
	// the client's count.
	if !got.SeesPeers || len(got.Peers) != 1 || got.Peers[0].Addr != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("peers %+v (kept: %v), want 127.0.0.1 alone", got.Peers, got.SeesPeers)
	} else {
		for k := range sigvocab.NumNetKinds {
			kind, w := sigvocab.NetKind(k), uint64(0)
			switch kind {
			case sigvocab.NetResetSent, sigvocab.NetCut, sigvocab.NetUnanswered, sigvocab.NetAfterClose, sigvocab.NetRefused, sigvocab.NetUndecided:
				w = want[kind]
			}
			if kind == sigvocab.NetResetSent {
				w -= 2 // 9's and 10's addresses are in request sockets the kernel does not hand over
			}
			if got.Peers[0].N[k] != w {
				t.Errorf("peer 127.0.0.1's %s: %d, want %d", kind, got.Peers[0].N[k], w)
			}
		}
	}
	// Split by the socket's cgroup: every socket is the server's.
	if !got.SeesCgroups {
		t.Errorf("the kernel's sockets carry no cgroup (struct sock has no sk_cgrp_data?)")
	} else if len(got.ByCgroup) != 1 || got.ByCgroup[0].CgroupID != cgSt.Ino {
		t.Errorf("split %+v, want only the server's cgroup %d", got.ByCgroup, cgSt.Ino)
	} else {
		for k := range sigvocab.NumNetKinds {
			w := want[sigvocab.NetKind(k)]
			if sigvocab.OutboundKind(sigvocab.NetKind(k)) {
				w = 0 // the clients' sockets, not the server's cgroup's
			}
			if sigvocab.NetKind(k) != sigvocab.NetRefused && got.ByCgroup[0].N[k] != w {
				t.Errorf("split %s: %d, want %d", sigvocab.NetKind(k), got.ByCgroup[0].N[k], w)
			}
		}
		if got.ByCgroup[0].N[sigvocab.NetRefused] != 0 {
			t.Errorf("a refused attempt has no socket, yet its cgroup counted %d", got.ByCgroup[0].N[sigvocab.NetRefused])
		}
	}
	// The count began at the SIGTERM itself: its record's time stamp.
	var ns sigscopeNetStats
	if err := c.t.nets.Lookup(netns, &ns); err != nil || ns.BeginNs != term.BootNS {
		t.Errorf("the count began at %d, the SIGTERM's record at %d (%v)", ns.BeginNs, term.BootNS, err)
	}
	for _, cl := range clients {
		cl.Close()
	}
	if err := c.t.Unwatch(netns); err != nil {
		t.Fatal(err)
	}
	if again, err := c.t.Connections(netns); again != nil || err != nil {
		t.Errorf("after Unwatch: %v, %v", again, err)
	}
	left := 0
	if c.t.netCgroups != nil {
		if err := c.t.eachCgroupCount(func(k sigscopeNetCgKey, _ *sigscopeNetCgCounts) {
			if k.Netns == netns {
				left++
			}
		}); err != nil || left != 0 {
			t.Errorf("after Unwatch, %d entries of the split are left (%v)", left, err)
		}
	}
}

// Network namespace inodes are recycled at once (the lowest free number):
// a watch a dead namespace left behind must not count for the next
// namespace of its inode. The kernel tells them apart by the namespace's
// hash_mix (random per namespace): an entry of another generation counts
// nothing, and a stop signal into the new namespace begins the count anew
// at itself; an entry user space began (a preStop hook's) adopts the
// namespace of the first connection it sees.
func TestRecycledNamespaceInode(t *testing.T) {
	c := startCollector(t, Options{})
	if !c.t.CountsConnections() {
		t.Fatal("the tracer does not count connections on this kernel")
	}
	pid, netns, say, _ := startTCPServer(t, "")
	accepted := 0
	dial := func(n int) {
		t.Helper()
		inNetNS(t, pid, func() {
			for range n {
				conn, err := net.DialTimeout("tcp", "127.0.0.1:8080", 2*time.Second)
				if err != nil {
					t.Errorf("dial: %v", err)
					continue
				}
				defer conn.Close()
			}
		})
		accepted += n
		say(fmt.Sprintf("count %d", accepted))
	}
	entry := func() sigscopeNetStats {
		t.Helper()
		var e sigscopeNetStats
		if err := c.t.nets.Lookup(netns, &e); err != nil {
			t.Fatalf("the namespace's entry: %v", err)
		}
		return e
	}

	// What a dead namespace of this inode left: another generation.
	stale := sigscopeNetStats{BeginNs: 1, NetGen: 0x5eed}
	if err := c.t.nets.Put(netns, &stale); err != nil {
		t.Fatal(err)
	}
	dial(2)
	if e := entry(); e.Count[sigvocab.NetAccepted] != 0 || e.BeginNs != 1 {
		t.Fatalf("a stale entry counted this namespace's connections: %+v", e)
	}
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(pid))
	term := c.waitFor(t, "SIGTERM", isGenerate(sigvocab.SIGTERM, pid))
	if term.NetNS != netns || term.Facts&sigvocab.FactNetWatched == 0 {
		t.Fatalf("SIGTERM: netns %d facts %#x, want %d watched", term.NetNS, term.Facts, netns)
	}
	e := entry()
	if e.BeginNs != term.BootNS || e.NetGen == 0 || e.NetGen == stale.NetGen {
		t.Fatalf("after the stop signal: begin %d (the SIGTERM's %d), generation %#x: want a new count of this namespace", e.BeginNs, term.BootNS, e.NetGen)
	}
	dial(1)
	if got, err := c.t.Connections(netns); err != nil || got.Counts[sigvocab.NetAccepted].N != 1 {
		t.Fatalf("after the stop signal: %+v, %v; want 1 accepted", got, err)
	}
	gen := e.NetGen

	// A watch user space begins adopts the namespace it first sees.
	if err := c.t.Unwatch(netns); err != nil {
		t.Fatal(err)
	}
	if err := c.t.Watch(netns, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Unadopted until the namespace's next TCP event, which may already
	// have come (the FINs of the connections just closed, handled late on
	// a slow machine): never another namespace's generation.
	if e := entry(); e.NetGen != 0 && e.NetGen != gen {
		t.Fatalf("a watch user space began has generation %#x, the namespace's is %#x", e.NetGen, gen)
	}
	dial(1)
	if e := entry(); e.NetGen != gen || e.Count[sigvocab.NetAccepted] != 1 {
		t.Errorf("after a connection: generation %#x (the namespace's %#x), accepted %d", e.NetGen, gen, e.Count[sigvocab.NetAccepted])
	}
}

// The connections of a prober (the kubelet's probes: a process the tracer
// was told of) count apart from the clients', by the same kinds: its
// accepted connections, their ends, its attempts refused after the
// listener closed; a client's beside it count as clients'.
func TestProbeConnections(t *testing.T) {
	c := startCollector(t, Options{})
	if !c.t.CountsConnections() {
		t.Fatal("the tracer does not count connections on this kernel")
	}
	pid, netns, say, wait := startTCPServer(t, "")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pr := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", self)
	pr.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=dialer")
	prIn, _ := pr.StdinPipe()
	prOutPipe, _ := pr.StdoutPipe()
	pr.Stderr = os.Stderr
	if err := pr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Process.Kill(); pr.Wait() })
	prOut := bufio.NewReader(prOutPipe)
	if line, err := prOut.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("dialer: %q, %v", line, err)
	}
	probe := func(cmd string) string {
		t.Helper()
		if _, err := io.WriteString(prIn, cmd+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := prOut.ReadString('\n')
		if err != nil {
			t.Fatalf("dialer after %q: %v", cmd, err)
		}
		return strings.TrimSpace(line)
	}
	// nsenter execs: the prober is pr's process.
	if err := c.t.SetProbers([]uint32{uint32(pr.Process.Pid)}); err != nil {
		t.Fatal(err)
	}
	var clients []net.Conn
	dial := func() (refused bool) {
		inNetNS(t, pid, func() {
			conn, err := net.DialTimeout("tcp", "127.0.0.1:8080", 2*time.Second)
			if errors.Is(err, syscall.ECONNREFUSED) {
				refused = true
				return
			}
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			clients = append(clients, conn)
		})
		return refused
	}

	testutil.Run(t, "kill", "-TERM", strconv.Itoa(pid))
	c.waitFor(t, "SIGTERM", isGenerate(sigvocab.SIGTERM, pid))
	// Two probes and a client, accepted; the probes end, the server
	// closing its side after the prober did (closed).
	probe("dial")
	probe("dial")
	dial()
	say("count 3")
	probe("close")
	time.Sleep(50 * time.Millisecond)
	say("close 0")
	say("close 1")
	// The listener closes: a probe and two clients are refused.
	say("unlisten")
	if got := probe("dial"); got != "refused" {
		t.Fatalf("the probe after the listener closed: %s", got)
	}
	if first, second := dial(), dial(); !first || !second {
		t.Fatal("a client's attempt after the listener closed was not refused")
	}
	testutil.Run(t, "kill", "-KILL", strconv.Itoa(pid))
	_ = wait()
	c.waitFor(t, "SIGKILL", isGenerate(sigvocab.SIGKILL, pid))

	got, err := c.t.Connections(netns)
	if err != nil || got == nil {
		t.Fatalf("Connections(%d) = %v, %v", netns, got, err)
	}
	if !got.SeesProbes {
		t.Fatal("the counts do not say the probes were counted apart")
	}
	// The clients dial from inside the namespace: their refused attempts
	// are its own calls the namespace refused (self_refused).
	wantClients := map[sigvocab.NetKind]uint64{sigvocab.NetAccepted: 1, sigvocab.NetSelfRefused: 2, sigvocab.NetListenerClosed: 1, sigvocab.NetIdleAtExit: 1}
	wantProbes := map[sigvocab.NetKind]uint64{sigvocab.NetAccepted: 2, sigvocab.NetClosed: 2, sigvocab.NetRefused: 1}
	if !got.SeesRefused {
		wantClients[sigvocab.NetSelfRefused], wantClients[sigvocab.NetOutRefused], wantProbes[sigvocab.NetRefused] = 0, 2, 0
	}
	for k := range sigvocab.NumNetKinds {
		kind := sigvocab.NetKind(k)
		if n := got.Counts[k].N; n != wantClients[kind] {
			t.Errorf("clients' %s: %d, want %d", kind, n, wantClients[kind])
		}
		if n := got.Probes[k]; n != wantProbes[kind] {
			t.Errorf("probes' %s: %d, want %d", kind, n, wantProbes[kind])
		}
	}
	for _, cl := range clients {
		cl.Close()
	}
}
