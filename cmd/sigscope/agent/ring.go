package agent

import (
	"fmt"
	"slices"
	"sync"
	"time"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// episodeRing keeps the last completed episodes for /api/v1/episodes and
// numbers them. Its own lock: the tracer's goroutine adds while HTTP
// handlers and scrapes read.
//
// Each episode is kept with its JSON, encoded once as it enters
// (apiv1.EpisodeLine): fifty clients reading the whole ring used to
// encode it fifty times at once, 1000 episodes into a buffer each, which
// was most of the agent's peak memory under load (docs/benchmarks.md).
type episodeRing struct {
	mu       sync.Mutex
	episodes []timeline.Episode // oldest first once full
	lines    [][]byte           // episodes[i]'s apiv1.EpisodeLine; nil if it failed
	next     int
	full     bool
	seq      uint64    // the last episode's ID
	evicted  time.Time // the latest start among the episodes pushed out
	reloaded int       // episodes read back from the journal at start
}

func newEpisodeRing(capacity int) *episodeRing {
	return &episodeRing{episodes: make([]timeline.Episode, capacity), lines: make([][]byte, capacity)}
}

// add numbers eps (their IDs and node are set in place) and keeps them,
// pushing the oldest out.
func (r *episodeRing) add(eps []timeline.Episode, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range eps {
		r.seq++
		eps[i].ID, eps[i].Node = r.seq, node
		if old := &r.episodes[r.next]; r.full && old.Start.After(r.evicted) {
			r.evicted = old.Start
		}
		r.episodes[r.next], r.lines[r.next] = eps[i], encodeLine(&eps[i])
		r.next = (r.next + 1) % len(r.episodes)
		if r.next == 0 {
			r.full = true
		}
	}
}

// load fills the ring with episodes read back from the journal, oldest
// first (at most its capacity: the newest), before any is added, and
// numbers on from lastID so that ids stay unique across restarts. lines is
// how many episodes the journal holds: when it held more than the ring
// takes, the older ones count as pushed out, up to about the earliest
// start among those kept (the journal's other lines are not decoded at
// load, and episodes complete out of start order).
func (r *episodeRing) load(eps []timeline.Episode, lastID uint64, lines int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(eps) > len(r.episodes) {
		eps = eps[len(eps)-len(r.episodes):]
	}
	r.reloaded = len(eps)
	if lines > len(eps) {
		for i := range eps {
			if st := eps[i].Start; r.evicted.IsZero() || st.Before(r.evicted) {
				r.evicted = st
			}
		}
	}
	for i := range eps {
		r.seq = max(r.seq, eps[i].ID)
		r.episodes[r.next], r.lines[r.next] = eps[i], encodeLine(&eps[i])
		r.next = (r.next + 1) % len(r.episodes)
		if r.next == 0 {
			r.full = true
		}
	}
	r.seq = max(r.seq, lastID)
}

// matching returns the lines of the newest limit episodes that f matches
// (all of them when limit is 0), oldest first, the oldest one's ID, and
// whether older ones match too. The lines are shared, never written: the
// answer is written from them after the lock is released.
func (r *episodeRing) matching(f *episodeFilter, limit int) (lines [][]byte, oldest uint64, more bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.keptLocked()
	lines = make([][]byte, 0, n)
	if limit > 0 {
		lines = make([][]byte, 0, min(n, limit))
	}
	// Newest first, so that the page is the newest matches.
	for k := range n {
		i := (r.next - 1 - k + len(r.episodes)) % len(r.episodes)
		ep := &r.episodes[i]
		if !f.match(ep) {
			continue
		}
		if limit > 0 && len(lines) == limit {
			more = true
			break
		}
		if r.lines[i] == nil {
			// Encoding failed as it entered: try again, to answer the
			// error rather than leave the episode out.
			if r.lines[i], err = apiv1.EpisodeLine(ep); err != nil {
				return nil, 0, false, fmt.Errorf("episode %d: %w", ep.ID, err)
			}
		}
		lines = append(lines, r.lines[i])
		oldest = ep.ID
	}
	slices.Reverse(lines)
	return lines, oldest, more, nil
}

// size returns how many episodes are kept and how many can be.
func (r *episodeRing) size() (kept, capacity int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keptLocked(), len(r.episodes)
}

func (r *episodeRing) keptLocked() int {
	if r.full {
		return len(r.episodes)
	}
	return r.next
}

// pushedOut reports whether episodes that started at or after since were
// pushed out of the ring (or not read back into it from the journal), and
// the lowest id it keeps: older ones are in the journal alone.
func (r *episodeRing) pushedOut(since time.Time) (bool, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.keptLocked()
	if r.seq <= uint64(kept) || !since.IsZero() && r.evicted.Before(since) {
		return false, 0
	}
	lowest := r.seq + 1
	for i := range kept {
		lowest = min(lowest, r.episodes[i].ID)
	}
	return true, lowest
}

// info fills /api/v1/info's episodes.
func (r *episodeRing) info(in *apiv1.Info) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in.Episodes.Capacity = len(r.episodes)
	in.Episodes.LastID = r.seq
	in.Episodes.Kept = r.keptLocked()
	// Episodes complete out of start order: the earliest start of those
	// kept, not the lowest ID's.
	for i := range in.Episodes.Kept {
		if st := r.episodes[i].Start; in.Episodes.OldestAt.IsZero() || st.Before(in.Episodes.OldestAt) {
			in.Episodes.OldestAt = st
		}
	}
	in.Episodes.Evicted = r.seq - uint64(in.Episodes.Kept)
	in.Episodes.EvictedUntil = r.evicted
	in.Episodes.Reloaded = r.reloaded
}
