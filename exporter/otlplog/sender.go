package otlplog

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter/sink"
)

// Defaults for [Options].
const (
	DefaultQueueSize = 1000
	DefaultBatchSize = 100
	// A collector away is tried again as every output (package sink):
	// after 1 s, 2 s, 4 s... up to every 30 s; the last try of what is
	// queued at shutdown gives up after 3 s.
	DefaultRetryMin     = sink.DefaultRetryMin
	DefaultRetryMax     = sink.DefaultRetryMax
	DefaultDrainTimeout = sink.DefaultDrainTimeout
)

// Sender sends one log record per episode to an OTLP endpoint. Its methods
// are safe for concurrent use.
type Sender struct {
	sink.Collector // sigscope_otlp_log_*: metrics.go

	opts     Options
	exporter sdklog.Exporter
	logger   log.Logger // the SDK's: builds each record with the resource and scope
	now      func() time.Time
	out      *sink.Sink[sdklog.Record] // the records for the exporter
	shutdown sync.Once
}

// New returns a Sender with the exporter opts describe (see [Options]);
// [Sender.Run] exports what it queues.
func New(opts Options) (*Sender, error) {
	opts.defaults()
	exp := opts.exporter
	if exp == nil {
		var err error
		if exp, err = newExporter(opts); err != nil {
			return nil, err
		}
	}
	s := &Sender{opts: opts, exporter: exp, now: time.Now}
	s.out = sink.New(sink.Options[sdklog.Record]{
		QueueSize:    opts.QueueSize,
		BatchSize:    opts.BatchSize,
		Send:         s.export,
		RetryMin:     opts.RetryMin,
		RetryMax:     opts.RetryMax,
		DrainTimeout: opts.DrainTimeout,
		Logger:       opts.Logger,
		Log: sink.Messages{
			Down:    "otlp logs: the collector does not answer; records stay queued and are retried",
			Again:   "otlp logs: retrying",
			Up:      "otlp logs: the collector answers again",
			UpLevel: slog.LevelWarn,
			Dropped: "otlp logs: records still queued at shutdown were dropped",
		},
	})
	s.Collector = s.metrics()
	// The provider's one processor is the Sender's queue: no BatchProcessor,
	// whose own queue drops records uncounted.
	provider := sdklog.NewLoggerProvider(sdklog.WithResource(newResource(opts)), sdklog.WithProcessor((*queueProcessor)(s)))
	s.logger = provider.Logger(scopeName, log.WithInstrumentationVersion(opts.Version))
	return s, nil
}

// scopeName is the records' instrumentation scope, which collectors'
// pipelines match on: it is the path this package had when OTLP output
// shipped, and stays so though the package now lives in exporter/otlplog.
const scopeName = "github.com/sigscope/sigscope/internal/otlplog"

// Sent counts records the endpoint accepted.
func (s *Sender) Sent() uint64 { return s.out.Sent() }

// Failed counts records the endpoint refused for good (an answer that is
// no retryable failure: 400, 401, 413, gRPC InvalidArgument...).
func (s *Sender) Failed() uint64 { return s.out.Failed() }

// Dropped counts records lost unsent: pushed out of the full queue (the
// oldest first), or still queued when Close gave up.
func (s *Sender) Dropped() uint64 { return s.out.Dropped() }

// Retries counts exports that failed transiently and are tried again.
func (s *Sender) Retries() uint64 { return s.out.Retries() }

// Queued is the number of records waiting, the ones being exported included.
func (s *Sender) Queued() int { return s.out.Queued() }

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

// OnEmit queues a copy of r (the SDK's after OnEmit returns); a full queue
// drops its oldest: see doc.go.
func (p *queueProcessor) OnEmit(_ context.Context, r *sdklog.Record) error {
	p.out.Add(r.Clone())
	return nil
}

// Shutdown and ForceFlush do nothing: the Sender drains its queue, within
// its bound.
func (p *queueProcessor) Shutdown(context.Context) error { return nil }

func (p *queueProcessor) ForceFlush(context.Context) error { return nil }

// Run exports the queued records until ctx ends or Close is called, then
// what is still queued once more, for at most Options.DrainTimeout, and
// returns.
func (s *Sender) Run(ctx context.Context) { s.out.Run(ctx) }

// Close stops the Sender (later episodes are dropped), returns once Run
// has (or, when Run was never called, once what is queued had its last
// try), and shuts the exporter down: its connections. It is idempotent.
func (s *Sender) Close() error {
	_ = s.out.Close()
	var err error
	s.shutdown.Do(func() {
		// Nothing is buffered in the exporter (each Export returned):
		// Shutdown only closes its connections, which a collector away
		// cannot hold up for long.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = s.exporter.Shutdown(ctx)
	})
	return err
}

// export is the sink's Send: one Export of up to Options.BatchSize
// records, oldest first, counted by what it returned.
func (s *Sender) export(ctx context.Context, batch []sdklog.Record) (sink.Done, error) {
	err := s.exporter.Export(ctx, batch)
	switch {
	case err == nil:
		return sink.Done{Sent: len(batch)}, nil
	case ctx.Err() != nil, Transient(err):
		// Tried again, or dropped when the drain's deadline ended ctx.
		return sink.Done{}, err
	}
	s.opts.Logger.Warn("otlp logs: the collector refused records", "records", len(batch), "error", err)
	return sink.Done{Failed: len(batch)}, nil
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
