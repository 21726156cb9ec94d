package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The agent's /metrics, read the one way every test here reads it.

// scrapeMetrics reads and parses base's /metrics.
func scrapeMetrics(client *http.Client, base string) (map[string]*dto.MetricFamily, error) {
	body, err := get(context.Background(), client, base+"/metrics")
	if err != nil {
		return nil, err
	}
	return parseMetrics(body)
}

// parseMetrics parses an exposition with the legacy name scheme: the
// strictest, what every Prometheus accepts.
func parseMetrics(body []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("/metrics does not parse: %v", err)
	}
	return fams, nil
}

// sumMetric adds the values of name's series whose labels include match.
func sumMetric(fams map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.Metric {
		if !labelsMatch(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// mustScrape is scrapeMetrics that fails the test on an error.
func mustScrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := scrapeMetrics(http.DefaultClient, base)
	if err != nil {
		t.Fatalf("%s/metrics: %v", base, err)
	}
	return fams
}

// hasMetric reports whether name has a series whose labels include match.
func hasMetric(fams map[string]*dto.MetricFamily, name string, match map[string]string) bool {
	f := fams[name]
	if f == nil {
		return false
	}
	for _, m := range f.Metric {
		if labelsMatch(m, match) {
			return true
		}
	}
	return false
}

// labelsMatch reports whether m's labels include every pair of match.
func labelsMatch(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		found := false
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
