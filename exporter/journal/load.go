package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/sigscope/sigscope/episodes/timeline"
)

// MaxLine bounds a journal line: a longer one is skipped as invalid. An
// episode's line is a few KiB (its minor steps are capped at 256).
const MaxLine = 1 << 20

// Loaded is what the agent reads back from its journal at start.
type Loaded struct {
	// Episodes are the newest whole lines, at most the number asked,
	// oldest first.
	Episodes []timeline.Episode
	// LastID is the highest episode id of the journal's valid lines: the
	// agent numbers on from it.
	LastID uint64
	// Lines counts the lines read as episodes: whole JSON objects with an
	// outcome (only the kept ones are decoded in full).
	Lines int
	// Skipped counts the lines that are no episode: a line cut by power
	// loss or a full disk, anything else written there.
	Skipped int
	// FirstSkipped says where the first skipped line is and why.
	FirstSkipped string
	Files        int
	Bytes        int64
}

// Load reads a journal directory, oldest file first, and keeps its newest
// keep episodes. Every line is checked (and its id read) so that LastID is
// the journal's highest whatever order the files hold; only the kept ones
// are fully decoded. A directory that does not exist is an empty journal;
// a file that cannot be read is an error.
func Load(dir string, keep int) (Loaded, error) {
	var ld Loaded
	fs, err := listFiles(dir)
	if errors.Is(err, os.ErrNotExist) {
		return ld, nil
	}
	if err != nil {
		return ld, err
	}
	ring := make([][]byte, max(keep, 0))
	next, kept := 0, 0
	skip := func(where string, err error) {
		ld.Skipped++
		if ld.FirstSkipped == "" {
			ld.FirstSkipped = fmt.Sprintf("%s: %v", where, err)
		}
	}
	for _, f := range fs {
		file, err := os.Open(f.path)
		if err != nil {
			return ld, err
		}
		ld.Files++
		n, err := scanLines(file, func(line []byte, no int, complete bool) error {
			id, err := lineID(line)
			if err = lineError(line, complete, err); err != nil {
				skip(fmt.Sprintf("%s:%d", f.path, no), err)
				return nil
			}
			ld.Lines++
			ld.LastID = max(ld.LastID, id)
			if len(ring) > 0 {
				ring[next] = append(ring[next][:0], line...)
				next = (next + 1) % len(ring)
				kept = min(kept+1, len(ring))
			}
			return nil
		})
		_ = file.Close()
		ld.Bytes += n
		if err != nil {
			return ld, fmt.Errorf("reading %s: %w", f.path, err)
		}
	}
	for i := range kept {
		line := ring[(next-kept+i+len(ring))%len(ring)]
		var ep timeline.Episode
		if err := json.Unmarshal(line, &ep); err != nil {
			// Whole JSON with an id, but no episode (a bad step, time or
			// signal): only the kept lines are decoded far enough to tell.
			ld.Lines--
			skip("a kept line", err)
			continue
		}
		ld.Episodes = append(ld.Episodes, ep)
	}
	return ld, nil
}

// lineID checks that a line is one whole JSON object with an outcome and
// reads its id. The id is the object's first key as the journal writes
// it, read there without decoding the rest: json.Valid is three times
// faster than a decode, and a full journal is read at every start.
func lineID(line []byte) (uint64, error) {
	if !json.Valid(line) {
		var v any
		return 0, json.Unmarshal(line, &v) // the reason
	}
	if rest, ok := bytes.CutPrefix(line, []byte(`{"id":`)); ok && bytes.Contains(rest, []byte(`"outcome":`)) {
		end := bytes.IndexAny(rest, ",}")
		if id, err := strconv.ParseUint(string(rest[:max(end, 0)]), 10, 64); err == nil {
			return id, nil
		}
	}
	var head struct {
		ID      uint64 `json:"id"`
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return 0, err
	}
	if head.Outcome == "" {
		return 0, errors.New("not an episode (no outcome)")
	}
	return head.ID, nil
}

