package container

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/procsig"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// unknownTTL is how long "no trace of this process" is cached: short,
// because the cgroup index may learn the cgroup meanwhile.
const unknownTTL = time.Second

// KeyOf returns the cache key an event's process carries. A cgroup v2 id
// of 1 (the root, what every task has on a host whose v2 tree is unused)
// identifies nothing and is dropped.
func KeyOf(p *sigvocab.Process) Key {
	k := Key{PidNS: p.PidNS, CgroupV1ID: p.CgroupV1ID}
	if p.CgroupID > 1 {
		k.CgroupID = p.CgroupID
	}
	return k
}

// NamespaceEnded tells the resolver that pid namespace ns has ended: the
// kernel said its init's exit was its last (the tracer's ns_empty record,
// after which nothing of the namespace comes). The answer cached under the
// namespace alone, for events that carry no cgroup id (a kernel without
// the memory controller on a host whose cgroup2 tree is unused), is
// dropped: the next namespace to get the inode is another, and may be
// another container's. Answers keyed by a cgroup id stay: those ids are
// never reused.
func (r *Resolver) NamespaceEnded(ns uint32) {
	r.mu.Lock()
	r.entries.Remove(Key{PidNS: ns})
	r.mu.Unlock()
}

// flightKey is k as the string a singleflight.Group is keyed by: the three
// ids at fixed width. Made on a miss only, never on a cache hit.
func (k Key) flightKey() string {
	var b [20]byte
	binary.LittleEndian.PutUint32(b[0:], k.PidNS)
	binary.LittleEndian.PutUint64(b[4:], k.CgroupID)
	binary.LittleEndian.PutUint64(b[12:], k.CgroupV1ID)
	return string(b[:])
}

// Lookup returns the container p belongs to, or nil for a process outside
// any container (and for one whose container cannot be found any more). The
// returned Info is shared: treat it as read-only.
//
// Processes are cached by [KeyOf]: all three ids together, because each
// alone is ambiguous (pods share a pid namespace across containers,
// --pid=host containers share the host's, and a hybrid host gives every
// task the same v2 id). A process that carries no key at all is resolved
// from /proc every time.
func (r *Resolver) Lookup(p *sigvocab.Process) *identity.Info {
	return r.LookupAt(p, r.now())
}

// LookupAt is Lookup with the caller's reading of the clock, against which
// a cached answer's age is judged. A caller resolving a stream of events
// reads the clock once for many of them: on a VM a reading costs ~50 ns,
// two per signal at a million signals a second. now may be a little stale
// (a cached answer then lives that much longer); a miss reads the clock
// itself.
func (r *Resolver) LookupAt(p *sigvocab.Process, now time.Time) *identity.Info {
	if p == nil {
		return nil
	}
	key := KeyOf(p)
	if key == (Key{}) {
		if p.PID == 0 {
			return nil
		}
		return r.resolve(p, key, nil)
	}
	r.mu.Lock()
	e, ok := r.entries.Get(key)
	if ok && now.Before(e.expires) {
		var info *identity.Info
		if m := e.meta; m != nil {
			info = m.info
			if !m.complete && !m.retrying && !now.Before(m.retryAt) && !r.closing {
				// Enrichment failed earlier: try again in the background
				// so that a hit never waits on a runtime. Close waits
				// for it.
				m.retrying = true
				r.reenriching.Add(1)
				go func() {
					defer r.reenriching.Done()
					r.reenrich(m)
				}()
			}
		}
		r.mu.Unlock()
		return info
	}
	r.mu.Unlock()
	var expired *entry
	if ok {
		expired = e
	}
	return once(&r.keyCall, key.flightKey(), func() *identity.Info {
		// Another caller may have resolved key between our miss and now.
		r.mu.Lock()
		if e, ok := r.entries.Get(key); ok && r.now().Before(e.expires) && e != expired {
			var info *identity.Info
			if e.meta != nil {
				info = e.meta.info
			}
			r.mu.Unlock()
			return info
		}
		r.mu.Unlock()
		return r.resolve(p, key, expired)
	})
}

