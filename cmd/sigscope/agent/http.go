package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/sync/errgroup"

	apiv1 "github.com/sigscope/sigscope/api/v1"
)

// APIVersion is the version of the agent's HTTP API (docs/api.md).
const APIVersion = apiv1.Version

// shutdownGrace is how long requests in flight get to finish when the
// agent stops; then their connections are closed.
const shutdownGrace = 5 * time.Second

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

// serveHTTP starts the main server and the health listener, if any, in g.
// Each stops when ctx ends; a server that fails returns its error, which
// ends ctx for the rest of the agent.
func (a *Agent) serveHTTP(ctx context.Context, g *errgroup.Group) {
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	flags := &web.FlagConfig{WebListenAddresses: &a.opts.ListenAddresses, WebConfigFile: &a.opts.WebConfigFile}
	g.Go(func() error {
		var err error
		if l := a.opts.Listener; l != nil {
			err = web.Serve(l, srv, flags, a.log)
			// web.Serve returns bad TLS files without closing l.
			_ = l.Close()
		} else {
			err = web.ListenAndServe(srv, flags, a.log)
		}
		return serveErr(err)
	})
	g.Go(func() error { return shutdownOnDone(ctx, srv) })

	l := a.opts.HealthListener
	if l == nil && a.opts.HealthAddress != "" {
		var err error
		if l, err = net.Listen("tcp", a.opts.HealthAddress); err != nil {
			g.Go(func() error { return serveErr(fmt.Errorf("--web.health-address: %w", err)) })
			return
		}
	}
	if l == nil {
		return
	}
	mux := http.NewServeMux()
	a.healthRoutes(mux)
	health := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g.Go(func() error {
		if err := health.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return serveErr(fmt.Errorf("health listener: %w", err))
		}
		return nil
	})
	g.Go(func() error { return shutdownOnDone(ctx, health) })
}

// serveErr is a server's return as the agent's error: nil once it was shut
// down.
func serveErr(err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serving HTTP: %w", err)
}

// shutdownOnDone waits for ctx to end, then shuts srv down: requests in
// flight get shutdownGrace to finish, then their connections are closed,
// so that no handler outlives the agent by more than that.
func shutdownOnDone(ctx context.Context, srv *http.Server) error {
	<-ctx.Done()
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// serveEpisodes: GET /api/v1/episodes, docs/api.md. The newest `limit`
// matching episodes (all without it) older than the `before` cursor, oldest
// first, as a JSON array; a Link header with rel="next" points to the older
// page when more match.
func (a *Agent) serveEpisodes(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	q, err := apiv1.ParseEpisodeQuery(query)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f := newEpisodeFilter(q, time.Now())
	lines, oldest, more, err := a.ring.matching(&f, q.Limit)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if more {
		w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", apiv1.NextPage(query, oldest)))
	}
	writeEpisodes(w, lines)
}

func (a *Agent) serveInfo(w http.ResponseWriter, _ *http.Request) {
	in := apiv1.Info{APIVersion: APIVersion, Node: a.opts.NodeName, Version: a.opts.Version, StartedAt: a.started,
		Ready: a.ready.Load(), Kubernetes: a.pods != nil}
	a.ring.info(&in)
	writeJSON(w, in)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
