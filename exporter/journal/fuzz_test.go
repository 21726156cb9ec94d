package journal

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sigscope/sigscope/episodes/pipeline/pipelinetest"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// Whatever a journal file holds (a disk that filled mid-line, power loss,
// another program's lines), reading it never fails nor panics: every
// non-blank line is an episode or counted as skipped, and the agent's
// load agrees with `timeline -f`'s read on both counts and on the last id.
func FuzzReadEpisodes(f *testing.F) {
	eps := numbered(pipelinetest.StreamEpisodes(f), 1, 3)
	var whole bytes.Buffer
	for i := range eps {
		b, _ := json.Marshal(eps[i])
		whole.Write(append(b, '\n'))
	}
	f.Add(whole.Bytes())
	f.Add(whole.Bytes()[:whole.Len()-100])                  // cut mid-line
	f.Add([]byte("\n  \n{\"id\":7}\n{\"outcome\":\"x\"\n")) // blank, no outcome, cut
	f.Add([]byte(`{"id":18446744073709551615,"outcome":"graceful","steps":[]}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ids []uint64
		st, err := ReadEpisodes(bytes.NewReader(data), func(ep *timeline.Episode) error {
			ids = append(ids, ep.ID)
			return nil
		})
		if err != nil {
			t.Fatalf("ReadEpisodes: %v", err)
		}
		lines := 0
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.Trim(l, " \t\r")) > 0 {
				lines++
			}
		}
		if st.Episodes+st.Skipped != lines || st.Episodes != len(ids) {
			t.Fatalf("%d episodes + %d skipped of %d non-blank lines (%d handed on)", st.Episodes, st.Skipped, lines, len(ids))
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, fileName(1)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		ld, err := Load(dir, 2)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		// Load decodes only the kept lines in full, so a line of whole JSON
		// with an id and an outcome that is no episode (a bad step) counts
		// as read there unless kept: it agrees on every line's fate, and
		// keeps episodes ReadEpisodes read, with their ids.
		if ld.Lines+ld.Skipped != lines || ld.Lines < st.Episodes || len(ld.Episodes) > min(2, ld.Lines) {
			t.Fatalf("Load: %d lines, %d skipped, %d kept, of %d non-blank; ReadEpisodes: %d episodes", ld.Lines, ld.Skipped, len(ld.Episodes), lines, st.Episodes)
		}
		var last uint64
		for _, id := range ids {
			last = max(last, id)
		}
		if ld.LastID < last {
			t.Fatalf("Load's last id %d, below the episode id %d", ld.LastID, last)
		}
		if st.Episodes >= 2 && !slices.Contains(ids, ld.Episodes[len(ld.Episodes)-1].ID) {
			t.Fatalf("Load kept id %d, which ReadEpisodes did not read", ld.Episodes[len(ld.Episodes)-1].ID)
		}
	})
}
