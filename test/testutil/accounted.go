package testutil

import "testing"

// Counted is an output that queues what it is given and counts what
// became of it (sink.Sink and the outputs built on it).
type Counted interface {
	Sent() uint64
	Failed() uint64
	Dropped() uint64
	Queued() int
}

// Accounted fails the test unless every one of the given units was sent,
// failed, dropped or is still queued: none is lost uncounted.
func Accounted(t testing.TB, c Counted, given uint64) {
	t.Helper()
	if got := c.Sent() + c.Failed() + c.Dropped() + uint64(c.Queued()); got != given {
		t.Errorf("sent %d + failed %d + dropped %d + queued %d = %d, want the %d given",
			c.Sent(), c.Failed(), c.Dropped(), c.Queued(), got, given)
	}
}
