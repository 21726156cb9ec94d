package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sigscope/sigscope/containers/container"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/pipeline"
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

type traceFlags struct {
	output   string
	signals  string
	pid      uint32
	comm     string
	duration time.Duration
	count    uint64
	ringSize int

	container    string
	pod          string
	noContainers bool
	connections  bool
	runtime      runtimeFlags
}

func newTraceCmd() *cobra.Command {
	var f traceFlags
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Stream signals, their fate and process exits",
		Long: `Stream every traced signal as the kernel generates and delivers it, and the exits
of processes that matter (killed by a signal, in a container, or sent a traced signal).

Needs root, or CAP_BPF and CAP_PERFMON. Ends on Ctrl-C, --duration or --count, then
prints the kernel's counters (seen, emitted, dropped) on stderr.`,
		Example: `  sigscope trace                        # table on a terminal, JSON lines otherwise
  sigscope trace --signals TERM,KILL -o json
  sigscope trace --pid 4242 --duration 30s
  sigscope trace --comm runc --count 10
  sigscope trace --container web --signals TERM,KILL
  sigscope trace --pod default/web-7d4b9 -o json > rec.jsonl
  sigscope trace --container web --connections   # and what its stop cost its clients`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTrace(cmd.Context(), f, os.Stdout, os.Stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "", "output format: table or json (default: table on a terminal, json otherwise)")
	fl.StringVar(&f.signals, "signals", "default", `signals to trace: "default" (all but SIGCHLD, SIGURG, SIGWINCH, SIGCONT, SIGALRM, SIGVTALRM, SIGPROF), "all", or a list such as TERM,KILL,10`)
	fl.Uint32Var(&f.pid, "pid", 0, "only events whose sender or target is this process (host pid)")
	fl.StringVar(&f.comm, "comm", "", "only events whose sender or target has this command name (exact, as in /proc/PID/comm)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	fl.Uint64Var(&f.count, "count", 0, "stop after this many events (0: no limit)")
	registerRingSize(fl, &f.ringSize)
	fl.StringVar(&f.container, "container", "", "only events about this container (ID prefix or name)")
	fl.StringVar(&f.pod, "pod", "", "only events about this pod (namespace/name)")
	fl.BoolVar(&f.noContainers, "no-containers", false, "do not resolve containers (no /proc, cgroup or runtime API access)")
	fl.BoolVar(&f.connections, "connections", false, "count the inbound TCP connections of each container a stop signal reaches from outside its network namespace, "+
		"and print them as net events: when they change (at most each second) and once its process has exited")
	f.runtime.register(fl)
	return cmd
}

func runTrace(ctx context.Context, f traceFlags, stdout, stderr io.Writer) error {
	sigs, err := sigvocab.ParseSignalSet(f.signals)
	if err != nil {
		return usageError{fmt.Errorf("--signals: %w", err)}
	}
	format := f.output
	if format == "" {
		format = "json"
		if isTerminal(stdout) {
			format = "table"
		}
	}
	if format != "table" && format != "json" {
		return usageError{fmt.Errorf("--output %q: want table or json", format)}
	}
	cf, err := newContainerFilter(f.container, f.pod)
	if err != nil {
		return err
	}
	if cf.Active() && f.noContainers {
		return usageError{fmt.Errorf("--container and --pod need container resolution: drop --no-containers")}
	}
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}

	w := bufio.NewWriterSize(stdout, 64<<10)
	defer w.Flush()
	var resolver *container.Resolver
	if !f.noContainers {
		resolver = container.NewResolver(f.runtime.options())
		defer resolver.Close()
	}
	sink := &traceSink{w: w, json: format == "json", filter: cf, count: f.count}
	if !sink.json {
		writeTableHeader(w)
	}
	p, err := pipeline.New(pipeline.Options{
		Tracer: tracer.Options{
			Signals:  sigs,
			PID:      f.pid,
			Comm:     f.comm,
			RingSize: f.ringSize,
			Idle:     func() time.Time { _ = w.Flush(); return time.Time{} },
			Logger:   slog.Default(),
		},
		Resolver:    resolver,
		Senders:     true,
		OnEvent:     sink.event,
		Connections: f.connections,
	})
	if err != nil {
		return err
	}
	defer p.Close()
	t := p.Tracer()
	if f.connections && !t.CountsConnections() {
		slog.Warn("--connections: this kernel does not let sigscope count connections (the TCP tracepoints did not attach): no net events")
	}
	runErr := p.Run(ctx)
	if err := w.Flush(); err != nil && runErr == nil {
		runErr = err
	}
	if err := t.Close(); err != nil && runErr == nil {
		runErr = err
	}
	if s, err := t.Stats(); err == nil {
		fmt.Fprintln(stderr, formatStats(s))
	}
	if resolver != nil {
		if errs := resolver.Errors(); len(errs) > 0 {
			fmt.Fprintf(stderr, "sigscope: container enrichment errors %v (IDs still come from cgroup paths)\n", errs)
		}
		if n := resolver.UnresolvedCgroups(); n > 0 {
			fmt.Fprintf(stderr, "sigscope: %d container-like cgroup(s) that no runtime resolved (each logged once): their events have no container\n", n)
		}
	}
	return runErr
}