// resolve handles a miss: identify the container, enrich it, cache both.
// old is the expired entry for key, if any.
func (r *Resolver) resolve(p *sigvocab.Process, key Key, old *entry) *identity.Info {
	c := r.identify(p, key)
	now := r.now()
	if !c.found {
		e := &entry{expires: now.Add(r.opts.TTL)}
		switch {
		case !c.retryAt.IsZero():
			// Container-like, and nothing resolved it yet: looked at again
			// when its cgroup is due another try (owners.go).
			e.expires = c.retryAt
		case c.definite:
		case old != nil && old.meta != nil && !old.gone:
			// No trace of it any more: the container has ended. Keep
			// answering with what was known for one more TTL, so late
			// events (the cascade, the init's exit) still resolve.
			e.meta, e.gone = old.meta, true
		default:
			e.expires = now.Add(unknownTTL)
		}
		return r.store(key, e)
	}
	e := &entry{meta: r.metaFor(c.id, c.runtime), expires: now.Add(r.opts.TTL)}
	if !c.goneAt.IsZero() {
		// Known from a removed cgroup: the container ended then, and is
		// answered for one TTL from its end.
		e.gone, e.expires = true, c.goneAt.Add(r.opts.TTL)
	}
	return r.store(key, e)
}

// store caches e under key and returns its Info, read under the lock that
// background re-enrichment replaces it under.
func (r *Resolver) store(key Key, e *entry) *identity.Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	if key != (Key{}) {
		r.entries.Add(key, e)
	}
	if e.meta == nil {
		return nil
	}
	return e.meta.info
}

// identified is what identify learnt of a process.
type identified struct {
	id, runtime string
	found       bool // in a container
	// definite: the answer came from the process or its cgroup (so
	// !found && definite is a host process), not from a lack of traces.
	definite bool
	goneAt   time.Time // when the answer came from a removed cgroup: its removal
	// retryAt: a container-like process nothing resolved (owners.go), to be
	// looked at again then.
	retryAt time.Time
}

// identify finds a process's container ID and runtime.
func (r *Resolver) identify(p *sigvocab.Process, key Key) identified {
	if p.PID != 0 {
		dir := filepath.Join(r.opts.ProcRoot, strconv.FormatUint(uint64(p.PID), 10))
		alive := true
		if key.PidNS != 0 {
			// The pid may belong to another process by now: only trust
			// /proc/PID when its pid namespace is the event's.
			link, err := r.fs.Readlink(filepath.Join(dir, "ns", "pid"))
			switch {
			case err != nil:
				alive = false
				r.procErr(err)
			case link != "pid:["+strconv.FormatUint(uint64(key.PidNS), 10)+"]":
				alive = false
			}
		}
		if alive {
			data, err := r.fs.ReadFile(filepath.Join(dir, "cgroup"))
			if err != nil {
				r.procErr(err)
			} else if l := splitCgroupFile(string(data)); r.sameCgroups(key, l) {
				return r.fromCgroups(p, l, time.Time{})
			}
		}
	}
	// The process is gone; its cgroup may not be.
	for _, c := range []struct {
		id uint64
		v1 bool
	}{{key.CgroupID, false}, {key.CgroupV1ID, true}} {
		if c.id == 0 {
			continue
		}
		path, goneAt, ok, err := r.cg.find(c.id, c.v1)
		if err != nil {
			r.fail(SourceCgroup, "", err)
		}
		if ok {
			l := cgroupLines{v2: path}
			if c.v1 {
				l = cgroupLines{memory: path}
			}
			return r.fromCgroups(p, l, goneAt)
		}
	}
	return identified{}
}

// sameCgroups reports whether the cgroups /proc/PID/cgroup names (l) can
// be the event's (key): a pid and a pid namespace inode are both reused as
// soon as they are free, so a process that exited may have left its pid to
// a process of a new namespace with the same inode, in another cgroup. A
// cgroup id is never reused: when the index knows the cgroup at l's path
// and its id is not the event's, /proc shows another process, and the
// event's is looked for by its cgroup id instead.
func (r *Resolver) sameCgroups(key Key, l cgroupLines) bool {
	for _, c := range []struct {
		id   uint64
		path string
		v1   bool
	}{{key.CgroupID, l.v2, false}, {key.CgroupV1ID, l.memory, true}} {
		if c.id == 0 || c.path == "" {
			continue
		}
		if id, ok := r.cg.idOf(c.path, c.v1); ok && id != c.id {
			return false
		}
	}
	return true
}

// procErr counts a /proc read that failed for another reason than the
// process having exited.
func (r *Resolver) procErr(err error) {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return
	}
	r.fail(SourceProc, "", procsig.NeedsPtrace(err))
}
