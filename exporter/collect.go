package exporter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The exposition: built at scrape time from the counters, the tracer's
// and the caches' own readings.

// Describe sends every metric's description: the exporter is a checked collector.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range e.counterFamilies() {
		ch <- f.desc
	}
	for _, d := range []*prometheus.Desc{e.stopDuration.desc, e.endpointLag.desc, e.eventsDesc, e.droppedDesc, e.missedDesc, e.wakeupsDesc,
		e.enrichDesc, e.unresolvedDesc, e.buildDesc, e.auditDesc, e.overflowDesc, e.cacheDesc, e.cacheCapDesc} {
		ch <- d
	}
}

func (e *Exporter) counterFamilies() []*counterFamily {
	return []*counterFamily{e.signals, e.pid1Ignored, e.cascade, e.stops, e.runningOOM, e.exits, e.oom, e.connections, e.probeConns}
}

// histFamilies are the histogram metrics.
func (e *Exporter) histFamilies() []*histFamily {
	return []*histFamily{e.stopDuration, e.endpointLag}
}

// Collect builds the exposition from the counters and reads the tracer's and
// the resolver's counters. A failure to read the tracer's counters is
// reported as an invalid metric (the registry turns it into a scrape error)
// rather than as zeros, which would look like a counter reset.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	for _, f := range e.counterFamilies() {
		f.collect(ch)
	}
	for _, h := range e.histFamilies() {
		h.collect(ch)
	}
	if e.podLabels {
		for _, f := range e.counterFamilies() {
			ch <- constMetric(e.overflowDesc, prometheus.CounterValue, float64(f.overflowed()), f.name)
		}
		for _, h := range e.histFamilies() {
			ch <- constMetric(e.overflowDesc, prometheus.CounterValue, float64(h.overflowedCount()), h.name)
		}
	}

	if e.opts.Stats != nil {
		s, err := e.opts.Stats()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(e.eventsDesc, err)
		} else {
			for _, k := range sigvocab.RingKinds {
				ks := s.Kind(k)
				ch <- constMetric(e.eventsDesc, prometheus.CounterValue, float64(ks.Emitted), k.String())
				ch <- constMetric(e.droppedDesc, prometheus.CounterValue, float64(ks.Dropped), k.String())
			}
			ch <- constMetric(e.missedDesc, prometheus.CounterValue, float64(s.Missed))
			ch <- constMetric(e.wakeupsDesc, prometheus.CounterValue, float64(s.Wakeups))
		}
	}
	if e.opts.EnrichmentErrors != nil {
		bySource := map[string]uint64{}
		for src, n := range e.opts.EnrichmentErrors() {
			bySource[clean(src)] += n
		}
		for src, n := range bySource {
			ch <- constMetric(e.enrichDesc, prometheus.CounterValue, float64(n), src)
		}
	}
	if e.opts.UnresolvedCgroups != nil {
		ch <- constMetric(e.unresolvedDesc, prometheus.CounterValue, float64(e.opts.UnresolvedCgroups()))
	}
	ch <- e.buildInfo
	for _, c := range e.caches() {
		name := clean(c.Name)
		ch <- constMetric(e.cacheDesc, prometheus.GaugeValue, float64(c.Entries), name)
		ch <- constMetric(e.cacheCapDesc, prometheus.GaugeValue, float64(c.Capacity), name)
	}

	e.auditMu.Lock()
	series := e.auditSeries
	e.auditMu.Unlock()
	for _, s := range series { // never modified once stored: SetAudit replaces it
		ch <- constMetric(e.auditDesc, prometheus.GaugeValue, s.value, s.labels[:]...)
	}
}

// caches are Options.Caches and, with pod labels, the exporter's own
// series: each capped metric's series against its cap.
func (e *Exporter) caches() []Cache {
	var out []Cache
	if e.opts.Caches != nil {
		out = e.opts.Caches()
	}
	if e.podLabels {
		for _, f := range e.counterFamilies() {
			f.mu.RLock()
			out = append(out, Cache{Name: "series:" + f.name, Entries: len(f.series), Capacity: f.max})
			f.mu.RUnlock()
		}
		for _, f := range e.histFamilies() {
			f.mu.Lock()
			out = append(out, Cache{Name: "series:" + f.name, Entries: len(f.series), Capacity: f.max})
			f.mu.Unlock()
		}
	}
	return out
}
