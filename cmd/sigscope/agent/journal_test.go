package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// journalAgent is an agent on a journal directory that never runs its
// tracer: episodes are handed to complete, as the pipeline would.
func journalAgent(t *testing.T, dir string, capacity int) *Agent {
	t.Helper()
	a, err := New(Options{MaxEpisodes: capacity, NodeName: "node-a", JournalDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func served(t *testing.T, a *Agent, target string) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: %d %s", target, rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// A restarted agent serves the episodes of the one before from the
// journal, byte for byte with the same ids, keeps the newest MaxEpisodes,
// and numbers new episodes on from the journal's last id.
func TestJournalOutlivesTheAgent(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	var eps []timeline.Episode
	for i := range 5 {
		eps = append(eps, timeline.Episode{Start: t0.Add(time.Duration(i) * time.Minute), Outcome: timeline.OutcomeIgnoredByInit,
			Container:    timeline.Container{Identity: identity.Identity{ID: "c0ffee" + string(rune('a'+i)), Name: "app\xff", Namespace: "shop", Pod: "web-1"}},
			CascadeKills: []timeline.Proc{{PID: 10 + uint32(i), NsPID: 7, Comm: "sleep"}}})
	}

	first := journalAgent(t, dir, 3)
	first.complete(eps)
	before := served(t, first, "/api/v1/episodes")
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := journalAgent(t, dir, 3)
	defer second.Close()
	if after := served(t, second, "/api/v1/episodes"); !bytes.Equal(after, before) {
		t.Fatalf("after a restart /api/v1/episodes is\n%s\nwant, as before it,\n%s", after, before)
	}
	var info apiv1.Info
	getJSON(t, second.Handler(), "/api/v1/info", &info)
	if info.Episodes.Kept != 3 || info.Episodes.LastID != 5 || info.Episodes.Reloaded != 3 {
		t.Errorf("info after a restart: %+v, want 3 kept and reloaded, last id 5", info.Episodes)
	}
	// Two of the journal's five were not read back: a window from before
	// the earliest start read back is incomplete.
	if !info.Episodes.EvictedUntil.Equal(eps[2].Start) || info.Episodes.Evicted != 2 {
		t.Errorf("info after a restart: evicted %d until %v, want 2 until %v", info.Episodes.Evicted, info.Episodes.EvictedUntil, eps[2].Start)
	}
	more := []timeline.Episode{eps[0], eps[1]}
	second.complete(more)
	if more[0].ID != 6 || more[1].ID != 7 {
		t.Errorf("new episodes numbered %d, %d after a journal ending at 5: want 6, 7", more[0].ID, more[1].ID)
	}
	var got []timeline.Episode
	getJSON(t, second.Handler(), "/api/v1/episodes", &got)
	if g := ids(got); len(g) != 3 || g[0] != 5 || g[2] != 7 {
		t.Errorf("ids served %v, want [5 6 7]", g)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	m := `
# HELP sigscope_journal_episodes_total Episodes written to the node journal (--journal-dir).
# TYPE sigscope_journal_episodes_total counter
sigscope_journal_episodes_total 2
`
	if err := testutil.GatherAndCompare(second.reg, strings.NewReader(m), "sigscope_journal_episodes_total"); err != nil {
		t.Error(err)
	}
}

// A window older than the ring is answered from the journal too: every
// matching episode of the window, in pages when asked, the ring's and the
// journal's on one clock of ids; without a window, the ring alone.
func TestEpisodesWindowFromJournal(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	var eps []timeline.Episode
	for i := range 8 {
		ns := "shop"
		if i == 2 {
			ns = "other"
		}
		eps = append(eps, timeline.Episode{Start: t0.Add(time.Duration(i) * time.Minute), Outcome: timeline.OutcomeGraceful,
			Container: timeline.Container{Identity: identity.Identity{ID: fmt.Sprintf("c%d", i), Name: "app", Namespace: ns, Pod: "web-1"}}})
	}
	first := journalAgent(t, dir, 3)
	first.complete(eps)
	if err := first.Close(); err != nil { // the journal written whole
		t.Fatal(err)
	}
	a := journalAgent(t, dir, 3)
	defer a.Close()

	var got []timeline.Episode
	getJSON(t, a.Handler(), "/api/v1/episodes", &got)
	if g := ids(got); !slices.Equal(g, []uint64{6, 7, 8}) {
		t.Errorf("no window: ids %v, want the ring's [6 7 8]", g)
	}
	since := url.QueryEscape(t0.Add(time.Minute).Format(time.RFC3339))
	getJSON(t, a.Handler(), "/api/v1/episodes?namespace=shop&since="+since, &got)
	if g := ids(got); !slices.Equal(g, []uint64{2, 4, 5, 6, 7, 8}) {
		t.Errorf("a window from minute 1 in shop: ids %v, want [2 4 5 6 7 8] (3 is another namespace's, 1 before the window)", g)
	}
	// In pages of two, following the Link header.
	var all []uint64
	next := "/api/v1/episodes?namespace=shop&limit=2&since=" + since
	for next != "" {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, next, nil))
		var page []timeline.Episode
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %v %s", next, rec.Code, err, rec.Body)
		}
		all = append(ids(page), all...)
		next = ""
		if l := rec.Header().Get("Link"); l != "" {
			next = "/api/v1/episodes" + strings.TrimSuffix(strings.TrimPrefix(strings.Split(l, ";")[0], "<"), ">")
		}
		if len(all) > 20 {
			t.Fatal("pages without end")
		}
	}
	if !slices.Equal(all, []uint64{2, 4, 5, 6, 7, 8}) {
		t.Errorf("paged: ids %v, want [2 4 5 6 7 8]", all)
	}
	var info apiv1.Info
	getJSON(t, a.Handler(), "/api/v1/info", &info)
	if !info.Episodes.Journal {
		t.Errorf("info does not say windows are answered from the journal: %+v", info.Episodes)
	}
}
