package pipeline

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/sigscope/sigscope/containers/container"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Options configure a [Pipeline].
type Options struct {
	// Tracer configures the tracer; its Idle is called after the
	// pipeline's own idle work.
	Tracer tracer.Options
	// Resolver maps processes to containers; nil resolves nothing (every
	// event's containers are nil).
	Resolver *container.Resolver
	// Timeline, when not nil, builds stop episodes with these options.
	Timeline *timeline.Options
	// Senders resolves the container of each generate event's sender too,
	// for OnEvent: the engine needs only the target's, and a lookup per
	// signal is not paid for nothing.
	Senders bool
	// OnEvent, when not nil, sees every event with the containers of its
	// target and sender (nil unless Senders; see [About] for how to show
	// them) before the engine does. The event is reused: copy what you keep. An error
	// stops Run (tracer.ErrStop: stop without an error).
	OnEvent func(e *sigvocab.Event, target, sender *identity.Info) error
	// OnEpisodes, when not nil, gets the episodes as they complete. An
	// error stops Run.
	OnEpisodes func([]timeline.Episode) error
	// Kube, when not nil, is what the API server's records say of the
	// stop of container c of a pod (kubemeta.Pods.Facts, or why they were
	// not read), which finishes its episode with the resolver's name
	// before OnEpisodes sees it (timeline.Finish).
	Kube func(c identity.Identity, stopAt, start time.Time) *timeline.KubeFacts
	// PeerNames, with Kube, names the addresses of the clients that lost
	// requests in a stop at at (kubemeta.Pods.PeerNames): node holds this
	// node's own addresses. Without it only those are named.
	PeerNames func(addrs []netip.Addr, at time.Time, node map[netip.Addr]bool) map[netip.Addr]timeline.PeerName
	// Connections, without a Timeline, has the kernel count the
	// connections of each stopping container's network namespace and
	// hands OnEvent a net event when its counts change and when its stop
	// is over (traceconns.go). A Timeline always counts them.
	Connections bool
}

// Pipeline is a loaded tracer, a resolver and an engine, run together.
type Pipeline struct {
	opts   Options
	t      *tracer.Tracer
	engine *timeline.Engine
	err    error // from OnEpisodes during an idle call
	// held are completed episodes waiting for their container's name
	// (naming).
	held   []heldEpisode
	heldAt time.Time // when they were last looked at
	// lossAt is when the kernel's drop counters were last read for the
	// engine (Engine.NoteDropped).
	lossAt time.Time
	clock  eventClock
	memo   lookupMemo
	// sweptAt is when the kernel's watched namespaces were last looked at
	// (sweepWatched).
	sweptAt time.Time
	// probers are the processes whose connections count as probes, and
	// probersAt when they were last looked for (noteProbers).
	probers   []uint32
	probersAt time.Time
	// nodeAddrs are this node's addresses, read at nodeAddrsAt (peerNames).
	nodeAddrs   map[netip.Addr]bool
	nodeAddrsAt time.Time
	// hooks are the counts begun from preStop hooks (timeline.HookCounts
	// decides when they begin, are taken up and are let go).
	hooks *timeline.HookCounts
	// hookStarts are the counts HookStarted handed over from other
	// goroutines, for the reader to begin (takeHookStarts).
	hookMu     sync.Mutex
	hookStarts []hookStart
	// following are the namespaces followed without a timeline
	// (Options.Connections).
	following map[uint32]*followed
}

// lookupMemo remembers the resolver's answers for the current clock
// reading: the resolver answers a key from its cache against that reading,
// so asking again with the same key and reading gets the same answer, and
// a storm's sender and target (one key when both are on the host) need
// not take the resolver's lock and hash its key twice per signal. An answer
// the resolver changes meanwhile (re-enrichment in the background) is seen
// at the next reading, within a millisecond or 1024 events: the staleness
// a reading already allows. Direct-mapped and tiny: the keys of the
// events within one reading.
type lookupMemo [memoSlots]struct {
	gen  uint64 // the eventClock reading; 0: empty
	key  container.Key
	info *identity.Info
}

const memoSlots = 4

