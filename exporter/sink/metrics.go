package sink

import "github.com/prometheus/client_golang/prometheus"

// Series is one metric series of an output, read at scrape time.
type Series struct {
	Desc   *prometheus.Desc
	Type   prometheus.ValueType
	Labels []string // the values of Desc's variable labels
	Value  func() float64
}

// Collector is an output's metrics: a prometheus.Collector of its series,
// each output naming its sink's counts in its own words (docs/metrics.md).
type Collector []Series

// Describe implements prometheus.Collector.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	seen := make(map[*prometheus.Desc]bool, len(c))
	for _, s := range c {
		if !seen[s.Desc] {
			seen[s.Desc] = true
			ch <- s.Desc
		}
	}
}

// Collect implements prometheus.Collector. A series the client library
// rejects is reported to the scrape instead of panicking (the labels are
// the outputs' constants: this only keeps the library panic-free).
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c {
		m, err := prometheus.NewConstMetric(s.Desc, s.Type, s.Value(), s.Labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(s.Desc, err)
		}
		ch <- m
	}
}

// Counter is a series of a counter.
func Counter(d *prometheus.Desc, value func() uint64, labels ...string) Series {
	return Series{Desc: d, Type: prometheus.CounterValue, Labels: labels, Value: func() float64 { return float64(value()) }}
}

// Gauge is a series of a gauge.
func Gauge(d *prometheus.Desc, value func() int, labels ...string) Series {
	return Series{Desc: d, Type: prometheus.GaugeValue, Labels: labels, Value: func() float64 { return float64(value()) }}
}
