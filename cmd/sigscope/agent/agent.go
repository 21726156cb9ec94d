package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/sync/errgroup"

	"github.com/sigscope/sigscope/containers/container"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/kubeclient"
	"github.com/sigscope/sigscope/episodes/kubemeta"
	"github.com/sigscope/sigscope/episodes/pipeline"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter"
	"github.com/sigscope/sigscope/exporter/journal"
	"github.com/sigscope/sigscope/exporter/kubeevents"
	"github.com/sigscope/sigscope/exporter/otlplog"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
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

	Signals   sigvocab.SignalSet // default sigvocab.DefaultSignals
	RingSize  int                // the tracer's ring buffer in bytes; 0: tracer.DefaultRingSize
	PodLabels bool               // namespace/pod/container labels on the counters
	MaxSeries int                // per metric, with PodLabels

	// OTLP, when set, sends one OpenTelemetry log record per episode
	// (exporter/otlplog); the agent sets its node and version.
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
	// are the defaults; NoRuntimeFiles: names from the runtimes' APIs
	// only, as in container.Options.
	DockerSocket   string
	CRISockets     []string
	NoRuntimeFiles bool

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
// Its goroutines form one tree: New starts the resolver's cgroup watch;
// Run starts the rest (the outputs' workers, the HTTP servers, the pod
// informers, the tracer's reader, the audit loop) in one errgroup whose
// context ends on every way out of Run. Run returns once all of them have;
// Close stops Run and releases what New started.
type Agent struct {
	opts     Options
	log      *slog.Logger
	ready    atomic.Bool
	resolver *container.Resolver
	exp      *exporter.Exporter
	reg      *prometheus.Registry
	pods     *kubemeta.Pods // why containers were stopped; nil without a Kubernetes client
	// pipe is the running pipeline, for the informers' goroutine
	// (kubemeta's OnHookStart); nil until it is loaded.
	pipe    atomic.Pointer[pipeline.Pipeline]
	started time.Time

	ring  *episodeRing
	audit auditState
	// outputs take every completed episode once it is numbered, on the
	// tracer's goroutine, after the API's ring and the metrics: what
	// leaves the agent.
	outputs []output

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

// output is where completed episodes leave the agent: the node journal
// (journal), Kubernetes Events (kubeevents), OpenTelemetry logs (otlplog).
// Each is a sink.Sink: a bounded queue, one worker, its counts.
type output interface {
	// ObserveEpisode takes one numbered episode. It never blocks the
	// tracer: it queues and returns.
	ObserveEpisode(ep *timeline.Episode)
	// Run is the output's worker: it sends what is queued until ctx
	// ends, then what is left once more, within the output's own bound.
	Run(ctx context.Context)
	// Close releases the output, after Run has returned; one never run
	// first gives what is queued its last try.
	Close() error
	// Its metrics exist only when the output is on.
	prometheus.Collector
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
		opts.Signals = sigvocab.DefaultSignals
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
		a.outputs = append(a.outputs, j)
	}
	a.resolver = container.NewResolver(container.Options{ProcRoot: opts.ProcRoot, Logger: opts.Logger,
		DockerSocket: opts.DockerSocket, CRISockets: opts.CRISockets, NoRuntimeFiles: opts.NoRuntimeFiles})
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
	if opts.KubeEvents {
		a.outputs = append(a.outputs, kubeevents.New(opts.KubeClient, opts.NodeName, kubeevents.Options{Logger: opts.Logger}))
		a.pods = kubemeta.New(opts.KubeClient, opts.NodeName, opts.Logger)
		a.pods.OnHookStart = func(h kubemeta.HookStart) {
			if p := a.pipe.Load(); p != nil {
				p.CountFromHooks(h)
			}
		}
	}
	if opts.OTLP != nil {
		o := *opts.OTLP
		o.NodeName, o.Version, o.Logger = opts.NodeName, opts.Version, opts.Logger
		s, err := otlplog.New(o)
		if err != nil {
			a.release()
			return nil, fmt.Errorf("otlp logs: %w", err)
		}
		a.outputs = append(a.outputs, s)
	}
	for _, o := range a.outputs {
		// sigscope_journal_*, sigscope_kube_events_*, sigscope_otlp_log_*:
		// each only with its output.
		a.reg.MustRegister(o)
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
	// The outputs' workers stop once nothing more can come: after the
	// tracer's reader has returned, its last act being to complete the
	// open episodes. Each then drains within its own bound, while the HTTP
	// servers shut down.
	octx, endOutputs := context.WithCancel(context.WithoutCancel(ctx))
	for _, o := range a.outputs {
		g.Go(func() error { o.Run(octx); return nil })
	}
	a.serveHTTP(gctx, g)
	if a.pods != nil {
		g.Go(func() error { a.pods.Run(gctx); return nil })
	}

	p, err := a.newPipeline()
	if err != nil {
		stop()
		endOutputs()
		if werr := g.Wait(); werr != nil {
			return errors.Join(err, werr)
		}
		return err
	}
	// The tracer is closed once its reader has returned, and before the
	// resolver it looks containers up with.
	defer p.Close()
	a.pipe.Store(p)
	defer a.pipe.Store(nil)
	if gctx.Err() != nil {
		// A server failed, or ctx ended, while the programs loaded.
		endOutputs()
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
		defer endOutputs()
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
		OnEvent: func(e *sigvocab.Event, target, _ *identity.Info) error {
			a.exp.ObserveEvent(e, target)
			if events++; events%engineSnapshotEvery == 0 {
				a.snapshotEngine(p.Engine())
			}
			return nil
		},
		Kube:      a.kubeFacts,
		PeerNames: a.peerNames,
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
// outputs). It is idempotent, and safe before, during and after Run.
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
		// The outputs drained as Run ended; an agent never run has them
		// drain here, at once, each within its own bound (3 s, OTLP 4 s
		// with its connections' shutdown): one after the other they
		// could outlast the pod's 10 s grace.
		var wg sync.WaitGroup
		for _, o := range a.outputs {
			wg.Go(func() {
				if err := o.Close(); err != nil {
					a.log.Warn("closing an output", "error", err)
				}
			})
		}
		wg.Wait()
		_ = a.resolver.Close()
	})
}

