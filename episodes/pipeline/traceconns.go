package pipeline

import (
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Without a timeline (sigscope trace --connections) nothing decides when a
// stop is over, so the pipeline follows each namespace the kernel began to
// watch at a stop signal on its own: it reads the counts every
// followEvery while the stop goes on, hands a net event to OnEvent when
// they changed, and a last one netLinger after the stopped process exited,
// then lets the namespace go. The net event's target is the stop signal's,
// with its container, so that trace's filters treat it as they treat that
// signal.

// followEvery is how often a followed namespace's counts are read.
const followEvery = time.Second

// followed is a namespace whose stop the pipeline follows.
type followed struct {
	target sigvocab.Process // the stop signal's target
	info   *identity.Info   // its container, when resolved
	begun  time.Time        // the stop signal's time
	exited time.Time        // the target's exit; zero while it runs
	readAt time.Time        // the last read; zero: never
	last   sigvocab.Connections
}

// follow notes a watched stop signal (or the target's exit) of a followed
// namespace; called for every event when the pipeline follows namespaces.
func (p *Pipeline) follow(e *sigvocab.Event, target *identity.Info) {
	switch {
	case e.Kind == sigvocab.KindGenerate && e.NetNS != 0 && e.Facts&sigvocab.FactNetWatched != 0:
		if _, ok := p.following[e.NetNS]; ok {
			return
		}
		if p.following == nil {
			p.following = make(map[uint32]*followed)
		}
		if len(p.following) >= maxHeld {
			p.log().Warn("following too many stopping network namespaces: this one's connections are not shown", "netns", e.NetNS)
			return
		}
		p.following[e.NetNS] = &followed{target: e.Target, info: target, begun: e.Time}
	case e.Kind == sigvocab.KindExit:
		for _, f := range p.following {
			if f.target.PID == e.Target.PID && f.exited.IsZero() {
				f.exited = e.Time
			}
		}
	}
}

// readFollowed reads the followed namespaces that are due (all of them with
// final) and returns when the next one is.
func (p *Pipeline) readFollowed(now time.Time, final bool) (time.Time, error) {
	var next time.Time
	for netns, f := range p.following {
		end := !f.exited.IsZero() && !now.Before(f.exited.Add(timeline.NetLinger))
		stale := now.Sub(f.begun) > watchedMax
		if final || end || stale || now.Sub(f.readAt) >= followEvery {
			c, err := p.t.Connections(netns)
			if err != nil {
				p.log().Warn("reading a stopping container's connection counts", "netns", netns, "error", err)
			}
			if c != nil && (f.readAt.IsZero() || !sameCounts(c, &f.last) || final || end || stale) {
				ev := sigvocab.Event{Time: now, Kind: sigvocab.KindNet, NetNS: netns, Conns: c, Target: f.target}
				if err := p.opts.OnEvent(&ev, f.info, nil); err != nil {
					return time.Time{}, err
				}
			}
			if c != nil {
				f.last = *c
			}
			f.readAt = now
			if final || end || stale || c == nil {
				delete(p.following, netns)
				if err := p.t.Unwatch(netns); err != nil {
					p.log().Warn("letting a network namespace go", "netns", netns, "error", err)
				}
				continue
			}
		}
		at := f.readAt.Add(followEvery)
		if !f.exited.IsZero() {
			at = minTime(at, f.exited.Add(timeline.NetLinger))
		}
		next = minTime(next, at)
	}
	p.sweepWatched(now)
	return next, nil
}

// minTime is the earlier of a and b, a zero time counting as none.
func minTime(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// sameCounts reports whether a and b counted the same of each kind (the
// times of a kind change only with its count, but each read converts them
// to the wall clock anew, a few ns apart).
func sameCounts(a, b *sigvocab.Connections) bool {
	for k := range a.Counts {
		if a.Counts[k].N != b.Counts[k].N {
			return false
		}
	}
	return true
}
