package container

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sigscope/sigscope/internal/langrt"
	"github.com/sigscope/sigscope/internal/sigvocab"
)

// Defaults for [Options].
const (
	DefaultProcRoot     = "/proc"
	DefaultCgroupRoot   = "/sys/fs/cgroup"
	DefaultDockerSocket = "/var/run/docker.sock"
	DefaultMaxEntries   = 4096
	DefaultTTL          = 5 * time.Minute
	DefaultAPITimeout   = 2 * time.Second

	// unknownTTL is how long "no trace of this process" is cached: short,
	// because the cgroup index may learn the cgroup meanwhile.
	unknownTTL = time.Second
	// prefetchQueue bounds the containers waiting for early enrichment;
	// past it they are enriched at their first lookup instead. It bounds
	// the containers waiting to be asked again (recheck) too.
	prefetchQueue = 1024
)

// A container enriched before its runtime started it has no main pid yet,
// and a pod sandbox being created is not known to containerd yet: the
// runtime is asked again every recheckInterval, at most recheckTries times
// (5 s), until it gives a pid or forgets the container, so that MainPID is
// known by the time the container is stopped. Variables for the tests.
var (
	recheckInterval = 250 * time.Millisecond
	recheckTries    = 20
)

// DefaultCRISockets are where the CRI runtimes listen by default:
// containerd, CRI-O, the containerd of k3s and RKE2, and cri-dockerd
// (Docker behind the CRI). Sockets that do not exist are skipped.
var DefaultCRISockets = []string{
	"/run/containerd/containerd.sock",
	"/var/run/crio/crio.sock",
	"/run/k3s/containerd/containerd.sock",
	"/run/cri-dockerd.sock",
}

// Error sources counted by [Resolver.Errors].
const (
	SourceDocker = "docker" // the Docker Engine API
	SourceCRI    = "cri"    // a CRI endpoint (containerd, CRI-O)
	SourceProc   = "proc"   // /proc reads other than "the process is gone"
	SourceCgroup = "cgroup" // walking the cgroup filesystem
)

// Options configure a [Resolver]. Zero values take the defaults.
type Options struct {
	ProcRoot   string // default "/proc"
	CgroupRoot string // where cgroup hierarchies are mounted; default "/sys/fs/cgroup"
	// DockerSocket is the Docker Engine API socket; "" is
	// DefaultDockerSocket. CRISockets are the CRI endpoints asked in
	// order; nil is DefaultCRISockets, empty is none. A "unix://" prefix
	// (the kubelet's form) is accepted. A socket given explicitly that
	// does not exist is warned about once; a default one is a runtime
	// this node does not run.
	DockerSocket string
	CRISockets   []string
	// NoRuntimeAPI turns enrichment off: IDs and runtimes come from cgroup
	// paths only, and nothing is dialled.
	NoRuntimeAPI bool
	// NoCgroupWatch turns off the inotify watch of the cgroup tree, for a
	// one-shot user (audit) whose processes are all alive. Without it,
	// a process that is gone resolves only if its cgroup is still there
	// or was seen by an earlier walk.
	NoCgroupWatch bool

	MaxEntries int           // bound of each cache (keys, and containers); default 4096
	TTL        time.Duration // how long a resolution is reused, and kept after a container ends; default 5m
	APITimeout time.Duration // per runtime API call; default 2s
	Logger     *slog.Logger  // default slog.Default()
}

// Resolver maps processes to containers. It is safe for concurrent use.
//
// A Lookup that hits the cache takes one lock and does no I/O. A miss reads
// /proc/PID (the pid namespace link, to notice a reused pid, and the cgroup
// file) or, when the process is gone, finds the cgroup by id; then, once
// per container per TTL, asks the container's runtime for metadata.
type Resolver struct {
	opts          Options
	log           *slog.Logger
	fs            procFS
	now           func() time.Time
	retryInterval time.Duration // before asking a failed runtime again
	cg            *cgroupIndex
	own           *cgroupOwners // cgroups no pattern names, from the runtimes' main processes (owners.go)
	watch         *cgroupWatch  // nil with NoCgroupWatch or when inotify failed
	docker        *dockerClient // nil with NoRuntimeAPI
	cri           []*criClient

	// Containers whose cgroup appeared are enriched in the background at
	// once, while the runtime still knows them: docker rm -f forgets a
	// container within milliseconds of its end.
	prefetch     chan prefetchItem // nil without a watch or a runtime API
	prefetchStop chan struct{}
	prefetchDone chan struct{}
	closeOnce    sync.Once

	// Containers the runtime is asked about again by the prefetcher (no
	// main pid yet, or not known yet), by container ID; at most
	// prefetchQueue.
	recheckMu   sync.Mutex
	rechecks    map[string]*recheck
	recheckWake chan struct{} // a recheck was added

	mu      sync.Mutex
	entries *lru[Key, *entry]   // by event key
	metas   *lru[string, *meta] // by container ID
	keyCall flight[Key, *Info]
	idCall  flight[string, *meta]

	errMu   sync.Mutex
	errs    map[string]uint64
	warned  map[string]bool
	downTil map[string]time.Time
	// downSock is a failed endpoint's socket file as it was when it
	// failed: a runtime that restarts makes a new one, and is asked again
	// at once instead of after retryInterval.
	downSock map[string]fileID
}

