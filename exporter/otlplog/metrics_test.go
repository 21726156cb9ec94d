package otlplog

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// oneMetric is the Sender's collector narrowed to one metric, for
// promtestutil.ToFloat64.
type oneMetric struct {
	s    *Sender
	name string
}

func (o *oneMetric) Describe(ch chan<- *prometheus.Desc) { o.s.Describe(ch) }

func (o *oneMetric) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 10)
	o.s.Collect(all)
	close(all)
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+o.name+`"`) {
			ch <- m
		}
	}
}
