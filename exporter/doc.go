// Package exporter turns sigscope's event stream, its stop episodes and the
// PID 1 audit into Prometheus metrics. docs/metrics.md lists every metric.
//
// [Exporter] is a [prometheus.Collector] in the style of
// cloudflare/ebpf_exporter: the hot path ([Exporter.ObserveEvent], called by
// the tracer's callback for every event) only bumps counters in place, and
// the exposition is built at scrape time, when the tracer's own counters
// ([tracer.Stats]) and the resolver's error counts are read too. Nothing is
// read-and-reset: every counter is a monotonic total.
//
// Label values come from processes and runtimes (container, pod and
// namespace names) or from recordings, so none is passed to client_golang
// unchecked: signal, result and outcome words are mapped onto fixed tables
// ("unknown" when out of range) and names are made valid UTF-8 with
// [textsafe.UTF8] and bounded in length. With [Options.PodLabels] the
// per-container series are capped at [Options.MaxSeries] per metric; past the
// cap observations land in one overflow series whose label values are all
// "_overflow", and sigscope_series_overflow_total{metric} counts them.
//
// It owns no I/O: it does not serve HTTP, read the kernel or list containers.
// cmd/sigscope registers it and feeds it.
package exporter
