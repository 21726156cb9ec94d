package container

import (
	"time"
)

// prefetchQueue bounds the containers waiting for early enrichment; past
// it they are enriched at their first lookup instead. It bounds the
// containers waiting to be asked again (recheck) too.
const prefetchQueue = 1024

// A container enriched before its runtime started it has no main pid yet,
// and a pod sandbox being created is not known to containerd yet: the
// runtime is asked again every Options.recheckInterval, at most
// Options.recheckTries times (5 s by default), until it gives a pid or
// forgets the container, so that MainPID is known by the time the
// container is stopped.
//
// A container the runtime could not be asked about (it failed: slow under
// load, restarting, down) is asked again every second until it answers,
// for at most the resolver's TTL, and at once when the runtime answers
// another request. Asking a runtime left alone after a failure (isDown)
// does no I/O, so the runtime itself is asked no more often than its
// outage allows. Docker keeps an exited container until it is removed, so
// even a container stopped meanwhile is named; what is known when its
// episode completes is what the episode says (Known).
const (
	defaultRecheckInterval = 250 * time.Millisecond
	defaultRecheckTries    = 20
)

type prefetchItem struct{ id, runtime string }

type recheck struct {
	runtime string
	tries   int       // asked again and told "not started yet"
	due     time.Time // wall clock
	// failing: the runtime could not be asked (enrichment incomplete);
	// asked again every outageMin until giveUp, tries not counted.
	failing bool
	giveUp  time.Time
}

// queuePrefetch queues the container of the cgroup at rel, if any, for
// enrichment; when the queue is full it is enriched at its first lookup.
func (r *Resolver) queuePrefetch(rel string) {
	id, runtime, ok, nested := splitCgroupPath(rel).parse()
	if !ok || nested {
		// Not named by a pattern (or a container nested in the one it
		// names): a container the owners know restarted in its cgroup
		// has a new main pid to ask for; a cgroup named by a container
		// ID may be a container's that the runtimes list once it runs.
		oid, oruntime, owned := r.ownerOfPath(rel)
		if !owned && hasContainerID(rel) {
			r.noteUnknownCgroup()
		}
		if owned {
			id, runtime, ok = oid, oruntime, true
		}
		if !ok {
			return
		}
	} else {
		r.own.notePatterned(id)
	}
	if r.filesFirst(id, runtime) != nil {
		return // named from its runtime's files; its API is asked next
	}
	select {
	case r.prefetch <- prefetchItem{id, runtime}:
	default:
	}
}

