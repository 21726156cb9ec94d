package agent

import (
	"net/http"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// Audited is called after the first audit, which ends start-up, with first
// set (sigscope serve gives start-up's memory back then), and not again
// before the next audit.
func TestAuditedAfterStartUp(t *testing.T) {
	calls := make(chan bool, 10)
	startAgent(t, Options{Audited: func(first bool) { calls <- first }}, "http", http.DefaultClient)
	select {
	case first := <-calls:
		if !first {
			t.Error("the first call says first=false")
		}
	case <-time.After(testutil.Bound):
		t.Fatal("Audited not called after the first audit")
	}
	select {
	case first := <-calls: // startAgent audits every hour
		t.Errorf("Audited called again at once (first=%v)", first)
	case <-time.After(200 * time.Millisecond):
	}
}
