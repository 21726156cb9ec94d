package sigvocab

import "testing"

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]Signal{
		"TERM": SIGTERM, "sigterm": SIGTERM, "SIGKILL": SIGKILL, "15": SIGTERM, " usr1 ": SIGUSR1,
		"SIGRTMIN": 34, "RTMIN+2": 36, "64": 64,
	} {
		got, err := ParseSignal(in)
		if err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "65", "SIGFOO", "-1"} {
		if _, err := ParseSignal(bad); err == nil {
			t.Errorf("ParseSignal(%q) accepted", bad)
		}
	}
}

func TestSignalSets(t *testing.T) {
	for _, quiet := range []Signal{SIGCHLD, SIGURG, SIGWINCH, SIGCONT, SIGALRM, SIGVTALRM, SIGPROF} {
		if DefaultSignals.Has(quiet) {
			t.Errorf("default set traces %s", quiet)
		}
	}
	for _, loud := range []Signal{SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, 64} {
		if !DefaultSignals.Has(loud) {
			t.Errorf("default set misses %s", loud)
		}
	}
	s, err := ParseSignalSet("TERM,9, int")
	if err != nil || s != NewSignalSet(SIGTERM, SIGKILL, SIGINT) {
		t.Errorf("ParseSignalSet = %v, %v", s, err)
	}
	if s, _ := ParseSignalSet("all"); s != AllSignals || !s.Has(64) || !s.Has(1) {
		t.Errorf("all = %v", s)
	}
	if s, _ := ParseSignalSet(""); s != DefaultSignals {
		t.Errorf("empty = %v", s)
	}
	if _, err := ParseSignalSet("TERM,BOGUS"); err == nil {
		t.Error("bad list accepted")
	}
	if _, err := ParseSignalSet(","); err == nil {
		t.Error("empty list accepted")
	}
	if got := NewSignalSet(SIGTERM, SIGKILL).String(); got != "SIGKILL,SIGTERM" {
		t.Errorf("String = %q", got)
	}
}
