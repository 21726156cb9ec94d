package sigvocab

import "testing"

// TestFateWords pins the one text per fate that the timeline's steps and
// the audit's hints share: docs/timelines.md quotes these words.
func TestFateWords(t *testing.T) {
	for _, c := range []struct {
		f    Fate
		sig  Signal
		h    Disposition
		want string
	}{
		{FateDroppedInit, SIGTERM, DispDefault, "ignored — PID 1 has no SIGTERM handler"},
		{FateDroppedSigIgn, SIGTERM, DispIgnore, "ignored — PID 1 has set SIGTERM to SIG_IGN"},
		{FateDroppedDefault, SIGWINCH, DispDefault, "ignored — the default action of SIGWINCH is to do nothing"},
		{FateDroppedExiting, SIGTERM, DispDefault, "ignored — PID 1 is already exiting"},
		{FateHandler, SIGTERM, DispHandler, "delivered — PID 1 has a SIGTERM handler"},
		{FateSigwait, SIGTERM, DispDefault, "queued — PID 1 waits for SIGTERM with sigtimedwait"},
		{FateBlocked, SIGTERM, DispHandler, "queued — PID 1 has SIGTERM blocked (it has a handler)"},
		{FateBlocked, SIGTERM, DispDefault, "queued — PID 1 has SIGTERM blocked (and no handler)"},
		{FateAlreadyPending, SIGTERM, DispDefault, "merged — SIGTERM is already pending at PID 1, blocked"},
		{FateFailed, 40, DispHandler, "failed — the real-time signal queue of PID 1 is full"},
		{FateDefault, SIGTERM, DispDefault, "delivered — its default action ends PID 1"},
		{FateDefault, 20, DispDefault, "delivered — its default action stops PID 1 without ending it"},
		{FateUnknown, SIGTERM, DispDefault, "delivered"},
	} {
		if got := c.f.Explain(c.sig, c.h, "PID 1"); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.f, c.sig, got, c.want)
		}
	}
}
