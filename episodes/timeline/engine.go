package timeline

import (
	"container/heap"
	"container/list"
	"slices"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Defaults for the zero fields of [Options].
const (
	DefaultSettle   = time.Second
	DefaultMaxOpen  = 4096
	DefaultMaxSteps = 256
	// DefaultStopBudget is the longest a stop is assumed to last when the
	// runtime did not say (no grace period or stop timeout known): the
	// Kubernetes default grace period, longer than Docker's 10 s.
	DefaultStopBudget = 30 * time.Second
)

// An episode whose stop signal the kernel watched (its network namespace's
// connections are counted, traffic.go) does not complete without the
// counts: when it would, it waits for the net event of its namespace, which
// the caller feeds once [Engine.ConnectionsDue] names the namespace.
const (
	// NetLinger is how long after the main process's exit the counts are
	// read at the earliest: connection attempts refused just after the
	// exit are part of the stop (a pod's sandbox keeps the namespace, and
	// clients still sent to it are refused there).
	NetLinger = time.Second
	// NetWait is how long after it would have completed an episode waits
	// for its counts at most: the caller reads them as soon as they are
	// due, at most NetLinger later, so a wait this long means the read
	// failed or the caller fell behind; the episode then completes
	// without them rather than hold its verdict back.
	NetWait = 3 * time.Second
)

// stopSlack is added to a stop budget for the runtime's own delay between
// the end of the grace period and its SIGKILL, and for the kubelet's 2 s
// minimum after a late stop signal.
const stopSlack = 2 * time.Second

// Options configures an [Engine]. The zero value gives the defaults.
type Options struct {
	// Settle is how long after its main process's exit an episode keeps
	// collecting the other processes' exits and late signals before it
	// completes (default 1s), when the kernel cannot say that it is over:
	// an episode whose main process is its namespace's init completes at
	// once when the namespace is empty ([sigvocab.KindNSEmpty]), with the
	// cascade and every exit in it. The settle applies to a main process
	// that is no init (a pod sharing one pid namespace, --pid host), whose
	// container's other processes the runtime kills after it, and when the
	// namespace's end was not seen (lost, or an init with no exit signal). Events of the namespace later than
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
	// Since is when tracing began: nothing before it was seen. A stop can
	// begin before and end after it (a tracer started, or an agent
	// restarted, in the middle of a stop), and then its stop signal was
	// missed: an episode with no stop signal, whose main process's start
	// was not seen either, and whose first event comes within its stop
	// budget after Since ([Episode.StopBudget]) is [OutcomeUnfinished] with
	// StartUnseen set, never killed or exited, which it cannot know; this
	// for containers only, not pid namespaces no runtime made. Zero: the
	// first event's time, the earliest a recording shows.
	Since time.Time
	// History, when not nil, is what the container runtimes recorded of
	// the stop signals they sent before Since. For a container whose
	// runtime's record is complete, an episode begins unseen only when the
	// runtime sent it a stop signal within its stop budget before its
	// first event: a `docker kill` moments after tracing began is killed,
	// not unfinished. Without it (a recording, a runtime that keeps no
	// record, such as CRI's) the cautious rule above holds.
	History *identity.StopHistory
	// Settled: the engine hands out settled episodes, which the caller
	// finishes with [Finish] and what it learnt of them (the live
	// pipeline: the resolver's names, the API server's records). Off, the
	// engine finishes each with none as it completes (a recording
	// replayed, the tests).
	Settled bool
}

// Stats counts episodes since the engine was made; monotonic totals except
// Open and ExecLogs.
type Stats struct {
	Open      int    // episodes in progress now (at most MaxOpen)
	ExecLogs  int    // containers with no open episode whose exec sessions are kept (at most MaxOpen)
	Started   uint64 // episodes begun
	Completed uint64 // episodes returned by Add, Advance or Flush
	Evicted   uint64 // open episodes dropped because MaxOpen was reached
	// SandboxStops counts the ends of pods' sandbox (pause) containers:
	// the last step of a pod's teardown, never an episode.
	SandboxStops uint64
	// NetIgnored counts the net events no open episode watched the
	// namespace of (read too late, or for no episode); NetUnread the
	// episodes that completed without their counts.
	NetIgnored uint64
	NetUnread  uint64
}

// Engine builds episodes from events. It is not safe for concurrent use:
// one goroutine feeds it, as the tracer's callback does.
type Engine struct {
	opts     Options
	open     map[epKey]*episode  // by container
	byMain   map[uint32]*episode // by the host pid of the episode's main process, once known
	byNS     map[uint32]*episode // by pid namespace, for episodes whose main process is its init
	order    list.List           // the open episodes, oldest first, for eviction
	settling settleQueue         // open episodes with a completion deadline
	now      time.Time           // the latest time seen
	execs    execs               // exec sessions of containers with no open episode
	stats    Stats
	dropped  uint64 // the tracer's dropped total at the last NoteDropped
	since    time.Time
	starts   starts     // main processes whose start was seen
	routes   []routed   // route's answer, reused from one event to the next
	waiting  []*episode // episodes waiting for their network namespace's counts, in the order they began to
	due      []uint32   // ConnectionsDue's answer, reused from one call to the next
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
	return &Engine{opts: opts, open: make(map[epKey]*episode), byMain: make(map[uint32]*episode), byNS: make(map[uint32]*episode),
		execs: newExecs(opts.MaxOpen), since: opts.Since, starts: newStarts(opts.MaxOpen)}
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.Open, s.ExecLogs = e.order.Len(), e.execs.logs.Len()
	return s
}

// Add feeds one event, with the container of its target (nil for a host
// process or an unresolved one), and returns the episodes that completed by
// the event's time, oldest deadline first. It keeps neither ev nor c: the
// tracer reuses its Event, and the resolver may update its Info.
//
// An event goes one way: the engine routes it to its episodes (route.go),
// each applies it (apply.go) and says what the engine must do next, the
// engine does that, and an episode that completes gets its words (words.go).
func (e *Engine) Add(ev *sigvocab.Event, c *identity.Info) []Episode {
	var out []Episode
	if e.since.IsZero() {
		e.since = ev.Time
	}
	if ev.Time.After(e.now) {
		e.now = ev.Time
		e.expire(&out)
	}
	for _, r := range e.route(ev, c, &out) {
		e.act(r.ep, ev.Time, r.ep.apply(ev, r.role), &out)
	}
	return out
}

// act does what applying an event at t asked of the engine.
func (e *Engine) act(ep *episode, t time.Time, fx effect, out *[]Episode) {
	switch fx {
	case settleAfter:
		e.settle(ep, t.Add(e.opts.Settle))
	case awaitMain:
		e.unsettle(ep)
	case completeNow:
		e.end(ep, t, out)
	}
}

// Advance tells the engine that time has reached now, with no event, and
// returns the episodes that completed by then. A live caller uses it so an
// episode is printed about Settle after the main process's exit even when
// the stream goes quiet; pass a time on the events' clock (the tracer
// converts boot time to wall-clock time, so time.Now() minus a little slack
// for events still in the ring buffer).
func (e *Engine) Advance(now time.Time) []Episode {
	var out []Episode
	if now.After(e.now) {
		e.now = now
		e.expire(&out)
	}
	return out
}

// Deadline is when the engine next needs the caller if no event comes, or
// the zero time when nothing waits for a time: an open episode's settle
// deadline or the hard deadline of one waiting for its counts (Advance to
// any time after it completes the episode), or the time a waiting
// episode's counts are due (call [Engine.ConnectionsDue] then). A live
// caller uses it to call them then instead of polling.
func (e *Engine) Deadline() time.Time {
	var d time.Time
	if len(e.settling) > 0 {
		d = e.settling[0].deadline
	}
	for _, ep := range e.waiting {
		if !ep.netAsked && (d.IsZero() || ep.netDue.Before(d)) {
			d = ep.netDue
		}
	}
	return d
}

// ConnectionsDue returns the network namespaces whose counts the caller
// should read now and feed as net events ([sigvocab.KindNet], Time the
// time of the read): those of the episodes waiting for them whose read is
// due by now, at the later of when the episode would have completed and
// its main process's exit plus [NetLinger]. A namespace is returned once
// until its counts are read. The slice is reused by the next call.
func (e *Engine) ConnectionsDue(now time.Time) []uint32 {
	e.due = e.due[:0]
	for _, ep := range e.waiting {
		if ep.netAsked || ep.netDue.After(now) || ep.deadline.Before(now) {
			continue
		}
		e.due = append(e.due, ep.netns)
		for _, o := range e.waiting {
			if o.netns == ep.netns {
				o.netAsked = true
			}
		}
	}
	return e.due
}

// Watching reports whether an open episode watches the network namespace
// netns: its counts are still wanted (the caller keeps the kernel's entry
// while they are).
func (e *Engine) Watching(netns uint32) bool {
	if netns == 0 {
		return false
	}
	for el := e.order.Front(); el != nil; el = el.Next() {
		if el.Value.(*episode).netns == netns {
			return true
		}
	}
	return false
}

// WatchedNets returns the network namespaces the open episodes watch, once
// each: the caller reads their counts before Flush at the end of a trace.
func (e *Engine) WatchedNets() []uint32 {
	var nets []uint32
	for el := e.order.Front(); el != nil; el = el.Next() {
		if ns := el.Value.(*episode).netns; ns != 0 && !slices.Contains(nets, ns) {
			nets = append(nets, ns)
		}
	}
	return nets
}

// Flush completes every open episode, oldest first: the end of a recording.
// Episodes still waiting for the main process get the outcome their events
// support, [OutcomeUnfinished] when that is only a stop signal. An episode
// that watched a network namespace takes the counts read after its last
// event (the caller reads [Engine.WatchedNets] first), and says they were
// not read otherwise.
func (e *Engine) Flush() []Episode {
	var out []Episode
	for e.order.Len() > 0 {
		ep := e.order.Front().Value.(*episode)
		if ep.netns != 0 && (ep.connsAt.IsZero() || ep.connsAt.Before(ep.lastAt)) {
			ep.unread = unreadEnded
		}
		e.complete(ep, &out)
	}
	return out
}

// NoteDropped tells the engine the tracer's total of dropped events (every
// kind), as read now: when it rose since the last call, every open episode
// counts the difference in EventsDropped, since any of the lost events may
// have been its own. Call it at least as often as episodes settle (the
// pipeline does on each read, at most every 100 ms).
func (e *Engine) NoteDropped(total uint64) {
	if total <= e.dropped {
		e.dropped = total
		return
	}
	delta := total - e.dropped
	e.dropped = total
	for el := e.order.Front(); el != nil; el = el.Next() {
		if ep := el.Value.(*episode); !ep.netWait { // none of its events is to come
			ep.EventsDropped += delta
		}
	}
}

// HasOpen reports whether an episode of a container of the pod is in
// progress.
func (e *Engine) HasOpen(namespace, pod string) bool {
	for el := e.order.Front(); el != nil; el = el.Next() {
		if c := &el.Value.(*episode).Container; c.Pod == pod && c.Namespace == namespace {
			return true
		}
	}
	return false
}

func (e *Engine) remove(ep *episode) {
	e.detach(ep)
	e.order.Remove(ep.elem)
	if ep.heapIdx >= 0 {
		heap.Remove(&e.settling, ep.heapIdx)
	}
	if ep.netWait {
		e.waiting = slices.DeleteFunc(e.waiting, func(o *episode) bool { return o == ep })
	}
}

// detach takes ep out of the indexes: no event finds it any more.
func (e *Engine) detach(ep *episode) {
	if e.open[ep.key] == ep {
		delete(e.open, ep.key)
	}
	if ep.mainKnown && e.byMain[ep.Main.PID] == ep {
		delete(e.byMain, ep.Main.PID)
	}
	if e.byNS[ep.Container.PidNS] == ep {
		delete(e.byNS, ep.Container.PidNS)
	}
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

// unsettle removes ep's deadline: it waits for the main process again.
func (e *Engine) unsettle(ep *episode) {
	if ep.heapIdx >= 0 {
		heap.Remove(&e.settling, ep.heapIdx)
	}
}

// expire completes the episodes whose deadline is before now (or makes
// them wait for their counts). An event at exactly the deadline still joins
// its episode.
func (e *Engine) expire(out *[]Episode) {
	for len(e.settling) > 0 && e.settling[0].deadline.Before(e.now) {
		ep := e.settling[0]
		e.end(ep, ep.deadline, out)
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
