package kubeevents

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigscope/sigscope/exporter/sink"
)

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

// metrics are the Recorder's series. Every result is there from the
// start, at 0, so that rate() sees the first increment.
func (r *Recorder) metrics() sink.Collector {
	return sink.Collector{
		sink.Counter(eventsDesc, r.Sent, "sent"),
		sink.Counter(eventsDesc, r.Failed, "failed"),
		sink.Counter(eventsDesc, r.Dropped, "dropped"),
		sink.Counter(eventsDesc, r.Suppressed, "suppressed"),
		sink.Gauge(queuedDesc, r.Queued),
		sink.Counter(retriesDesc, r.Retries),
	}
}
