package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/pipeline/pipelinetest"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/testutil"
)

// numbered returns n episodes taken in turn from eps, numbered from first.
func numbered(eps []timeline.Episode, first uint64, n int) []timeline.Episode {
	out := make([]timeline.Episode, n)
	for i := range out {
		out[i] = eps[i%len(eps)]
		out[i].ID, out[i].Node = first+uint64(i), "node-a"
	}
	return out
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func open(t *testing.T, opts Options) *Journal {
	t.Helper()
	opts.Logger = quiet()
	if opts.Queue == 0 {
		opts.Queue = 4096
	}
	j, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	go j.Run(context.Background()) // as the agent runs it; Close stops it
	return j
}

// write journals eps and closes the journal.
func write(t *testing.T, opts Options, eps []timeline.Episode) Stats {
	t.Helper()
	j := open(t, opts)
	for i := range eps {
		j.ObserveEpisode(&eps[i])
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return j.Stats()
}

// Rotation keeps the journal within Files × FileSize, every file within
// FileSize, and what is kept is the newest episodes, whole and in order.
func TestRotationKeepsTheBound(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, FileSize: 16 << 10, Files: 3}
	eps := numbered(pipelinetest.StreamEpisodes(t), 1, 400)
	st := write(t, opts, eps[:150])
	st2 := write(t, opts, eps[150:]) // a restart in between: the newest file goes on
	if st.Written+st2.Written != 400 || st.Dropped+st2.Dropped != 0 || st.Errors+st2.Errors != 0 {
		t.Fatalf("stats %+v then %+v, want 400 written in all, none dropped or failed", st, st2)
	}
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > opts.FileSize {
			t.Errorf("%s: %d bytes, over the file size %d", f, fi.Size(), opts.FileSize)
		}
		total += fi.Size()
	}
	if len(files) > opts.Files || total > int64(opts.Files)*opts.FileSize {
		t.Errorf("%d files, %d bytes: over the bound of %d × %d", len(files), total, opts.Files, opts.FileSize)
	}
	ld, err := Load(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files, %d bytes, %d episodes kept of 400", len(files), total, len(ld.Episodes))
	if ld.Skipped != 0 || ld.LastID != 400 || len(ld.Episodes) < 10 || len(ld.Episodes) >= 400 {
		t.Fatalf("loaded %d episodes (last id %d, %d skipped): want the newest of 400, some rotated out", len(ld.Episodes), ld.LastID, ld.Skipped)
	}
	// A contiguous run ending at the newest: rotation only removes the oldest.
	first := ld.Episodes[0].ID
	for i, ep := range ld.Episodes {
		if ep.ID != first+uint64(i) {
			t.Fatalf("episode %d has id %d, want %d: a gap", i, ep.ID, first+uint64(i))
		}
		want, _ := json.Marshal(eps[ep.ID-1])
		got, _ := json.Marshal(ep)
		if !bytes.Equal(got, want) {
			t.Fatalf("episode %d reads back as\n%s\nwant\n%s", ep.ID, got, want)
		}
	}
}

// A line is exactly what /api/v1/episodes serves for the episode.
func TestLineIsTheAPIObject(t *testing.T) {
	dir := t.TempDir()
	eps := numbered(pipelinetest.StreamEpisodes(t), 7, 1)
	write(t, Options{Dir: dir}, eps)
	files, _ := Files(dir)
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	got, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want) // the agent's writeJSON, one element
	enc.SetEscapeHTML(false)
	if err := enc.Encode(eps[0]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("journal line\n%s\nwant\n%s", got, want.Bytes())
	}
	if !IsEpisodeLine(bytes.TrimSpace(got)) {
		t.Error("IsEpisodeLine: false for an episode")
	}
	rec, err := os.ReadFile(filepath.Join("..", "..", "episodes", "timeline", "testdata", "streams", "catatonit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if IsEpisodeLine(bytes.SplitN(rec, []byte("\n"), 2)[0]) {
		t.Error("IsEpisodeLine: true for a trace record")
	}
}

// Power loss cut the last line: it is skipped and counted, the whole lines
// before it are read, and writing goes on in a new file so that the next
// line is whole.
func TestCutMidLine(t *testing.T) {
	dir := t.TempDir()
	eps := numbered(pipelinetest.StreamEpisodes(t), 1, 6)
	write(t, Options{Dir: dir}, eps[:5])
	files, _ := Files(dir)
	line, _ := json.Marshal(eps[5])
	f, err := os.OpenFile(files[len(files)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(line[:len(line)/2]); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	j := open(t, Options{Dir: dir, Keep: 100})
	ld := j.Loaded()
	if len(ld.Episodes) != 5 || ld.LastID != 5 || ld.Skipped != 1 || j.Stats().Skipped != 1 {
		t.Fatalf("loaded %d episodes, last id %d, %d skipped (metric %d): want 5, 5, 1, 1", len(ld.Episodes), ld.LastID, ld.Skipped, j.Stats().Skipped)
	}
	j.ObserveEpisode(&eps[5])
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ld, err = Load(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ld.Episodes) != 6 || ld.Episodes[5].ID != 6 || ld.Skipped != 1 {
		t.Fatalf("after one more: %d episodes, %d skipped; want 6 (the last id 6) and the cut line still skipped", len(ld.Episodes), ld.Skipped)
	}
	var st ReadStats
	fh, _ := os.Open(files[len(files)-1])
	defer fh.Close()
	st, err = ReadEpisodes(fh, func(*timeline.Episode) error { return nil })
	if err != nil || st.Episodes != 5 || st.Skipped != 1 || !st.Truncated {
		t.Errorf("ReadEpisodes of the cut file: %+v, %v; want 5 episodes, 1 skipped, truncated", st, err)
	}
}

// The agent gets the newest Keep episodes, oldest first, and the last id.
func TestLoadNewest(t *testing.T) {
	dir := t.TempDir()
	write(t, Options{Dir: dir, FileSize: 8 << 10, Files: 100}, numbered(pipelinetest.StreamEpisodes(t), 1, 50))
	ld, err := Load(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ld.Files < 2 || ld.Lines != 50 || ld.LastID != 50 || len(ld.Episodes) != 3 {
		t.Fatalf("%d files, %d lines, last id %d, %d kept: want several files, 50, 50, 3", ld.Files, ld.Lines, ld.LastID, len(ld.Episodes))
	}
	for i, ep := range ld.Episodes {
		if ep.ID != uint64(48+i) || ep.Node != "node-a" || ep.Outcome == "" {
			t.Errorf("kept %d: id %d node %q outcome %q, want id %d", i, ep.ID, ep.Node, ep.Outcome, 48+i)
		}
	}
	if ld, err := Load(filepath.Join(dir, "none"), 3); err != nil || ld.Lines != 0 {
		t.Errorf("a missing directory: %+v, %v; want an empty journal", ld, err)
	}
}

// A directory that cannot be written does not block the caller: the
// failures are counted and retried after a backoff, and once the disk
// takes writes again the episode is written.
func TestFailedWritesAreRetried(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "journal")
	// A file where the directory should be: every create fails (ENOTDIR),
	// as it would on a read-only disk, root or not.
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	j := open(t, Options{Dir: filepath.Join(dir, "sub"), Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Queue: 2})
	eps := numbered(pipelinetest.StreamEpisodes(t), 1, 10)
	start := time.Now()
	for i := range eps {
		j.ObserveEpisode(&eps[i])
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("ObserveEpisode blocked %v on a failing disk", d)
	}
	testutil.WaitFor(t, "the journal's counters", func() bool { return j.Stats().Errors >= 3 })
	if st := j.Stats(); st.Written != 0 || st.Dropped == 0 {
		t.Errorf("on a failing disk: %+v, want nothing written and the queue's overflow dropped", st)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the journal's counters", func() bool { return j.Stats().Written >= 1 })
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	st := j.Stats()
	if st.Written+st.Dropped != 10 {
		t.Errorf("%+v: written and dropped do not add up to the 10 episodes", st)
	}
	ld, err := Load(filepath.Join(dir, "sub"), 100)
	if err != nil || uint64(len(ld.Episodes)) != st.Written || ld.Episodes[0].ID != 1 {
		t.Errorf("read back %d episodes (%v), want the %d written, the first (id 1) among them", len(ld.Episodes), err, st.Written)
	}
}

// A second writer of the same directory is refused: ids would collide.
func TestSecondWriterRefused(t *testing.T) {
	dir := t.TempDir()
	j := open(t, Options{Dir: dir})
	defer j.Close()
	if j2, err := Open(Options{Dir: dir, Logger: quiet()}); err == nil {
		_ = j2.Close()
		t.Fatal("a second Open of the same directory succeeded")
	}
}
