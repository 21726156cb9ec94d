package pipeline

import (
	"testing"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The resolver's clock is read once for many events: again only when the
// events' kernel time moved on by clockStale, went back, or clockReuse
// events used the reading.
func TestEventClock(t *testing.T) {
	var c eventClock
	ev := func(boot uint64) *sigvocab.Event { return &sigvocab.Event{BootNS: boot} }
	const base = uint64(1_000_000_000)
	first := c.at(ev(base))
	if first.IsZero() {
		t.Fatal("the first event read no clock")
	}
	same := func(boot uint64) bool { return c.at(ev(boot)) == first }

	if !same(base + clockStale - 1) {
		t.Error("the clock was read again within clockStale of kernel time")
	}
	for i := 2; i < clockReuse; i++ {
		if !same(base + uint64(i)) {
			t.Fatalf("the clock was read again after %d events, before clockReuse", i)
		}
	}
	time.Sleep(time.Millisecond) // so that a new reading differs
	if same(base + 10) {
		t.Error("the reading outlived clockReuse events")
	}

	next := c.at(ev(base + 20))
	time.Sleep(time.Millisecond)
	if c.at(ev(base+20+clockStale)) == next {
		t.Error("the reading outlived clockStale of kernel time")
	}
	after := c.at(ev(base + 30 + clockStale))
	time.Sleep(time.Millisecond)
	if c.at(ev(base)) == after {
		t.Error("an event earlier in kernel time than the reading's kept it")
	}
}