// traceSink is the trace command's per-event output: each event that passes
// the container filter, as a JSON line or a table row, into the buffered
// writer (flushed when the tracer is idle and at the end).
type traceSink struct {
	w      *bufio.Writer
	json   bool
	filter identity.Filter
	count  uint64 // stop after this many events; 0: no limit
	n      uint64
	buf    []byte                 // the JSON line, reused
	enc    pipeline.RecordEncoder // what repeats from line to line, encoded once
}

func (s *traceSink) event(e *sigvocab.Event, target, sender *identity.Info) error {
	if !matchAny(s.filter, target, sender) {
		return nil
	}
	if s.json {
		s.buf = s.enc.Append(s.buf[:0], e, target, sender)
		if _, err := s.w.Write(s.buf); err != nil {
			return err
		}
	} else {
		about, _ := pipeline.About(target, sender)
		if err := writeTableRow(s.w, e, about); err != nil {
			return err
		}
	}
	s.n++
	if s.count > 0 && s.n >= s.count {
		return tracer.ErrStop
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// formatStats is the end-of-run summary; a non-zero "dropped" means the ring
// buffer was too small for the burst (raise --ring-size).
func formatStats(s tracer.Stats) string {
	var b strings.Builder
	b.WriteString("sigscope: events")
	for _, k := range sigvocab.RingKinds {
		ks := s.Kind(k)
		fmt.Fprintf(&b, " %s seen=%d emitted=%d dropped=%d;", k, ks.Seen, ks.Emitted, ks.Dropped)
	}
	tot := s.Total()
	fmt.Fprintf(&b, " total seen=%d emitted=%d dropped=%d read=%d", tot.Seen, tot.Emitted, tot.Dropped, s.Read)
	if s.Missed > 0 {
		fmt.Fprintf(&b, " missed=%d", s.Missed)
	}
	if s.DecodeErrors > 0 {
		fmt.Fprintf(&b, " undecodable=%d", s.DecodeErrors)
	}
	return b.String()
}

const tableFormat = "%-15s  %-8s  %-9s  %-13s  %-30s  %-22s  %-22s  %-6s  %s\n"

func writeTableHeader(w io.Writer) {
	fmt.Fprintf(w, tableFormat, "TIME", "EVENT", "SIGNAL", "RESULT", "FLAGS", "SENDER", "TARGET", "NS_PID", "CONTAINER")
}

// containerCell names a container compactly: pod/container for Kubernetes,
// else the runtime's name, else the short ID; escaped, and cut to a
// readable width (names are anyone's: a label can be 10 kB).
func containerCell(c *identity.Info) string {
	if c == nil {
		return "-"
	}
	return identityCell(c.Identity)
}

// identityCell is containerCell for a container known by its identity.
func identityCell(c identity.Identity) string {
	return textsafe.Cell(textsafe.Terminal(c.DisplayName()), maxNameCell)
}

// maxNameCell is the widest a container's name gets in a table.
const maxNameCell = 64

// writeTableRow prints one event; comms are escaped because any process can
// put terminal control sequences in its name.
func writeTableRow(w io.Writer, e *sigvocab.Event, c *identity.Info) error {
	sig, result, sender := "", "", ""
	switch e.Kind {
	case sigvocab.KindGenerate:
		sig, result = e.Signal.String(), e.Result.String()
		sender = procCell(e.Sender.PID, e.Sender.Comm)
	case sigvocab.KindDeliver:
		sig, result = e.Signal.String(), "-> "+e.Handler.String()
	case sigvocab.KindOOM:
		result = "oom victim"
	case sigvocab.KindNSEmpty:
		// The init (target) notified its parent: the namespace is empty.
		sig, result = e.Signal.String(), "ns empty"
	case sigvocab.KindExec:
		result = "entered"
		sender = procCell(e.Sender.PID, e.Sender.Comm)
	case sigvocab.KindNet:
		result = "connections"
		sender = netCell(e)
	case sigvocab.KindBlocked:
		// What a task of the signalled process was doing: its role, and
		// the system call in the SENDER column.
		result = e.Task.Role.String()
		if n := sigvocab.SyscallName(e.Task.Syscall); n != "" {
			sender = "in " + n
			if k := e.Task.FdKind.String(); k != "" {
				sender += " (" + k + ")"
			}
		}
	case sigvocab.KindExit:
		if e.Signaled() {
			sig, result = e.Signal.String(), "killed"
			if e.CoreDumped {
				result = "killed (core)"
			}
		} else {
			result = "exit " + strconv.Itoa(e.ExitCode)
		}
	}
	flags := e.Flags.String()
	if flags == "" {
		flags = "-"
	}
	if sender == "" {
		sender = "-"
	}
	_, err := fmt.Fprintf(w, tableFormat, e.Time.Format("15:04:05.000000"), e.Kind, sig, result, flags,
		sender, procCell(e.Target.PID, e.Target.Comm), strconv.FormatUint(uint64(e.Target.NsPID), 10), containerCell(c))
	return err
}

func procCell(pid uint32, comm sigvocab.Comm) string {
	return strconv.FormatUint(uint64(pid), 10) + " " + textsafe.Terminal(comm.String())
}

// netCell is a net event's counts in the SENDER column: what the clients
// of the stopping container got since its stop began ("-" for refused
// attempts on a kernel that cannot see them).
func netCell(e *sigvocab.Event) string {
	c := e.Conns
	if c == nil {
		return "not counted"
	}
	refused := "-"
	if c.SeesRefused {
		refused = strconv.FormatUint(c.Counts[sigvocab.NetRefused].N, 10)
	}
	s := fmt.Sprintf("acc=%d closed=%d rst=%d/%d cut=%d refused=%s", c.Counts[sigvocab.NetAccepted].N, c.Counts[sigvocab.NetClosed].N,
		c.Counts[sigvocab.NetResetSent].N, c.Counts[sigvocab.NetResetReceived].N, c.Counts[sigvocab.NetCut].N, refused)
	if c.SeesLastSpeaker {
		s += fmt.Sprintf(" unanswered=%d after_close=%d idle_at_exit=%d undecided=%d", c.Counts[sigvocab.NetUnanswered].N,
			c.Counts[sigvocab.NetAfterClose].N, c.Counts[sigvocab.NetIdleAtExit].N, c.Counts[sigvocab.NetUndecided].N)
	}
	return s
}
