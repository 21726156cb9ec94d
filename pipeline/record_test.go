package pipeline

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
	if buf, err = AppendRecord(buf, &e, c, other); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(buf), `"sender_container":{"id":"def456","name":"sidecar","runtime":"docker"}`) {
		t.Errorf("no sender_container: %s", buf)
	}
	host := e
	host.Target.PidNS = 0
	if buf, err = AppendRecord(buf, &host, nil, nil); err != nil {
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
	err = ReadRecording(bytes.NewReader(buf), func(ev *tracer.Event, ci, _ *container.Info) error {
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
	if err := ReadRecording(strings.NewReader("{not json\n"), func(_ *tracer.Event, _, _ *container.Info) error { return nil }); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad line: %v", err)
	}
}

// A container's signal to a host process: the recording's one container
// object is the sender's, and reads back as such.
func TestRecordSenderOnly(t *testing.T) {
	e := tracer.Event{Kind: tracer.KindGenerate, Signal: tracer.SIGTERM, Time: time.Unix(1700000000, 5)}
	e.Target.PID, e.Target.NsPID, e.Target.PidNS = 42, 42, hostPidNS
	e.Sender.PID, e.Sender.NsPID, e.Sender.PidNS = 77, 3, 4026532177
	c := &container.Info{ID: "abc123", Runtime: "docker", Name: "web", MainPID: 70}
	buf, err := AppendRecord(nil, &e, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	err = ReadRecording(bytes.NewReader(buf), func(_ *tracer.Event, target, sender *container.Info) error {
		if target != nil || sender == nil || sender.ID != "abc123" {
			t.Errorf("target %+v sender %+v", target, sender)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
