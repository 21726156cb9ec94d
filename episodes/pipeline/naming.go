package pipeline

import (
	"time"

	"github.com/sigscope/sigscope/containers/container"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// Completed episodes whose container has no name while the resolver is
// still asking its failing runtime about it are held back a little, up to
// holdUnnamed, so that a container that lived less than a slow runtime
// took to answer (docker run of a one-second job during a stall) is named
// all the same: Docker keeps an exited container until it is removed.
// At most maxHeld are held; past that they go out as they are, saying why
// they have no name. Only that case waits: a named container's episode,
// or one whose runtime answered, goes out at once.
const (
	holdUnnamed = 10 * time.Second
	holdPoll    = 250 * time.Millisecond
	maxHeld     = 256
)

type heldEpisode struct {
	ep    timeline.Episode
	until time.Time
}

// naming names eps from the resolver and returns those ready to go out:
// the held ones that are named now, no longer asked about, or held long
// enough (all of them with all), then those of eps not held back.
func (p *Pipeline) naming(r *container.Resolver, eps []timeline.Episode, now time.Time, all bool) []timeline.Episode {
	var out []timeline.Episode
	p.heldAt = now
	kept := p.held[:0]
	for _, h := range p.held {
		if all || named(r, &h.ep) || !now.Before(h.until) || !r.Asking(h.ep.Container.ID) {
			out = append(out, h.ep)
		} else {
			kept = append(kept, h)
		}
	}
	clear(p.held[len(kept):])
	p.held = kept
	for _, ep := range eps {
		if !all && ep.Container.ID != "" && !named(r, &ep) && len(p.held) < maxHeld && r.Asking(ep.Container.ID) {
			p.held = append(p.held, heldEpisode{ep, now.Add(holdUnnamed)})
			continue
		}
		out = append(out, ep)
	}
	return out
}

// known is what the resolver knows now of the container of ep, when the
// engine took less (its identity came from the stop's first events, and a
// runtime that was slow then may have answered since: the resolver asks
// again until it does; or the runtime's files named it first), and why it
// still has no name. From the resolver's cache: no I/O.
func known(r *container.Resolver, ep *timeline.Episode) (*identity.Info, string) {
	c := &ep.Container
	if c.ID == "" || c.Name != "" && c.IdentityFrom == "" {
		return nil, ""
	}
	info, why := r.Known(c.ID)
	if info != nil && info.Name != "" {
		return info, ""
	}
	if why == "" {
		why = "the resolver no longer remembers it"
	}
	return nil, why
}

// named reports whether ep's container has a name, or the resolver has one
// for it now.
func named(r *container.Resolver, ep *timeline.Episode) bool {
	if ep.Container.Name != "" {
		return true
	}
	info, _ := known(r, ep)
	return info != nil
}
