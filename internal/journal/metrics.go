package journal

import "github.com/prometheus/client_golang/prometheus"

// The journal's metrics, read from its counters at scrape time.
var (
	episodesDesc = prometheus.NewDesc("sigscope_journal_episodes_total",
		"Episodes written to the node journal (--journal-dir).", nil, nil)
	errorsDesc = prometheus.NewDesc("sigscope_journal_errors_total",
		"Failed writes to the node journal (a full or read-only disk, a directory that cannot be created): each attempt, the retries after a backoff included. Tracing goes on.", nil, nil)
	droppedDesc = prometheus.NewDesc("sigscope_journal_dropped_total",
		"Episodes never written to the node journal: the writer's queue was full (the disk failing or slow), the disk still failed at shutdown, or the episode is larger than a journal file.", nil, nil)
	skippedDesc = prometheus.NewDesc("sigscope_journal_skipped_lines_total",
		"Lines of the node journal skipped when the agent read it back at start: not whole episodes (a line cut by power loss or a full disk).", nil, nil)
)

// Describe implements prometheus.Collector.
func (j *Journal) Describe(ch chan<- *prometheus.Desc) {
	ch <- episodesDesc
	ch <- errorsDesc
	ch <- droppedDesc
	ch <- skippedDesc
}

// Collect implements prometheus.Collector.
func (j *Journal) Collect(ch chan<- prometheus.Metric) {
	for _, c := range [...]struct {
		d *prometheus.Desc
		n uint64
	}{
		{episodesDesc, j.written.Load()},
		{errorsDesc, j.errs.Load()},
		{droppedDesc, j.dropped.Load()},
		{skippedDesc, j.skipped.Load()},
	} {
		m, err := prometheus.NewConstMetric(c.d, prometheus.CounterValue, float64(c.n))
		if err != nil {
			// Reported to the scrape rather than panicking (never, without labels).
			m = prometheus.NewInvalidMetric(c.d, err)
		}
		ch <- m
	}
}

// Stats are the journal's counters, as the metrics say them.
type Stats struct {
	Written, Errors, Dropped, Skipped uint64
}

// Stats reads the counters.
func (j *Journal) Stats() Stats {
	return Stats{Written: j.written.Load(), Errors: j.errs.Load(), Dropped: j.dropped.Load(), Skipped: j.skipped.Load()}
}
