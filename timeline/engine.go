package timeline

import (
	"container/heap"
	"container/list"
	"time"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/tracer"
)

// hostPidNS is the inode of the host's (initial) pid namespace,
// PROC_PID_INIT_INO in the kernel: the same constant on every kernel, so a
// process of the host is recognisable from the event alone.
const hostPidNS = 0xEFFFFFFC

// Defaults for the zero fields of [Options].
const (
	DefaultSettle   = time.Second
	DefaultMaxOpen  = 4096
	DefaultMaxSteps = 256
)

// Options configures an [Engine]. The zero value gives the defaults.
type Options struct {
	// Settle is how long after PID 1's exit an episode keeps collecting the
	// namespace cascade and the other processes' exits before it completes
	// (default 1s). The cascade follows the exit within microseconds; the
	// slack covers events that arrive out of order from different CPUs and
	// processes that take a while to die. Events of the namespace later than
	// that start nothing: only a stop, a SIGKILL or an exit of a PID 1, or
	// an OOM kill, begins an episode.
	Settle time.Duration
	// MaxOpen bounds the episodes in progress (default 4096). Past it the
	// oldest open episode is dropped and counted in Stats().Evicted.
	MaxOpen int
	// MaxSteps bounds the minor steps of an episode (default 256): other
	// signals, process exits, cascade kills. The steps that decide the
	// outcome (the first stop signal and its verdict, the first handler run,
	// the SIGKILL, PID 1's exit, the first OOM kill) are always kept. Steps
	// and cascade kills beyond it are only counted.
	MaxSteps int
}

// Stats counts episodes since the engine was made; monotonic totals except Open.
type Stats struct {
	Open      int    // episodes in progress now
	Started   uint64 // episodes begun
	Completed uint64 // episodes returned by Add, Advance or Flush
	Evicted   uint64 // open episodes dropped because MaxOpen was reached
}

// Engine builds episodes from events. It is not safe for concurrent use:
// one goroutine feeds it, as the tracer's callback does.
type Engine struct {
	opts     Options
	open     map[uint32]*episode // by pid-namespace inode
	order    list.List           // the open episodes, oldest first, for eviction
	settling settleQueue         // open episodes with a completion deadline
	now      time.Time           // the latest time seen
	stats    Stats
}

// New returns an engine with opts, zero fields replaced by the defaults.
func New(opts Options) *Engine {
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.MaxOpen <= 0 {
		opts.MaxOpen = DefaultMaxOpen
	}
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	return &Engine{opts: opts, open: make(map[uint32]*episode)}
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.Open = len(e.open)
	return s
}

// Add feeds one event, with the container of its target (nil for a host
// process or an unresolved one), and returns the episodes that completed by
// the event's time, oldest deadline first. It keeps neither ev nor c: the
// tracer reuses its Event, and the resolver may update its Info.
func (e *Engine) Add(ev *tracer.Event, c *container.Info) []Episode {
	var out []Episode
	if ev.Time.After(e.now) {
		e.now = ev.Time
		e.expire(&out)
	}
	switch ev.Kind {
	case tracer.KindGenerate:
		e.addGenerate(ev, c, &out)
	case tracer.KindDeliver:
		e.addDeliver(ev)
	case tracer.KindExit:
		e.addExit(ev, c, &out)
	case tracer.KindOOM:
		e.addOOM(ev, c, &out)
	}
	return out
}

// Advance tells the engine that time has reached now, with no event, and
// returns the episodes that completed by then. A live caller uses it so an
// episode is printed about Settle after PID 1's exit even when the stream
// goes quiet; pass a time on the events' clock (the tracer converts boot
// time to wall-clock time, so time.Now() minus a little slack for events
// still in the ring buffer).
func (e *Engine) Advance(now time.Time) []Episode {
	var out []Episode
	if now.After(e.now) {
		e.now = now
		e.expire(&out)
	}
	return out
}

// Flush completes every open episode, oldest first: the end of a recording.
// Episodes still waiting for PID 1 get the outcome their events support,
// [OutcomeUnfinished] when that is only a stop signal.
func (e *Engine) Flush() []Episode {
	var out []Episode
	for e.order.Len() > 0 {
		e.complete(e.order.Front().Value.(*episode), &out)
	}
	return out
}