// entry is the resolution of one Key.
type entry struct {
	meta    *meta // nil: not a container
	expires time.Time
	gone    bool // kept past its expiry because the container has ended
}

// meta is what is known about one container, shared by every key that
// resolves to it.
type meta struct {
	info     *Info // replaced, never mutated: callers may hold the old one
	fetched  time.Time
	complete bool      // the runtime answered (or there is no runtime to ask)
	retryAt  time.Time // when !complete: not before
	retrying bool
}

type prefetchItem struct{ id, runtime string }

type recheck struct {
	runtime string
	tries   int
	due     time.Time // wall clock
}

// enrichment is what asking the runtimes about a container gave.
type enrichment struct {
	info *Info
	// complete: the runtime answered (or there is no runtime to ask);
	// false when one that should know could not be asked.
	complete bool
	// again: ask soon again. The runtime knows the container but has not
	// started it (no main pid yet), or knows nothing of it yet (containerd
	// registers a pod sandbox only once it runs).
	again bool
}

// procFS is the resolver's only access to /proc, so that tests can count
// reads.
type procFS interface {
	ReadFile(name string) ([]byte, error)
	Readlink(name string) (string, error)
}

type osFS struct{}

func (osFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }
func (osFS) Readlink(name string) (string, error) { return os.Readlink(name) }

// NewResolver returns a resolver. Unless opts.NoCgroupWatch, it walks the
// cgroup tree and watches it from now on, so that the containers of
// processes gone before their lookup are still found, and enriches the
// containers it sees in the background. Call Close to stop that.
func NewResolver(opts Options) *Resolver { return newResolver(opts, osFS{}, time.Now) }

