package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A journal's files are episodes-NNNNNNNN.jsonl, numbered from 1 in the
// order they were begun: the highest is the one written to. Numbers, not
// renames (episodes.jsonl.1, .2, ...): a rotation creates one file and
// removes the oldest, and a crash between the two leaves a journal that
// still reads in order.
const (
	filePrefix = "episodes-"
	fileSuffix = ".jsonl"
)

// fileName is the name of the journal's file number seq.
func fileName(seq uint64) string {
	return fmt.Sprintf("%s%08d%s", filePrefix, seq, fileSuffix)
}

// parseFileName returns the number of a journal file's name; false for any
// other name.
func parseFileName(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, filePrefix)
	if !ok {
		return 0, false
	}
	if s, ok = strings.CutSuffix(s, fileSuffix); !ok || s == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, false
	}
	return n, true
}

// journalFile is one file of a journal directory.
type journalFile struct {
	seq  uint64
	path string
}

// Files lists a journal directory's files, oldest first. Other files in
// the directory are not the journal's and are left alone.
func Files(dir string) ([]string, error) {
	fs, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.path
	}
	return out, nil
}

func listFiles(dir string) ([]journalFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var fs []journalFile
	for _, e := range ents {
		if seq, ok := parseFileName(e.Name()); ok && e.Type().IsRegular() {
			fs = append(fs, journalFile{seq: seq, path: filepath.Join(dir, e.Name())})
		}
	}
	slices.SortFunc(fs, func(a, b journalFile) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return fs, nil
}
