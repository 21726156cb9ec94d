package agent

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/sigscope/sigscope/episodes/pipeline/pipelinetest"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// /api/v1/episodes, written from the lines encoded as episodes enter the
// ring, is byte for byte what encoding/json writes for the same episodes
// as a slice (the answer before the lines were kept), whole ring or page,
// with the HTML characters and invalid UTF-8 the encoding must keep as they
// were; its Content-Length is its length.
func TestEpisodesStreamedAsEncoded(t *testing.T) {
	eps := pipelinetest.StreamEpisodes(t)
	odd := eps[0]
	odd.Container.Name, odd.Hint = "<a&b>\xff\x01", "\u2028 \"quoted\""
	eps = append(eps, odd)
	a, h := apiAgent(t, len(eps)+5, eps)
	for _, tc := range []struct {
		query string
		first int // of a.ring's episodes, oldest first
	}{
		{"", 0},
		{"?limit=3", len(eps) - 3},
		{"?limit=1", len(eps) - 1},
		{"?before=1", len(eps)}, // none
	} {
		rec := getJSON(t, h, "/api/v1/episodes"+tc.query, nil)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(append([]timeline.Episode{}, a.ring.episodes[tc.first:len(eps)]...)); err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.Bytes(); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%q: %d bytes differ from encoding/json's %d:\n%s\nwant\n%s", tc.query, len(got), want.Len(), got, want.Bytes())
		}
		if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(want.Len()) {
			t.Errorf("%q: Content-Length %s, body %d bytes", tc.query, cl, want.Len())
		}
	}
}
