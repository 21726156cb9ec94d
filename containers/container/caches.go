package container

// CacheSize is how full one of the resolver's bounded caches or queues is.
type CacheSize struct {
	Name     string
	Entries  int
	Capacity int
}

// Caches reports the resolver's bounded caches and queues (docs/metrics.md,
// sigscope_cache_entries): what it remembers grows with the containers and
// processes of the node, so an agent that runs for months shows here that
// it stays within its bounds. The cgroups that exist now are not listed:
// they are the node's, not a cache.
func (r *Resolver) Caches() []CacheSize {
	r.mu.Lock()
	out := []CacheSize{
		{"resolver_processes", r.entries.Len(), r.opts.MaxEntries},
		{"resolver_containers", r.metas.Len(), r.opts.MaxEntries},
	}
	r.mu.Unlock()
	r.own.mu.Lock()
	out = append(out,
		CacheSize{"resolver_cgroup_owners", len(r.own.byID), r.own.max},
		CacheSize{"resolver_unresolved_cgroups", r.own.unresolved.Len(), r.own.max})
	r.own.mu.Unlock()
	r.recheckMu.Lock()
	out = append(out, CacheSize{"resolver_rechecks", len(r.rechecks), prefetchQueue})
	r.recheckMu.Unlock()
	if r.prefetch != nil {
		out = append(out, CacheSize{"resolver_prefetch_queue", len(r.prefetch), cap(r.prefetch)})
	}
	r.cg.mu.Lock()
	for i, name := range [...]string{"cgroups_removed_v2", "cgroups_removed_v1"} {
		if h := r.cg.hier[i]; h != nil {
			out = append(out, CacheSize{name, h.gone.Len(), r.cg.maxGone})
		}
	}
	if r.watch != nil {
		n, max := r.watch.watches()
		out = append(out, CacheSize{"cgroup_watches", n, max})
	}
	r.cg.mu.Unlock()
	return out
}
