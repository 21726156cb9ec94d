package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/sigscope/sigscope/cmd/sigscope/agent"
	"github.com/sigscope/sigscope/exporter/journal"
)

// The bounds of --journal-file-size: a file must hold the largest episode
// line (a few KiB, its minor steps capped), and a single file past 1G is
// more than a node's journal should take.
const (
	minJournalFileSize = 64 << 10
	maxJournalFileSize = 1 << 30
)

// journalFlags are serve's node journal flags (docs/deploy.md).
type journalFlags struct {
	dir      string
	fileSize journalSize
	files    int
}

type journalSize struct{ n int64 }

func (s *journalSize) String() string { return formatSize(int(s.n)) }
func (s *journalSize) Type() string   { return "bytes" }
func (s *journalSize) Set(v string) error {
	n, err := parseBytes(v, maxJournalFileSize)
	if err != nil {
		return err
	}
	if n < minJournalFileSize {
		return fmt.Errorf("at least %s", formatSize(minJournalFileSize))
	}
	s.n = int64(n)
	return nil
}

func (f *journalFlags) register(fl *pflag.FlagSet) {
	f.fileSize.n = journal.DefaultFileSize
	fl.StringVar(&f.dir, "journal-dir", "", "append every completed episode as a JSON line to a rotated journal in this directory, and read the newest --max-episodes back at start (empty: no journal)")
	fl.Var(&f.fileSize, "journal-file-size", "the most a journal file holds, in bytes or with K, M, G, before the next one begins")
	fl.IntVar(&f.files, "journal-files", journal.DefaultFiles, "journal files kept, the one written included: the journal takes at most --journal-files × --journal-file-size")
}

// apply checks the flags and sets them on the agent's options.
func (f *journalFlags) apply(opts *agent.Options) error {
	if f.files < 2 {
		return usageError{fmt.Errorf("--journal-files %d: want at least 2 (a rotation removes the oldest file)", f.files)}
	}
	opts.JournalDir, opts.JournalFileSize, opts.JournalFiles = f.dir, f.fileSize.n, f.files
	return nil
}
