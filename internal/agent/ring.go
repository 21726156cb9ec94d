package agent

import (
	"sync"
	"time"

	"github.com/sigscope/sigscope/agent/apiv1"
	"github.com/sigscope/sigscope/timeline"
)

// episodeRing keeps the last completed episodes for /api/v1/episodes and
// numbers them. Its own lock: the tracer's goroutine adds while HTTP
// handlers and scrapes read.
type episodeRing struct {
	mu       sync.Mutex
	episodes []timeline.Episode // oldest first once full
	next     int
	full     bool
	seq      uint64    // the last episode's ID
	evicted  time.Time // the latest start among the episodes pushed out
	reloaded int       // episodes read back from the journal at start
}

func newEpisodeRing(capacity int) *episodeRing {
	return &episodeRing{episodes: make([]timeline.Episode, capacity)}
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
		r.episodes[r.next] = eps[i]
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
		r.episodes[r.next] = eps[i]
		r.next = (r.next + 1) % len(r.episodes)
		if r.next == 0 {
			r.full = true
		}
	}
	r.seq = max(r.seq, lastID)
}

// recent returns the kept episodes, oldest first.
func (r *episodeRing) recent() []timeline.Episode {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []timeline.Episode
	if r.full {
		out = append(out, r.episodes[r.next:]...)
	}
	return append(out, r.episodes[:r.next]...)
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
