package retry

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 8 * time.Second}
	within := func(d, base time.Duration) bool { return d >= base && d <= base+base/5 }
	for i, want := range []time.Duration{1, 2, 4, 8, 8} {
		if d := b.Next(0); !within(d, want*time.Second) {
			t.Errorf("try %d: %v, want %v plus up to a fifth", i, d, want*time.Second)
		}
	}
	b.Reset()
	if d := b.Next(0); !within(d, time.Second) {
		t.Errorf("after Reset: %v, want 1s plus up to a fifth", d)
	}
	if d := b.Next(5 * time.Second); !within(d, 5*time.Second) {
		t.Errorf("asked for 5s: %v", d)
	}
	if d := b.Next(time.Hour); !within(d, 8*time.Second) {
		t.Errorf("asked for an hour: %v, want Max", d)
	}
}
