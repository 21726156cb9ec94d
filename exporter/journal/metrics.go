package journal

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigscope/sigscope/exporter/sink"
)

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

// metrics are the journal's series, in the sink's counts: a write is a
// send, a failed write a transient failure, and an episode refused for
// good (larger than a file) is as lost as one dropped.
func (j *Journal) metrics() sink.Collector {
	return sink.Collector{
		sink.Counter(episodesDesc, j.out.Sent),
		sink.Counter(errorsDesc, j.out.Retries),
		sink.Counter(droppedDesc, j.dropped),
		sink.Counter(skippedDesc, j.skipped.Load),
	}
}

func (j *Journal) dropped() uint64 { return j.out.Dropped() + j.out.Failed() }

// Stats are the journal's counters, as the metrics say them.
type Stats struct {
	Written, Errors, Dropped, Skipped uint64
}

// Stats reads the counters.
func (j *Journal) Stats() Stats {
	return Stats{Written: j.out.Sent(), Errors: j.out.Retries(), Dropped: j.dropped(), Skipped: j.skipped.Load()}
}