// prefetcher enriches the containers whose cgroup appeared, and asks again
// about those that had no main pid yet when it is time.
func (r *Resolver) prefetcher() {
	defer close(r.prefetchDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	armed := false
	// The owners (owners.go) are refreshed here too, in the background,
	// while cgroups no pattern names keep appearing.
	otimer := time.NewTimer(time.Hour)
	otimer.Stop()
	defer otimer.Stop()
	oarmed := false
	for {
		var due, odue <-chan time.Time
		if armed {
			due = timer.C
		}
		if oarmed {
			odue = otimer.C
		}
		select {
		case <-r.prefetchStop:
			return // what is still queued is not needed any more
		case it := <-r.prefetch:
			r.restarted(it.id, it.runtime)
		case <-r.recheckWake:
		case <-r.own.wake:
		case <-due:
			armed = false
			r.runRechecks()
		case <-odue:
			oarmed = false
			r.refreshOwners()
		}
		if !armed {
			if d, ok := r.nextRecheck(); ok {
				timer.Reset(d)
				armed = true
			}
		}
		if !oarmed {
			if d, ok := r.own.nextBackground(r.now()); ok {
				otimer.Reset(d)
				oarmed = true
			}
		}
	}
}

// queueRecheck has the prefetcher ask the runtime about the container
// again in Options.recheckInterval. Without a prefetcher (no cgroup watch) a
// container keeps what its first enrichment said.
//
// failing says the runtime could not be asked (the enrichment is
// incomplete): the recheck goes on until it answers (rechecked).
func (r *Resolver) queueRecheck(id, runtime string, failing bool) {
	if r.prefetch == nil {
		return
	}
	now := time.Now()
	r.recheckMu.Lock()
	c, ok := r.rechecks[id]
	if !ok && len(r.rechecks) < prefetchQueue {
		c = &recheck{runtime: runtime, due: now.Add(r.opts.recheckInterval)}
		r.rechecks[id] = c
	}
	if c != nil && failing && !c.failing {
		c.failing, c.giveUp = true, now.Add(r.opts.TTL)
	}
	r.recheckMu.Unlock()
	select {
	case r.recheckWake <- struct{}{}:
	default:
	}
}

// Asking reports whether the resolver is still asking container id's
// runtime about it because the runtime failed: an enrichment in flight, or
// a recheck of a failed one queued. A completed episode whose container it
// has no name for yet waits for it a little (the pipeline), rather than go
// out unnamed while a slow runtime's answer is on its way.
func (r *Resolver) Asking(id string) bool {
	r.recheckMu.Lock()
	c := r.rechecks[id]
	failing := c != nil && c.failing
	r.recheckMu.Unlock()
	if failing {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asking[id] > 0
}

// recheckFailedNow makes the containers whose runtime could not be asked
// due now: it has just answered another request.
func (r *Resolver) recheckFailedNow() {
	if r.prefetch == nil {
		return
	}
	now, any := time.Now(), false
	r.recheckMu.Lock()
	for _, c := range r.rechecks {
		if c.failing && c.due.After(now) {
			c.due, any = now, true
		}
	}
	r.recheckMu.Unlock()
	if any {
		select {
		case r.recheckWake <- struct{}{}:
		default:
		}
	}
}

// nextRecheck says how long until the earliest recheck is due.
func (r *Resolver) nextRecheck() (time.Duration, bool) {
	r.recheckMu.Lock()
	defer r.recheckMu.Unlock()
	var first time.Time
	for _, c := range r.rechecks {
		if first.IsZero() || c.due.Before(first) {
			first = c.due
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return max(time.Until(first), 0), true
}

// rechecked decides, under recheckMu, what comes after asking again about
// container id: nothing more once the runtime answered for good, the
// container left the cache, or its tries (or, failing, its time) ran out.
func (r *Resolver) rechecked(id string, c *recheck, known bool, en enrichment) {
	now := time.Now()
	switch {
	case !known || en.complete && !en.again:
		delete(r.rechecks, id)
	case !en.complete:
		if !c.failing {
			c.failing, c.giveUp = true, now.Add(r.opts.TTL)
		}
		if now.After(c.giveUp) {
			delete(r.rechecks, id)
			return
		}
		c.due = now.Add(outageMin)
	default:
		c.failing = false
		if c.tries++; c.tries >= r.opts.recheckTries {
			delete(r.rechecks, id)
			return
		}
		c.due = now.Add(r.opts.recheckInterval)
	}
}

// runRechecks asks the runtimes again about the containers that are due,
// and updates their metadata in place, so that every key resolving to
// them sees it.
func (r *Resolver) runRechecks() {
	now := time.Now()
	type item struct{ id, runtime string }
	var due []item
	r.recheckMu.Lock()
	for id, c := range r.rechecks {
		if !now.Before(c.due) {
			due = append(due, item{id, c.runtime})
		}
	}
	r.recheckMu.Unlock()
	for _, it := range due {
		select {
		case <-r.prefetchStop:
			return
		default:
		}
		en := r.enrich(it.id, it.runtime)
		r.mu.Lock()
		m, known := r.metas.Get(it.id)
		if known && (en.complete || en.info.FromFiles) {
			m.info = merged(m.info, m.complete, en.info)
			m.complete = m.complete || en.complete
		}
		if known {
			m.noteWhy(en)
		}
		r.mu.Unlock()
		r.recheckMu.Lock()
		if c := r.rechecks[it.id]; c != nil {
			r.rechecked(it.id, c, known, en)
		}
		r.recheckMu.Unlock()
	}
}
