package tracer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/sigscope/sigscope/tracer/sigvocab"
	"golang.org/x/sys/unix"
)

// Defaults for [Options].
const (
	DefaultRingSize = 8 << 20          // bytes; ~38k records
	DefaultLinger   = time.Millisecond // the reader's wait between batches while events flow
)

// Options configures a [Tracer]. The zero value traces
// [sigvocab.DefaultSignals] for every process.
type Options struct {
	Signals sigvocab.SignalSet // signals to trace; 0 means sigvocab.DefaultSignals
	PID     uint32             // only events whose sender or target has this tgid; 0: all
	Comm    string             // only events whose sender or target has this comm (exact, 15 bytes max); "": all

	// RingSize is the ring buffer's size in bytes: a power of two and a
	// multiple of the page size. 0 means DefaultRingSize.
	RingSize int
	// Linger is how long the reader waits, awake, after a batch of events
	// before it reads the ring again. While it is awake the programs never
	// wake it, so a stream of events costs the traced processes no wakeup
	// at all; it goes to sleep when it finds the ring empty, and the next
	// event wakes it at once. 0 means DefaultLinger; negative: read again
	// at once, and sleep as soon as the ring is empty.
	Linger time.Duration

	// NoConnections leaves out the count of a stopping container's TCP
	// connections (stopping_nets and the three TCP programs): no stop
	// signal marks a namespace watched, and Connections finds nothing.
	NoConnections bool

	// Idle, if set, is called by Run on its goroutine after each batch of
	// events handed to the callback (the place to flush buffered output, not
	// per event), and again at the time it returns even if no event comes
	// by then; the zero time: only after the next events.
	Idle func() time.Time

	// oomTIDOnly makes every OOM event look as the 1-argument mark_victim
	// writes it (the victim's thread id only) before the /proc completion
	// runs: the tests use it to exercise that path on kernels whose
	// tracepoint passes the task.
	oomTIDOnly bool
	// helperReads makes the programs read as on kernels without
	// bpf_rdonly_cast (before 6.2): the tests compare both ways.
	helperReads bool
	// compat loads the object built for kernels without
	// bpf_get_current_task_btf() (before 5.11) whatever the kernel has: the
	// tests compare it with the fast one.
	compat bool
	// procRoot is where the OOM victim's identity is read from when the
	// kernel passed its thread id only; "" means /proc. Run hands it to
	// completeOOMFrom, which the tests call with a directory of their own.
	procRoot string

	Logger *slog.Logger
}

// Tracer owns the loaded programs, their links and the ring-buffer reader.
type Tracer struct {
	opts     Options
	log      *slog.Logger
	coll     *ebpf.Collection
	progs    []*ebpf.Program
	counters *ebpf.Map
	rd       *ring

	mu     sync.Mutex
	links  []link.Link
	closed bool

	read         atomic.Uint64 // records handed to Run's callback
	decodeErrors atomic.Uint64
	wakeups      atomic.Uint64 // times the doorbell woke a sleeping reader
	final        Stats         // the counters at Close

	exitProgram string // see ExitProgram
	oomProgram  string // see OOMProgram
	object      string // see Object

	nets        *ebpf.Map // stopping_nets; nil without the connection count
	seesRefused bool      // see SeesRefused
	seesData    bool      // the kernel times a client's last data on a connection (its tick is known)
	probers     *ebpf.Map // see SetProbers; nil without connections
	probersOn   atomic.Bool
	// netCgroups is the count split by socket cgroup (stopping_conns);
	// nil when the kernel's sockets have no cgroup to read.
	netCgroups *ebpf.Map
	netPeers   *ebpf.Map // stopping_peers: who lost requests
}

// The two builds of bpf/sigscope.bpf.c; see [Tracer.Object].
const (
	ObjectFast   = "sigscope"
	ObjectCompat = "sigscope_compat"
)

// Object names the build of the programs that was loaded: [ObjectFast],
// which reads the current task through bpf_get_current_task_btf() (Linux
// 5.11 and later), or [ObjectCompat], which reads it with a helper call per
// field where the kernel lacks that helper.
func (t *Tracer) Object() string { return t.object }