// kubeFacts is what the API server's records say of a pod's container's
// stop, or that the agent has no client to read them.
func (a *Agent) kubeFacts(c identity.Identity, stopAt, start time.Time) *timeline.KubeFacts {
	if a.pods == nil {
		if c.Pod == "" {
			return nil
		}
		return &timeline.KubeFacts{Unread: timeline.KubeNoClient}
	}
	return a.pods.Facts(c, stopAt, start)
}

// peerNames names the clients that lost requests: this node by its
// addresses, its pods by the API server's records (other nodes' pods are
// named by the plugin, which sees the cluster).
func (a *Agent) peerNames(addrs []netip.Addr, at time.Time, node map[netip.Addr]bool) map[netip.Addr]timeline.PeerName {
	if a.pods == nil {
		out := map[netip.Addr]timeline.PeerName{}
		for _, ad := range addrs {
			if node[ad] {
				out[ad] = timeline.PeerName{Kind: timeline.PeerNode, Name: a.opts.NodeName}
			}
		}
		return out
	}
	return a.pods.PeerNames(addrs, at, node, a.opts.NodeName)
}

// complete records finished episodes: the API's ring numbers them, then
// the metrics and each output take them.
func (a *Agent) complete(eps []timeline.Episode) {
	if len(eps) == 0 {
		return
	}
	a.ring.add(eps, a.opts.NodeName)
	for i := range eps {
		a.exp.ObserveEpisode(&eps[i])
		for _, o := range a.outputs {
			o.ObserveEpisode(&eps[i])
		}
	}
}
