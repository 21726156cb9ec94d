package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The connection storm (issue 30): a child in a network namespace of its
// own connects to its own listener on loopback, accepts, and closes both
// ends (the client with a RST, so that no TIME_WAIT piles up) as fast as
// one thread can; each connection passes inet_sock_set_state five times and
// each RST hook once. Phases, interleaved per round:
//
//	off      nothing attached
//	noop     floor.bpf.c's three noop_tcp_* programs: the floor
//	lookup   floor.bpf.c's three lookup_tcp_* programs: the namespace read
//	         and one hash look-up, the least a per-namespace filter does
//	filtered sigscope's tracer, the storm's namespace not watched: what every
//	         connection of a node pays outside a stop (one map look-up)
//	watched  the same, the namespace watched, as during a stop: every
//	         connection counted; the counts must equal the storm's
//
// The programs' own run time per invocation (BPF_ENABLE_STATS) judges
// filtered against lookup: a connection's whole path varies from phase to
// phase by more than the programs add.
//
// then a refused-attempt flood at a port nothing listens on in a watched
// namespace: the refused count must equal the attempts (Linux 6.10 and
// later), with no memory but the counters.

type connConfig int

const (
	connOff connConfig = iota
	connNoop
	connLookup
	connFiltered
	connWatched
)

var connConfigNames = [...]string{"off", "noop", "lookup", "filtered", "watched"}

// connPhase is one storm under one configuration.
type connPhase struct {
	cfg   connConfig
	conns uint64
	cpu   time.Duration // the storm thread's user+sys time
	// watched: what the kernel counted.
	accepted, resetReceived uint64
	// The programs' own run time and invocations over the phase, from the
	// kernel's counters (BPF_ENABLE_STATS): noop, filtered and watched.
	runTime time.Duration
	runs    uint64
}

// runNS is the programs' own ns per invocation; false without counters.
func (p connPhase) runNS() (float64, bool) {
	if p.runs == 0 {
		return 0, false
	}
	return float64(p.runTime.Nanoseconds()) / float64(p.runs), true
}

func (p connPhase) nsPerConn() float64 { return float64(p.cpu.Nanoseconds()) / float64(p.conns) }

// connsResult is the section's outcome.
type connsResult struct {
	phases  []connPhase
	exact   bool   // every watched phase counted each connection once
	refused uint64 // the flood's refused attempts, as the kernel counted
	flood   uint64 // the flood's attempts, as the child counted
	sees    bool   // the kernel reports refused attempts
	// floodRecords and floodDropped are what the kernel wrote to the ring,
	// and lost, while the flood ran: the connection count writes nothing
	// there, so the signals' records have the ring to themselves.
	floodRecords, floodDropped uint64
}

