package agent

import (
	"bytes"
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
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter/journal"
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
	if err == nil && !more {
		lines, oldest, more, err = a.fromJournal(&f, q.Limit, lines, oldest)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if more {
		w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", apiv1.NextPage(query, oldest)))
	}
	writeEpisodes(w, lines)
}

// fromJournal adds to a page of the ring's matches (lines, oldest first,
// and the oldest's id) the older matches of the node journal, when the
// query's window (since) reaches before what the ring keeps: a rollout's
// report an hour back on a busy node. Only with a window, so that a plain
// listing stays the ring's; at most the page's limit, or the ring's
// capacity without one, newest first, with more set when older matches are
// left for the next page. The journal is read whole (--journal-dir's
// files, 56 MiB at most by default), each line's id first and only lines
// that name the query's namespace, pod or owner decoded.
func (a *Agent) fromJournal(f *episodeFilter, limit int, lines [][]byte, oldest uint64) ([][]byte, uint64, bool, error) {
	if a.opts.JournalDir == "" || f.since.IsZero() {
		return lines, oldest, false, nil
	}
	pushed, below := a.ring.pushedOut(f.since)
	if !pushed {
		return lines, oldest, false, nil
	}
	if f.q.Before > 0 {
		below = min(below, f.q.Before)
	}
	room := a.opts.MaxEpisodes
	if limit > 0 {
		room = limit - len(lines)
	}
	if room <= 0 {
		return lines, oldest, true, nil // the next page begins below this one's oldest
	}
	var needles [][]byte
	for _, s := range []string{f.q.Namespace, f.q.Pod, f.q.Owner.Name} {
		if s != "" {
			b, _ := json.Marshal(s)
			needles = append(needles, b)
		}
	}
	// The journal is oldest first: a ring of the room's newest matches,
	// the older ones left for the next page.
	ring := make([][]byte, room)
	next, n := 0, 0
	more := false
	err := journal.Scan(a.opts.JournalDir, func(id uint64, line []byte) error {
		if id >= below {
			return nil
		}
		for _, n := range needles {
			if !bytes.Contains(line, n) {
				return nil
			}
		}
		var ep timeline.Episode
		if json.Unmarshal(line, &ep) != nil || !f.match(&ep) {
			return nil
		}
		if n == room {
			more = true
		}
		ring[next] = append(append(ring[next][:0], line...), '\n') // as the ring's lines (apiv1.EpisodeLine)
		next, n = (next+1)%room, min(n+1, room)
		return nil
	})
	if err != nil {
		return nil, 0, false, fmt.Errorf("reading the node journal: %w", err)
	}
	if n == 0 {
		return lines, oldest, false, nil
	}
	kept := make([][]byte, 0, n+len(lines))
	for i := range n {
		kept = append(kept, ring[(next-n+i+room)%room])
	}
	first, err := lineIDOf(kept[0])
	if err != nil {
		return nil, 0, false, err
	}
	return append(kept, lines...), first, more, nil
}

// lineIDOf is a journal line's episode id.
func lineIDOf(line []byte) (uint64, error) {
	var head struct {
		ID uint64 `json:"id"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return 0, err
	}
	return head.ID, nil
}

func (a *Agent) serveInfo(w http.ResponseWriter, _ *http.Request) {
	in := apiv1.Info{APIVersion: APIVersion, Node: a.opts.NodeName, Version: a.opts.Version, StartedAt: a.started,
		Ready: a.ready.Load(), Kubernetes: a.pods != nil}
	a.ring.info(&in)
	in.Episodes.Journal = a.opts.JournalDir != ""
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
