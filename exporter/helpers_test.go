package exporter

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type collectorFunc func(ch chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

func metricLabels(m prometheus.Metric) []string {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		return nil
	}
	var out []string
	for _, l := range pb.GetLabel() {
		out = append(out, l.GetValue())
	}
	return out
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