// lineError is a line's decoding error, said as a cut line when it is the
// last and has no newline (power loss mid-write).
func lineError(line []byte, complete bool, err error) error {
	if err == nil || complete {
		return err
	}
	return fmt.Errorf("cut off (no newline at the end, %d bytes): %w", len(line), err)
}

// ReadStats says what ReadEpisodes read.
type ReadStats struct {
	Episodes     int
	Skipped      int
	FirstSkipped string // where (line number) and why
	// Truncated: the last line was cut off (no newline, not an episode),
	// as power loss leaves it. It is among Skipped.
	Truncated bool
}

// ReadEpisodes calls fn with each episode line of one journal file (or a
// stream of `sigscope timeline -o json`, which is the same format),
// skipping and counting the lines that are no episode. An error of fn ends
// the read and is returned as is.
func ReadEpisodes(r io.Reader, fn func(ep *timeline.Episode) error) (ReadStats, error) {
	var st ReadStats
	_, err := scanLines(r, func(line []byte, no int, complete bool) error {
		var ep timeline.Episode
		err := json.Unmarshal(line, &ep)
		if err == nil && ep.Outcome == "" {
			err = errors.New("not an episode (no outcome)")
		}
		if err = lineError(line, complete, err); err != nil {
			st.Skipped++
			st.Truncated = !complete
			if st.FirstSkipped == "" {
				st.FirstSkipped = fmt.Sprintf("line %d: %v", no, err)
			}
			return nil
		}
		st.Episodes++
		return fn(&ep)
	})
	return st, err
}

// IsEpisodeLine says whether a JSON line is an episode object (an
// "outcome" and "steps"), as the journal and `timeline -o json` write
// them, rather than a trace record.
func IsEpisodeLine(line []byte) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(line, &keys) != nil {
		return false
	}
	_, outcome := keys["outcome"]
	_, steps := keys["steps"]
	return outcome && steps
}

// scanLines calls fn with each non-blank line (without its newline),
// its 1-based number and whether a newline ended it, and returns the bytes
// read. A line longer than MaxLine is read through but handed on empty, so
// that it fails to decode: memory stays bounded whatever the file holds.
func scanLines(r io.Reader, fn func(line []byte, no int, complete bool) error) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		total int64
		line  []byte
	)
	for no := 1; ; no++ {
		line = line[:0]
		tooLong, complete := false, false
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			total += int64(len(chunk))
			if len(line)+len(chunk) > MaxLine {
				tooLong, line = true, line[:0]
			} else if !tooLong {
				line = append(line, chunk...)
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return total, err
		}
		if err == nil {
			complete = true
			if !tooLong {
				line = line[:len(line)-1]
			}
		}
		if tooLong || !blank(line) {
			if ferr := fn(line, no, complete); ferr != nil {
				return total, ferr
			}
		}
		if err == io.EOF {
			return total, nil
		}
	}
}

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// Scan calls fn with each whole episode line of the journal in dir, oldest
// file first, and its id, skipping the lines that are no episode; the line
// is fn's only until it returns. A directory that does not exist is an
// empty journal. The agent reads it to answer a window older than its
// ring: only the lines fn keeps are decoded.
func Scan(dir string, fn func(id uint64, line []byte) error) error {
	fs, err := listFiles(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, f := range fs {
		file, err := os.Open(f.path)
		if errors.Is(err, os.ErrNotExist) {
			continue // rotated away since the listing
		}
		if err != nil {
			return err
		}
		_, err = scanLines(file, func(line []byte, _ int, complete bool) error {
			id, err := lineID(line)
			if !complete || err != nil {
				return nil
			}
			return fn(id, line)
		})
		_ = file.Close()
		if err != nil {
			return fmt.Errorf("reading %s: %w", f.path, err)
		}
	}
	return nil
}