// ExitProgram names the sched_process_exit program that was attached:
// "handle_exit_v1" (1 argument, kernels before 6.16) or "handle_exit_v2".
func (t *Tracer) ExitProgram() string { return t.exitProgram }

// OOMProgram names the oom:mark_victim program that was attached:
// "handle_oom_v1" (the victim's pid only) or "handle_oom_v2" (the victim's
// task).
func (t *Tracer) OOMProgram() string { return t.oomProgram }

// New checks that this process and kernel can trace, loads the programs with
// the options baked in as constants, and attaches them. Errors that come from
// the environment wrap [ErrUnsupported] and say what is missing.
func New(opts Options) (*Tracer, error) {
	if opts.Signals == 0 {
		opts.Signals = sigvocab.DefaultSignals
	}
	if opts.RingSize == 0 {
		opts.RingSize = DefaultRingSize
	}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.procRoot == "" {
		opts.procRoot = defaultProcRoot
	}
	page := os.Getpagesize()
	if opts.RingSize < page || opts.RingSize&(opts.RingSize-1) != 0 {
		return nil, fmt.Errorf("ring size %d: must be a power of two of at least %d bytes", opts.RingSize, page)
	}
	if len(opts.Comm) > 15 {
		return nil, fmt.Errorf("comm %q: the kernel keeps 15 bytes at most", opts.Comm)
	}
	if err := preflight(); err != nil {
		return nil, err
	}
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; later ones use
	// memcg and this is a no-op.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err)
	}

	object := ObjectFast
	if opts.compat || !haveCurrentTaskBTF() {
		object = ObjectCompat
	}
	load := loadSigscope
	if object == ObjectCompat {
		load = loadSigscopeCompat
	}
	spec, err := load()
	if err != nil {
		return nil, err
	}
	kspec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("%w: reading kernel BTF: %v", ErrUnsupported, err)
	}
	twoArg, err := exitHasGroupDead(kspec)
	if err != nil {
		return nil, err
	}
	keep, drop := sigscopeProgHandleExitV1, sigscopeProgHandleExitV2
	if twoArg {
		keep, drop = drop, keep
	}
	// The other prototype would fail to load (or load wrong): remove it.
	delete(spec.Programs, drop)
	oomTask, err := oomPassesTask(kspec)
	if err != nil {
		return nil, err
	}
	oomKeep, oomDrop := sigscopeProgHandleOomV1, sigscopeProgHandleOomV2
	if oomTask {
		oomKeep, oomDrop = oomDrop, oomKeep
	}
	delete(spec.Programs, oomDrop)
	netProgs, seesRefused := []string(nil), false
	if !opts.NoConnections {
		if netProgs, seesRefused, err = connectionPrograms(kspec); err != nil {
			opts.Logger.Warn("not counting stopping containers' connections", "error", err)
			opts.NoConnections = true
		}
	}
	var tickNS uint64
	if !opts.NoConnections {
		if d, err := kernelTick(); err != nil {
			opts.Logger.Warn("not timing clients' last requests on pooled connections", "error", err)
		} else {
			tickNS = uint64(d.Nanoseconds())
		}
	}
	if opts.NoConnections {
		for _, p := range allConnectionPrograms {
			delete(spec.Programs, p)
		}
	}

	spec.Maps[sigscopeMapEvents].MaxEntries = uint32(opts.RingSize)
	spec.Maps[sigscopeMapDoorbell].MaxEntries = uint32(page) // its smallest size
	var commBytes [16]byte
	copy(commBytes[:], opts.Comm)
	consts := map[string]any{
		sigscopeVarSignalMask:   uint64(opts.Signals),
		sigscopeVarSelfTgid:     uint32(os.Getpid()),
		sigscopeVarFilterPid:    opts.PID,
		sigscopeVarFilterComm:   commBytes,
		sigscopeVarDirectReads:  !opts.helperReads && hasKfunc(kspec, "bpf_rdonly_cast"),
		sigscopeVarWatchNets:    !opts.NoConnections,
		sigscopeVarEveryReset:   seesRefused,
		sigscopeVarNsPerJiffy:   tickNS,
		sigscopeVarCrossJiffies: crossJiffies(tickNS),
	}
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}

	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{})
	if err != nil {
		return nil, explainLoadError(err)
	}
	t := &Tracer{opts: opts, log: opts.Logger, coll: coll, exitProgram: keep, oomProgram: oomKeep, object: object,
		counters: coll.Maps[sigscopeMapEventCounters]}
	if !opts.NoConnections {
		t.nets, t.seesRefused, t.probers = coll.Maps[sigscopeMapStoppingNets], seesRefused, coll.Maps[sigscopeMapProbers]
		t.seesData = tickNS > 0
		t.netPeers = coll.Maps[sigscopeMapStoppingPeers]
		if sockHasCgroup(kspec) {
			t.netCgroups = coll.Maps[sigscopeMapStoppingConns]
		}
	}
	for _, name := range append([]string{sigscopeProgHandleGenerate, sigscopeProgHandleDeliver, keep, oomKeep, sigscopeProgHandleExec}, netProgs...) {
		p := coll.Programs[name]
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("attaching %s: %w", name, explainLoadError(err))
		}
		t.links = append(t.links, l)
		t.progs = append(t.progs, p)
	}
	t.rd, err = newRing(coll.Maps[sigscopeMapEvents], coll.Maps[sigscopeMapDoorbell], coll.Maps[sigscopeMapReaderState])
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("opening ring buffer reader: %w", err)
	}
	if object == ObjectCompat && !opts.compat {
		// Everything works; each traced signal costs more (docs/kernel.md).
		t.log.Info("kernel without bpf_get_current_task_btf (Linux 5.11): loaded the compat programs, which read the current task with helper calls",
			"object", object)
	}
	t.log.Debug("tracer attached", "object", object, "exit_program", keep, "ring_bytes", opts.RingSize, "signals", opts.Signals.String())
	return t, nil
}

