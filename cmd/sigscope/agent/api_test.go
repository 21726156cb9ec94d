package agent

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"testing"
	"time"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// apiAgent is an agent that never runs its tracer: the API over episodes
// handed to complete, as the pipeline would.
func apiAgent(t *testing.T, capacity int, eps []timeline.Episode) (*Agent, http.Handler) {
	t.Helper()
	a, err := New(Options{MaxEpisodes: capacity, NodeName: "node-a", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.resolver.Close() })
	a.complete(eps)
	return a, a.Handler()
}

func getJSON(t *testing.T, h http.Handler, target string, v any) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if rec.Code == http.StatusOK && v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s: %v\n%s", target, err, rec.Body)
		}
	}
	return rec
}

func ids(eps []timeline.Episode) []uint64 {
	out := []uint64{}
	for _, ep := range eps {
		out = append(out, ep.ID)
	}
	return out
}

// The v1 episode listing: IDs and node set by the agent, every filter,
// paging backwards with the Link header until the ring's oldest, and what
// /api/v1/info says of a ring that has evicted episodes.
func TestEpisodesAPI(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	web := &timeline.Owner{Kind: "Deployment", Name: "web"}
	db := &timeline.Owner{Kind: "StatefulSet", Name: "db"}
	var eps []timeline.Episode
	for i := range 8 {
		ep := timeline.Episode{Start: t0.Add(time.Duration(i) * time.Minute), Outcome: timeline.OutcomeGraceful,
			Container: timeline.Container{Identity: identity.Identity{ID: "c0ffee" + string(rune('a'+i)), Name: "app", Namespace: "shop", Pod: "web-1"}}, Owner: web}
		switch i % 3 {
		case 1:
			ep.Outcome, ep.Owner, ep.Container.Pod = timeline.OutcomeIgnoredByInit, db, "db-0"
		case 2:
			ep.Container.Namespace, ep.Owner = "other", nil
		}
		eps = append(eps, ep)
	}
	// A ring of 6: episodes 1 and 2 are pushed out.
	_, h := apiAgent(t, 6, eps)

	var all []timeline.Episode
	getJSON(t, h, "/api/v1/episodes", &all)
	if got := ids(all); len(got) != 6 || got[0] != 3 || got[5] != 8 {
		t.Fatalf("ids %v, want 3..8 oldest first", got)
	}
	for _, ep := range all {
		if ep.Node != "node-a" {
			t.Errorf("episode %d node %q", ep.ID, ep.Node)
		}
	}

	for _, tc := range []struct {
		query string
		want  []uint64
	}{
		{"namespace=shop", []uint64{4, 5, 7, 8}},
		{"namespace=shop&pod=db-0", []uint64{5, 8}},
		{"owner=Deployment/web", []uint64{4, 7}},
		{"owner=deployment/web", []uint64{4, 7}},
		{"owner=db", []uint64{5, 8}},
		{"owner=DaemonSet/db", []uint64{}},
		// As kubectl sigscope timeline deploy/web -n shop --since asks.
		{apiv1.EpisodeQuery{Namespace: "shop", Owner: *web, Since: apiv1.At(t0.Add(5 * time.Minute))}.Encode(), []uint64{7}},
		{apiv1.EpisodeQuery{Namespace: "other", Owner: *web}.Encode(), []uint64{}},
		{"outcome=ignored_by_init", []uint64{5, 8}},
		{"container=c0ffeeg", []uint64{7}},
		{"since=" + url.QueryEscape(t0.Add(5*time.Minute).Format(time.RFC3339)), []uint64{6, 7, 8}},
		{"until=" + url.QueryEscape(t0.Add(3*time.Minute).Format(time.RFC3339)), []uint64{3, 4}},
		{"since=100000h", []uint64{3, 4, 5, 6, 7, 8}},
		{"limit=2", []uint64{7, 8}},
		{"before=5", []uint64{3, 4}},
	} {
		var got []timeline.Episode
		rec := getJSON(t, h, "/api/v1/episodes?"+tc.query, &got)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: %d %s", tc.query, rec.Code, rec.Body)
			continue
		}
		if g := ids(got); !slices.Equal(g, tc.want) {
			t.Errorf("%s: ids %v, want %v", tc.query, g, tc.want)
		}
	}

	// Paging: follow rel="next" until it is gone.
	link := regexp.MustCompile(`^<\?([^>]*)>; rel="next"$`)
	var pages [][]uint64
	query := "namespace=shop&limit=3"
	for range 5 {
		var page []timeline.Episode
		rec := getJSON(t, h, "/api/v1/episodes?"+query, &page)
		pages = append(pages, ids(page))
		l := rec.Header().Get("Link")
		if l == "" {
			break
		}
		m := link.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("Link header %q", l)
		}
		query = m[1]
	}
	if len(pages) != 2 || !slices.Equal(pages[0], []uint64{5, 7, 8}) || !slices.Equal(pages[1], []uint64{4}) {
		t.Errorf("pages %v, want [[5 7 8] [4]]", pages)
	}

	for _, bad := range []string{"limit=-1", "limit=x", "before=y", "since=yesterday", "owner=Deployment/", "outcome=fine"} {
		if rec := getJSON(t, h, "/api/v1/episodes?"+bad, nil); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, rec.Code)
		}
	}

	var info apiv1.Info
	getJSON(t, h, "/api/v1/info", &info)
	if info.APIVersion != "v1" || info.Node != "node-a" || info.Episodes.Kept != 6 || info.Episodes.Capacity != 6 ||
		info.Episodes.Evicted != 2 || info.Episodes.LastID != 8 || !info.Episodes.OldestAt.Equal(t0.Add(2*time.Minute)) ||
		!info.Episodes.EvictedUntil.Equal(t0.Add(time.Minute)) {
		t.Errorf("info %+v", info)
	}
	if info.Ready || info.Kubernetes {
		t.Errorf("info: ready %v kubernetes %v for an agent that never ran, without a client", info.Ready, info.Kubernetes)
	}
}