// lookup is r.LookupAt(p, now) through the memo.
func (p *Pipeline) lookup(r *container.Resolver, proc *sigvocab.Process, now time.Time) *identity.Info {
	key := container.KeyOf(proc)
	if key == (container.Key{}) {
		return r.LookupAt(proc, now) // resolved from /proc each time: nothing to key it by
	}
	m := &p.memo[uint(key.PidNS^uint32(key.CgroupID)^uint32(key.CgroupV1ID))%memoSlots]
	if m.gen == p.clock.gen && m.key == key {
		return m.info
	}
	info := r.LookupAt(proc, now)
	m.gen, m.key, m.info = p.clock.gen, key, info
	return info
}

// eventClock reads the clock for the resolver's cache (LookupAt) once for
// many events: again when the events' own kernel time has moved on by
// clockStale since the last reading, and at least every clockReuse events.
// A storm of a million signals a second then reads it about a thousand
// times a second instead of twice per signal.
type eventClock struct {
	now  time.Time
	boot uint64 // the kernel time of the event that read it
	left int    // events that may still use it
	gen  uint64 // counts the readings: the memo's answers are for one
}

const (
	clockStale = uint64(time.Millisecond)
	clockReuse = 1024
)

func (c *eventClock) at(e *sigvocab.Event) time.Time {
	if c.left == 0 || e.BootNS-c.boot >= clockStale || e.BootNS < c.boot {
		c.now, c.boot, c.left = time.Now(), e.BootNS, clockReuse
		c.gen++
	}
	c.left--
	return c.now
}

// lossEvery bounds how often the drop counters are read (a map lookup
// per CPU): well within the engine's settle time, so an episode open when
// events were lost knows it before it completes.
const lossEvery = 100 * time.Millisecond

// noteLoss hands the kernel's total of dropped events to the engine, at
// most every lossEvery.
func (p *Pipeline) noteLoss(now time.Time) {
	if p.engine == nil || p.t == nil || now.Sub(p.lossAt) < lossEvery {
		return
	}
	p.lossAt = now
	if s, err := p.t.Stats(); err == nil {
		p.engine.NoteDropped(s.Total().Dropped)
	}
}

// historyWindow is how far before tracing began the runtimes' records are
// read (each episode looks back its own stop budget within it), and
// historyTimeout how long start-up waits for them.
const (
	historyWindow  = 10 * time.Minute
	historyTimeout = 2 * time.Second
)

// New loads and attaches the tracer. Close releases it.
func New(opts Options) (*Pipeline, error) {
	p := &Pipeline{opts: opts}
	to := opts.Tracer
	if opts.Timeline == nil && (!opts.Connections || opts.OnEvent == nil) {
		// Nothing would read the counts: the kernel need not keep them.
		to.NoConnections = true
	}
	userIdle := to.Idle
	to.Idle = func() time.Time {
		// Complete the episodes whose settle time passed while the
		// stream was quiet, hand them over at once, and be called again
		// at the next settle deadline: the reader has no timer of its own.
		var next time.Time
		if p.engine != nil && p.err == nil {
			now := time.Now()
			if d := p.engine.Deadline(); !d.IsZero() && d.Before(now) {
				// An episode completes now: it must know of every
				// loss before, however recently the counters were read.
				p.lossAt = time.Time{}
			}
			p.noteLoss(now)
			p.noteProbers(now)
			p.takeHookStarts()
			p.endHooks(now)
			p.err = p.readConnections(now, p.engine.ConnectionsDue(now))
			if p.err == nil {
				p.err = p.episodes(p.engine.Advance(now))
			}
			if p.err == nil {
				next = minTime(p.engine.Deadline(), p.hooks.Next())
			}
			if p.err == nil && len(p.held) > 0 {
				// Named since, or held long enough: out they go.
				if next.IsZero() || now.Add(holdPoll).Before(next) {
					next = now.Add(holdPoll)
				}
			}
		}
		if p.engine == nil && len(p.following) > 0 && p.err == nil {
			var at time.Time
			at, p.err = p.readFollowed(time.Now(), false)
			next = minTime(next, at)
		}
		if userIdle != nil {
			if u := userIdle(); !u.IsZero() && (next.IsZero() || u.Before(next)) {
				next = u
			}
		}
		return next
	}
	t, err := tracer.New(to)
	if err != nil {
		return nil, err
	}
	p.t = t
	if opts.Timeline != nil {
		// Tracing began now, with every program attached: an episode
		// whose first event comes soon after may have begun unseen.
		topts := *opts.Timeline
		if topts.Since.IsZero() {
			topts.Since = time.Now()
		}
		if topts.History == nil && opts.Resolver != nil {
			// What the runtimes sent before tracing began: a stop
			// signal then is the only reason to doubt a SIGKILL seen
			// soon after.
			ctx, cancel := context.WithTimeout(context.Background(), historyTimeout)
			h := opts.Resolver.StopHistory(ctx, topts.Since.Add(-historyWindow), topts.Since)
			cancel()
			topts.History = &h
		}
		// The pipeline finishes the episodes, with what it learns of
		// them after the engine settled them (handOver).
		topts.Settled = opts.OnEpisodes != nil
		p.engine = timeline.New(topts)
	}
	return p, nil
}

