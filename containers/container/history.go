package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// StopHistory asks the reachable runtimes which stop signals they sent
// between from and to. Docker keeps its last 256 events in memory: its
// record is complete from its oldest kept event on, or for all time when it
// holds fewer (nothing was evicted since the daemon started, and a stop
// begun by a daemon that restarted since then died with it). CRI runtimes
// keep no such record and are never complete. A runtime that does not
// answer is left out: the caller then keeps its cautious reading.
func (r *Resolver) StopHistory(ctx context.Context, from, to time.Time) identity.StopHistory {
	h := identity.StopHistory{From: from, To: to, CompleteSince: map[string]time.Time{}}
	for _, a := range r.apis() {
		hist, ok := a.(stopHistorian)
		if !ok {
			continue
		}
		reqs, since, err := hist.stopHistory(ctx, from, to)
		if err != nil {
			r.log.Debug(a.source()+": reading the event history before tracing began", "error", err)
			continue
		}
		h.CompleteSince[hist.historyRuntime()] = since
		h.Requests = append(h.Requests, reqs...)
	}
	return h
}

// dockerEventsKept is how many events the Docker daemon keeps in memory for
// /events?since= (moby's daemon/events: eventsLimit).
const dockerEventsKept = 256

// dockerEvent is the part of an /events message used here.
type dockerEvent struct {
	Type   string `json:"Type"`
	Action string `json:"Action"`
	Actor  struct {
		ID         string            `json:"ID"`
		Attributes map[string]string `json:"Attributes"`
	} `json:"Actor"`
	TimeNano int64 `json:"timeNano"`
}

// stopHistory reads every event the daemon keeps up to `to` and returns the
// stop signals among them from `from` on ("kill" events whose signal is
// not SIGKILL: docker stop's first signal; docker kill -s TERM too), and
// from when on its record is complete (the zero time: since it started).
func (c *dockerClient) stopHistory(ctx context.Context, from, to time.Time) ([]identity.StopRequest, time.Time, error) {
	// since=1: every event kept (0 would mean "from now on" and stream).
	path := fmt.Sprintf("/events?since=1&until=%d.%09d", to.Unix(), to.Nanosecond())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("docker API %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, time.Time{}, fmt.Errorf("docker API GET /events: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxResponse))
	var (
		out    []identity.StopRequest
		n      int
		oldest time.Time
	)
	for {
		var ev dockerEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, time.Time{}, fmt.Errorf("docker API GET /events: decoding: %w", err)
		}
		n++
		at := time.Unix(0, ev.TimeNano)
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
		if ev.Type != "container" || ev.Action != "kill" || at.Before(from) || at.After(to) {
			continue
		}
		sig := parseEventSignal(ev.Actor.Attributes["signal"])
		if sig == 0 || sig == sigvocab.SIGKILL {
			continue
		}
		out = append(out, identity.StopRequest{ID: ev.Actor.ID, At: at, Signal: sig})
	}
	if n < dockerEventsKept {
		return out, time.Time{}, nil
	}
	return out, oldest, nil
}

// parseEventSignal reads a kill event's signal attribute: a number as
// Docker writes it, or a name; 0 when it is neither.
func parseEventSignal(s string) sigvocab.Signal {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return sigvocab.Signal(n)
	}
	if sig, err := sigvocab.ParseSignal(s); err == nil {
		return sig
	}
	return 0
}
