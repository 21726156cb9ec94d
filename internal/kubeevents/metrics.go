package kubeevents

import "github.com/prometheus/client_golang/prometheus"

// The Recorder's metrics, read from its counters at scrape time.
var (
	eventsDesc = prometheus.NewDesc("sigscope_kube_events_total",
		"Kubernetes Events (--kube-events) by result: sent (the API server accepted it), failed (refused for good, or the pod is another node's), dropped (lost unsent: pushed out of the full queue or still queued at shutdown), suppressed (held back by the rate limit).",
		[]string{"result"}, nil)
	queuedDesc = prometheus.NewDesc("sigscope_kube_events_queued",
		"Kubernetes Events waiting for the API server, the ones being sent included.",
		nil, nil)
	retriesDesc = prometheus.NewDesc("sigscope_kube_events_retries_total",
		"API requests for Kubernetes Events (creates, pod GETs) that failed transiently and are tried again: no answer from the API server, or 429 or 5xx.",
		nil, nil)
)

// Describe implements prometheus.Collector.
func (r *Recorder) Describe(ch chan<- *prometheus.Desc) {
	ch <- eventsDesc
	ch <- queuedDesc
	ch <- retriesDesc
}

// Collect implements prometheus.Collector. Every result is there from the
// start, at 0, so that rate() sees the first increment.
func (r *Recorder) Collect(ch chan<- prometheus.Metric) {
	for _, c := range [...]struct {
		result string
		n      uint64
	}{
		{"sent", r.Sent()},
		{"failed", r.Failed()},
		{"dropped", r.Dropped()},
		{"suppressed", r.Suppressed()},
	} {
		ch <- constMetric(eventsDesc, prometheus.CounterValue, float64(c.n), c.result)
	}
	ch <- constMetric(queuedDesc, prometheus.GaugeValue, float64(r.Queued()))
	ch <- constMetric(retriesDesc, prometheus.CounterValue, float64(r.Retries()))
}

// constMetric reports a rejected metric to the scrape instead of panicking
// (the labels are constants here; this only keeps the library panic-free).
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}