// Tracer is the pipeline's tracer, for its Stats and program names.
func (p *Pipeline) Tracer() *tracer.Tracer { return p.t }

// Engine is the pipeline's timeline engine, nil without Options.Timeline.
func (p *Pipeline) Engine() *timeline.Engine { return p.engine }

func (p *Pipeline) episodes(eps []timeline.Episode) error { return p.handOver(eps, false) }

// handOver finishes and hands over the settled episodes eps and the held
// ones that are ready (every held one when final: the end). The pipeline
// orders the stages; their rules are the resolver's, kubemeta's and the
// timeline's: it gathers the facts (the name the resolver knows now, the
// API server's record of the pod) and timeline.Finish applies them.
func (p *Pipeline) handOver(eps []timeline.Episode, final bool) error {
	if p.opts.OnEpisodes == nil || len(eps) == 0 && len(p.held) == 0 {
		return nil
	}
	now := time.Now()
	if !final && len(eps) == 0 && now.Sub(p.heldAt) < holdPoll {
		return nil // held ones are looked at again every holdPoll, not per event
	}
	r := p.opts.Resolver
	if r != nil {
		eps = p.naming(r, eps, now, final)
		if len(eps) == 0 {
			return nil
		}
	}
	for i := range eps {
		ep := &eps[i]
		var f timeline.Facts
		id := ep.Container.Identity
		if r != nil {
			f.Container, f.NameUnknown = known(r, ep)
			if f.Container != nil {
				id = f.Container.Identity
			}
		}
		if p.opts.Kube != nil {
			f.Kube = p.opts.Kube(id, ep.StopAt, ep.Start)
		}
		f.PeerNames = p.peerNames(ep, now)
		timeline.Finish(ep, f)
	}
	return p.opts.OnEpisodes(eps)
}

// Run processes events until ctx ends or a callback fails, then completes
// every open episode (they say what they lack: unfinished when only a stop
// signal was seen). It returns the first callback error, except ErrStop.
func (p *Pipeline) Run(ctx context.Context) error {
	p.noteProbers(time.Now())
	runErr := p.t.Run(ctx, p.Handle)
	if runErr == nil {
		runErr = p.err
	}
	if p.engine == nil && len(p.following) > 0 {
		// The end: the counts as far as they went.
		if _, err := p.readFollowed(time.Now(), true); err != nil && runErr == nil {
			runErr = err
		}
	}
	if p.engine != nil {
		p.lossAt = time.Time{}
		now := time.Now()
		p.noteLoss(now)
		// The end: what the kernel counted of the connections of every
		// stop still open is read now, as far as it went.
		if err := p.readConnections(now, p.engine.WatchedNets()); err != nil && runErr == nil {
			runErr = err
		}
		// The held episodes go out too, as they are.
		if err := p.handOver(p.engine.Flush(), true); err != nil && runErr == nil {
			runErr = err
		}
	}
	return runErr
}

