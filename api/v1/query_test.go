package v1

import (
	"net/url"
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
)

// What a client writes, the agent reads back as the same query; the
// parameters' names and formats are those of docs/api.md.
func TestEpisodeQueryRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 123, time.UTC)
	for _, tc := range []struct {
		q    EpisodeQuery
		want string
	}{
		{EpisodeQuery{}, ""},
		{EpisodeQuery{Namespace: "shop", Pod: "web-1"}, "namespace=shop&pod=web-1"},
		{EpisodeQuery{Container: "c0ffee", Outcome: timeline.OutcomeIgnoredByInit}, "container=c0ffee&outcome=ignored_by_init"},
		{EpisodeQuery{Owner: timeline.Owner{Kind: "Deployment", Name: "web"}}, "owner=Deployment%2Fweb"},
		{EpisodeQuery{Owner: timeline.Owner{Name: "web"}}, "owner=web"},
		{EpisodeQuery{Since: At(at), Until: Ago(90 * time.Second)}, "since=2026-11-25T10%3A00%3A00.000000123Z&until=1m30s"},
		{EpisodeQuery{Since: Ago(0)}, "since=0s"},
		{EpisodeQuery{Before: 4118, Limit: 50, Namespace: "shop"}, "before=4118&limit=50&namespace=shop"},
	} {
		if got := tc.q.Encode(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.q, got, tc.want)
		}
		back, err := ParseEpisodeQuery(tc.q.Values())
		if err != nil {
			t.Errorf("%q: %v", tc.want, err)
			continue
		}
		if back.Encode() != tc.want || !back.Since.Resolve(at).Equal(tc.q.Since.Resolve(at)) || back.Since.IsZero() != tc.q.Since.IsZero() {
			t.Errorf("%q read back as %+v", tc.want, back)
		}
	}
}

func TestParseEpisodeQuery(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	q, err := ParseEpisodeQuery(url.Values{"since": {"1h", "2h"}, "until": {""}, "owner": {"deployment/web"}, "unknown": {"x"}, "limit": {"99999999999"}})
	if err != nil {
		t.Fatal(err)
	}
	if !q.Since.Resolve(now).Equal(now.Add(-time.Hour)) || !q.Until.IsZero() || q.Owner != (timeline.Owner{Kind: "deployment", Name: "web"}) || q.Limit != 1<<31 {
		t.Errorf("%+v", q)
	}
	for _, bad := range []string{"limit=-1", "limit=x", "before=y", "since=yesterday", "since=-1h", "until=2026-11-25T10:00:00 01:00", "owner=Deployment/", "outcome=fine"} {
		v, _ := url.ParseQuery(bad)
		if _, err := ParseEpisodeQuery(v); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// The next page keeps the request's parameters as sent, unknown ones too,
// and sets the cursor.
func TestNextPage(t *testing.T) {
	v, _ := url.ParseQuery("namespace=shop&limit=50&before=9000&x=1&since=90s")
	if got, want := NextPage(v, 4118), "?before=4118&limit=50&namespace=shop&since=90s&x=1"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if v.Get("before") != "9000" {
		t.Error("NextPage changed the request's query")
	}
}

func TestAuditQuery(t *testing.T) {
	q := AuditQuery{Namespace: "shop", Pod: "web-1"}
	if got := q.Values().Encode(); got != "namespace=shop&pod=web-1" {
		t.Errorf("%q", got)
	}
	if back := ParseAuditQuery(q.Values()); back != q {
		t.Errorf("%+v", back)
	}
}
