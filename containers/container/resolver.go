package container

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"

	"github.com/sigscope/sigscope/containers/identity"
)

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
	retryInterval time.Duration // the longest a failing runtime is left alone
	cg            *cgroupIndex
	own           *cgroupOwners // cgroups no pattern names, from the runtimes' main processes (owners.go)
	watch         *cgroupWatch  // nil with NoCgroupWatch or when inotify failed
	// files reads containers' identities from their runtimes' own files
	// (files.go), before any API is asked; nil with NoRuntimeFiles or
	// NoRuntimeAPI.
	files *runtimeFiles
	// runtimes are the runtime APIs asked (runtime.go): Docker's, then
	// each CRI endpoint's in order. Nil with NoRuntimeAPI, and after Close.
	runtimes []runtimeAPI

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
	entries *simplelru.LRU[Key, *entry]   // by event key
	metas   *simplelru.LRU[string, *meta] // by container ID
	// One resolution per key (Key.flightKey) and one enrichment per
	// container ID at a time: concurrent callers wait for its result.
	keyCall singleflight.Group
	idCall  singleflight.Group
	// The background re-enrichments a cache hit starts: Close waits for
	// them, and none starts once closing is set (under mu).
	reenriching sync.WaitGroup
	closing     bool
	// asking counts the enrichments in flight per container ID (Asking).
	asking map[string]int

	errMu  sync.Mutex
	errs   map[string]uint64
	warned map[string]bool
	down   map[string]*outage // the runtime endpoints failing now (endpoints.go)
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
	info     *identity.Info // replaced, never mutated: callers may hold the old one
	fetched  time.Time
	complete bool      // the runtime answered (or there is no runtime to ask)
	retryAt  time.Time // when !complete: not before
	retrying bool
	// why the runtime told nothing of it, when info is bare (Known).
	why string
	// fileReads counts the reads of its runtime's files after the first
	// (fillFromFiles): bounded.
	fileReads int
}

// noteWhy keeps what en says of why the runtime told nothing, unless an
// earlier answer named the container: a runtime that has forgotten it
// since (docker rm) does not unname it (merged).
func (m *meta) noteWhy(en enrichment) {
	if bare(m.info) {
		m.why = en.why
	} else {
		m.why = ""
	}
}

// Known returns what the resolver knows now of container id, from its
// cache and without I/O: nil when nothing; and when the runtime told
// nothing of it (only its cgroup path names it), why. An episode that
// completes asks it, so that a container named after its stop began (a
// runtime slow for a moment under load, asked again since) is named.
func (r *Resolver) Known(id string) (*identity.Info, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.metas.Get(id)
	if !ok {
		return nil, ""
	}
	why := m.why
	if bare(m.info) && why == "" {
		why = "the runtime has not answered yet"
	}
	return m.info, why
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
	opts, given := opts.withDefaults()
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
		down:          make(map[string]*outage),
		rechecks:      make(map[string]*recheck),
		asking:        make(map[string]int),
		recheckWake:   make(chan struct{}, 1),
	}
	r.own = newCgroupOwners(opts.MaxEntries)
	r.cg = newCgroupIndex(opts.CgroupRoot, opts.MaxEntries, opts.TTL, func() time.Time { return r.now() })
	if !opts.NoRuntimeAPI && !opts.NoRuntimeFiles {
		r.files = newRuntimeFiles(opts.ProcRoot, func() time.Time { return r.now() })
		r.files.log = r.log
	}
	if !opts.NoRuntimeAPI {
		r.runtimes = append(r.runtimes, newDockerClient(opts.DockerSocket))
		for _, s := range opts.CRISockets {
			r.runtimes = append(r.runtimes, newCRIClient(s))
		}
		r.warnMissing(given)
		r.sayFound()
	}
	if !opts.NoCgroupWatch {
		onNew := func(string) {}
		if r.runtimes != nil {
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

// Close releases the runtime connections. The resolver still answers from
// its cache and cgroup paths afterwards, but asks no runtime.
func (r *Resolver) Close() error {
	var errs []error
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closing = true
		r.mu.Unlock()
		r.own.close()
		if r.watch != nil {
			errs = append(errs, r.watch.close())
		}
		if r.prefetch != nil {
			close(r.prefetchStop)
			<-r.prefetchDone
		}
		// Each is bounded by APITimeout; the runtimes' clients stay open
		// for them.
		r.reenriching.Wait()
	})
	r.mu.Lock()
	rts := r.runtimes
	r.runtimes = nil
	r.mu.Unlock()
	for _, rt := range rts {
		errs = append(errs, rt.close())
	}
	return errors.Join(errs...)
}

// once runs fn for key unless a call for key is running already, in which
// case it waits for that call's result instead of repeating the work.
func once[V any](g *singleflight.Group, key string, fn func() V) V {
	v, _, _ := g.Do(key, func() (any, error) { return fn(), nil })
	return v.(V)
}

// apis returns the runtime APIs to ask: nil with NoRuntimeAPI or once
// closed.
func (r *Resolver) apis() []runtimeAPI {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runtimes
}
