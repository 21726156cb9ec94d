package sink

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sigscope/sigscope/internal/retry"
)

// Defaults for [Options]: an output away is tried again after 1 s, 2 s,
// 4 s... up to every 30 s, soon enough to see a restart, seldom enough
// that a cluster's agents do not flood what comes back. The drain gives
// up after 3 s: the chart's terminationGracePeriodSeconds is 10, and the
// outputs drain at once, beside the HTTP server's 5 s shutdown.
const (
	DefaultRetryMin     = time.Second
	DefaultRetryMax     = 30 * time.Second
	DefaultDrainTimeout = 3 * time.Second
)

// Options configures a [Sink] of items of type T.
type Options[T any] struct {
	// QueueSize bounds the items waiting, besides the ones being sent;
	// past it the oldest is dropped. 0 is taken as 1.
	QueueSize int
	// BatchSize bounds the items of one Send. 0 means 1.
	BatchSize int
	// Size is how many units an item counts for in the counts (an
	// episode's Events: one per Event); nil counts 1 an item. Send may
	// lower it as it finishes part of an item.
	Size func(T) int
	// Send tries batch, oldest first, and says what it finished (Done).
	// nil: every unit of batch is finished. An error is transient: the
	// items with units left are tried again after a wait, unless ctx has
	// ended (the drain's deadline), when they are dropped. Send is only
	// ever called from the one worker.
	Send func(ctx context.Context, batch []T) (Done, error)
	// RetryAfter is the least wait a transient error asks for (a
	// Retry-After); nil for none.
	RetryAfter func(error) time.Duration
	// KeepFailed keeps items that failed transiently with the worker, tried
	// again until they are finished, instead of putting them back at the
	// queue's head where newer items push them out. For a destination
	// whose failures are its own and never an item's (a disk); where an
	// item may fail for reasons of its own (a 500 on that one object), it
	// must not hold the queue for ever, and KeepFailed stays false.
	KeepFailed bool
	// RetryMin and RetryMax bound the wait after a transient failure (see
	// retry.Backoff). 0 means DefaultRetryMin and DefaultRetryMax.
	RetryMin, RetryMax time.Duration
	// DrainTimeout bounds the last try of what is queued when the sink
	// stops. 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
	Logger       *slog.Logger
	Log          Messages
}

// Messages are what an output logs of its outage, in its own words: its
// first transient failure at warn (Down), the next ones at debug (Again),
// the success that ends it at UpLevel (Up), and what shutdown dropped at
// warn (Dropped). "" logs nothing.
type Messages struct {
	Down, Again, Up, Dropped string
	// UpLevel is Up's level: warn to close a warning where sigscope's
	// default level (warn) shows it.
	UpLevel slog.Level
}

// Done is what one Send finished, in units.
type Done struct {
	Sent   int // delivered
	Failed int // refused for good: never tried again
}

// Sink is one output's queue and worker. Add, the counts and Close are
// safe for concurrent use.
type Sink[T any] struct {
	opts Options[T]
	log  *slog.Logger

	mu sync.Mutex // guards hand, queue, closed, started and drain
	// hand is the batch being sent: the worker's, outside the queue, so
	// that newer items never push it out. An item added to an empty sink
	// is put there at once, for its first try whenever the worker comes.
	hand    []T
	queue   ring[T]
	closed  bool        // no more items: Close was called or Run's ctx ended
	started bool        // a worker runs or ran: Run's, or Close's in its place
	drain   *time.Timer // cancels ctx DrainTimeout after closed
	wake    chan struct{}
	closing chan struct{} // closed with closed: no more waiting between tries
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when the worker has returned

	sent, failed, dropped, retries atomic.Uint64
	queued                         atomic.Int64 // units queued or being sent
	droppedAtClose                 uint64       // dropped when closed was set
}

