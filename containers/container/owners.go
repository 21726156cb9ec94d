package container

import (
	"context"
	"errors"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Cgroups that no path pattern names (ParseCgroupPath) are resolved from the
// runtimes themselves: every running container a reachable runtime lists
// (Docker, and each CRI endpoint's containers and pod sandboxes) has a main
// pid, and the cgroup that process is in is its container's, whatever the
// layout: `docker run --cgroup-parent`, a daemon's --cgroup-parent, a
// kubelet's custom cgroup root, a runtime nested in a container, paths as
// a cgroup namespace shows them. The map from those cgroups to containers
// (the owners) is refreshed, never per event and at most once per
// ownersMinRefresh: in the background while cgroups named by a container
// ID that no pattern knows appear (so that a container is known, with its
// main pid, before its stop, often its first event, is read after it
// ended), and on a miss for a container-like cgroup nobody owns. A refresh
// lists each runtime's running containers; only those not seen before,
// and not named by a pattern, cost an inspect and a /proc read.
//
// A process in a container-like cgroup that the refresh does not resolve
// either is counted once per cgroup ([Resolver.UnresolvedCgroups],
// sigscope_unresolved_cgroups_total) and logged once, at warn. Container-like
// means: in a cgroup other than the root (of the v2 or the v1 memory
// hierarchy), and either its pid namespace is not the host's (the timeline
// keeps episodes for such processes as a container's, so an unnamed one is
// worth saying) or its cgroup path holds a full container ID (64 hex
// digits, as every runtime names its containers' cgroups by default). A
// host process in a host cgroup (a service, a login session) is neither,
// and costs nothing more than before.

// ownersMinRefresh is the least time between two refreshes of the owners,
// however many unknown cgroups come.
const ownersMinRefresh = time.Second

// ownersFreshWindow is how long the owners are refreshed in the background
// (once per ownersMinRefresh) after a cgroup no pattern names appeared:
// runc makes a container's cgroup before its runtime lists it as running,
// and the stop of a container sigscope never looked up must find it known.
const ownersFreshWindow = 5 * time.Second

// cgPath is a cgroup in one hierarchy.
type cgPath struct {
	v1   bool   // the v1 memory controller's hierarchy; else cgroup2
	path string // as /proc/PID/cgroup writes it, from the hierarchy's root
}

// owner is a running container as its runtime listed it.
type owner struct {
	id, runtime string
	source      string // the runtime's socket: its containers are forgotten only when it answers without them
	// paths are its main process's cgroups, which no pattern names as this
	// container's (the others go to patterned).
	paths  []cgPath
	listed time.Time // when its runtime last listed it running
}

// unresolvedCgroup is a container-like cgroup nothing resolved.
type unresolvedCgroup struct {
	paths      []cgPath
	pid, pidns uint32 // of the first process seen in it, for the log
	first      time.Time
	// counted: a refresh that began after first did not resolve it either;
	// it was counted and logged.
	counted bool
	wait    time.Duration // before the next try, doubling to the TTL
	retryAt time.Time
}

// cgroupOwners maps the cgroups of the runtimes' main processes to their
// containers. Bounded: at most max containers, and max unresolved cgroups
// remembered (one seen again after its eviction is counted again).
type cgroupOwners struct {
	max int

	mu         sync.Mutex
	byID       map[string]*owner
	byPath     map[cgPath]string // container ID; "" when two containers' main processes share it, naming neither
	last       time.Time         // when the last refresh began
	refreshes  int               // for tests
	unresolved *simplelru.LRU[cgPath, *unresolvedCgroup]
	// patterned: containers whose cgroup a pattern names (seen by the
	// watch or a lookup): a refresh lists them without inspecting them,
	// so that the first refresh on a node of many ordinary containers
	// costs one list per runtime, not an inspect each.
	patterned *simplelru.LRU[string, struct{}]
	counted   uint64
	timer     *time.Timer // a refresh for the cgroups waiting on one
	closed    bool
	// freshUntil: refresh in the background until then (the prefetcher
	// does, woken by wake).
	freshUntil time.Time
	wake       chan struct{}

	call singleflight.Group // one refresh at a time
}

func newCgroupOwners(max int) *cgroupOwners {
	return &cgroupOwners{
		max:        max,
		byID:       make(map[string]*owner),
		byPath:     make(map[cgPath]string),
		unresolved: newLRU[cgPath, *unresolvedCgroup](max),
		patterned:  newLRU[string, struct{}](max),
		wake:       make(chan struct{}, 1),
	}
}

// noteUnknownCgroup notes that a cgroup no pattern names appeared (or
// existed when the watch began): the owners are refreshed in the
// background for ownersFreshWindow, so that a container there is known
// before its first event, its main pid with it.
func (r *Resolver) noteUnknownCgroup() {
	o := r.own
	o.mu.Lock()
	o.freshUntil = r.now().Add(ownersFreshWindow)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// notePatterned notes a container whose cgroup a pattern names.
func (o *cgroupOwners) notePatterned(id string) {
	o.mu.Lock()
	o.patterned.Add(id, struct{}{})
	o.mu.Unlock()
}

// nextBackground says how long until the next background refresh, if one
// is due: at once for the first, then once per ownersMinRefresh until
// freshUntil.
func (o *cgroupOwners) nextBackground(now time.Time) (time.Duration, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.freshUntil.IsZero() {
		return 0, false
	}
	due := now
	if !o.last.IsZero() {
		due = o.last.Add(ownersMinRefresh)
	}
	if due.After(o.freshUntil) {
		return 0, false
	}
	return max(due.Sub(now), 0), true
}

// lookupLocked returns the container owning paths: the deepest of each
// path and its ancestors (a container's own subgroups, systemd's in a
// container) that one container's main process is in. The hierarchy's
// root is nobody's.
func (o *cgroupOwners) lookupLocked(paths []cgPath) (*owner, bool) {
	for _, p := range paths {
		for q := p.path; q != "/" && q != "." && q != ""; q = path.Dir(q) {
			id, ok := o.byPath[cgPath{p.v1, q}]
			if !ok {
				continue
			}
			if id == "" {
				break // shared by two containers: it names neither
			}
			return o.byID[id], true
		}
	}
	return nil, false
}

// rebuildLocked remakes byPath from byID. A cgroup two containers claim
// is the one's that the last refresh listed when the other has ended (a
// runtime that reuses a path for a new container), and nobody's when both
// run: the main processes of two running containers share it.
func (o *cgroupOwners) rebuildLocked() {
	clear(o.byPath)
	for id, ow := range o.byID {
		for _, p := range ow.paths {
			other, ok := o.byPath[p]
			switch {
			case !ok:
				o.byPath[p] = id
			case other == "":
			default:
				prev := o.byID[other]
				running, prevRunning := !ow.listed.Before(o.last), !prev.listed.Before(o.last)
				switch {
				case running && !prevRunning:
					o.byPath[p] = id
				case running == prevRunning:
					o.byPath[p] = ""
				}
			}
		}
	}
}

// containerLike reports whether a process in these cgroups, in pid
// namespace pidns, looks like a container's (see the top of this file).
func containerLike(paths []cgPath, pidns uint32) bool {
	if pidns != 0 && pidns != sigvocab.HostPidNS {
		return true
	}
	for _, p := range paths {
		if hasContainerID(p.path) {
			return true
		}
	}
	return false
}

// fromCgroups resolves a process from its cgroup paths: by pattern, else
// (or when the pattern named an outer container of a nested one) by the
// owners, else it is unresolved. goneAt is passed through for a removed
// cgroup.
func (r *Resolver) fromCgroups(p *sigvocab.Process, l cgroupLines, goneAt time.Time) identified {
	id, runtime, ok, nested := l.parse()
	if ok && !nested {
		r.own.notePatterned(id)
		return identified{id: id, runtime: runtime, found: true, definite: true, goneAt: goneAt}
	}
	paths := l.owned()
	o := r.own
	o.mu.Lock()
	ow, owned := o.lookupLocked(paths)
	o.mu.Unlock()
	if !owned && ok {
		// A container inside the one the pattern named, laid out as no
		// pattern knows: its runtime may list it, if it is reachable.
		r.refreshOwners()
		o.mu.Lock()
		ow, owned = o.lookupLocked(paths)
		o.mu.Unlock()
	}
	switch {
	case owned:
		return identified{id: ow.id, runtime: ow.runtime, found: true, definite: true, goneAt: goneAt}
	case ok:
		return identified{id: id, runtime: runtime, found: true, definite: true, goneAt: goneAt}
	case len(paths) == 0 || !containerLike(paths, p.PidNS):
		return identified{definite: true}
	}
	return r.unresolvedCgroup(p, paths, goneAt)
}

// unresolvedCgroup handles a container-like process that neither a pattern
// nor the owners resolve: it refreshes the owners when allowed and due for
// its cgroup, and counts the cgroup once a refresh begun after it was first
// seen has not resolved it. The identity's retryAt says when to look again.
func (r *Resolver) unresolvedCgroup(p *sigvocab.Process, paths []cgPath, goneAt time.Time) identified {
	o := r.own
	key := paths[0]
	now := r.now()
	o.mu.Lock()
	u, seen := o.unresolved.Get(key)
	if !seen {
		u = &unresolvedCgroup{paths: slices.Clone(paths), pid: p.PID, pidns: p.PidNS, first: now, wait: ownersMinRefresh}
		o.unresolved.Add(key, u)
	}
	if seen && now.Before(u.retryAt) {
		retry := u.retryAt
		o.mu.Unlock()
		return identified{definite: true, retryAt: retry}
	}
	o.mu.Unlock()

	r.refreshOwners()

	o.mu.Lock()
	if ow, ok := o.lookupLocked(paths); ok {
		o.unresolved.Remove(key)
		o.mu.Unlock()
		return identified{id: ow.id, runtime: ow.runtime, found: true, definite: true, goneAt: goneAt}
	}
	var log *unresolvedCgroup
	if !u.counted && !o.last.Before(u.first) {
		log = o.countLocked(u)
	}
	if u.counted {
		u.retryAt = now.Add(u.wait)
		u.wait = min(2*u.wait, r.opts.TTL)
	} else {
		// The last refresh began before this cgroup was seen and the
		// next is not due yet: one will run then, and decide.
		u.retryAt = o.last.Add(ownersMinRefresh)
		r.armRefreshLocked(u.retryAt)
	}
	retry := u.retryAt
	o.mu.Unlock()
	r.logUnresolved(log)
	return identified{definite: true, retryAt: retry}
}

func (o *cgroupOwners) countLocked(u *unresolvedCgroup) *unresolvedCgroup {
	u.counted = true
	o.counted++
	return u
}

func (r *Resolver) logUnresolved(u *unresolvedCgroup) {
	if u == nil {
		return
	}
	p := u.paths[0]
	hier := "cgroup2"
	if p.v1 {
		hier = "memory"
	}
	r.log.Warn("no container runtime names the container of this cgroup: its events carry no container, and a main process that is no namespace init gets no stop episode",
		"cgroup", textsafe.Terminal(p.path), "hierarchy", hier, "pid", u.pid, "pidns", u.pidns)
}

// armRefreshLocked has a refresh run at when, for the cgroups waiting on
// one, unless one is armed already.
func (r *Resolver) armRefreshLocked(when time.Time) {
	o := r.own
	if o.timer != nil || o.closed {
		return
	}
	o.timer = time.AfterFunc(max(when.Sub(r.now()), 0), func() {
		o.mu.Lock()
		o.timer = nil
		closed := o.closed
		o.mu.Unlock()
		if !closed {
			r.refreshOwners()
		}
	})
}

// UnresolvedCgroups is how many distinct container-like cgroups nothing
// resolved to a container since the resolver was made (see owners.go):
// monotonic.
func (r *Resolver) UnresolvedCgroups() uint64 {
	r.own.mu.Lock()
	defer r.own.mu.Unlock()
	return r.own.counted
}

// refreshOwners refreshes the owners unless a refresh began less than
// ownersMinRefresh ago; a caller that comes while one runs waits for it.
func (r *Resolver) refreshOwners() {
	once(&r.own.call, "", func() struct{} {
		r.refreshOwnersNow()
		return struct{}{}
	})
}

func (r *Resolver) refreshOwnersNow() {
	o := r.own
	now := r.now()
	o.mu.Lock()
	if d := now.Sub(o.last); !o.last.IsZero() && d >= 0 && d < ownersMinRefresh {
		o.mu.Unlock()
		return
	}
	o.last = now
	o.refreshes++
	known := make(map[string]bool, len(o.byID)+o.patterned.Len())
	for id := range o.byID {
		known[id] = true
	}
	for _, id := range o.patterned.Keys() {
		known[id] = true
	}
	o.mu.Unlock()

	listed, answered := r.listMains(known)

	o.mu.Lock()
	for id, ow := range listed {
		if old, ok := o.byID[id]; ok {
			old.listed = now
		} else if ow != nil && ow.paths == nil {
			o.patterned.Add(id, struct{}{}) // not needed to resolve anything
		} else if ow != nil {
			ow.listed = now
			o.byID[id] = ow
		}
	}
	for id, ow := range o.byID {
		// A container its runtime no longer lists has ended: its cgroups
		// are kept for the TTL, as the cgroup index keeps removed ones,
		// so that its late events still resolve.
		if answered[ow.source] && now.Sub(ow.listed) >= r.opts.TTL {
			delete(o.byID, id)
		}
	}
	if len(o.byID) > o.max {
		ids := make([]string, 0, len(o.byID))
		for id := range o.byID {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return o.byID[ids[i]].listed.Before(o.byID[ids[j]].listed) })
		for _, id := range ids[:len(ids)-o.max] {
			delete(o.byID, id)
		}
	}
	o.rebuildLocked()
	// The cgroups waiting on a refresh begun after they were seen: resolved
	// now, or counted.
	var resolved []cgPath
	var logs []*unresolvedCgroup
	// Most recently seen first; Peek leaves their order as it is.
	for _, k := range slices.Backward(o.unresolved.Keys()) {
		u, _ := o.unresolved.Peek(k)
		if u.counted || now.Before(u.first) {
			continue
		}
		if _, ok := o.lookupLocked(u.paths); ok {
			resolved = append(resolved, k)
			continue
		}
		logs = append(logs, o.countLocked(u))
		u.retryAt = now.Add(u.wait)
	}
	for _, k := range resolved {
		o.unresolved.Remove(k)
	}
	o.mu.Unlock()
	for _, u := range logs {
		r.logUnresolved(u)
	}
}

// listMains lists the running containers of every reachable runtime, and
// the pod sandboxes of those that have them. The containers in known are
// only noted as still listed; the others are asked for their main pid,
// whose cgroups are read. answered holds the sockets of the runtimes that
// answered the list.
func (r *Resolver) listMains(known map[string]bool) (listed map[string]*owner, answered map[string]bool) {
	listed, answered = make(map[string]*owner), make(map[string]bool)
	// Each refresh inspects at most what the owners can hold.
	budget := r.own.max
	for _, a := range r.apis() {
		if !a.present() || r.isDown(a.endpoint()) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.APITimeout)
		sent := r.now()
		refs, err := a.list(ctx, true)
		cancel()
		if err != nil {
			r.failSince(a.source(), a.endpoint(), err, sent)
			continue
		}
		r.ok(a.source(), a.endpoint())
		answered[a.endpoint()] = true
		for _, ref := range refs {
			if known[ref.id] {
				listed[ref.id] = nil
				continue
			}
			if budget == 0 || r.stopping() {
				break
			}
			budget--
			ctx, cancel := context.WithTimeout(context.Background(), r.opts.APITimeout)
			sent := r.now()
			ans, err := a.describe(ctx, ref)
			cancel()
			if err != nil {
				if !errors.Is(err, errNotFound) {
					r.failSince(a.source(), a.endpoint(), err, sent)
				}
				continue
			}
			if ow := r.learnMain(ans.info, a.endpoint()); ow != nil {
				listed[ref.id] = ow
			}
		}
	}
	return listed, answered
}

