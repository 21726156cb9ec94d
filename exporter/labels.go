package exporter

import (
	"sort"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/internal/textsafe"
)

// Label values: made valid and bounded, named the way Kubernetes users
// know their containers, and the overflow series past the cap.

// constMetric never panics: label values are cleaned before they get here,
// and should one still be rejected the scrape reports it instead of the
// process dying.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// clean makes an untrusted string a valid, bounded label value, with
// control characters escaped as for a terminal (\xNN): `curl /metrics` on a
// terminal must not run a workload's escape sequences, and Kubernetes names,
// which have none, pass unchanged. It does not allocate for a plain name.
func clean(s string) string {
	s = textsafe.Terminal(s)
	if len(s) > maxLabelLen {
		i := maxLabelLen
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	return s
}

// infoLabels are the namespace, pod and container labels of a container:
// Kubernetes names for a pod's container; "", "" and the runtime's name (its
// short ID when the runtime was not reachable) otherwise; all "" for no
// container.
func infoLabels(c *identity.Info) (namespace, pod, ctr string) {
	if c == nil {
		return "", "", ""
	}
	return containerLabels(c.Identity)
}

func episodeLabels(c *timeline.Container) (namespace, pod, ctr string) {
	return containerLabels(c.Identity)
}

func containerLabels(c identity.Identity) (namespace, pod, ctr string) {
	name := c.Name
	if name == "" {
		name = c.ShortID() // the short ID docker ps shows
	}
	if c.Pod == "" {
		return "", "", clean(name)
	}
	return clean(c.Namespace), clean(c.Pod), clean(name)
}

// seriesKey identifies a series within one metric: a and b index the
// metric's own label tables, the strings are the cleaned pod labels.
type seriesKey struct {
	a, b                      uint8
	namespace, pod, container string
}

// sortKeys orders series so that expositions are stable (the registry sorts
// too; tests and humans reading Collect's output benefit).
func sortKeys(keys []seriesKey) {
	sort.Slice(keys, func(i, j int) bool {
		x, y := keys[i], keys[j]
		switch {
		case x.a != y.a:
			return x.a < y.a
		case x.b != y.b:
			return x.b < y.b
		case x.namespace != y.namespace:
			return x.namespace < y.namespace
		case x.pod != y.pod:
			return x.pod < y.pod
		}
		return x.container < y.container
	})
}

func overflowLabels(d int) []string {
	out := make([]string, d)
	for i := range out {
		out[i] = Overflow
	}
	return out
}
