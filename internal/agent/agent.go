package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/sync/errgroup"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/container/identity"
	"github.com/sigscope/sigscope/internal/exporter"
	"github.com/sigscope/sigscope/internal/journal"
	"github.com/sigscope/sigscope/internal/kubeclient"
	"github.com/sigscope/sigscope/internal/kubeevents"
	"github.com/sigscope/sigscope/internal/kubemeta"
	"github.com/sigscope/sigscope/internal/otlplog"
	"github.com/sigscope/sigscope/internal/pipeline"
	"github.com/sigscope/sigscope/timeline"
	"github.com/sigscope/sigscope/tracer"
)

// DefaultListenAddress is sigscope's port. Prometheus' default port
// allocation list has had its 9100-9999 range fully allocated since 2023,
// so any port in it belongs to another exporter; 10042 is outside it.
const DefaultListenAddress = ":10042"

// Defaults for [Options].
const (
	DefaultMaxEpisodes   = 1000
	DefaultAuditInterval = 30 * time.Second
)

// Options configures an [Agent].
type Options struct {
	ListenAddresses []string     // default [DefaultListenAddress]
	Listener        net.Listener // if set, serve on it instead (tests)
	WebConfigFile   string       // exporter-toolkit web config: TLS, basic auth
	// HealthAddress, when set, serves /healthz and /readyz alone there,
	// in plain HTTP without authentication: for the kubelet's probes when
	// the main listener wants basic auth. HealthListener is it for tests.
	HealthAddress  string
	HealthListener net.Listener

	Signals   tracer.SignalSet // default tracer.DefaultSignals
	RingSize  int              // the tracer's ring buffer in bytes; 0: tracer.DefaultRingSize
	PodLabels bool             // namespace/pod/container labels on the counters
	MaxSeries int              // per metric, with PodLabels

	// OTLP, when set, sends one OpenTelemetry log record per episode
	// (internal/otlplog); the agent sets its node and version.
	OTLP *otlplog.Options

	KubeEvents bool              // post Kubernetes Events on pods
	KubeClient kubeclient.Client // used when KubeEvents; the caller builds it
	NodeName   string

	MaxEpisodes   int           // recent episodes kept for /api/v1/episodes
	AuditInterval time.Duration // how often PID 1s are audited (metric and API)
	ProcRoot      string        // default /proc

	// JournalDir, when set, is the node journal (package journal): every
	// completed episode is appended there, and the ring is filled from it
	// at start, its ids going on from the journal's last.
	JournalDir      string
	JournalFileSize int64 // 0: journal.DefaultFileSize
	JournalFiles    int   // 0: journal.DefaultFiles

	// Container runtime endpoints, as in container.Options: "" and nil
	// are the defaults.
	DockerSocket string
	CRISockets   []string

	Version, Revision string
	Logger            *slog.Logger

	// Audited, if set, is called after each audit of the periodic loop;
	// first is true after the first, which ends start-up (the tracer is
	// attached by then). Loading BPF programs, as the tracer does and as
	// each audit does for its task iterator, parses the kernel's BTF and
	// leaves megabytes of garbage: sigscope serve gives memory back then.
	Audited func(first bool)
}

// Agent is one node's sigscope.
//
// Its goroutines form one tree: New starts the resolver's cgroup watch and,
// with KubeEvents, the Events sender; Run starts the rest (the HTTP
// servers, the pod informers, the tracer's reader, the audit loop) in one
// errgroup whose context ends on every way out of Run. Run returns once
// all of them have; Close stops Run and releases what New started.
type Agent struct {
	opts     Options
	log      *slog.Logger
	ready    atomic.Bool
	resolver *container.Resolver
	exp      *exporter.Exporter
	reg      *prometheus.Registry
	events   *kubeevents.Recorder
	pods     *kubemeta.Pods // why containers were stopped; nil without a Kubernetes client
	started  time.Time

	ring  *episodeRing
	audit auditState
	// sinks take every completed episode once it is numbered, on the
	// tracer's goroutine: what leaves the agent (the node journal, OTLP
	// logs). Each queues and returns; release closes them, in order.
	sinks []episodeSink

	statsFn atomic.Pointer[func() (tracer.Stats, error)]
	// engineStats is a copy of the timeline engine's counters, for
	// sigscope_cache_entries (caches.go).
	engineStats atomic.Pointer[timeline.Stats]

	life      sync.Mutex
	running   bool               // Run was called
	closed    bool               // Close was called
	stop      context.CancelFunc // ends Run's context
	done      chan struct{}      // closed when Run has returned
	closeOnce sync.Once
}

