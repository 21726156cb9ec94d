package agent

import (
	"strings"
	"time"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// episodeFilter is an /api/v1/episodes query (apiv1.EpisodeQuery, which
// parses it) with its time bounds read against the request's now, once, so
// that every episode of one answer is judged against the same window.
type episodeFilter struct {
	q            apiv1.EpisodeQuery
	since, until time.Time
}

func newEpisodeFilter(q apiv1.EpisodeQuery, now time.Time) episodeFilter {
	return episodeFilter{q: q, since: q.Since.Resolve(now), until: q.Until.Resolve(now)}
}

func (f *episodeFilter) match(ep *timeline.Episode) bool {
	q, c := &f.q, &ep.Container
	switch {
	case q.Before > 0 && ep.ID >= q.Before,
		!(identity.Filter{Container: q.Container, Namespace: q.Namespace, Pod: q.Pod}).Matches(c.Identity),
		q.Outcome != "" && ep.Outcome != q.Outcome,
		!f.since.IsZero() && ep.Start.Before(f.since),
		!f.until.IsZero() && ep.Start.After(f.until):
		return false
	}
	if q.Owner.Name != "" {
		o := ep.Owner
		if o == nil || o.Name != q.Owner.Name || q.Owner.Kind != "" && !strings.EqualFold(o.Kind, q.Owner.Kind) {
			return false
		}
	}
	return true
}