// haveCurrentTaskBTF reports whether the kernel offers
// bpf_get_current_task_btf() (Linux 5.11) to tracing programs, by loading a
// raw tracepoint program that calls it: cilium/ebpf has no helper probe for
// tp_btf (Tracing) programs, and the kernel offers its tracing helpers to
// both types alike (bpf_tracing_func_proto). The result is cached. An
// inconclusive probe counts as "yes": the fast object's own load then says
// what is wrong.
func haveCurrentTaskBTF() bool {
	err := features.HaveProgramHelper(ebpf.RawTracepoint, asm.FnGetCurrentTaskBtf)
	return err == nil || !errors.Is(err, ebpf.ErrNotSupported)
}

// hasKfunc reports whether the kernel's BTF has the kfunc: the programs call
// the ones they declare weak only when told so, as the verifier rejects a
// reachable call to a missing one.
func hasKfunc(spec *btf.Spec, name string) bool {
	var fn *btf.Func
	return spec.TypeByName(name, &fn) == nil
}

func explainLoadError(err error) error {
	switch {
	case errors.Is(err, unix.EPERM):
		if cerr := checkCapabilities(); cerr != nil {
			return fmt.Errorf("%w (kernel said: %v)", cerr, err)
		}
		return fmt.Errorf("%w: the kernel refused with EPERM (lockdown, a seccomp filter or an LSM policy may forbid bpf()): %v", ErrUnsupported, err)
	case strings.Contains(err.Error(), "unknown func") || strings.Contains(err.Error(), "invalid func"):
		// Both objects call only helpers of Linux 5.10 and earlier but
		// bpf_get_current_task_btf(), which is probed before the load.
		return fmt.Errorf("%w: kernel too old: a BPF helper the programs call is missing; sigscope needs Linux 5.10 or later: %v", ErrUnsupported, err)
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("%w: kernel too old or built without a needed feature: %v", ErrUnsupported, err)
	}
	return err
}

// ErrStop may be returned by a [Tracer.Run] callback to end the run at once.
var ErrStop = errors.New("stop tracing")

// Wake has Run call Options.Idle soon, even with no event and no deadline
// due: for work another goroutine handed the reader (the pipeline's watch
// of a pod whose deletion the API server reported). Safe from any goroutine.
func (t *Tracer) Wake() {
	if r := t.rd; r != nil {
		r.nudge()
	}
}

