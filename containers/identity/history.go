package identity

import (
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// StopRequest is a stop signal a runtime says it sent to a container.
type StopRequest struct {
	ID     string
	At     time.Time
	Signal sigvocab.Signal
}

// StopHistory is what the runtimes recorded of the stop signals they sent
// in a window of time: the window before tracing began, which the kernel's
// record cannot show. A stop begun then ends after tracing begins with only
// its SIGKILL or its exit seen; a runtime whose record of the window is
// complete tells that apart from a plain kill (docker kill, docker rm -f)
// of a container it never asked to stop.
type StopHistory struct {
	From, To time.Time
	// CompleteSince says, for each runtime that answered (Info.Runtime
	// values), from when on its record is complete: From or earlier when
	// it covers the whole window, a later time when it kept too few events
	// to reach back that far.
	CompleteSince map[string]time.Time
	// Requests are the stop signals (not SIGKILL) those runtimes sent in
	// the window.
	Requests []StopRequest
}

// Covers reports whether the history can answer for a container of
// runtime rt from the time from on.
func (h *StopHistory) Covers(rt string, from time.Time) bool {
	if h == nil || from.Before(h.From) {
		return false
	}
	since, ok := h.CompleteSince[rt]
	return ok && !since.After(from)
}

// LastRequest is the last stop signal the runtime sent to container id at
// or after since, within the window; false when there was none.
func (h *StopHistory) LastRequest(id string, since time.Time) (StopRequest, bool) {
	var out StopRequest
	found := false
	if h == nil {
		return out, false
	}
	for _, r := range h.Requests {
		if r.ID == id && !r.At.Before(since) && (!found || r.At.After(out.At)) {
			out, found = r, true
		}
	}
	return out, found
}
