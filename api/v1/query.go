package v1

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
)

// EpisodeQuery is the query of GET /api/v1/episodes (docs/api.md). The
// agent parses requests with [ParseEpisodeQuery]; clients (kubectl-sigscope,
// sigscope timeline --server) build theirs with [EpisodeQuery.Values], so
// that the parameters' names and formats are written in this file alone.
// The zero value asks for every kept episode.
type EpisodeQuery struct {
	Namespace string // exact
	Pod       string // exact; without Namespace, in any namespace
	// Container is a container's name or a prefix of its ID: both are
	// tried.
	Container string
	Outcome   timeline.Outcome
	// Owner is the pod's workload: Name exact, Kind case-insensitive and
	// any kind when empty. An empty Name is no owner filter.
	Owner  timeline.Owner
	Since  TimeBound // episodes whose start is at or after it
	Until  TimeBound // episodes whose start is at or before it
	Before uint64    // the paging cursor: episodes with a smaller id; 0 is none
	Limit  int       // the newest Limit matches; 0 is no limit
}

// TimeBound is since or until: a time, or a duration back from the agent's
// clock at the request (evaluated again on every page). The zero value is
// no bound; [At] and [Ago] make the others.
type TimeBound struct {
	at       time.Time
	ago      time.Duration
	relative bool // ago counts, 0 included (since=0s is now, not no bound)
}

// At is a bound at t, sent as RFC 3339 with nanoseconds; a zero t is no
// bound.
func At(t time.Time) TimeBound { return TimeBound{at: t} }

// Ago is a bound d before the agent's now, sent as a Go duration.
func Ago(d time.Duration) TimeBound { return TimeBound{ago: d, relative: true} }

// IsZero says whether b bounds nothing.
func (b TimeBound) IsZero() bool { return !b.relative && b.at.IsZero() }

// Resolve returns the bound as a time, reading a duration back from now;
// the zero time for no bound.
func (b TimeBound) Resolve(now time.Time) time.Time {
	if b.relative {
		return now.Add(-b.ago)
	}
	return b.at
}

// String is the bound as its parameter's value; "" for no bound.
func (b TimeBound) String() string {
	switch {
	case b.relative:
		return b.ago.String()
	case !b.at.IsZero():
		return b.at.Format(time.RFC3339Nano)
	}
	return ""
}

// Query parameters of /api/v1/episodes and /api/v1/audit.
const (
	paramNamespace = "namespace"
	paramPod       = "pod"
	paramContainer = "container"
	paramOutcome   = "outcome"
	paramOwner     = "owner"
	paramSince     = "since"
	paramUntil     = "until"
	paramBefore    = "before"
	paramLimit     = "limit"
)

// Values is the query as URL parameters, empty ones left out: an agent
// ignores empty parameters, and a shorter URL reads better in logs.
func (q EpisodeQuery) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set(paramNamespace, q.Namespace)
	set(paramPod, q.Pod)
	set(paramContainer, q.Container)
	set(paramOutcome, string(q.Outcome))
	if q.Owner.Name != "" {
		if q.Owner.Kind == "" {
			set(paramOwner, q.Owner.Name)
		} else {
			set(paramOwner, q.Owner.String())
		}
	}
	set(paramSince, q.Since.String())
	set(paramUntil, q.Until.String())
	if q.Before > 0 {
		v.Set(paramBefore, strconv.FormatUint(q.Before, 10))
	}
	if q.Limit > 0 {
		v.Set(paramLimit, strconv.Itoa(q.Limit))
	}
	return v
}

// Encode is Values().Encode(): the query string, sorted by name.
func (q EpisodeQuery) Encode() string { return q.Values().Encode() }

// ParseEpisodeQuery reads an /api/v1/episodes query. Empty and unknown
// parameters are ignored, the first of a repeated one counts; a value that
// is not what docs/api.md says is an error, meant for a 400.
func ParseEpisodeQuery(v url.Values) (EpisodeQuery, error) {
	q := EpisodeQuery{Namespace: v.Get(paramNamespace), Pod: v.Get(paramPod), Container: v.Get(paramContainer)}
	if s := v.Get(paramOutcome); s != "" {
		if !timeline.KnownOutcome(timeline.Outcome(s)) {
			return q, fmt.Errorf("outcome %q: not an outcome (docs/timelines.md)", s)
		}
		q.Outcome = timeline.Outcome(s)
	}
	if s := v.Get(paramOwner); s != "" {
		kind, name, ok := strings.Cut(s, "/")
		if !ok {
			kind, name = "", s
		}
		if name == "" {
			return q, fmt.Errorf("owner %q: want KIND/NAME or NAME", s)
		}
		q.Owner = timeline.Owner{Kind: kind, Name: name}
	}
	for _, t := range []struct {
		key string
		dst *TimeBound
	}{{paramSince, &q.Since}, {paramUntil, &q.Until}} {
		s := v.Get(t.key)
		if s == "" {
			continue
		}
		if d, err := time.ParseDuration(s); err == nil && d >= 0 {
			*t.dst = Ago(d)
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, fmt.Errorf("%s %q: want an RFC 3339 time or a duration back from now (1h)", t.key, s)
		}
		*t.dst = At(at)
	}
	for _, n := range []struct {
		key string
		dst func(uint64)
	}{{paramBefore, func(u uint64) { q.Before = u }}, {paramLimit, func(u uint64) { q.Limit = int(min(u, 1<<31)) }}} {
		s := v.Get(n.key)
		if s == "" {
			continue
		}
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("%s %q: want a non-negative integer", n.key, s)
		}
		n.dst(u)
	}
	return q, nil
}

// NextPage is the query of the page after one whose oldest episode is id
// before: the request's own parameters (unknown ones kept, as sent) with
// the cursor set, re-encoded, sorted by name, as a relative URL ("?...")
// so that it holds behind the API server's proxy too.
func NextPage(request url.Values, before uint64) string {
	next := url.Values{}
	for k, vs := range request {
		next[k] = append([]string(nil), vs...)
	}
	next.Set(paramBefore, strconv.FormatUint(before, 10))
	return "?" + next.Encode()
}

// AuditQuery is the query of GET /api/v1/audit (docs/api.md).
type AuditQuery struct {
	Namespace string // exact
	Pod       string // exact
}

// Values is the query as URL parameters, empty ones left out.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	if q.Namespace != "" {
		v.Set(paramNamespace, q.Namespace)
	}
	if q.Pod != "" {
		v.Set(paramPod, q.Pod)
	}
	return v
}

// ParseAuditQuery reads an /api/v1/audit query; it has nothing to refuse.
func ParseAuditQuery(v url.Values) AuditQuery {
	return AuditQuery{Namespace: v.Get(paramNamespace), Pod: v.Get(paramPod)}
}