// Run reads events and calls fn for each, on the calling goroutine, until ctx
// ends or fn returns an error. The *Event is reused: copy what you keep.
//
// When ctx ends, Run detaches the programs, delivers every record the kernel
// had already written, and returns nil, so that the counters reconcile with
// what fn saw. If fn returns ErrStop, Run returns nil at once; after Close,
// too.
//
// The reader sleeps while nothing happens, with no timer (unless Idle asked
// for one), and the first event after a quiet time wakes it: see
// wake_reader() in bpf/sigscope.bpf.c. While events flow it reads them in
// batches, publishing its position in the ring once per batch, and waits
// Options.Linger between batches instead of sleeping, so that the programs
// need not wake it.
func (t *Tracer) Run(ctx context.Context, fn func(*sigvocab.Event) error) error {
	r := t.rd
	if r == nil || !r.start() {
		return errors.New("tracer is closed")
	}
	defer r.stop()
	stop := context.AfterFunc(ctx, r.interrupt)
	defer stop()

	var (
		clk Clock
		ev  sigvocab.Event
		// The target of the last kernel-raised SIGKILL: the OOM killer
		// signals its victim just before it marks it (__oom_kill_process),
		// in the same task, so the victim's whole identity precedes an
		// OOM record that carries only its thread id.
		lastKernelKill sigvocab.Process
		next           time.Time // when Idle asked to be called; zero: after events only
		draining       bool
	)
	handle := func(raw []byte) error {
		if err := Decode(raw, clk, &ev); err != nil {
			t.decodeErrors.Add(1)
			t.log.Warn("dropping undecodable record", "error", err)
			return nil
		}
		t.read.Add(1)
		switch {
		case ev.Kind == sigvocab.KindGenerate && ev.Signal == sigvocab.SIGKILL && ev.Facts&sigvocab.FactInfoPriv != 0:
			lastKernelKill = ev.Target
		case ev.Kind == sigvocab.KindOOM:
			if t.opts.oomTIDOnly {
				ev.Target = sigvocab.Process{PID: ev.Target.TID, TID: ev.Target.TID}
			}
			completeOOMFrom(&ev, &lastKernelKill, t.opts.procRoot)
		}
		return fn(&ev)
	}
	for {
		if r.closed() {
			return nil
		}
		clk = NewClock() // follow wall-clock steps (NTP) batch by batch
		n, st, err := r.drain(handle)
		if err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
		nudged := r.takeNudge()
		if t.opts.Idle != nil && (n > 0 || nudged || (!next.IsZero() && !time.Now().Before(next))) {
			next = t.opts.Idle()
		}
		if ctx.Err() != nil {
			if !draining {
				// Stop the kernel side, then take what it already wrote.
				t.detach()
				syncPrograms()
				draining = true
				continue
			}
			switch st {
			case ringEmpty:
				return nil
			case ringBusy:
				// A program still running on another CPU: its commit is
				// a matter of instructions.
				time.Sleep(50 * time.Microsecond)
			}
			continue
		}
		switch {
		case st == ringMore:
			continue
		case n > 0 || st == ringBusy:
			// Events flow (a busy record is one being written): stay
			// awake, so that the programs do not ring the doorbell.
			if t.opts.Linger < 0 {
				if st == ringBusy {
					runtime.Gosched()
				}
				continue
			}
			if err := r.linger(waitFor(t.opts.Linger, next)); err != nil {
				return err
			}
		default:
			// Found empty: sleep until the doorbell, Idle's time or ctx.
			rang, err := r.sleep(waitFor(-1, next))
			if err != nil {
				return err
			}
			if rang {
				t.wakeups.Add(1)
			}
		}
	}
}

// waitFor is how long to wait: d (negative: without end), cut short by the
// time next when it is set.
func waitFor(d time.Duration, next time.Time) time.Duration {
	if next.IsZero() {
		return d
	}
	w := max(time.Until(next), 0)
	if d < 0 || w < d {
		return w
	}
	return d
}

// KindStats are the kernel's counters for one event kind. They are
// monotonic totals over all CPUs, and Seen == Emitted + Dropped exactly.
type KindStats struct {
	Seen    uint64 // passed the in-kernel filters
	Emitted uint64 // written to the ring buffer
	Dropped uint64 // lost: the ring buffer was full
}

