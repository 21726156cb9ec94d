package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/sigscope/sigscope/agent/apiv1"
	"github.com/sigscope/sigscope/audit"
	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/exporter"
	"github.com/sigscope/sigscope/internal/kubeclient"
	"github.com/sigscope/sigscope/kubeevents"
	"github.com/sigscope/sigscope/kubemeta"
	"github.com/sigscope/sigscope/pipeline"
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

	KubeEvents bool              // post Kubernetes Events on pods
	KubeClient kubeclient.Client // used when KubeEvents; the caller builds it
	NodeName   string

	MaxEpisodes   int           // recent episodes kept for /api/v1/episodes
	AuditInterval time.Duration // how often PID 1s are audited (metric and API)
	ProcRoot      string        // default /proc

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
type Agent struct {
	opts     Options
	log      *slog.Logger
	ready    atomic.Bool
	resolver *container.Resolver
	exp      *exporter.Exporter
	reg      *prometheus.Registry
	events   *kubeevents.Recorder
	pods     *kubemeta.Pods // why containers were stopped; nil without a Kubernetes client

	mu       sync.Mutex
	episodes []timeline.Episode // ring, oldest first once full
	next     int
	full     bool
	seq      uint64    // the last episode's ID
	evicted  time.Time // the latest start among the episodes pushed out
	started  time.Time

	auditMu sync.Mutex
	audits  []audit.Result
	auditAt time.Time

	statsFn atomic.Pointer[func() (tracer.Stats, error)]
	// engineStats is a copy of the timeline engine's counters, for
	// sigscope_cache_entries (caches.go).
	engineStats atomic.Pointer[timeline.Stats]
}

// New prepares an agent; Run starts it.
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
	a := &Agent{opts: opts, log: opts.Logger, episodes: make([]timeline.Episode, opts.MaxEpisodes), started: time.Now()}
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
	if opts.KubeEvents {
		a.events = kubeevents.New(opts.KubeClient, opts.NodeName, kubeevents.Options{Logger: opts.Logger})
		a.reg.MustRegister(a.events) // sigscope_kube_events_*: only with --kube-events
		a.pods = kubemeta.New(opts.KubeClient, opts.NodeName, opts.Logger)
	}
	return a, nil
}

// Handler serves the agent's HTTP API (without TLS or auth: Run adds those).
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}))
	a.healthRoutes(mux)
	mux.HandleFunc("GET /api/v1/episodes", a.serveEpisodes)
	mux.HandleFunc("GET /api/v1/audit", a.serveAudit)
	mux.HandleFunc("GET /api/v1/info", a.serveInfo)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("sigscope agent: /metrics /healthz /readyz /api/v1/info /api/v1/episodes /api/v1/audit (docs/api.md)\n"))
	})
	return mux
}

// healthRoutes adds /healthz and /readyz: on the main handler, and alone
// on the health listener.
func (a *Agent) healthRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.ready.Load() {
			http.Error(w, "tracer not attached yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
}

// serveHealth serves the health listener, if any, until ctx ends.
func (a *Agent) serveHealth(ctx context.Context, errs chan<- error) (stop func()) {
	l := a.opts.HealthListener
	if l == nil && a.opts.HealthAddress != "" {
		var err error
		if l, err = net.Listen("tcp", a.opts.HealthAddress); err != nil {
			errs <- fmt.Errorf("--web.health-address: %w", err)
			return func() {}
		}
	}
	if l == nil {
		return func() {}
	}
	mux := http.NewServeMux()
	a.healthRoutes(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("health listener: %w", err)
		}
	}()
	return func() { _ = srv.Close() }
}

