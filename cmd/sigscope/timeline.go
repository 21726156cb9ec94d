package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/containers/container"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/kubemeta"
	"github.com/sigscope/sigscope/episodes/pipeline"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

type timelineFlags struct {
	file       string
	follow     bool
	duration   time.Duration
	output     string
	container  string
	pod        string
	settle     time.Duration
	kubeconfig string
	skip       bool
	ringSize   int
	server     serverFlags
	runtime    runtimeFlags
}

func newTimelineCmd() *cobra.Command {
	var f timelineFlags
	cmd := &cobra.Command{
		Use:   "timeline",
		Short: "Per-container stop timelines with a verdict: why did it take 30 s, why exit 137",
		Long: `Turn the kernel's record of signals and exits into one stop episode per container:
the stop signal sent to the container's main process (its PID 1, or the process
the runtime started when it shares a pid namespace) and what the kernel did with
it, the SIGKILL escalation, the namespace cascade, the exit status, and a
verdict (graceful, ignored_by_init, ignored, handler_timeout, killed,
oom_killed, exited; unfinished when a recording ends mid-stop, or when the
stop may have begun before tracing did) with a fix hint. A pod's sandbox
(pause) container makes no episode of its own.

Live (the default, needs root): trace now and print each episode when it
completes. Offline: read a recording made with "sigscope trace -o json", or
print the episodes of a node journal ("sigscope serve --journal-dir DIR": the
directory, oldest file first, or one file).`,
		Example: `  sigscope timeline                          # live, until Ctrl-C
  sigscope timeline --duration 2m -o json
  sigscope trace -o json > rec.jsonl          # record now...
  sigscope timeline -f rec.jsonl              # ...explain later
  sigscope timeline -f /var/lib/sigscope --pod shop/web-1   # a node journal
  sigscope timeline --server http://node-1:10042 --pod shop/web-1`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTimeline(cmd.Context(), f, os.Stdin, os.Stdout, os.Stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", `read a "sigscope trace -o json" recording ("-" for stdin) instead of tracing live; or print the episodes of a node journal (a --journal-dir directory or one of its files)`)
	fl.BoolVar(&f.follow, "follow", false, "trace live and print each episode as it completes (the default without -f)")
	fl.DurationVar(&f.duration, "duration", 0, "live: stop after this long (0: until Ctrl-C)")
	fl.BoolVar(&f.skip, "skip-invalid", false, "with -f: go on past invalid lines, count them and say so at the end (default: stop at the first, naming its line)")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json (one episode per line)")
	fl.StringVar(&f.container, "container", "", "only episodes of this container (ID prefix or name)")
	fl.StringVar(&f.pod, "pod", "", "only episodes of this pod (namespace/name)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "read why pods' containers were stopped (stop_reason), the grace period applied and their endpoints' changes (endpoints) from the API server with this kubeconfig")
	fl.DurationVar(&f.settle, "settle", 0, "how long after the main process's exit an episode waits for late events when the kernel cannot say it is over (a main process that is no init); an init's episode ends when its namespace is empty (default 1s)")
	registerRingSize(fl, &f.ringSize)
	f.server.register(fl)
	f.runtime.register(fl)
	return cmd
}

func runTimeline(ctx context.Context, f timelineFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.output != "text" && f.output != "json" {
		return usageError{fmt.Errorf("--output %q: want text or json", f.output)}
	}
	if f.skip && f.file == "" {
		return usageError{fmt.Errorf("--skip-invalid is for a recording read with -f")}
	}
	if f.file != "" && (f.follow || f.duration > 0 || ringSizeGiven(f.ringSize)) {
		return usageError{fmt.Errorf("-f reads a recording: --follow, --duration and --ring-size are for live tracing")}
	}
	cf, err := newContainerFilter(f.container, f.pod)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	// The engine, once there is one, tells the pod view which pods still
	// have an episode in progress.
	var engine *timeline.Engine
	hasOpen := func(ns, pod string) bool { return engine != nil && engine.HasOpen(ns, pod) }
	print, flush := episodePrinter(w, f.output, cf, hasOpen)
	if f.server.url != "" {
		if f.file != "" || f.follow || f.duration > 0 || ringSizeGiven(f.ringSize) {
			return usageError{fmt.Errorf("--server reads an agent's recent episodes: no -f, --follow, --duration or --ring-size")}
		}
		q := apiv1.EpisodeQuery{Container: cf.Container, Namespace: cf.Namespace, Pod: cf.Pod}
		var eps []timeline.Episode
		if err := f.server.get(ctx, "/api/v1/episodes", q.Values(), &eps); err != nil {
			return err
		}
		if err := print(eps); err != nil {
			return err
		}
		return flush()
	}
	topts := timeline.Options{Settle: f.settle}
	if f.file != "" {
		name := f.file
		if name == "-" {
			name = "stdin"
		}
		in := stdin
		if fi, err := os.Stat(f.file); f.file != "-" && (err != nil || !fi.IsDir()) {
			file, err := os.Open(f.file)
			if err != nil {
				return err
			}
			defer file.Close()
			in = file
		}
		// A node journal (sigscope serve --journal-dir), or episodes as
		// `timeline -o json` writes them, are printed as they are.
		src, rec, err := journalSource(f.file, in)
		if err != nil {
			return err
		}
		if src != nil {
			src.name = name
			if err := src.read(print, stderr); err != nil {
				return err
			}
			return flush()
		}
		in = rec
		engine = timeline.New(topts)
		st, err := pipeline.Replay(in, pipeline.ReadOptions{SkipInvalid: f.skip}, engine, print)
		var rerr *pipeline.RecordError
		if errors.As(err, &rerr) {
			return fmt.Errorf("%s:%d: not a sigscope trace record: %v (--skip-invalid goes on past such lines)", name, rerr.Line, rerr.Err)
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		if st.Truncated {
			fmt.Fprintf(stderr, "sigscope: %s: the last line is cut off (a recording stopped mid-write): ignored\n", name)
		}
		if st.Skipped > 0 {
			fmt.Fprintf(stderr, "sigscope: %s: skipped %d invalid line(s) of %d; the first, %s:%d: %v; episodes around them may be incomplete\n",
				name, st.Skipped, st.Records+st.Skipped, name, st.FirstSkipped.Line, st.FirstSkipped.Err)
		}
		return flush()
	}

	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	resolver := container.NewResolver(f.runtime.options())
	defer resolver.Close()
	kube := func(c identity.Identity, _, _ time.Time) *timeline.KubeFacts {
		if c.Pod == "" {
			return nil
		}
		return &timeline.KubeFacts{Unread: timeline.KubeNoAPIServer}
	}
	// Without the API server, only this node's own addresses are named
	// among who was hurt (the pipeline's rule).
	var peerNames func(addrs []netip.Addr, at time.Time, node map[netip.Addr]bool) map[netip.Addr]timeline.PeerName
	var pipe atomic.Pointer[pipeline.Pipeline]
	if f.kubeconfig != "" {
		client, err := kubeClient(f.kubeconfig)
		if err != nil {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
		pods := kubemeta.New(client, "", slog.Default())
		// A sleep or httpGet preStop hook's start begins the count of the
		// container's connections; the pipeline loads after the informers
		// start.
		pods.OnHookStart = func(h kubemeta.HookStart) {
			if p := pipe.Load(); p != nil {
				p.CountFromHooks(h)
			}
		}
		// The informers stop before runTimeline returns (deferred calls
		// run last first: cancel, then Wait).
		var informers sync.WaitGroup
		defer informers.Wait()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		informers.Go(func() { pods.Run(ctx) })
		kube = pods.Facts
		peerNames = func(addrs []netip.Addr, at time.Time, node map[netip.Addr]bool) map[netip.Addr]timeline.PeerName {
			return pods.PeerNames(addrs, at, node, "")
		}
	}
	p, err := pipeline.New(pipeline.Options{
		Tracer: tracer.Options{
			Signals:  sigvocab.DefaultSignals,
			RingSize: f.ringSize,
			Logger:   slog.Default(),
			Idle:     func() time.Time { _ = w.Flush(); return time.Time{} },
		},
		Resolver:   resolver,
		Timeline:   &topts,
		Kube:       kube,
		PeerNames:  peerNames,
		OnEpisodes: print,
	})
	if err != nil {
		return err
	}
	defer p.Close()
	pipe.Store(p)
	defer pipe.Store(nil)
	engine = p.Engine()
	runErr := p.Run(ctx)
	if err := flush(); err != nil && runErr == nil {
		runErr = err
	}
	if s, err := p.Tracer().Stats(); err == nil {
		fmt.Fprintln(stderr, formatStats(s))
	}
	return runErr
}

// episodePrinter writes completed episodes that pass the filter. With
// --pod and text output, a pod's episodes are written together as one view
// of the pod's stop once its sandbox is torn down (flush writes what is
// still waiting).
func episodePrinter(w io.Writer, format string, cf identity.Filter, open func(namespace, pod string) bool) (print func([]timeline.Episode) error, flush func() error) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var pods *timeline.PodGrouper
	if cf.Pod != "" && format != "json" {
		pods = timeline.NewPodGrouper(0, open)
	}
	writePods := func(ps []timeline.PodStop) error {
		for i := range ps {
			if err := ps[i].WriteText(w); err != nil {
				return err
			}
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		return nil
	}
	print = func(eps []timeline.Episode) error {
		var kept []timeline.Episode
		for i := range eps {
			if cf.Matches(eps[i].Container.Identity) {
				kept = append(kept, eps[i])
			}
		}
		if pods != nil {
			ps, single := pods.Add(kept)
			if err := writePods(ps); err != nil {
				return err
			}
			kept = single
		}
		for i := range kept {
			ep := &kept[i]
			var err error
			if format == "json" {
				err = enc.Encode(ep)
			} else {
				err = ep.WriteText(w)
				if err == nil {
					_, err = fmt.Fprintln(w)
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	flush = func() error {
		if pods == nil {
			return nil
		}
		return writePods(pods.Flush())
	}
	return print, flush
}