// Add adds o's counters to s.
func (s *KindStats) Add(o KindStats) {
	s.Seen += o.Seen
	s.Emitted += o.Emitted
	s.Dropped += o.Dropped
}

// PerKind holds one KindStats for each event kind, indexed by
// [sigvocab.Kind]: a new kind (sigvocab's Kind and bpf/sigscope.h) has its
// counters here, in Total, in the JSON and in every output that ranges over
// [sigvocab.Kinds], with no change to this file.
type PerKind [sigvocab.NumKinds]KindStats

// Total sums the counters of every kind.
func (p *PerKind) Total() KindStats {
	var t KindStats
	for _, k := range p {
		t.Add(k)
	}
	return t
}

// Stats is a snapshot of the tracer's counters.
type Stats struct {
	PerKind PerKind
	// Read counts records handed to Run's callback; DecodeErrors those it could not decode.
	Read         uint64
	DecodeErrors uint64
	// Wakeups counts the times a sleeping reader was woken by the kernel
	// because events came: about one per burst after a quiet time, none
	// while events keep flowing.
	Wakeups uint64
	// Missed counts program runs the kernel skipped because one of our
	// programs was already running on that CPU (bpf recursion protection):
	// such a signal was never seen at all.
	Missed uint64
}

// Kind returns the counters for k.
func (s Stats) Kind(k sigvocab.Kind) KindStats {
	if !k.Valid() {
		return KindStats{}
	}
	return s.PerKind[k]
}

// Total sums the counters of every kind.
func (s Stats) Total() KindStats { return s.PerKind.Total() }

// MarshalJSON writes each ring kind's counters (sigvocab.RingKinds) under its name, then the
// reader's: {"generate":{"seen":1,"emitted":1,"dropped":0},...,"ns_empty":{...},
// "read":1,"decode_errors":0,"wakeups":1,"missed":0}.
func (s Stats) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for _, k := range sigvocab.RingKinds { // net is never a ring record: its counters are not the kernel's
		ks := s.PerKind[k]
		b = fmt.Appendf(b, `%q:{"seen":%d,"emitted":%d,"dropped":%d},`, k, ks.Seen, ks.Emitted, ks.Dropped)
	}
	b = fmt.Appendf(b, `"read":%d,"decode_errors":%d,"wakeups":%d,"missed":%d}`, s.Read, s.DecodeErrors, s.Wakeups, s.Missed)
	return b, nil
}

// Stats sums the per-CPU counters. It is safe to call while Run is running,
// and after Close it returns the last snapshot taken.
func (t *Tracer) Stats() (Stats, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.statsLocked()
}

func (t *Tracer) statsLocked() (Stats, error) {
	var s Stats
	s.Read, s.DecodeErrors, s.Wakeups = t.read.Load(), t.decodeErrors.Load(), t.wakeups.Load()
	if t.closed {
		return t.final, nil
	}
	var perCPU []sigscopeCounters
	if err := t.counters.Lookup(uint32(0), &perCPU); err != nil {
		return s, fmt.Errorf("reading counters: %w", err)
	}
	for _, c := range perCPU {
		for k := range s.PerKind {
			s.PerKind[k].Add(KindStats{Seen: c.Seen[k], Emitted: c.Emitted[k], Dropped: c.Dropped[k]})
		}
	}
	for _, p := range t.progs {
		if ps, err := p.Stats(); err == nil {
			s.Missed += ps.RecursionMisses
		}
	}
	return s, nil
}

// detach removes the programs from their tracepoints; reading can go on.
func (t *Tracer) detach() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.links {
		if err := l.Close(); err != nil {
			t.log.Warn("detaching", "error", err)
		}
	}
	t.links = nil
}

// Close detaches every program and frees the maps. It is idempotent; Stats
// keeps answering with the counters as they were at Close.
func (t *Tracer) Close() error {
	t.detach()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	if t.counters != nil {
		if s, err := t.statsLocked(); err == nil {
			t.final = s
		}
	}
	t.closed = true
	if t.rd != nil {
		// Unmapped now, or by Run when it returns; the mappings keep the
		// maps alive until then.
		t.rd.close()
	}
	if t.coll != nil {
		t.coll.Close()
	}
	return nil
}
