package exporter

import (
	"testing"
)

const (
	helpCacheEntries  = "# HELP sigscope_cache_entries Entries held now by one of the agent's bounded caches and queues (cache): never above sigscope_cache_capacity.\n# TYPE sigscope_cache_entries gauge\n"
	helpCacheCapacity = "# HELP sigscope_cache_capacity The most entries one of the agent's bounded caches and queues (cache) holds.\n# TYPE sigscope_cache_capacity gauge\n"
)

// The caches the agent reports are exported as they are at each scrape;
// with pod labels the exporter adds its own capped series.
func TestCaches(t *testing.T) {
	n := 2
	e := New(Options{Caches: func() []Cache {
		return []Cache{{Name: "episodes", Entries: n, Capacity: 1000}, {Name: "resolver_processes", Entries: 7, Capacity: 4096}}
	}})
	reg := register(t, e)
	compare(t, reg, helpCacheCapacity+`
sigscope_cache_capacity{cache="episodes"} 1000
sigscope_cache_capacity{cache="resolver_processes"} 4096
`+helpCacheEntries+`
sigscope_cache_entries{cache="episodes"} 2
sigscope_cache_entries{cache="resolver_processes"} 7
`, "sigscope_cache_entries", "sigscope_cache_capacity")
	n = 1000
	compare(t, reg, helpCacheEntries+`
sigscope_cache_entries{cache="episodes"} 1000
sigscope_cache_entries{cache="resolver_processes"} 7
`, "sigscope_cache_entries")

	e = New(Options{PodLabels: true, MaxSeries: 5})
	reg = register(t, e)
	e.ObserveEvent(oom(), nil)
	compare(t, reg, helpCacheEntries+`
sigscope_cache_entries{cache="series:sigscope_container_stop_duration_seconds"} 0
sigscope_cache_entries{cache="series:sigscope_container_oom_kills_total"} 0
sigscope_cache_entries{cache="series:sigscope_container_stops_total"} 0
sigscope_cache_entries{cache="series:sigscope_oom_kills_total"} 1
sigscope_cache_entries{cache="series:sigscope_pid1_ignored_signals_total"} 0
sigscope_cache_entries{cache="series:sigscope_pidns_cascade_kills_total"} 0
sigscope_cache_entries{cache="series:sigscope_process_exits_total"} 0
sigscope_cache_entries{cache="series:sigscope_signals_total"} 0
sigscope_cache_entries{cache="series:sigscope_stop_connections_total"} 0
sigscope_cache_entries{cache="series:sigscope_stop_endpoint_lag_seconds"} 0
sigscope_cache_entries{cache="series:sigscope_stop_probe_connections_total"} 0
`, "sigscope_cache_entries")
}