// episodeSink is where completed episodes go besides the API's ring, the
// metrics and Events.
type episodeSink interface {
	// ObserveEpisode takes one numbered episode. It must not block the
	// tracer: a sink that writes or sends queues and returns.
	ObserveEpisode(ep *timeline.Episode)
	// Close flushes what is queued, within the sink's own bound, and
	// releases it.
	Close() error
}

// lineSink is a sink that takes an episode as the JSON line the ring
// encoded for the API (the journal): one encoding for both.
type lineSink interface {
	ObserveLine(id uint64, line []byte)
}

// ErrClosed is Run's error on an agent already closed or already run.
var ErrClosed = errors.New("agent: closed or already run")

// New prepares an agent; Run starts it. Close releases it, whether it ran
// or not.
func New(opts Options) (*Agent, error) {
	if len(opts.ListenAddresses) == 0 {
		opts.ListenAddresses = []string{DefaultListenAddress}
	}
	if opts.Signals == 0 {
		opts.Signals = tracer.DefaultSignals
	}
	if opts.MaxEpisodes <= 0 {
		opts.MaxEpisodes = DefaultMaxEpisodes
	}
	if opts.AuditInterval <= 0 {
		opts.AuditInterval = DefaultAuditInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.KubeEvents && opts.KubeClient == nil {
		return nil, errors.New("kube events need a Kubernetes client")
	}
	if opts.WebConfigFile != "" {
		if err := web.Validate(opts.WebConfigFile); err != nil {
			return nil, fmt.Errorf("web config %s: %w", opts.WebConfigFile, err)
		}
	}
	a := &Agent{opts: opts, log: opts.Logger, ring: newEpisodeRing(opts.MaxEpisodes), started: time.Now(), done: make(chan struct{})}
	// The journal first: it is the one part of New that can fail (another
	// agent writes it), before anything that would need releasing.
	if opts.JournalDir != "" {
		j, err := journal.Open(journal.Options{Dir: opts.JournalDir, FileSize: opts.JournalFileSize,
			Files: opts.JournalFiles, Keep: opts.MaxEpisodes, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		ld := j.Loaded()
		a.ring.load(ld.Episodes, ld.LastID, ld.Lines)
		a.sinks = append(a.sinks, j)
	}
	a.resolver = container.NewResolver(container.Options{ProcRoot: opts.ProcRoot, Logger: opts.Logger,
		DockerSocket: opts.DockerSocket, CRISockets: opts.CRISockets})
	a.exp = exporter.New(exporter.Options{
		PodLabels: opts.PodLabels,
		MaxSeries: opts.MaxSeries,
		Stats: func() (tracer.Stats, error) {
			if fn := a.statsFn.Load(); fn != nil {
				return (*fn)()
			}
			return tracer.Stats{}, nil
		},
		EnrichmentErrors:  a.resolver.Errors,
		UnresolvedCgroups: a.resolver.UnresolvedCgroups,
		Caches:            a.caches,
		Version:           opts.Version,
		Revision:          opts.Revision,
	})
	a.reg = prometheus.NewRegistry()
	// go_gc_heap_live_bytes besides the defaults: the heap the last GC
	// found live, the measure of memory that returns to its baseline
	// (docs/benchmarks.md), where heap in use also counts garbage.
	goc := collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}))
	a.reg.MustRegister(a.exp, goc, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, s := range a.sinks {
		if c, ok := s.(prometheus.Collector); ok {
			a.reg.MustRegister(c) // sigscope_journal_*: only with --journal-dir
		}
	}
	if opts.KubeEvents {
		a.events = kubeevents.New(opts.KubeClient, opts.NodeName, kubeevents.Options{Logger: opts.Logger})
		a.reg.MustRegister(a.events) // sigscope_kube_events_*: only with --kube-events
		a.pods = kubemeta.New(opts.KubeClient, opts.NodeName, opts.Logger)
	}
	if opts.OTLP != nil {
		o := *opts.OTLP
		o.NodeName, o.Version, o.Logger = opts.NodeName, opts.Version, opts.Logger
		s, err := otlplog.New(o)
		if err != nil {
			a.release()
			return nil, fmt.Errorf("otlp logs: %w", err)
		}
		a.sinks = append(a.sinks, s)
		a.reg.MustRegister(s) // sigscope_otlp_log_*: only with OTLP
	}
	return a, nil
}

// Run serves HTTP at once (so /healthz answers while the programs load),
// loads and attaches the tracer, and processes events until ctx ends,
// Close is called, or a part fails (the HTTP port taken, bad TLS files, the
// tracer): then every part is stopped and waited for, what New started is
// released, and Run returns the first failure (nil when ctx ended or Close
// was called). An agent runs once.
func (a *Agent) Run(ctx context.Context) error {
	a.life.Lock()
	if a.running || a.closed {
		a.life.Unlock()
		return ErrClosed
	}
	a.running = true
	ctx, stop := context.WithCancel(ctx)
	a.stop = stop
	a.life.Unlock()
	defer close(a.done)
	defer a.release()
	defer stop()

	g, gctx := errgroup.WithContext(ctx)
	a.serveHTTP(gctx, g)
	if a.pods != nil {
		g.Go(func() error { a.pods.Run(gctx); return nil })
	}

	p, err := a.newPipeline()
	if err != nil {
		stop()
		if werr := g.Wait(); werr != nil {
			return errors.Join(err, werr)
		}
		return err
	}
	// The tracer is closed once its reader has returned, and before the
	// resolver it looks containers up with.
	defer p.Close()
	if gctx.Err() != nil {
		// A server failed, or ctx ended, while the programs loaded.
		return g.Wait()
	}
	t := p.Tracer()
	stats := t.Stats
	a.statsFn.Store(&stats)
	a.ready.Store(true)
	a.log.Info("tracer attached", "exit_program", t.ExitProgram(), "oom_program", t.OOMProgram())

	g.Go(func() error { a.auditLoop(gctx); return nil })
	g.Go(func() error {
		// The reader returns when gctx ends, or on its own (a callback's
		// error): either way everything else stops with it.
		defer stop()
		return p.Run(gctx)
	})
	return g.Wait()
}

// newPipeline loads and attaches the tracer, wired to the agent.
func (a *Agent) newPipeline() (*pipeline.Pipeline, error) {
	var p *pipeline.Pipeline
	events := 0
	p, err := pipeline.New(pipeline.Options{
		// The callbacks run on the tracer's goroutine, started after p is set.
		Tracer:   tracer.Options{Signals: a.opts.Signals, RingSize: a.opts.RingSize, Logger: a.log, Idle: func() time.Time { a.snapshotEngine(p.Engine()); return time.Time{} }},
		Resolver: a.resolver,
		Timeline: &timeline.Options{},
		OnEvent: func(e *tracer.Event, target, _ *identity.Info) error {
			a.exp.ObserveEvent(e, target)
			if events++; events%engineSnapshotEvery == 0 {
				a.snapshotEngine(p.Engine())
			}
			return nil
		},
		Annotate: a.annotate,
		OnEpisodes: func(eps []timeline.Episode) error {
			a.complete(eps)
			a.snapshotEngine(p.Engine())
			return nil
		},
	})
	return p, err
}

// Close stops a running Run and waits until it has returned, then releases
// what New started (the resolver's watch and runtime connections, the
// Events sender). It is idempotent, and safe before, during and after Run.
func (a *Agent) Close() error {
	a.life.Lock()
	a.closed = true
	running, stop := a.running, a.stop
	a.life.Unlock()
	if running {
		stop()
		<-a.done
	}
	a.release()
	return nil
}

// release closes what New started, once every goroutine that uses it has
// returned. Audits asked later (a request in flight past the shutdown's
// grace) are refused rather than run against a closed resolver.
//
// The resolver's Close waits for its background re-enrichments, so
// nothing of the agent asks a runtime after release returns.
func (a *Agent) release() {
	a.closeOnce.Do(func() {
		a.closeAudits()
		// The Events sender and the sinks flush at once, each within its
		// own bound (Events 3 s, OTLP 4 s, the journal a local write):
		// one after the other they could outlast the pod's 10 s grace.
		var wg sync.WaitGroup
		if a.events != nil {
			wg.Go(func() { _ = a.events.Close() })
		}
		for _, s := range a.sinks {
			wg.Go(func() {
				if err := s.Close(); err != nil {
					a.log.Warn("closing an episode sink", "error", err)
				}
			})
		}
		wg.Wait()
		_ = a.resolver.Close()
	})
}

// annotate adds why a pod's container was stopped, from the API server.
func (a *Agent) annotate(ep *timeline.Episode) {
	if a.pods == nil {
		kubemeta.NotLearnt(ep, "no Kubernetes client (sigscope serve --kube-events)")
		return
	}
	a.pods.Annotate(ep)
}

// complete records finished episodes: metrics, the API's ring, Events.
func (a *Agent) complete(eps []timeline.Episode) {
	if len(eps) == 0 {
		return
	}
	lines := a.ring.add(eps, a.opts.NodeName)
	for i := range eps {
		a.exp.ObserveEpisode(&eps[i])
		if a.events != nil {
			a.events.ObserveEpisode(&eps[i])
		}
		for _, s := range a.sinks {
			if ls, ok := s.(lineSink); ok && lines[i] != nil {
				ls.ObserveLine(eps[i].ID, lines[i])
				continue
			}
			s.ObserveEpisode(&eps[i])
		}
	}
}
