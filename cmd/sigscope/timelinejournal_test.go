package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter/journal"
)

// `timeline -f` on a node journal prints its episodes as it prints a
// recording's: a journal of the episodes a recording makes reads as that
// recording, in text and JSON, through the same filters; a directory is
// read oldest file first, and a cut last line is skipped and said.
func TestTimelineReadsAJournal(t *testing.T) {
	var recs []string
	for _, name := range []string{"docker_stop_t3.jsonl", "catatonit.jsonl", "sigblock.jsonl"} {
		recs = append(recs, filepath.Join("..", "..", "episodes", "timeline", "testdata", "streams", name))
	}
	run := func(f timelineFlags) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := runTimeline(t.Context(), f, strings.NewReader(""), &out, &errOut); err != nil {
			t.Fatalf("timeline %+v: %v\n%s", f, err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	// What the recordings print, one after the other.
	fromRecs := func(f timelineFlags) string {
		var all string
		for _, rec := range recs {
			f.file = rec
			out, _ := run(f)
			all += out
		}
		return all
	}
	jsonOut := fromRecs(timelineFlags{output: "json"})
	var eps []timeline.Episode
	for _, line := range strings.Split(strings.TrimSpace(jsonOut), "\n") {
		var ep timeline.Episode
		if err := json.Unmarshal([]byte(line), &ep); err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	if len(eps) < 2 {
		t.Fatalf("the recording made %d episodes, want several", len(eps))
	}

	// A journal of two files: the first episodes, then the last.
	dir := t.TempDir()
	for i, part := range [][]timeline.Episode{eps[:1], eps[1:]} {
		j, err := journal.Open(journal.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		for k := range part {
			j.ObserveEpisode(&part[k])
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if i == 0 { // the next Open begins a new file
			files, _ := journal.Files(dir)
			f, _ := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
			_, _ = f.WriteString(`{"id":99,"outcome":"grace`)
			_ = f.Close()
		}
	}
	files, _ := journal.Files(dir)
	if len(files) != 2 {
		t.Fatalf("journal files %v, want 2", files)
	}

	textRec := fromRecs(timelineFlags{output: "text"})
	textDir, errDir := run(timelineFlags{file: dir, output: "text"})
	if textDir != textRec {
		t.Errorf("the journal directory in text:\n%s\nwant, as the recording:\n%s", textDir, textRec)
	}
	if !strings.Contains(errDir, "skipped 1 line(s)") || !strings.Contains(errDir, "cut off") {
		t.Errorf("stderr %q: want the cut line said", errDir)
	}
	jsonDir, _ := run(timelineFlags{file: dir, output: "json"})
	if jsonDir != jsonOut {
		t.Errorf("the journal directory in JSON:\n%s\nwant\n%s", jsonDir, jsonOut)
	}

	name := eps[len(eps)-1].Container.Name
	one, _ := run(timelineFlags{file: files[1], output: "json", container: name})
	want := fromRecs(timelineFlags{output: "json", container: name})
	if one == "" || one != want {
		t.Errorf("one journal file, --container %s:\n%s\nwant\n%s", name, one, want)
	}
	if none, _ := run(timelineFlags{file: files[1], output: "json", container: "no-such"}); none != "" {
		t.Errorf("--container no-such printed %s", none)
	}
}