// inContainer reports whether a pid namespace can hold an episode: known and
// not the host's.
func inContainer(ns uint32) bool { return ns != 0 && ns != hostPidNS }

// aboutInit reports whether the event's target is its namespace's PID 1.
func aboutInit(ev *tracer.Event) bool {
	return ev.Flags.Has(tracer.FlagNSInit) || ev.Target.NsPID == 1
}

// lookup returns the open episode of namespace ns. initPID, when not 0, is
// the PID 1 the event is about: a different PID 1 than the episode's means
// the namespace inode was reused (or the old init's exit was lost), and the
// old episode is completed first.
func (e *Engine) lookup(ns, initPID uint32, out *[]Episode) *episode {
	ep := e.open[ns]
	if ep != nil && initPID != 0 && ep.initKnown && ep.Init.PID != initPID {
		e.complete(ep, out)
		return nil
	}
	return ep
}

func (e *Engine) begin(ev *tracer.Event) *episode {
	if len(e.open) >= e.opts.MaxOpen {
		e.remove(e.order.Front().Value.(*episode))
		e.stats.Evicted++
	}
	ep := &episode{heapIdx: -1}
	ep.Start = ev.Time
	ep.Container.PidNS = ev.Target.PidNS
	ep.elem = e.order.PushBack(ep)
	e.open[ev.Target.PidNS] = ep
	e.stats.Started++
	return ep
}

func (e *Engine) remove(ep *episode) {
	delete(e.open, ep.Container.PidNS)
	e.order.Remove(ep.elem)
	if ep.heapIdx >= 0 {
		heap.Remove(&e.settling, ep.heapIdx)
	}
}

func (e *Engine) complete(ep *episode, out *[]Episode) {
	e.remove(ep)
	ep.finish()
	e.stats.Completed++
	*out = append(*out, ep.Episode)
}

// settle makes ep complete at t, or later if it already had a later deadline.
func (e *Engine) settle(ep *episode, t time.Time) {
	switch {
	case ep.heapIdx < 0:
		ep.deadline = t
		heap.Push(&e.settling, ep)
	case t.After(ep.deadline):
		ep.deadline = t
		heap.Fix(&e.settling, ep.heapIdx)
	}
}

// unsettle removes ep's deadline: it waits for PID 1 again.
func (e *Engine) unsettle(ep *episode) {
	if ep.heapIdx >= 0 {
		heap.Remove(&e.settling, ep.heapIdx)
	}
}

// expire completes the episodes whose deadline is before now. An event at
// exactly the deadline still joins its episode.
func (e *Engine) expire(out *[]Episode) {
	for len(e.settling) > 0 && e.settling[0].deadline.Before(e.now) {
		e.complete(e.settling[0], out)
	}
}

// isStopSignal reports whether sig, sent to a PID 1 from outside, is a
// request to stop: SIGTERM (the runtimes' default), SIGINT and SIGQUIT (the
// usual STOPSIGNAL choices), or the container's configured stop signal.
// Other signals (SIGHUP, SIGUSR1: reloads; SIGWINCH from a terminal resize)
// do not begin episodes, unless the container's stop signal is one of them.
func isStopSignal(sig tracer.Signal, c *container.Info, ep *episode) bool {
	switch sig {
	case tracer.SIGTERM, tracer.SIGINT, tracer.SIGQUIT:
		return true
	case 0, tracer.SIGKILL, tracer.SIGSTOP:
		return false
	}
	if c != nil && c.StopSignal != 0 {
		return c.StopSignal == sig
	}
	return ep != nil && ep.configuredStop == sig
}