// readConnections reads what the kernel counted of each namespace's
// connections and hands it on as a net event, through Handle as the
// kernel's events go (OnEvent sees it, so a recording has it and its
// replay gives the same episodes); a namespace no open episode watches
// any more is let go in the kernel. A failed read is logged and still
// handed on, without counts: the episode then says they were not read.
func (p *Pipeline) readConnections(now time.Time, nets []uint32) error {
	if p.t == nil {
		return nil // a replay: the net events are in the stream
	}
	for _, netns := range nets {
		conns, err := p.t.Connections(netns)
		if err != nil {
			p.log().Warn("reading a stopping container's connection counts", "netns", netns, "error", err)
		}
		ev := sigvocab.Event{Time: now, Kind: sigvocab.KindNet, NetNS: netns, Conns: conns}
		if err := p.Handle(&ev); err != nil {
			return err
		}
		if p.engine == nil || !p.engine.Watching(netns) {
			if err := p.t.Unwatch(netns); err != nil {
				p.log().Warn("letting a network namespace go", "netns", netns, "error", err)
			}
		}
	}
	p.sweepWatched(now)
	return nil
}

// A namespace the kernel began to watch at a stop signal that no episode
// took up (a SIGINT to a process that is no container's main, say) is let
// go after watchedMax; the kernel's table holds 1024. Looked at every
// sweepEvery.
const (
	watchedMax = 10 * time.Minute
	sweepEvery = 30 * time.Second
)

func (p *Pipeline) sweepWatched(now time.Time) {
	if now.Sub(p.sweptAt) < sweepEvery {
		return
	}
	p.sweptAt = now
	watched, err := p.t.Watched()
	if err != nil {
		p.log().Warn("listing the watched network namespaces", "error", err)
		return
	}
	for netns, since := range watched {
		if now.Sub(since) > watchedMax && (p.engine == nil || !p.engine.Watching(netns)) {
			_ = p.t.Unwatch(netns)
		}
	}
	if err := p.t.SweepSplit(); err != nil {
		p.log().Warn("sweeping the connections' split by cgroup", "error", err)
	}
}

// NewReplay returns a pipeline without a tracer, for events that come from
// elsewhere through Handle: the JSON path's benchmark replays recorded
// records through the very code Run uses. Options.Tracer is ignored; Run
// and Close must not be called.
func NewReplay(opts Options) *Pipeline {
	p := &Pipeline{opts: opts}
	if opts.Timeline != nil {
		p.engine = timeline.New(*opts.Timeline)
	}
	return p
}

// Handle is Run's work for one decoded event: resolve its containers, hand
// it to OnEvent, then to the engine.
func (p *Pipeline) Handle(e *sigvocab.Event) error {
	if p.err != nil {
		return p.err
	}
	var target, sender *identity.Info
	if r := p.opts.Resolver; r != nil && e.Kind != sigvocab.KindNet {
		now := p.clock.at(e)
		target = p.lookup(r, &e.Target, now)
		if p.opts.Senders && e.Kind == sigvocab.KindGenerate {
			sender = p.lookup(r, &e.Sender, now)
		}
	}
	if p.opts.OnEvent != nil {
		if err := p.opts.OnEvent(e, target, sender); err != nil {
			return err
		}
	}
	if p.t != nil && p.engine != nil && p.t.CountsConnections() {
		p.watchHook(e, target)
	}
	if p.t != nil && p.engine == nil && p.opts.Connections && p.t.CountsConnections() {
		p.follow(e, target)
	}
	var err error
	if p.engine != nil {
		p.noteLoss(e.Time)
		err = p.episodes(p.engine.Add(e, target))
	}
	if e.Kind == sigvocab.KindNSEmpty && p.opts.Resolver != nil {
		// The namespace is over: its inode is free for the next one.
		p.opts.Resolver.NamespaceEnded(e.Target.PidNS)
		p.memo = lookupMemo{}
	}
	return err
}

// Close detaches the tracer. It is idempotent.
func (p *Pipeline) Close() error { return p.t.Close() }

// About is how an event is shown: the container it is about (its target's,
// or its sender's when the target is on the host) and the other container,
// only for a signal from one container to another.
func About(target, sender *identity.Info) (about, other *identity.Info) {
	switch {
	case target == nil:
		return sender, nil
	case sender != nil && sender.ID != target.ID:
		return target, sender
	}
	return target, nil
}

// log is the tracer's logger.
func (p *Pipeline) log() *slog.Logger {
	if l := p.opts.Tracer.Logger; l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