// Run serves HTTP at once (so /healthz answers while the programs load),
// loads and attaches the tracer, and processes events until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	defer a.resolver.Close()
	if a.pods != nil {
		go a.pods.Run(ctx)
	}
	if a.events != nil {
		defer a.events.Close()
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	flags := &web.FlagConfig{WebListenAddresses: &a.opts.ListenAddresses, WebConfigFile: &a.opts.WebConfigFile}
	serveErr := make(chan error, 2)
	go func() {
		var err error
		if a.opts.Listener != nil {
			err = web.Serve(a.opts.Listener, srv, flags, a.log)
		} else {
			err = web.ListenAndServe(srv, flags, a.log)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		serveErr <- err
	}()
	defer a.serveHealth(ctx, serveErr)()
	defer func() {
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutCtx)
	}()

	var p *pipeline.Pipeline
	events := 0
	p, err := pipeline.New(pipeline.Options{
		// The callbacks run on the tracer's goroutine, started after p is set.
		Tracer:   tracer.Options{Signals: a.opts.Signals, RingSize: a.opts.RingSize, Logger: a.log, Idle: func() time.Time { a.snapshotEngine(p.Engine()); return time.Time{} }},
		Resolver: a.resolver,
		Timeline: &timeline.Options{},
		OnEvent: func(e *tracer.Event, target, _ *container.Info) error {
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
	if err != nil {
		return err
	}
	defer p.Close()
	t := p.Tracer()
	stats := t.Stats
	a.statsFn.Store(&stats)
	a.ready.Store(true)
	a.log.Info("tracer attached", "exit_program", t.ExitProgram, "oom_program", t.OOMProgram)

	go a.auditLoop(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	select {
	case err := <-serveErr:
		// The HTTP server failed (port taken, bad TLS files): stop tracing.
		p.Close()
		<-runErr
		return fmt.Errorf("serving HTTP: %w", err)
	case err := <-runErr:
		return err
	}
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
	a.mu.Lock()
	for i := range eps {
		a.seq++
		eps[i].ID, eps[i].Node = a.seq, a.opts.NodeName
		if old := &a.episodes[a.next]; a.full && old.Start.After(a.evicted) {
			a.evicted = old.Start
		}
		a.episodes[a.next] = eps[i]
		a.next = (a.next + 1) % len(a.episodes)
		if a.next == 0 {
			a.full = true
		}
	}
	a.mu.Unlock()
	for i := range eps {
		a.exp.ObserveEpisode(&eps[i])
		if a.events != nil {
			a.events.ObserveEpisode(&eps[i])
		}
	}
}

// recent returns the kept episodes, oldest first.
func (a *Agent) recent() []timeline.Episode {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []timeline.Episode
	if a.full {
		out = append(out, a.episodes[a.next:]...)
	}
	return append(out, a.episodes[:a.next]...)
}

// serveEpisodes: GET /api/v1/episodes, docs/api.md. The newest `limit`
// matching episodes (all without it) older than the `before` cursor, oldest
// first, as a JSON array; a Link header with rel="next" points to the older
// page when more match.
func (a *Agent) serveEpisodes(w http.ResponseWriter, r *http.Request) {
	f, err := parseEpisodeFilter(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	eps := a.recent()
	out := []timeline.Episode{}
	more := false
	// Newest first, so that the page is the newest matches.
	for i := len(eps) - 1; i >= 0; i-- {
		if !f.match(&eps[i]) {
			continue
		}
		if f.limit > 0 && len(out) == f.limit {
			more = true
			break
		}
		out = append(out, eps[i])
	}
	slices.Reverse(out)
	if more {
		next := *r.URL
		q := next.Query()
		q.Set("before", strconv.FormatUint(out[0].ID, 10))
		next.RawQuery = q.Encode()
		// Relative, so that it holds behind the API server's proxy too.
		w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", "?"+next.RawQuery))
	}
	writeJSON(w, out)
}

// episodeFilter is the query of /api/v1/episodes.
type episodeFilter struct {
	namespace, pod, container, outcome string
	ownerKind, ownerName               string
	since, until                       time.Time
	before                             uint64
	limit                              int
}

// parseEpisodeFilter reads the query; since and until take RFC 3339 times
// or a duration back from now ("1h").
func parseEpisodeFilter(q url.Values, now time.Time) (episodeFilter, error) {
	f := episodeFilter{namespace: q.Get("namespace"), pod: q.Get("pod"), container: q.Get("container"), outcome: q.Get("outcome")}
	if v := q.Get("outcome"); v != "" && !timeline.KnownOutcome(timeline.Outcome(v)) {
		return f, fmt.Errorf("outcome %q: not an outcome (docs/timelines.md)", v)
	}
	if v := q.Get("owner"); v != "" {
		kind, name, ok := strings.Cut(v, "/")
		if !ok {
			kind, name = "", v
		}
		if name == "" {
			return f, fmt.Errorf("owner %q: want KIND/NAME or NAME", v)
		}
		f.ownerKind, f.ownerName = kind, name
	}
	for _, t := range []struct {
		key string
		dst *time.Time
	}{{"since", &f.since}, {"until", &f.until}} {
		v := q.Get(t.key)
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			*t.dst = now.Add(-d)
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, fmt.Errorf("%s %q: want an RFC 3339 time or a duration back from now (1h)", t.key, v)
		}
		*t.dst = at
	}
	for _, n := range []struct {
		key string
		dst func(uint64)
	}{{"before", func(v uint64) { f.before = v }}, {"limit", func(v uint64) { f.limit = int(min(v, 1<<31)) }}} {
		v := q.Get(n.key)
		if v == "" {
			continue
		}
		u, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return f, fmt.Errorf("%s %q: want a non-negative integer", n.key, v)
		}
		n.dst(u)
	}
	return f, nil
}

func (f *episodeFilter) match(ep *timeline.Episode) bool {
	c := &ep.Container
	switch {
	case f.before > 0 && ep.ID >= f.before,
		f.namespace != "" && c.Namespace != f.namespace,
		f.pod != "" && c.Pod != f.pod,
		f.container != "" && c.Name != f.container && !strings.HasPrefix(c.ID, f.container),
		f.outcome != "" && string(ep.Outcome) != f.outcome,
		!f.since.IsZero() && ep.Start.Before(f.since),
		!f.until.IsZero() && ep.Start.After(f.until):
		return false
	}
	if f.ownerName != "" {
		o := ep.Owner
		if o == nil || o.Name != f.ownerName || f.ownerKind != "" && !strings.EqualFold(o.Kind, f.ownerKind) {
			return false
		}
	}
	return true
}

// APIVersion is the version of the agent's HTTP API (docs/api.md).
const APIVersion = apiv1.Version

func (a *Agent) serveInfo(w http.ResponseWriter, _ *http.Request) {
	in := apiv1.Info{APIVersion: APIVersion, Node: a.opts.NodeName, Version: a.opts.Version, StartedAt: a.started,
		Ready: a.ready.Load(), Kubernetes: a.pods != nil}
	a.mu.Lock()
	in.Episodes.Capacity = len(a.episodes)
	in.Episodes.LastID = a.seq
	in.Episodes.Kept = a.next
	if a.full {
		in.Episodes.Kept = len(a.episodes)
	}
	// Episodes complete out of start order: the earliest start of those
	// kept, not the lowest ID's.
	for i := range in.Episodes.Kept {
		if st := a.episodes[i].Start; in.Episodes.OldestAt.IsZero() || st.Before(in.Episodes.OldestAt) {
			in.Episodes.OldestAt = st
		}
	}
	in.Episodes.Evicted = a.seq - uint64(in.Episodes.Kept)
	in.Episodes.EvictedUntil = a.evicted
	a.mu.Unlock()
	writeJSON(w, in)
}

// serveAudit: GET /api/v1/audit?namespace=&pod= audits the containers
// running now (docs/api.md). Someone asked, and an audit is cheap (one
// runtime list, one task-iterator pass), but not free: requests share an
// audit at most auditFresh old, so clients polling it in a loop cost one
// audit per second, not one each. The metric is refreshed on the audit
// interval.
func (a *Agent) serveAudit(w http.ResponseWriter, r *http.Request) {
	res, err := a.currentAudit(r.Context(), auditFresh)
	if err != nil && len(res) == 0 {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	q := r.URL.Query()
	ns, pod := q.Get("namespace"), q.Get("pod")
	out := make([]audit.Result, 0, len(res))
	for i := range res {
		c := &res[i].Container
		if ns != "" && c.Namespace != ns || pod != "" && c.Pod != pod {
			continue
		}
		out = append(out, res[i])
	}
	writeJSON(w, out)
}

// auditFresh is how old an audit /api/v1/audit may answer with.
const auditFresh = time.Second

func (a *Agent) currentAudit(ctx context.Context, maxAge time.Duration) ([]audit.Result, error) {
	a.auditMu.Lock()
	defer a.auditMu.Unlock()
	if a.audits != nil && time.Since(a.auditAt) < maxAge {
		return a.audits, nil
	}
	res, err := audit.RunWith(ctx, a.resolver, audit.Options{ProcRoot: a.opts.ProcRoot, ReadTaskStates: tracer.ReadTaskStates})
	if err != nil && len(res) == 0 {
		return nil, err
	}
	if res == nil {
		res = []audit.Result{}
	}
	a.audits, a.auditAt = res, time.Now()
	a.exp.SetAudit(res)
	return res, err
}

func (a *Agent) auditLoop(ctx context.Context) {
	tick := time.NewTicker(a.opts.AuditInterval)
	defer tick.Stop()
	for first := true; ; first = false {
		if _, err := a.currentAudit(ctx, a.opts.AuditInterval); err != nil {
			a.log.Debug("audit", "error", err)
		}
		if a.opts.Audited != nil {
			a.opts.Audited(first)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
