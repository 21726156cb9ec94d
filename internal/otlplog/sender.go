package otlplog

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigscope/sigscope/internal/retry"
	"github.com/sigscope/sigscope/timeline"
)

// Defaults for [Options].
const (
	DefaultQueueSize = 1000
	DefaultBatchSize = 100
	// A collector away is tried again after 1 s, 2 s, 4 s... up to every
	// 30 s, as kubeevents retries the API server.
	DefaultRetryMin = time.Second
	DefaultRetryMax = 30 * time.Second
	// Close gives up after 3 s: the chart's terminationGracePeriodSeconds
	// is 10, and the HTTP server's shutdown and the Events come first.
	DefaultDrainTimeout = 3 * time.Second
)

// Sender sends one log record per episode to an OTLP endpoint. Its methods
// are safe for concurrent use.
type Sender struct {
	opts     Options
	log      *slog.Logger
	exporter sdklog.Exporter
	logger   log.Logger // the SDK's: builds each record with the resource and scope
	now      func() time.Time

	mu      sync.Mutex // guards closed, queue and drain
	closed  bool
	queue   ring
	drain   *time.Timer
	wake    chan struct{}
	closing chan struct{}
	ctx     context.Context // every export's parent; canceled when Close gives up
	cancel  context.CancelFunc
	done    chan struct{}

	sent, failed, dropped, retries atomic.Uint64
	queued                         atomic.Int64 // records queued or being exported
}

// New starts a Sender with the exporter opts describe (see [Options]).
func New(opts Options) (*Sender, error) {
	opts.defaults()
	exp := opts.exporter
	if exp == nil {
		var err error
		if exp, err = newExporter(opts); err != nil {
			return nil, err
		}
	}
	s := &Sender{
		opts:     opts,
		log:      opts.Logger,
		exporter: exp,
		now:      time.Now,
		queue:    ring{recs: make([]sdklog.Record, opts.QueueSize)},
		wake:     make(chan struct{}, 1),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// The provider's one processor is the Sender's queue: no BatchProcessor,
	// whose own queue drops records uncounted.
	provider := sdklog.NewLoggerProvider(sdklog.WithResource(newResource(opts)), sdklog.WithProcessor((*queueProcessor)(s)))
	s.logger = provider.Logger(scopeName, log.WithInstrumentationVersion(opts.Version))
	go s.run()
	return s, nil
}

// scopeName is the records' instrumentation scope.
const scopeName = "github.com/sigscope/sigscope/internal/otlplog"

// Sent counts records the endpoint accepted.
func (s *Sender) Sent() uint64 { return s.sent.Load() }

// Failed counts records the endpoint refused for good (an answer that is
// no retryable failure: 400, 401, 413, gRPC InvalidArgument...).
func (s *Sender) Failed() uint64 { return s.failed.Load() }

// Dropped counts records lost unsent: pushed out of the full queue (the
// oldest first), or still queued when Close gave up.
func (s *Sender) Dropped() uint64 { return s.dropped.Load() }

// Retries counts exports that failed transiently and are tried again.
func (s *Sender) Retries() uint64 { return s.retries.Load() }

// Queued is the number of records waiting, the ones being exported included.
func (s *Sender) Queued() int { return int(s.queued.Load()) }

// ObserveEpisode queues ep's record and returns at once.
func (s *Sender) ObserveEpisode(ep *timeline.Episode) {
	if ep == nil {
		return
	}
	s.logger.Emit(context.Background(), Record(ep, s.now()))
}

// queueProcessor is the Sender as the SDK's processor: OnEmit queues.
type queueProcessor Sender

func (p *queueProcessor) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

func (p *queueProcessor) OnEmit(_ context.Context, r *sdklog.Record) error {
	s := (*Sender)(p)
	rec := r.Clone() // r is the SDK's after OnEmit returns
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.dropped.Add(1)
		return nil
	}
	s.queued.Add(1)
	if s.queue.full() {
		// The oldest goes: see doc.go.
		s.queue.popFront(1)
		s.dropLocked(1)
	}
	s.queue.pushBack(rec)
	s.mu.Unlock()
	s.signal()
	return nil
}

// Shutdown and ForceFlush do nothing: Close drains the queue, within its bound.
func (p *queueProcessor) Shutdown(context.Context) error { return nil }

func (p *queueProcessor) ForceFlush(context.Context) error { return nil }

// dropLocked counts n records lost unsent.
func (s *Sender) dropLocked(n int) {
	s.dropped.Add(uint64(n))
	s.queued.Add(-int64(n))
}

func (s *Sender) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close tries once more to export what is queued, for at most
// Options.DrainTimeout, drops the rest, and shuts the exporter down (its
// connections). Later episodes are dropped. It is idempotent.
func (s *Sender) Close() error {
	s.mu.Lock()
	first := !s.closed
	if first {
		s.closed = true
		close(s.closing)
		s.drain = time.AfterFunc(s.opts.DrainTimeout, s.cancel)
	}
	dropped := s.Dropped()
	s.mu.Unlock()
	s.signal()
	<-s.done
	s.mu.Lock()
	s.drain.Stop()
	s.mu.Unlock()
	s.cancel()
	if !first {
		return nil
	}
	if n := s.Dropped() - dropped; n > 0 {
		s.log.Warn("otlp logs: records still queued at shutdown were dropped", "dropped", n)
	}
	// Nothing is buffered in the exporter (each Export returned): Shutdown
	// only closes its connections, which a collector away cannot hold up
	// for long.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.exporter.Shutdown(ctx)
}