// stopping reports whether Close has begun: a refresh then stops asking.
func (r *Resolver) stopping() bool {
	r.own.mu.Lock()
	defer r.own.mu.Unlock()
	return r.own.closed
}

// learnMain makes the owner of a listed container from its main process's
// cgroups, and keeps what the runtime said about it as the container's
// metadata, so that resolving it asks nothing more. Nil when it has no
// main pid (not started yet: listed again at the next refresh) or the
// process cannot be read.
func (r *Resolver) learnMain(info *identity.Info, source string) *owner {
	if info.ID == "" || info.MainPID <= 0 {
		return nil
	}
	data, err := r.fs.ReadFile(filepath.Join(r.opts.ProcRoot, strconv.Itoa(info.MainPID), "cgroup"))
	if err != nil {
		r.procErr(err)
		return nil
	}
	l := splitCgroupFile(string(data))
	ow := &owner{id: info.ID, runtime: info.Runtime, source: source}
	if id, _, ok, nested := l.parse(); !ok || id != info.ID || nested {
		if ow.paths = r.ownPaths(info.MainPID, l.owned()); len(ow.paths) == 0 {
			// Nothing to learn from (a file read as it was written,
			// a process still at the root): not a container its
			// pattern names, so it is asked about again next time.
			return nil
		}
	}
	r.detectRuntime(info)
	now := r.now()
	r.mu.Lock()
	if m, ok := r.metas.Get(info.ID); ok {
		m.info, m.complete, m.fetched = merged(m.info, m.complete, info), true, now
	} else {
		r.metas.Add(info.ID, &meta{info: info, fetched: now, complete: true})
	}
	r.mu.Unlock()
	return ow
}

// ownerOfPath returns the container owning the cgroup at rel (in either
// hierarchy), when the owners know it: for the prefetch of a container
// restarted in the same cgroup.
func (r *Resolver) ownerOfPath(rel string) (id, runtime string, ok bool) {
	o := r.own
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, v1 := range []bool{false, true} {
		if id := o.byPath[cgPath{v1, rel}]; id != "" {
			ow := o.byID[id]
			return ow.id, ow.runtime, true
		}
	}
	return "", "", false
}

// close stops the armed refresh.
func (o *cgroupOwners) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
}