// New returns a Sink; [Sink.Run] starts its worker.
func New[T any](opts Options[T]) *Sink[T] {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1
	}
	if opts.Size == nil {
		opts.Size = func(T) int { return 1 }
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = DefaultRetryMin
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = DefaultRetryMax
	}
	opts.RetryMax = max(opts.RetryMax, opts.RetryMin)
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sink[T]{
		opts:    opts,
		log:     opts.Logger,
		queue:   ring[T]{items: make([]T, max(opts.QueueSize, 1))},
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Sent counts the units delivered.
func (s *Sink[T]) Sent() uint64 { return s.sent.Load() }

// Failed counts the units refused for good.
func (s *Sink[T]) Failed() uint64 { return s.failed.Load() }

// Dropped counts the units lost unsent: pushed out of the full queue (the
// oldest first), added after the sink closed, or still queued when the
// drain gave up.
func (s *Sink[T]) Dropped() uint64 { return s.dropped.Load() }

// Retries counts the Sends that failed transiently.
func (s *Sink[T]) Retries() uint64 { return s.retries.Load() }

// Queued is the number of units waiting, the ones being sent included.
func (s *Sink[T]) Queued() int { return int(s.queued.Load()) }

// Add queues item and returns at once; when the queue is full its oldest
// item is dropped. Once the sink is closed, item is dropped.
func (s *Sink[T]) Add(item T) {
	n := s.opts.Size(item)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.dropped.Add(uint64(n))
		return
	}
	s.queued.Add(int64(n))
	switch {
	case len(s.hand) == 0 && s.queue.n == 0:
		s.hand = append(s.hand, item)
	case s.queue.full():
		s.dropLocked(s.queue.popFront(1))
		fallthrough
	default:
		s.queue.pushBack(item)
	}
	s.mu.Unlock()
	s.signal()
}

// Run is the worker: it sends what is queued until ctx ends or Close is
// called, then what is still queued once more within DrainTimeout, and
// returns. It runs once: a second Run, or a Run after Close, returns at
// once.
func (s *Sink[T]) Run(ctx context.Context) {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return
	}
	s.started = true
	s.mu.Unlock()
	defer close(s.done)
	// Called in a goroutine of its own, so that the drain's deadline runs
	// even while a Send hangs.
	stop := context.AfterFunc(ctx, s.stop)
	defer stop()
	s.work()
}

// Close stops the sink (later items are dropped) and returns once what
// was queued has been tried once more, within DrainTimeout: by Run's
// worker, or here when Run was never called. It is idempotent.
func (s *Sink[T]) Close() error {
	s.stop()
	s.mu.Lock()
	worker := !s.started
	s.started = true
	s.mu.Unlock()
	if worker {
		s.work()
		close(s.done)
	}
	<-s.done
	return nil
}

// stop closes the sink to new items and arms the drain's deadline.
func (s *Sink[T]) stop() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.droppedAtClose = s.dropped.Load()
		close(s.closing)
		s.drain = time.AfterFunc(s.opts.DrainTimeout, s.cancel)
	}
	s.mu.Unlock()
	s.signal()
}

