package retry

import (
	"math/rand/v2"
	"time"
)

// Backoff doubles from Min to Max, waits at least what the other side asked
// for (a Retry-After), and adds up to a fifth more at random, so that the
// agents of a fleet do not all come back at once. The zero value after
// Reset starts again from Min.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Reset makes the next wait Min again: a try succeeded.
func (b *Backoff) Reset() { b.cur = 0 }

// Next returns the wait before the next try, at least floor (capped at
// Max; 0 for none).
func (b *Backoff) Next(floor time.Duration) time.Duration {
	if b.cur == 0 {
		b.cur = b.Min
	} else {
		b.cur = min(2*b.cur, b.Max)
	}
	d := max(b.cur, min(floor, b.Max))
	return d + rand.N(d/5+1)
}
