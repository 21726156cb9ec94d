package agent

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter"
)

// /metrics reports the ring of episodes against --max-episodes, the
// engine's open episodes and exec logs against their bound, and the
// resolver's caches.
func TestCacheMetrics(t *testing.T) {
	eps := make([]timeline.Episode, 5)
	for i := range eps {
		eps[i] = timeline.Episode{Start: time.Unix(int64(i), 0), Outcome: timeline.OutcomeExited}
	}
	a, h := apiAgent(t, 3, eps)
	got := map[string]exporter.Cache{}
	for _, c := range a.caches() {
		got[c.Name] = c
	}
	for _, want := range []exporter.Cache{
		{Name: "episodes", Entries: 3, Capacity: 3},
		{Name: "timeline_open_episodes", Entries: 0, Capacity: timeline.DefaultMaxOpen},
		{Name: "timeline_exec_logs", Entries: 0, Capacity: timeline.DefaultMaxOpen},
	} {
		if got[want.Name] != want {
			t.Errorf("%s: %+v, want %+v", want.Name, got[want.Name], want)
		}
	}
	for _, n := range []string{"resolver_processes", "resolver_containers"} {
		if _, ok := got[n]; !ok {
			t.Errorf("no cache %q", n)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range []string{`sigscope_cache_entries{cache="episodes"} 3`, `sigscope_cache_capacity{cache="episodes"} 3`, "go_gc_heap_live_bytes "} {
		if !strings.Contains(rec.Body.String(), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}
