package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter/journal"
)

// episodeSource is what `timeline -f` was given when it is no recording
// of trace events: a journal directory, or a file of episode lines (a
// journal file, or the output of `timeline -o json`).
type episodeSource struct {
	files []string  // a directory's journal files, oldest first
	in    io.Reader // else one file (or stdin), its first line already peeked
	name  string
}

// journalSource says whether -f names a journal: a directory (its files),
// or a file whose first line is an episode. Otherwise it returns the
// reader to read as a recording, with nothing of it lost to the peek.
func journalSource(name string, in io.Reader) (*episodeSource, io.Reader, error) {
	if name != "-" {
		if st, err := os.Stat(name); err == nil && st.IsDir() {
			files, err := journal.Files(name)
			if err != nil {
				return nil, nil, err
			}
			if len(files) == 0 {
				return nil, nil, fmt.Errorf("%s: a directory without journal files (episodes-*.jsonl)", name)
			}
			return &episodeSource{files: files, name: name}, nil, nil
		}
	}
	br := bufio.NewReaderSize(in, 64<<10)
	var head bytes.Buffer
	for {
		line, err := br.ReadBytes('\n')
		head.Write(line)
		if t := bytes.TrimSpace(line); len(t) > 0 || err != nil {
			r := io.MultiReader(bytes.NewReader(head.Bytes()), br)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, nil, err
			}
			if journal.IsEpisodeLine(t) {
				return &episodeSource{in: r, name: name}, nil, nil
			}
			return nil, r, nil
		}
	}
}

// read prints every episode of the source through print (the filters and
// the output format are print's), and says on stderr what was skipped: a
// journal's lines cut by power loss are expected, so they never end the read.
func (s *episodeSource) read(print func([]timeline.Episode) error, stderr io.Writer) error {
	each := func(ep *timeline.Episode) error { return print([]timeline.Episode{*ep}) }
	report := func(name string, st journal.ReadStats) {
		if st.Skipped > 0 {
			fmt.Fprintf(stderr, "sigscope: %s: skipped %d line(s) that are no whole episode; the first, %s\n", name, st.Skipped, st.FirstSkipped)
		}
	}
	if s.in != nil {
		st, err := journal.ReadEpisodes(s.in, each)
		if err != nil {
			return fmt.Errorf("reading %s: %w", s.name, err)
		}
		report(s.name, st)
		return nil
	}
	for _, path := range s.files {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // rotated away since the directory was listed
		}
		if err != nil {
			return err
		}
		st, err := journal.ReadEpisodes(f, each)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		report(path, st)
	}
	return nil
}
