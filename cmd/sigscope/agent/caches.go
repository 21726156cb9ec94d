package agent

import (
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter"
)

// caches reports the agent's bounded caches and queues for
// sigscope_cache_entries and sigscope_cache_capacity (docs/metrics.md):
// the resolver's, the timeline engine's, and the ring of episodes.
func (a *Agent) caches() []exporter.Cache {
	var out []exporter.Cache
	for _, c := range a.resolver.Caches() {
		out = append(out, exporter.Cache{Name: c.Name, Entries: c.Entries, Capacity: c.Capacity})
	}
	var eng timeline.Stats
	if s := a.engineStats.Load(); s != nil {
		eng = *s
	}
	out = append(out,
		exporter.Cache{Name: "timeline_open_episodes", Entries: eng.Open, Capacity: timeline.DefaultMaxOpen},
		exporter.Cache{Name: "timeline_exec_logs", Entries: eng.ExecLogs, Capacity: timeline.DefaultMaxOpen})
	kept, capacity := a.ring.size()
	return append(out, exporter.Cache{Name: "episodes", Entries: kept, Capacity: capacity})
}

// engineSnapshotEvery is how many events may pass between two copies of
// the engine's counters: the engine belongs to the tracer's goroutine, so
// scrapes read a copy, taken there when the ring is drained, when
// episodes complete, and every so many events during a storm that never
// lets the ring drain.
const engineSnapshotEvery = 4096

// snapshotEngine copies the engine's counters for scrapes. Call it on the
// tracer's goroutine only.
func (a *Agent) snapshotEngine(e *timeline.Engine) {
	if e == nil {
		return
	}
	s := e.Stats()
	a.engineStats.Store(&s)
}
