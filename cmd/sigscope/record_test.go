package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/tracer"
)

// A trace line with a container object reads back into the same event and
// container; a host event has no container key.
func TestRecordRoundTrip(t *testing.T) {
	e := tracer.Event{Kind: tracer.KindGenerate, Signal: tracer.SIGTERM, Result: tracer.ResultIgnored,
		Flags: tracer.FlagPID1Ignored | tracer.FlagNSInit, Time: time.Unix(1700000000, 5)}
	e.Target.PID, e.Target.NsPID, e.Target.PidNS = 42, 1, 4026532177
	c := &container.Info{ID: "abc123", Runtime: "docker", Name: "web\xff", Pod: "p", Namespace: "ns",
		StopSignal: tracer.SIGTERM, StopTimeout: 10, GracePeriod: 30}
	var buf []byte
	var err error
	other := &container.Info{ID: "def456", Runtime: "docker", Name: "sidecar"}
	if buf, err = appendRecord(buf, &e, c, other); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(buf), `"sender_container":{"id":"def456","name":"sidecar","runtime":"docker"}`) {
		t.Errorf("no sender_container: %s", buf)
	}
	host := e
	host.Target.PidNS = 0
	if buf, err = appendRecord(buf, &host, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(buf) || strings.Count(string(buf), "\n") != 2 {
		t.Fatalf("records: %q", buf)
	}
	if strings.Count(string(buf), `"container":`) != 1 {
		t.Errorf("want exactly one container object: %s", buf)
	}
	var got []*container.Info
	var events []tracer.Event
	err = readRecording(bytes.NewReader(buf), func(ev *tracer.Event, ci *container.Info) error {
		events = append(events, *ev)
		got = append(got, ci)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || got[1] != nil || got[0] == nil {
		t.Fatalf("read %d events, containers %v", len(events), got)
	}
	if g := got[0]; g.ID != "abc123" || g.Name != `web\xff` || g.Pod != "p" || g.Namespace != "ns" || g.GracePeriod != 30 || g.StopTimeout != 10 {
		t.Errorf("container read back as %+v", *g)
	}
	if ev := events[0]; ev.Flags != e.Flags || ev.Target.PidNS != e.Target.PidNS || !ev.Time.Equal(e.Time) {
		t.Errorf("event read back as %+v", ev)
	}
	if err := readRecording(strings.NewReader("{not json\n"), func(*tracer.Event, *container.Info) error { return nil }); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad line: %v", err)
	}
}

func TestContainerFilter(t *testing.T) {
	web := &container.Info{ID: "abcdef", Name: "web", Pod: "web-1", Namespace: "shop"}
	for _, c := range []struct {
		container, pod string
		in             *container.Info
		want           bool
	}{
		{"", "", nil, true},
		{"abc", "", web, true},
		{"web", "", web, true},
		{"xyz", "", web, false},
		{"", "shop/web-1", web, true},
		{"", "shop/web-2", web, false},
		{"web", "", nil, false},
	} {
		f, _ := newContainerFilter(c.container, c.pod)
		if got := f.matchAny(nil, c.in); c.in != nil && got != c.want {
			t.Errorf("filter %q %q on the sender %+v: %v", c.container, c.pod, c.in, got)
		}
		f, err := newContainerFilter(c.container, c.pod)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.match(c.in); got != c.want {
			t.Errorf("filter %q %q on %+v: %v", c.container, c.pod, c.in, got)
		}
	}
	if _, err := newContainerFilter("", "nopod"); err == nil {
		t.Error("--pod without a slash accepted")
	}
}
