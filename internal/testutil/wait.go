package testutil

import (
	"testing"
	"time"
)

// WaitFor polls cond every 10 ms and fails the test when it has not held
// after 10 s: a bound for a hang, never a measure.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
