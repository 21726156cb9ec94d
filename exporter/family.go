package exporter

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counter is one series' value. Padding is not worth it: one goroutine
// writes, scrapes only read.
type counter struct{ n atomic.Uint64 }

// counterFamily is one counter metric. The hot path takes the read lock
// for a map lookup and adds atomically; only a new series takes the write
// lock (and allocates).
type counterFamily struct {
	name   string
	desc   *prometheus.Desc
	values func(a, b uint8) []string // the metric's own label values for a key
	pod    bool                      // namespace, pod and container labels follow
	max    int                       // series cap; 0: none

	mu       sync.RWMutex
	series   map[seriesKey]*counter
	overflow counter // observations past the cap: the overflow series' value
}

func (f *counterFamily) inc(k seriesKey) { f.add(k, 1) }

// add adds n to k's series.
func (f *counterFamily) add(k seriesKey, n uint64) {
	f.mu.RLock()
	c, ok := f.series[k]
	full := f.max > 0 && len(f.series) >= f.max
	f.mu.RUnlock()
	switch {
	case ok:
		c.n.Add(n)
	case full:
		f.overflow.n.Add(n)
	default:
		f.get(k).n.Add(n)
	}
}

// get returns k's counter, creating it if there is room, else the overflow.
func (f *counterFamily) get(k seriesKey) *counter {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.series[k]; ok {
		return c
	}
	if f.max > 0 && len(f.series) >= f.max {
		return &f.overflow
	}
	c := new(counter)
	f.series[k] = c
	return c
}

func (f *counterFamily) overflowed() uint64 { return f.overflow.n.Load() }

func (f *counterFamily) collect(ch chan<- prometheus.Metric) {
	f.mu.RLock()
	keys := make([]seriesKey, 0, len(f.series))
	vals := make(map[seriesKey]uint64, len(f.series))
	for k, c := range f.series {
		keys = append(keys, k)
		vals[k] = c.n.Load()
	}
	f.mu.RUnlock()
	sortKeys(keys)
	for _, k := range keys {
		ch <- constMetric(f.desc, prometheus.CounterValue, float64(vals[k]), f.labels(k)...)
	}
	if n := f.overflowed(); n > 0 {
		ch <- constMetric(f.desc, prometheus.CounterValue, float64(n), overflowLabels(len(f.labels(seriesKey{})))...)
	}
}

func (f *counterFamily) labels(k seriesKey) []string {
	out := f.values(k.a, k.b)
	if f.pod {
		out = append(out, k.namespace, k.pod, k.container)
	}
	return out
}

// histogram is one series of a histogram family; buckets are not
// cumulative here (Collect sums them).
type histogram struct {
	buckets []uint64 // one per bound of the family, then the +Inf bucket
	count   uint64
	sum     float64
}

func (h *histogram) observe(bounds []float64, v float64) {
	if h.buckets == nil {
		h.buckets = make([]uint64, len(bounds)+1)
	}
	i := 0
	for i < len(bounds) && v > bounds[i] {
		i++
	}
	h.buckets[i]++
	h.count++
	h.sum += v
}

// histFamily is a histogram of episodes (the stop's duration, the
// endpoint's lag). Episodes are rare (one per container stop), so a plain
// mutex guards it.
type histFamily struct {
	name   string
	desc   *prometheus.Desc
	values func(a, b uint8) []string
	pod    bool
	max    int
	bounds []float64 // the buckets' upper bounds

	mu         sync.Mutex
	series     map[seriesKey]*histogram
	overflow   histogram
	overflowed uint64
}

func (f *histFamily) observe(k seriesKey, v float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.series[k]
	if !ok {
		if f.max > 0 && len(f.series) >= f.max {
			f.overflow.observe(f.bounds, v)
			f.overflowed++
			return
		}
		h = new(histogram)
		f.series[k] = h
	}
	h.observe(f.bounds, v)
}

func (f *histFamily) overflowedCount() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.overflowed
}

func (f *histFamily) collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	keys := make([]seriesKey, 0, len(f.series))
	snap := make(map[seriesKey]histogram, len(f.series))
	for k, h := range f.series {
		keys = append(keys, k)
		c := *h
		c.buckets = slices.Clone(h.buckets)
		snap[k] = c
	}
	over := f.overflow
	over.buckets = slices.Clone(over.buckets)
	f.mu.Unlock()
	sortKeys(keys)
	for _, k := range keys {
		h := snap[k]
		ch <- f.metric(&h, f.labels(k))
	}
	if over.count > 0 {
		ch <- f.metric(&over, overflowLabels(len(f.labels(seriesKey{}))))
	}
}

func (f *histFamily) metric(h *histogram, labels []string) prometheus.Metric {
	cum := make(map[float64]uint64, len(f.bounds))
	var n uint64
	for i, b := range f.bounds {
		if h.buckets != nil {
			n += h.buckets[i]
		}
		cum[b] = n
	}
	m, err := prometheus.NewConstHistogram(f.desc, h.count, h.sum, cum, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(f.desc, err)
	}
	return m
}

func (f *histFamily) labels(k seriesKey) []string {
	out := f.values(k.a, k.b)
	if f.pod {
		out = append(out, k.namespace, k.pod, k.container)
	}
	return out
}
