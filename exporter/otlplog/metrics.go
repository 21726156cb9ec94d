package otlplog

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigscope/sigscope/exporter/sink"
)

// The Sender's metrics, read from its counters at scrape time. Every
// episode observed is, once its record is out of the queue, exactly one of
// sent, failed or dropped.
var (
	sentDesc = prometheus.NewDesc("sigscope_otlp_log_records_sent_total",
		"OTLP log records (one per stop episode, --otlp-endpoint) the collector accepted.", nil, nil)
	failedDesc = prometheus.NewDesc("sigscope_otlp_log_records_failed_total",
		"OTLP log records the collector refused for good (an answer that is no retryable failure).", nil, nil)
	droppedDesc = prometheus.NewDesc("sigscope_otlp_log_records_dropped_total",
		"OTLP log records lost unsent: pushed out of the full queue while the collector was away, or still queued at shutdown.", nil, nil)
	queuedDesc = prometheus.NewDesc("sigscope_otlp_log_records_queued",
		"OTLP log records waiting for the collector, the ones being exported included.", nil, nil)
	retriesDesc = prometheus.NewDesc("sigscope_otlp_log_exports_retried_total",
		"OTLP log exports that failed transiently (no answer, HTTP 429/502/503/504, gRPC Unavailable...) and are tried again.", nil, nil)
)

func (s *Sender) metrics() sink.Collector {
	return sink.Collector{
		sink.Counter(sentDesc, s.Sent),
		sink.Counter(failedDesc, s.Failed),
		sink.Counter(droppedDesc, s.Dropped),
		sink.Gauge(queuedDesc, s.Queued),
		sink.Counter(retriesDesc, s.Retries),
	}
}