// signal wakes the worker if it waits for items; one pending wake-up is
// enough, since it empties the queue before it waits again.
func (s *Sink[T]) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// work is the worker's loop, until the sink is closed and its queue empty.
func (s *Sink[T]) work() {
	defer s.finish()
	b := retry.Backoff{Min: s.opts.RetryMin, Max: s.opts.RetryMax}
	timer := time.NewTimer(time.Hour) // one timer for every wait
	timer.Stop()
	var (
		outage   time.Time // when the run of transient failures began
		failures int       // in that run
	)
	for {
		batch := s.take()
		if batch == nil {
			return
		}
		done, err := s.opts.Send(s.ctx, batch)
		s.count(done)
		if err == nil {
			s.mu.Lock()
			s.hand = nil
			s.mu.Unlock()
			if !outage.IsZero() {
				s.logf(s.opts.Log.UpLevel, s.opts.Log.Up, "after", time.Since(outage).Round(time.Millisecond),
					"failures", failures, "queued", s.Queued(), "dropped_total", s.Dropped())
				outage, failures = time.Time{}, 0
			}
			b.Reset()
			continue
		}
		rest := s.unfinished(batch)
		if s.ctx.Err() != nil { // the drain gave up: counted by finish
			s.mu.Lock()
			s.hand = nil
			s.dropLocked(rest)
			s.mu.Unlock()
			continue
		}
		s.retries.Add(1)
		failures++
		if outage.IsZero() {
			outage = time.Now()
			s.logf(slog.LevelWarn, s.opts.Log.Down, "queued", s.Queued(), "error", err)
		} else {
			s.logf(slog.LevelDebug, s.opts.Log.Again, "queued", s.Queued(), "failures", failures, "error", err)
		}
		if !s.retryLater(rest) {
			continue // closing: no waiting, each item had its last try
		}
		var floor time.Duration
		if s.opts.RetryAfter != nil {
			floor = s.opts.RetryAfter(err)
		}
		timer.Reset(b.Next(floor))
		select {
		case <-timer.C:
		case <-s.closing:
			timer.Stop()
		}
	}
}

// take waits for the next batch: what is in hand, then the oldest queued,
// up to BatchSize; nil once closed and empty.
func (s *Sink[T]) take() []T {
	for {
		s.mu.Lock()
		if n := s.opts.BatchSize - len(s.hand); n > 0 {
			s.hand = append(s.hand, s.queue.popFront(n)...)
		}
		batch, closed := s.hand, s.closed
		s.mu.Unlock()
		if len(batch) > 0 {
			return batch
		}
		if closed {
			return nil
		}
		<-s.wake
	}
}

// count takes what a Send finished off the queued units.
func (s *Sink[T]) count(d Done) {
	s.sent.Add(uint64(d.Sent))
	s.failed.Add(uint64(d.Failed))
	s.queued.Add(-int64(d.Sent + d.Failed))
}

// unfinished is batch's items with units left, in order.
func (s *Sink[T]) unfinished(batch []T) []T {
	rest := batch[:0]
	for _, it := range batch {
		if s.opts.Size(it) > 0 {
			rest = append(rest, it)
		}
	}
	return rest
}

// retryLater keeps rest for another try after a transient failure: in
// hand (KeepFailed), or back at the queue's head, as much of it as fits
// (its oldest dropped when the queue filled meanwhile). Closing: rest is
// dropped instead, and false returned.
func (s *Sink[T]) retryLater(rest []T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hand = nil
	if s.closed {
		s.dropLocked(rest)
		return false
	}
	if s.opts.KeepFailed && len(rest) > 0 {
		s.hand = rest
		return true
	}
	if room := len(s.queue.items) - s.queue.n; len(rest) > room {
		s.dropLocked(rest[:len(rest)-room])
		rest = rest[len(rest)-room:]
	}
	s.queue.pushFront(rest)
	return true
}

// dropLocked counts items' units lost unsent.
func (s *Sink[T]) dropLocked(items []T) {
	n := 0
	for _, it := range items {
		n += s.opts.Size(it)
	}
	s.dropped.Add(uint64(n))
	s.queued.Add(-int64(n))
}

// finish ends the drain: its deadline is no longer needed, and what it
// dropped is said.
func (s *Sink[T]) finish() {
	s.mu.Lock()
	s.drain.Stop()
	n := s.dropped.Load() - s.droppedAtClose
	s.mu.Unlock()
	s.cancel()
	if n > 0 {
		s.logf(slog.LevelWarn, s.opts.Log.Dropped, "dropped", n)
	}
}

func (s *Sink[T]) logf(level slog.Level, msg string, args ...any) {
	if msg != "" {
		s.log.Log(context.Background(), level, msg, args...)
	}
}