func (e *Engine) addGenerate(ev *tracer.Event, c *container.Info, out *[]Episode) {
	if ev.Signal == tracer.SIGCHLD {
		return // every exit sends one to its parent: noise in a stop story
	}
	if ev.Flags.Has(tracer.FlagNSCascade) {
		// The sender is the exiting PID 1; the target may sit in a nested
		// namespace, so the sender's namespace names the episode.
		if ep := e.open[ev.Sender.PidNS]; ep != nil {
			ep.cascadeKill(ev, e.opts.MaxSteps)
		}
		return
	}
	ep, init, ok := e.targetEpisode(ev, out)
	if !ok {
		return
	}
	stop := init && ev.Flags.Has(tracer.FlagCrossNS) && isStopSignal(ev.Signal, c, ep)
	kill := init && ev.Signal == tracer.SIGKILL && ev.Result == tracer.ResultDelivered
	if ep == nil {
		if !stop && !kill {
			return
		}
		ep = e.begin(ev)
	}
	ep.noteInfo(c, init)
	if init {
		ep.noteInit(&ev.Target)
	}
	switch {
	case stop && !ep.killed && !ep.exited:
		ep.stopSignal(ev, e.opts.MaxSteps)
	case ev.Signal == tracer.SIGKILL:
		ep.sigkill(ev, init, e.opts.MaxSteps)
	default:
		ep.signal(ev, e.opts.MaxSteps)
	}
	if (stop || kill) && !ep.exited {
		e.unsettle(ep) // an OOM episode now waits for PID 1's end
	}
}

func (e *Engine) addDeliver(ev *tracer.Event) {
	if ev.Signal == tracer.SIGCHLD || !inContainer(ev.Target.PidNS) {
		return
	}
	ep := e.open[ev.Target.PidNS]
	if ep == nil {
		return
	}
	init := aboutInit(ev)
	ep.deliver(ev, init, init && isStopSignal(ev.Signal, nil, ep), e.opts.MaxSteps)
}

// targetEpisode finds the open episode of ev's target's pid namespace (nil
// when there is none yet) and says whether ev is about that namespace's
// PID 1. ok is false for host processes, which make no episodes.
func (e *Engine) targetEpisode(ev *tracer.Event, out *[]Episode) (ep *episode, init, ok bool) {
	t := &ev.Target
	if !inContainer(t.PidNS) {
		return nil, false, false
	}
	init = aboutInit(ev)
	var initPID uint32
	if init {
		initPID = t.PID
	}
	return e.lookup(t.PidNS, initPID, out), init, true
}

func (e *Engine) addExit(ev *tracer.Event, c *container.Info, out *[]Episode) {
	t := &ev.Target
	ep, init, ok := e.targetEpisode(ev, out)
	if !ok {
		return
	}
	if !init {
		if ep != nil {
			ep.noteInfo(c, false)
			ep.processExit(ev, e.opts.MaxSteps)
			if ep.isVictim(t.PID) && !ep.waitsForInit() {
				e.settle(ep, ev.Time.Add(e.opts.Settle))
			}
		}
		return
	}
	if ep == nil {
		ep = e.begin(ev)
	} else if ep.exited {
		return // the same PID 1's exit twice: nothing new
	}
	ep.noteInfo(c, true)
	ep.noteInit(t)
	ep.initExit(ev)
	e.settle(ep, ev.Time.Add(e.opts.Settle))
}

// addOOM takes the oom:mark_victim event, which follows the OOM killer's
// SIGKILL to the victim. A victim whose namespace the tracer could not learn
// (PidNS 0: the tracepoint gave only a thread id and /proc had no entry left)
// cannot be placed and is skipped.
func (e *Engine) addOOM(ev *tracer.Event, c *container.Info, out *[]Episode) {
	ep, init, ok := e.targetEpisode(ev, out)
	if !ok {
		return
	}
	if ep == nil {
		ep = e.begin(ev)
	}
	ep.noteInfo(c, init)
	if init {
		ep.noteInit(&ev.Target)
	}
	ep.oomKill(ev, init, e.opts.MaxSteps)
	switch {
	case ep.exited:
	case ep.waitsForInit():
		e.unsettle(ep)
	default:
		// Another process was the victim and PID 1 lives on: the episode
		// ends with the victim's death (its exit extends this deadline), or
		// with PID 1's if that comes first.
		e.settle(ep, ev.Time.Add(e.opts.Settle))
	}
}

// settleQueue is a min-heap of episodes by deadline.
type settleQueue []*episode

func (q settleQueue) Len() int           { return len(q) }
func (q settleQueue) Less(i, j int) bool { return q[i].deadline.Before(q[j].deadline) }
func (q settleQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].heapIdx = i
	q[j].heapIdx = j
}
func (q *settleQueue) Push(x any) {
	ep := x.(*episode)
	ep.heapIdx = len(*q)
	*q = append(*q, ep)
}
func (q *settleQueue) Pop() any {
	old := *q
	ep := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	ep.heapIdx = -1
	return ep
}
