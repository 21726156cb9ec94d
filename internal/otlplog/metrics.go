package otlplog

import "github.com/prometheus/client_golang/prometheus"

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

// Describe implements prometheus.Collector.
func (s *Sender) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sentDesc, failedDesc, droppedDesc, queuedDesc, retriesDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *Sender) Collect(ch chan<- prometheus.Metric) {
	ch <- constMetric(sentDesc, prometheus.CounterValue, float64(s.Sent()))
	ch <- constMetric(failedDesc, prometheus.CounterValue, float64(s.Failed()))
	ch <- constMetric(droppedDesc, prometheus.CounterValue, float64(s.Dropped()))
	ch <- constMetric(queuedDesc, prometheus.GaugeValue, float64(s.Queued()))
	ch <- constMetric(retriesDesc, prometheus.CounterValue, float64(s.Retries()))
}

// constMetric reports a rejected metric to the scrape instead of panicking.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}