// run is the exporter's one caller: a batch at a time, oldest first. A
// batch that fails transiently goes back to the queue's head and the
// sender waits before the next try, doubling while the collector is away.
func (s *Sender) run() {
	defer close(s.done)
	b := retry.Backoff{Min: s.opts.RetryMin, Max: s.opts.RetryMax}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var outage time.Time
	for {
		batch := s.take()
		if batch == nil {
			return
		}
		err := s.exporter.Export(s.ctx, batch)
		switch {
		case err == nil:
			s.sent.Add(uint64(len(batch)))
			s.queued.Add(-int64(len(batch)))
			if !outage.IsZero() {
				s.log.Warn("otlp logs: the collector answers again", "after", time.Since(outage).Round(time.Millisecond),
					"queued", s.Queued(), "dropped_total", s.Dropped())
				outage = time.Time{}
			}
			b.Reset()
			continue
		case s.ctx.Err() != nil: // Close gave up: counted as dropped
			s.mu.Lock()
			s.dropLocked(len(batch))
			s.mu.Unlock()
			continue
		case !Transient(err):
			s.failed.Add(uint64(len(batch)))
			s.queued.Add(-int64(len(batch)))
			s.log.Warn("otlp logs: the collector refused records", "records", len(batch), "error", err)
			continue
		}
		s.retries.Add(1)
		if outage.IsZero() {
			outage = time.Now()
			s.log.Warn("otlp logs: the collector does not answer; records stay queued and are retried",
				"queued", s.Queued(), "error", err)
		} else {
			s.log.Debug("otlp logs: retrying", "queued", s.Queued(), "error", err)
		}
		if !s.requeue(batch) {
			continue // closing: each record had its last try
		}
		timer.Reset(b.Next(0))
		select {
		case <-timer.C:
		case <-s.closing:
			timer.Stop()
		}
	}
}

// take waits for the oldest records, up to a batch; nil once closed and empty.
func (s *Sender) take() []sdklog.Record {
	for {
		s.mu.Lock()
		batch := s.queue.popFront(s.opts.BatchSize)
		closed := s.closed
		s.mu.Unlock()
		if batch != nil || closed {
			return batch
		}
		<-s.wake
	}
}

// requeue puts batch back at the head after a transient failure, as much
// of it as fits (its oldest records are dropped when the queue filled
// meanwhile), unless the Sender is closing: false, and batch is dropped.
func (s *Sender) requeue(batch []sdklog.Record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.dropLocked(len(batch))
		return false
	}
	if room := len(s.queue.recs) - s.queue.n; len(batch) > room {
		s.dropLocked(len(batch) - room)
		batch = batch[len(batch)-room:]
	}
	s.queue.pushFront(batch)
	return true
}

// Transient reports whether an export may succeed when tried again, by
// the OTLP specification's rules: the collector did not answer (connection
// refused or reset, a timeout), or answered HTTP 429, 502, 503, 504, or
// gRPC Unavailable, DeadlineExceeded, ResourceExhausted, Aborted,
// OutOfRange, DataLoss, Canceled. Any other answer is final.
//
// The exporters' own retries are off (the Sender retries, so that records
// wait in its counted queue): an HTTP exporter's retryable answer is then
// returned as its "retry-able request failure" error, and a request
// without an answer as a *url.Error.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted,
			codes.OutOfRange, codes.DataLoss, codes.Canceled:
			return true
		}
		return false
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return true
	}
	return strings.Contains(err.Error(), "retry-able request failure")
}

// ring is the queue: a fixed array of records.
type ring struct {
	recs    []sdklog.Record
	head, n int
}

func (q *ring) full() bool { return q.n == len(q.recs) }

func (q *ring) pushBack(r sdklog.Record) {
	q.recs[(q.head+q.n)%len(q.recs)] = r
	q.n++
}

// pushFront puts rs, in order, before the queue's head; the caller made room.
func (q *ring) pushFront(rs []sdklog.Record) {
	for i := len(rs) - 1; i >= 0; i-- {
		q.head = (q.head + len(q.recs) - 1) % len(q.recs)
		q.recs[q.head] = rs[i]
		q.n++
	}
}

// popFront removes up to n of the oldest records and returns them; nil
// when empty.
func (q *ring) popFront(n int) []sdklog.Record {
	n = min(n, q.n)
	if n == 0 {
		return nil
	}
	out := make([]sdklog.Record, n)
	for i := range out {
		out[i] = q.recs[q.head]
		q.recs[q.head] = sdklog.Record{}
		q.head = (q.head + 1) % len(q.recs)
	}
	q.n -= n
	return out
}
