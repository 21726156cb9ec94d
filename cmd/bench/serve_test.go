package main

import "testing"

func TestParseServeCounters(t *testing.T) {
	body := []byte(`# TYPE sigscope_signals_total counter
sigscope_signals_total{result="ignored",signal="SIGUSR1"} 1000
sigscope_signals_total{result="delivered",signal="SIGTERM"} 2
# TYPE sigscope_events_total counter
sigscope_events_total{event="generate"} 1002
sigscope_events_total{event="exit"} 7
# TYPE sigscope_events_dropped_total counter
sigscope_events_dropped_total{event="generate"} 3
sigscope_events_dropped_total{event="exit"} 1
# TYPE sigscope_events_missed_total counter
sigscope_events_missed_total 0
`)
	c, err := parseServeCounters(body)
	if err != nil {
		t.Fatal(err)
	}
	if c != (serveCounters{signals: 1002, emitted: 1002, dropped: 4, missed: 0}) {
		t.Errorf("parseServeCounters = %+v", c)
	}
	if _, err := parseServeCounters([]byte("# TYPE go_goroutines gauge\ngo_goroutines 7\n")); err == nil {
		t.Error("an exposition without sigscope_events_total was accepted")
	}
	r := serveStormResult{events: 2e6, cpu: 500e6} // 0.5 s for 2 M events
	if got := r.msPer100k(); got != 25 {
		t.Errorf("msPer100k = %v, want 25", got)
	}
}
