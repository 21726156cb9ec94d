package exporter

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/audit"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func TestInvalidUTF8(t *testing.T) {
	e := New(Options{
		PodLabels:        true,
		Version:          "v1\xff",
		Revision:         "\xc3",
		EnrichmentErrors: func() map[string]uint64 { return map[string]uint64{"dock\xe9r": 1} },
	})
	reg := register(t, e)
	evil := &identity.Info{Identity: identity.Identity{ID: "x", Name: "app\xff\xfe", Pod: "p\xc3\x28", Namespace: "n\xe2\x82", Runtime: "cri-o"}}
	e.ObserveEvent(generate(sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.FlagPID1Ignored), evil)
	e.ObserveEvent(oom(), &identity.Info{Identity: identity.Identity{Name: strings.Repeat("é", 1000)}}) // long: cut at a rune boundary
	ep := episode(timeline.OutcomeGraceful, 0, time.Second)
	ep.Container = timeline.Container{Identity: identity.Identity{Name: "\x80"}}
	ep.Traffic = &timeline.Traffic{NetNS: 7, Until: time.Unix(1700000000, 0), SeesRefused: true, SeesLastSpeaker: true,
		Probes: &[sigvocab.NumNetKinds]uint64{sigvocab.NetAccepted: 1}}
	e.ObserveEpisode(ep)
	e.SetAudit([]audit.Result{{Container: identity.Summary{Identity: identity.Identity{Name: "z\xff"}}, Prediction: audit.Graceful}})

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var seen []string
	probes := false
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				probes = probes || mf.GetName() == "sigscope_stop_probe_connections_total" && l.GetName() == "container" && l.GetValue() == `\x80`
				if !utf8.ValidString(l.GetValue()) {
					t.Errorf("%s: label %s=%q is not valid UTF-8", mf.GetName(), l.GetName(), l.GetValue())
				}
				if len(l.GetValue()) > maxLabelLen {
					t.Errorf("%s: label %s is %d bytes", mf.GetName(), l.GetName(), len(l.GetValue()))
				}
				seen = append(seen, l.GetValue())
			}
		}
	}
	if !probes {
		t.Errorf("no sigscope_stop_probe_connections_total series for container %q", `\x80`)
	}
	for _, want := range []string{`app\xff\xfe`, `p\xc3(`, `n\xe2\x82`, `\x80`, `z\xff`, `v1\xff`, `\xc3`, `dock\xe9r`, strings.Repeat("é", maxLabelLen/2)} {
		if !containsAll(seen, []string{want}) {
			t.Errorf("no label value %q (the original bytes written as \\xNN)", want)
		}
	}
}

// ObserveEvent runs for every event the kernel reports: once a series exists
// it must not allocate, with or without pod labels.
func TestObserveEventAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, podLabels := range []bool{false, true} {
		e := New(Options{PodLabels: podLabels})
		for _, tc := range []struct {
			name string
			ev   *sigvocab.Event
			c    *identity.Info
		}{
			{"generate pid1_ignored", generate(sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.FlagPID1Ignored|sigvocab.FlagNSInit), webApp},
			{"generate cascade", generate(sigvocab.SIGKILL, sigvocab.ResultDelivered, sigvocab.FlagNSCascade), plain},
			{"generate host", generate(sigvocab.SIGUSR1, sigvocab.ResultDelivered, 0), nil},
			{"generate no name", generate(sigvocab.SIGUSR1, sigvocab.ResultDelivered, 0), bare},
			{"deliver", deliver(sigvocab.SIGINT, sigvocab.FlagPID1Ignored), webSide},
			{"exit", killed(sigvocab.SIGKILL), webApp},
			{"exit code", exited(1), webApp},
			{"oom", oom(), plain},
		} {
			e.ObserveEvent(tc.ev, tc.c) // the first one makes the series
			if n := testing.AllocsPerRun(1000, func() { e.ObserveEvent(tc.ev, tc.c) }); n != 0 {
				t.Errorf("PodLabels=%v %s: %v allocations per ObserveEvent, want 0", podLabels, tc.name, n)
			}
		}
	}
}

// One writer and concurrent scrapes (run with -race).
func TestConcurrentScrapes(t *testing.T) {
	e := New(Options{PodLabels: true, MaxSeries: 50, Stats: func() (tracer.Stats, error) { return tracer.Stats{}, nil }})
	reg := register(t, e)
	const n = 5000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			c := &identity.Info{Identity: identity.Identity{Name: "c", Pod: fmt.Sprintf("p%d", i%80), Namespace: "ns"}}
			e.ObserveEvent(generate(sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.FlagPID1Ignored), c)
			if i%100 == 0 {
				e.ObserveEpisode(episode(timeline.OutcomeGraceful, 0, time.Second))
				e.SetAudit([]audit.Result{{Container: identity.Summary{Identity: identity.Identity{Name: "a"}}, Prediction: audit.Graceful}})
			}
		}
	}()
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var total float64
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "sigscope_signals_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	if total != n {
		t.Errorf("signals counted %v, want %d (none lost to the cap or to races)", total, n)
	}
}