// medianNS is the configuration's median ns per connection over its
// phases.
func (r *connsResult) medianNS(c connConfig) (float64, bool) {
	var xs []float64
	for _, p := range r.phases {
		if p.cfg == c {
			xs = append(xs, p.nsPerConn())
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return median(xs), true
}

// medianRunNS is the configuration's median over its phases of the
// programs' own ns per invocation.
func (r *connsResult) medianRunNS(c connConfig) (float64, bool) {
	var xs []float64
	for _, p := range r.phases {
		if ns, ok := p.runNS(); ok && p.cfg == c {
			xs = append(xs, ns)
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return median(xs), true
}

// runRatio is the median over rounds of c's programs' run time per
// invocation over base's in the same round.
func (r *connsResult) runRatio(c, base connConfig) (float64, bool) {
	var xs []float64
	var b float64
	have := false
	for _, p := range r.phases {
		ns, ok := p.runNS()
		switch {
		case !ok:
		case p.cfg == base:
			b, have = ns, true
		case p.cfg == c && have:
			xs = append(xs, ratio(ns, b))
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return median(xs), true
}

// addedNS is the median over rounds of what c added to the untraced phase
// of the same round: a round's phases run back to back, so the machine's
// drift between rounds cancels out.
func (r *connsResult) addedNS(c connConfig) (float64, bool) {
	var xs []float64
	var off float64
	have := false
	for _, p := range r.phases {
		switch p.cfg {
		case connOff:
			off, have = p.nsPerConn(), true
		case c:
			if have {
				xs = append(xs, p.nsPerConn()-off)
			}
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return median(xs), true
}

const connPort = 40099

// connsChildMain is the "conns" role, run by `unshare -n`: it brings its
// loopback up, prints "ready <netns inode>", waits for a line on stdin,
// runs the storm (or, with flood, connects to a closed port) for the
// duration, and prints "<connections> <cpu ns>".
func connsChildMain(flood bool) error {
	runtime.LockOSThread()
	if v := os.Getenv(cpuEnv); v != "" {
		var cpu int
		if _, err := fmt.Sscan(v, &cpu); err != nil {
			return fmt.Errorf("bad %s %q", cpuEnv, v)
		}
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("pinning to CPU %d: %w", cpu, err)
		}
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set lo up: %v: %s", err, out)
	}
	d, err := time.ParseDuration(os.Getenv(durationEnv))
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return err
	}
	addr := &unix.SockaddrInet4{Port: connPort, Addr: [4]byte{127, 0, 0, 1}}
	l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.SetsockoptInt(l, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	if !flood {
		if err := unix.Bind(l, addr); err != nil {
			return err
		}
		if err := unix.Listen(l, 4096); err != nil {
			return err
		}
	}
	fmt.Printf("ready %d\n", st.Ino)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	linger := &unix.Linger{Onoff: 1, Linger: 0}
	cpu0, err := threadCPU()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	var n uint64
	for time.Now().Before(deadline) {
		for range 64 {
			c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			err = unix.Connect(c, addr)
			if flood {
				unix.Close(c)
				if !errors.Is(err, unix.ECONNREFUSED) {
					return fmt.Errorf("connect to a closed port: %v, want ECONNREFUSED", err)
				}
				n++
				continue
			}
			if err != nil {
				return fmt.Errorf("connect after %d: %w", n, err)
			}
			a, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
			if err != nil {
				return err
			}
			_ = unix.SetsockoptLinger(c, unix.SOL_SOCKET, unix.SO_LINGER, linger)
			unix.Close(c) // RST: the server's end is reset, nothing waits in TIME_WAIT
			unix.Close(a)
			n++
		}
	}
	cpu1, err := threadCPU()
	if err != nil {
		return err
	}
	fmt.Printf("%d %d\n", n, (cpu1 - cpu0).Nanoseconds())
	return nil
}

// connChild is a running storm child, ready and waiting to go.
type connChild struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	netns uint32
}

func startConnChild(ctx context.Context, d time.Duration, flood bool, pinCPU int) (*connChild, error) {
	role := "conns"
	if flood {
		role = "conns-flood"
	}
	self, err := os.Executable() // not /proc/self/exe: unshare would run itself
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "unshare", "-n", self)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, durationEnv+"="+d.String(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
	if pinCPU >= 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", cpuEnv, pinCPU))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the connection storm: %w", err)
	}
	c := &connChild{cmd: cmd, in: in, out: bufio.NewReader(out)}
	line, err := c.out.ReadString('\n')
	if _, e := fmt.Sscanf(line, "ready %d", &c.netns); err != nil || e != nil {
		c.kill()
		return nil, fmt.Errorf("connection storm: %q, %v", line, errors.Join(err, e))
	}
	return c, nil
}

func (c *connChild) run() (uint64, time.Duration, error) {
	if _, err := io.WriteString(c.in, "go\n"); err != nil {
		return 0, 0, err
	}
	line, err := c.out.ReadString('\n')
	var n uint64
	var ns int64
	if _, e := fmt.Sscan(line, &n, &ns); err != nil || e != nil || n == 0 {
		return 0, 0, fmt.Errorf("connection storm printed %q: %v", line, errors.Join(err, e))
	}
	return n, time.Duration(ns), c.cmd.Wait()
}

func (c *connChild) kill() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() }

// connProgNames are each configuration's TCP programs, for their run-time
// counters.
var connProgNames = map[connConfig][]string{
	connNoop:     {"noop_tcp_state", "noop_tcp_rst_received", "noop_tcp_rst_sent"},
	connLookup:   {"lookup_tcp_state", "lookup_tcp_rst_received", "lookup_tcp_rst_sent"},
	connFiltered: {"handle_tcp_state", "handle_tcp_rst_received", "handle_tcp_rst_sent"},
	connWatched:  {"handle_tcp_state", "handle_tcp_rst_received", "handle_tcp_rst_sent"},
}

// connAttach attaches a configuration: the floor's three programs, or a
// tracer counting connections. close detaches.
func connAttach(cfg connConfig) (tr *tracer.Tracer, close func(), err error) {
	switch cfg {
	case connNoop, connLookup:
		spec, err := loadFloor()
		if err != nil {
			return nil, nil, err
		}
		names := connProgNames[cfg]
		coll, err := ebpf.NewCollection(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("loading the connection floor: %w", err)
		}
		var links []link.Link
		closeAll := func() {
			for _, l := range links {
				l.Close()
			}
			coll.Close()
		}
		for _, n := range names {
			p := coll.Programs[n]
			if p == nil {
				closeAll()
				return nil, nil, fmt.Errorf("the connection floor has no program %s", n)
			}
			l, err := link.AttachTracing(link.TracingOptions{Program: p})
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			links = append(links, l)
		}
		return nil, closeAll, nil
	case connFiltered, connWatched:
		tr, err := tracer.New(tracer.Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGTERM)})
		if err != nil {
			return nil, nil, err
		}
		if !tr.CountsConnections() {
			tr.Close()
			return nil, nil, errors.New("the tracer does not count connections on this kernel")
		}
		return tr, func() { tr.Close() }, nil
	}
	return nil, func() {}, nil
}

// runConns runs the section: rounds of the four configurations, then the
// flood.
func runConns(ctx context.Context, rounds int, d time.Duration, pinCPU int) (*connsResult, error) {
	r := &connsResult{exact: true}
	for round := range rounds {
		for _, cfg := range []connConfig{connOff, connNoop, connLookup, connFiltered, connWatched} {
			child, err := startConnChild(ctx, d, false, pinCPU)
			if err != nil {
				return nil, err
			}
			// The programs' own run time: counted while stats is open,
			// which costs each run two clock reads, in every traced
			// configuration alike.
			var stats *progRunStats
			if names := connProgNames[cfg]; names != nil {
				if stats, err = startProgRunStats(); err != nil {
					slog.Warn("connection storm: no run-time counters", "err", err)
				}
			}
			tr, detach, err := connAttach(cfg)
			if err != nil {
				if stats != nil {
					stats.close()
				}
				child.kill()
				return nil, err
			}
			if stats != nil {
				if err := stats.attachNamed(connProgNames[cfg]...); err != nil {
					slog.Warn("connection storm: no run-time counters", "err", err)
					stats.close()
					stats = nil
				}
			}
			if cfg == connWatched {
				if err := tr.Watch(child.netns, time.Now()); err != nil {
					detach()
					child.kill()
					return nil, err
				}
			}
			n, cpu, err := child.run()
			p := connPhase{cfg: cfg, conns: n, cpu: cpu}
			if stats != nil {
				if err == nil {
					p.runTime, p.runs, err = stats.read()
				}
				stats.close()
			}
			if err == nil && cfg == connWatched {
				var c *sigvocab.Connections
				if c, err = tr.Connections(child.netns); err == nil && c != nil {
					p.accepted, p.resetReceived = c.Counts[sigvocab.NetAccepted].N, c.Counts[sigvocab.NetResetReceived].N
					if p.accepted != n || p.resetReceived != n {
						r.exact = false
					}
					_ = tr.Unwatch(child.netns)
				} else if err == nil {
					err = errors.New("the watched namespace has no counts")
				}
			}
			detach()
			if err != nil {
				return nil, fmt.Errorf("connection storm, %s: %w", connConfigNames[cfg], err)
			}
			runNS, _ := p.runNS()
			slog.Info("connection storm", "round", round+1, "config", connConfigNames[cfg], "connections", n,
				"ns_per_connection", fmt.Sprintf("%.0f", p.nsPerConn()),
				"program_runs", p.runs, "program_ns_per_run", fmt.Sprintf("%.1f", runNS))
			r.phases = append(r.phases, p)
		}
	}
	// The flood: refused attempts at a watched namespace's closed port.
	child, err := startConnChild(ctx, d, true, pinCPU)
	if err != nil {
		return nil, err
	}
	tr, detach, err := connAttach(connWatched)
	if err != nil {
		child.kill()
		return nil, err
	}
	defer detach()
	r.sees = tr.SeesRefused()
	if err := tr.Watch(child.netns, time.Now()); err != nil {
		child.kill()
		return nil, err
	}
	before, err := tr.Stats()
	if err != nil {
		child.kill()
		return nil, err
	}
	if r.flood, _, err = child.run(); err != nil {
		return nil, fmt.Errorf("refused flood: %w", err)
	}
	after, err := tr.Stats()
	if err != nil {
		return nil, err
	}
	r.floodRecords = after.Total().Seen - before.Total().Seen
	r.floodDropped = after.Total().Dropped - before.Total().Dropped
	c, err := tr.Connections(child.netns)
	if err != nil || c == nil {
		return nil, fmt.Errorf("refused flood: no counts (%v)", err)
	}
	// The flood's client dials from inside the namespace: each attempt the
	// namespace refused is its own call (self_refused), taken off
	// refused. Every attempt is counted once, in one of the two.
	r.refused = c.Counts[sigvocab.NetRefused].N + c.Counts[sigvocab.NetSelfRefused].N
	slog.Info("refused flood", "attempts", r.flood, "refused_counted", r.refused, "kernel_reports_refused", r.sees,
		"ring_records", r.floodRecords, "ring_dropped", r.floodDropped)
	return r, nil
}

// connFigures adds the section's figures.
func connFigures(r *connsResult, f figures) {
	off, ok := r.medianNS(connOff)
	if !ok {
		return
	}
	added := r.addedNS
	f[figConnUntraced] = off
	if n, ok := added(connNoop); ok {
		f[figConnNoopAdded] = n
		if a, ok := added(connFiltered); ok {
			f[figConnFilteredOverNoop] = ratio(a, n)
		}
	}
	if w, ok := added(connWatched); ok {
		f[figConnWatchedAdded] = w
	}
	if n, ok := r.medianRunNS(connNoop); ok {
		f[figConnNoopRun] = n
	}
	if n, ok := r.medianRunNS(connLookup); ok {
		f[figConnLookupRun] = n
	}
	if n, ok := r.medianRunNS(connFiltered); ok {
		f[figConnFilteredRun] = n
	}
	if n, ok := r.medianRunNS(connWatched); ok {
		f[figConnWatchedRun] = n
	}
	if x, ok := r.runRatio(connFiltered, connLookup); ok {
		f[figConnFilteredOverLookup] = x
	}
	if x, ok := r.runRatio(connWatched, connLookup); ok {
		f[figConnWatchedOverLookup] = x
	}
	f[figConnCountsExact] = boolFigure(r.exact)
	f[figConnFloodDropped] = float64(r.floodDropped)
	if r.sees {
		f[figConnRefusedExact] = boolFigure(r.refused == r.flood)
	}
}

func boolFigure(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// connsNote says what the flood could not check.
func connsNote(r *connsResult) string {
	if r == nil || r.sees {
		return ""
	}
	return "refused flood: this kernel does not report refused attempts (before Linux 6.10): conn_refused_exact not measured"
}