// newResolver is NewResolver with the /proc access and the clock the tests
// replace, set before any goroutine starts.
func newResolver(opts Options, fs procFS, now func() time.Time) *Resolver {
	if opts.ProcRoot == "" {
		opts.ProcRoot = DefaultProcRoot
	}
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = DefaultCgroupRoot
	}
	explicitDocker, explicitCRI := opts.DockerSocket != "", opts.CRISockets != nil
	opts.DockerSocket = strings.TrimPrefix(opts.DockerSocket, "unix://")
	if opts.DockerSocket == "" {
		opts.DockerSocket = DefaultDockerSocket
	}
	if opts.CRISockets == nil {
		opts.CRISockets = DefaultCRISockets
	}
	var cri []string
	for _, s := range opts.CRISockets {
		if s = strings.TrimPrefix(s, "unix://"); s != "" && !slices.Contains(cri, s) {
			cri = append(cri, s)
		}
	}
	opts.CRISockets = cri
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.APITimeout <= 0 {
		opts.APITimeout = DefaultAPITimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Resolver{
		opts:          opts,
		log:           opts.Logger.With("component", "container"),
		fs:            fs,
		now:           now,
		retryInterval: 30 * time.Second,
		entries:       newLRU[Key, *entry](opts.MaxEntries),
		metas:         newLRU[string, *meta](opts.MaxEntries),
		errs:          make(map[string]uint64),
		warned:        make(map[string]bool),
		downTil:       make(map[string]time.Time),
		downSock:      make(map[string]fileID),
		rechecks:      make(map[string]*recheck),
		recheckWake:   make(chan struct{}, 1),
	}
	r.own = newCgroupOwners(opts.MaxEntries)
	r.cg = newCgroupIndex(opts.CgroupRoot, opts.MaxEntries, opts.TTL, func() time.Time { return r.now() })
	if !opts.NoRuntimeAPI {
		r.docker = newDockerClient(opts.DockerSocket)
		for _, s := range opts.CRISockets {
			r.cri = append(r.cri, newCRIClient(s))
		}
		var given []string
		if explicitDocker {
			given = append(given, opts.DockerSocket)
		}
		if explicitCRI {
			given = append(given, opts.CRISockets...)
		}
		r.warnMissing(given)
	}
	if !opts.NoCgroupWatch {
		onNew := func(string) {}
		if r.docker != nil {
			r.prefetch = make(chan prefetchItem, prefetchQueue)
			r.prefetchStop, r.prefetchDone = make(chan struct{}), make(chan struct{})
			go r.prefetcher()
			onNew = r.queuePrefetch
		}
		w, err := r.cg.watch(onNew, func(err error) { r.fail(SourceCgroup, "", err) })
		if err != nil {
			r.fail(SourceCgroup, "", err)
		}
		r.watch = w
	}
	return r
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
// again in recheckInterval. Without a prefetcher (no cgroup watch) a
// container keeps what its first enrichment said.
func (r *Resolver) queueRecheck(id, runtime string) {
	if r.prefetch == nil {
		return
	}
	r.recheckMu.Lock()
	if _, ok := r.rechecks[id]; !ok && len(r.rechecks) < prefetchQueue {
		r.rechecks[id] = &recheck{runtime: runtime, due: time.Now().Add(recheckInterval)}
	}
	r.recheckMu.Unlock()
	select {
	case r.recheckWake <- struct{}{}:
	default:
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
		m, known := r.metas.get(it.id)
		if known && en.complete {
			m.info, m.complete = merged(m.info, m.complete, en.info), true
		}
		r.mu.Unlock()
		r.recheckMu.Lock()
		if c := r.rechecks[it.id]; c != nil {
			c.tries++
			c.due = time.Now().Add(recheckInterval)
			if !known || !en.again && en.complete || c.tries >= recheckTries {
				delete(r.rechecks, it.id)
			}
		}
		r.recheckMu.Unlock()
	}
}

// Close releases the runtime connections. The resolver still answers from
// its cache and cgroup paths afterwards, but asks no runtime.
func (r *Resolver) Close() error {
	var errs []error
	r.closeOnce.Do(func() {
		r.own.close()
		if r.watch != nil {
			errs = append(errs, r.watch.close())
		}
		if r.prefetch != nil {
			close(r.prefetchStop)
			<-r.prefetchDone
		}
	})
	r.mu.Lock()
	docker, cri := r.docker, r.cri
	r.docker, r.cri = nil, nil
	r.mu.Unlock()
	if docker != nil {
		docker.close()
	}
	for _, c := range cri {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

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

// Lookup returns the container p belongs to, or nil for a process outside
// any container (and for one whose container cannot be found any more). The
// returned Info is shared: treat it as read-only.
//
// Processes are cached by [KeyOf]: all three ids together, because each
// alone is ambiguous (pods share a pid namespace across containers,
// --pid=host containers share the host's, and a hybrid host gives every
// task the same v2 id). A process that carries no key at all is resolved
// from /proc every time.
func (r *Resolver) Lookup(p *sigvocab.Process) *Info {
	return r.LookupAt(p, r.now())
}

// LookupAt is Lookup with the caller's reading of the clock, against which
// a cached answer's age is judged. A caller resolving a stream of events
// reads the clock once for many of them: on a VM a reading costs ~50 ns,
// two per signal at a million signals a second. now may be a little stale
// (a cached answer then lives that much longer); a miss reads the clock
// itself.
func (r *Resolver) LookupAt(p *sigvocab.Process, now time.Time) *Info {
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
	e, ok := r.entries.get(key)
	if ok && now.Before(e.expires) {
		var info *Info
		if m := e.meta; m != nil {
			info = m.info
			if !m.complete && !m.retrying && !now.Before(m.retryAt) {
				// Enrichment failed earlier: try again in the background
				// so that a hit never waits on a runtime.
				m.retrying = true
				go r.reenrich(m)
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
	return r.keyCall.do(key, func() *Info {
		// Another caller may have resolved key between our miss and now.
		r.mu.Lock()
		if e, ok := r.entries.get(key); ok && r.now().Before(e.expires) && e != expired {
			var info *Info
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
func (r *Resolver) resolve(p *sigvocab.Process, key Key, old *entry) *Info {
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
func (r *Resolver) store(key Key, e *entry) *Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	if key != (Key{}) {
		r.entries.put(key, e)
	}
	if e.meta == nil {
		return nil
	}
	return e.meta.info
}

// identity is what identify learnt of a process.
type identity struct {
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
func (r *Resolver) identify(p *sigvocab.Process, key Key) identity {
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
			if err == nil {
				return r.fromCgroups(p, splitCgroupFile(string(data)), time.Time{})
			}
			r.procErr(err)
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
	return identity{}
}

// procErr counts a /proc read that failed for another reason than the
// process having exited.
func (r *Resolver) procErr(err error) {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return
	}
	r.fail(SourceProc, "", NeedsPtrace(err))
}

// metaFor returns the container's metadata: cached within TTL, else asked
// of its runtime once, however many lookups wait for it.
func (r *Resolver) metaFor(id, runtime string) *meta {
	return r.fetchMeta(id, runtime, r.opts.TTL)
}

// restarted enriches a container whose cgroup just appeared. A container
// already known with a main pid was started again (docker restart, a
// kubelet restart of the container keeps its ID under dockershim): its
// main pid has changed, so the cached answer is replaced. The cgroup
// appears once per v1 hierarchy: answers younger than a second stand.
func (r *Resolver) restarted(id, runtime string) {
	r.mu.Lock()
	old, ok := r.metas.get(id)
	r.mu.Unlock()
	maxAge := r.opts.TTL
	if ok && old.info.MainPID != 0 {
		maxAge = time.Second
	}
	r.fetchMeta(id, runtime, maxAge)
}

// fetchMeta returns the cached metadata when younger than maxAge, else
// asks the runtime once, however many callers wait for it.
func (r *Resolver) fetchMeta(id, runtime string, maxAge time.Duration) *meta {
	now := r.now()
	r.mu.Lock()
	old, ok := r.metas.get(id)
	if ok && now.Sub(old.fetched) < maxAge {
		r.mu.Unlock()
		return old
	}
	r.mu.Unlock()
	return r.idCall.do(id, func() *meta {
		en := r.enrich(id, runtime)
		now := r.now()
		r.mu.Lock()
		// A known container's meta is updated in place: the cache entries
		// of its processes share it and see the new answer at once.
		m := old
		if m != nil {
			m.info = merged(old.info, old.complete, en.info)
		} else {
			m = &meta{info: en.info}
		}
		m.fetched, m.complete, m.retryAt = now, en.complete, now.Add(r.retryInterval)
		r.metas.put(id, m)
		r.mu.Unlock()
		if en.again {
			r.queueRecheck(id, runtime)
		}
		return m
	})
}

// merged is what is known of a container after the runtime answered next
// with info, when it had answered old before (complete) or not.
func merged(old *Info, complete bool, next *Info) *Info {
	if complete && next.bare() && !old.bare() {
		// The runtime has forgotten it (docker rm): what it said
		// while the container existed still holds.
		return old
	}
	if next.MainPID == 0 && old.MainPID != 0 && next.ID == old.ID {
		// It has exited since: its main pid was still that one, and ran
		// the same program.
		c := *next
		c.MainPID, c.MainRuntime = old.MainPID, old.MainRuntime
		return &c
	}
	return next
}

func (r *Resolver) reenrich(m *meta) {
	r.mu.Lock()
	id, runtime := m.info.ID, m.info.Runtime
	r.mu.Unlock()
	en := r.enrich(id, runtime)
	r.mu.Lock()
	m.retrying = false
	if en.complete {
		m.info, m.complete = merged(m.info, m.complete, en.info), true
	} else {
		m.retryAt = r.now().Add(r.retryInterval)
	}
	r.mu.Unlock()
	if en.again {
		r.queueRecheck(id, runtime)
	}
}

// enrich asks the runtime about a container. Its Info always has the ID
// and runtime, and the main process's language runtime when it has a main
// pid.
func (r *Resolver) enrich(id, runtime string) enrichment {
	en := r.askRuntime(id, runtime)
	r.detectRuntime(en.info)
	return en
}

// detectRuntime sets info.MainRuntime, info being a fresh answer no caller
// holds yet: what the cached answer for the same main process said, else
// read from /proc (langrt.Detect, a few small files). So /proc is read once
// per main process, when the runtime first names it, and again only while
// it is not recognised (the runtime may name it before its entrypoint has
// replaced runc's init), never per event.
func (r *Resolver) detectRuntime(info *Info) {
	if info == nil || info.MainPID <= 0 {
		return
	}
	r.mu.Lock()
	m, ok := r.metas.get(info.ID)
	if ok && m.info.MainPID == info.MainPID && m.info.MainRuntime != langrt.Unknown {
		info.MainRuntime = m.info.MainRuntime
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	info.MainRuntime = langrt.Detect(r.opts.ProcRoot, info.MainPID)
}

// askRuntime is enrich without the main process's language runtime.
func (r *Resolver) askRuntime(id, runtime string) enrichment {
	bare := &Info{ID: id, Runtime: runtime}
	r.mu.Lock()
	docker, cri := r.docker, r.cri
	r.mu.Unlock()
	if docker == nil {
		return enrichment{info: bare, complete: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.APITimeout)
	defer cancel()
	switch runtime {
	case RuntimeDocker:
		en, _ := r.fromDocker(ctx, docker, bare)
		return en
	case RuntimeContainerd, RuntimeCRIO:
		en, found := r.fromCRI(ctx, cri, bare)
		if found || runtime != RuntimeContainerd {
			return en
		}
		// The kubelet's cgroupfs layout is shared by containerd and
		// dockershim/cri-dockerd: ask Docker too, when it is there.
		if _, err := os.Stat(docker.socket); err == nil {
			if den, found := r.fromDocker(ctx, docker, bare); found {
				den.info.Runtime = RuntimeDocker
				return den
			}
		}
		return en
	}
	// podman: its Docker-compatible API is not asked (yet).
	return enrichment{info: bare, complete: true}
}

// fromDocker asks Docker about bare.ID; found: Docker knows it.
func (r *Resolver) fromDocker(ctx context.Context, c *dockerClient, bare *Info) (en enrichment, found bool) {
	if r.isDown(c.socket) {
		return enrichment{info: bare}, false
	}
	ins, err := c.inspect(ctx, bare.ID)
	if errors.Is(err, errNotFound) {
		// Docker records a container before it makes its cgroup: one
		// it does not know has been removed.
		r.ok(SourceDocker, c.socket)
		return enrichment{info: bare, complete: true}, false
	}
	if err != nil {
		r.fail(SourceDocker, c.socket, err)
		return enrichment{info: bare}, false
	}
	r.ok(SourceDocker, c.socket)
	info := ins.info()
	info.Runtime = bare.Runtime
	return enrichment{info: info, complete: true, again: ins.notStarted()}, true
}

// fromCRI asks each CRI endpoint present about bare.ID, a container or a
// pod sandbox, until one knows it; found: one did.
func (r *Resolver) fromCRI(ctx context.Context, clients []*criClient, bare *Info) (en enrichment, found bool) {
	present, failed := 0, 0
	for _, c := range clients {
		if !c.present() {
			continue
		}
		present++
		if r.isDown(c.socket) {
			failed++
			continue
		}
		st, err := c.lookup(ctx, bare.ID)
		if errors.Is(err, errNotFound) {
			r.ok(SourceCRI, c.socket)
			continue
		}
		if err != nil {
			r.fail(SourceCRI, c.socket, err)
			failed++
			continue
		}
		r.ok(SourceCRI, c.socket)
		info := &st.Info
		info.Runtime = bare.Runtime
		if name, err := c.runtimeName(ctx); err == nil && name != "" {
			// cri-dockerd's answer is a Docker container's.
			info.Runtime = name
		}
		return enrichment{info: info, complete: true, again: st.created}, true
	}
	switch {
	case present == 0:
		err := errors.New("no CRI socket configured")
		if len(r.opts.CRISockets) > 0 {
			err = fmt.Errorf("no CRI socket found (looked for %s)", strings.Join(r.opts.CRISockets, ", "))
		}
		r.fail(SourceCRI, strings.Join(r.opts.CRISockets, " "), err)
		return enrichment{info: bare}, false
	case failed > 0:
		return enrichment{info: bare}, false
	}
	// Nobody knows it: a container removed already, or a pod sandbox
	// containerd has not registered yet (it does once the sandbox runs,
	// after its cgroup appeared).
	return enrichment{info: bare, complete: true, again: true}, false
}

// warnMissing warns once about each socket in given, the ones the user
// named, that does not exist. A missing socket only costs enrichment;
// failures to reach it later are logged at debug.
func (r *Resolver) warnMissing(given []string) {
	missing := 0
	for _, s := range given {
		fi, err := os.Stat(s)
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			err = pe.Err // the path is the endpoint already
		case err == nil && fi.Mode()&os.ModeSocket == 0:
			err = errors.New("not a socket")
		}
		if err == nil {
			continue
		}
		if slices.Contains(r.opts.CRISockets, s) {
			missing++
		}
		r.errMu.Lock()
		first := !r.warned[s]
		r.warned[s] = true
		r.errMu.Unlock()
		if first {
			r.log.Warn("container runtime socket not found; container IDs still come from cgroup paths", "endpoint", s, "err", err)
		}
	}
	if missing > 0 && missing == len(r.opts.CRISockets) {
		// fromCRI's "no CRI socket found" would say it again.
		r.errMu.Lock()
		r.warned[strings.Join(r.opts.CRISockets, " ")] = true
		r.errMu.Unlock()
	}
}

// fail counts an error from source and logs it: at warn the first time
// since the endpoint (a socket path; "" for /proc and cgroups) last
// worked, at debug after that, so an unreachable runtime writes one line,
// not one per container, and each of two broken CRI sockets says so once.
// A runtime endpoint is not asked again for retryInterval, so a hung
// runtime costs one timeout per interval, not one per new container.
func (r *Resolver) fail(source, endpoint string, err error) {
	key := endpoint
	if key == "" {
		key = source
	}
	var sock fileID
	if endpoint != "" {
		sock = socketFile(endpoint)
	}
	r.errMu.Lock()
	r.errs[source]++
	first := !r.warned[key]
	r.warned[key] = true
	if endpoint != "" {
		r.downTil[endpoint] = r.now().Add(r.retryInterval)
		r.downSock[endpoint] = sock
	}
	r.errMu.Unlock()
	attrs := []any{"source", source}
	if endpoint != "" {
		attrs = append(attrs, "endpoint", endpoint)
	}
	attrs = append(attrs, "err", err)
	if first {
		r.log.Warn("container metadata source failed; container IDs still come from cgroup paths", attrs...)
	} else {
		r.log.Debug("container metadata source failed", attrs...)
	}
}

// ok notes that endpoint of source answered.
func (r *Resolver) ok(source, endpoint string) {
	r.errMu.Lock()
	was := r.warned[endpoint]
	r.warned[endpoint] = false
	delete(r.downTil, endpoint)
	delete(r.downSock, endpoint)
	r.errMu.Unlock()
	if was {
		r.log.Info("container metadata source answers again", "source", source, "endpoint", endpoint)
	}
}

// isDown reports whether endpoint failed less than retryInterval ago and
// is the same socket still: a daemon restarted since (dockerd, containerd)
// has made a new one, and the containers started right after it are named
// at once, not retryInterval later.
func (r *Resolver) isDown(endpoint string) bool {
	r.errMu.Lock()
	until, ok := r.downTil[endpoint]
	sock := r.downSock[endpoint]
	r.errMu.Unlock()
	if !ok || !r.now().Before(until) {
		return false
	}
	return socketFile(endpoint) == sock
}

// fileID is a file's identity; zero for none. The modification time is
// part of it: a file system may give a new socket the inode of the one
// just removed (ext4 does), but not the same time.
type fileID struct {
	dev, ino uint64
	mtime    int64
}

// socketFile is the identity of the socket file at path, zero when there
// is none (a daemon that stopped cleanly removed it).
func socketFile(path string) fileID {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}
	}
	id := fileID{mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino
	}
	return id
}

// Errors returns how many errors each source has had since the resolver
// was made: "docker", "cri", "proc", "cgroup". Monotonic, never reset.
func (r *Resolver) Errors() map[string]uint64 {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	out := make(map[string]uint64, len(r.errs))
	for k, v := range r.errs {
		out[k] = v
	}
	return out
}

// flight runs one function per key at a time; concurrent callers for the
// same key wait for its result instead of repeating the work.
type flight[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*flightCall[V]
}

type flightCall[V any] struct {
	done chan struct{}
	v    V
}

func (f *flight[K, V]) do(k K, fn func() V) V {
	f.mu.Lock()
	if c, ok := f.calls[k]; ok {
		f.mu.Unlock()
		<-c.done
		return c.v
	}
	if f.calls == nil {
		f.calls = make(map[K]*flightCall[V])
	}
	c := &flightCall[V]{done: make(chan struct{})}
	f.calls[k] = c
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.calls, k)
		f.mu.Unlock()
		close(c.done)
	}()
	c.v = fn()
	return c.v
}
