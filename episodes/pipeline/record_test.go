package pipeline

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A trace line with a container object reads back into the same event and
// container; a host event has no container key.
func TestRecordRoundTrip(t *testing.T) {
	e := sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultIgnored,
		Flags: sigvocab.FlagPID1Ignored | sigvocab.FlagNSInit, Time: time.Unix(1700000000, 5)}
	e.Target.PID, e.Target.NsPID, e.Target.PidNS = 42, 1, 4026532177
	c := &identity.Info{Identity: identity.Identity{ID: "abc123", Runtime: "docker", Name: "web\xff", Pod: "p", Namespace: "ns"}, StopSignal: sigvocab.SIGTERM, StopTimeout: 10, GracePeriod: 30}
	var buf []byte
	var err error
	other := &identity.Info{Identity: identity.Identity{ID: "def456", Runtime: "docker", Name: "sidecar"}}
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
	var got []*identity.Info
	var events []sigvocab.Event
	err = ReadRecording(bytes.NewReader(buf), func(ev *sigvocab.Event, ci, _ *identity.Info) error {
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
	if err := ReadRecording(strings.NewReader("{not json\n"), func(_ *sigvocab.Event, _, _ *identity.Info) error { return nil }); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad line: %v", err)
	}
}

// A container's signal to a host process: the recording's one container
// object is the sender's, and reads back as such.
func TestRecordSenderOnly(t *testing.T) {
	e := sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Time: time.Unix(1700000000, 5)}
	e.Target.PID, e.Target.NsPID, e.Target.PidNS = 42, 42, sigvocab.HostPidNS
	e.Sender.PID, e.Sender.NsPID, e.Sender.PidNS = 77, 3, 4026532177
	c := &identity.Info{Identity: identity.Identity{ID: "abc123", Runtime: "docker", Name: "web"}, MainPID: 70}
	buf, err := AppendRecord(nil, &e, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	err = ReadRecording(bytes.NewReader(buf), func(_ *sigvocab.Event, target, sender *identity.Info) error {
		if target != nil || sender == nil || sender.ID != "abc123" {
			t.Errorf("target %+v sender %+v", target, sender)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A recording cut mid-line is no error; a bad line is one, named by its
// number, unless skipped and counted; an endless line is rejected without
// holding it in memory.
func TestReadRecordingBadLines(t *testing.T) {
	good := `{"time":"2026-11-25T02:14:50.705966735Z","event":"generate","signal":"SIGTERM","signo":15,"result":"delivered","flags":["cross_ns","ns_init"],"code":"user","si_code":0,"group":true,"handler":"default","sender":{"pid":30122,"tid":30122,"comm":"runc","ns_pid":30122,"pidns":4026531836},"target":{"pid":30038,"tid":30038,"comm":"catatonit","ns_pid":1,"pidns":4026532180}}`
	if _, _, _, err := parseRecord([]byte(good)); err != nil {
		t.Fatalf("the good line does not parse: %v", err)
	}
	count := func(string) func(*sigvocab.Event, *identity.Info, *identity.Info) error {
		return func(*sigvocab.Event, *identity.Info, *identity.Info) error { return nil }
	}
	for _, tc := range []struct {
		name, in  string
		skip      bool
		records   int
		skipped   int
		truncated bool
		errLine   int
	}{
		{"cut last line", good + "\n" + good[:40], false, 1, 0, true, 0},
		{"complete last line without newline", good + "\n" + good, false, 2, 0, false, 0},
		{"bad middle line", good + "\nnot json\n" + good + "\n", false, 1, 0, false, 2},
		{"bad last line with newline", good + "\n" + good[:40] + "\n", false, 1, 0, false, 2},
		{"skipped", good + "\nnot json\n\n{}x\n" + good + "\n", true, 2, 2, false, 0},
		{"too long", good + "\n" + strings.Repeat("x", MaxRecordLine+10) + "\n" + good + "\n", true, 2, 1, false, 0},
	} {
		st, err := ReadRecordingWith(strings.NewReader(tc.in), ReadOptions{SkipInvalid: tc.skip}, count(tc.name))
		var rerr *RecordError
		switch {
		case tc.errLine > 0 && (!errors.As(err, &rerr) || rerr.Line != tc.errLine):
			t.Errorf("%s: error %v, want one at line %d", tc.name, err, tc.errLine)
		case tc.errLine == 0 && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case st.Records != tc.records || st.Skipped != tc.skipped || st.Truncated != tc.truncated:
			t.Errorf("%s: %+v, want records %d skipped %d truncated %v", tc.name, st, tc.records, tc.skipped, tc.truncated)
		case tc.skipped > 0 && (st.FirstSkipped == nil || st.FirstSkipped.Line != 2):
			t.Errorf("%s: first skipped %+v, want line 2", tc.name, st.FirstSkipped)
		}
	}
}

// Replay hands over the episodes the records complete and, at a clean end,
// those the engine still held; a bad line ends it without that flush, and
// an error of fn is returned as is.
func TestReplay(t *testing.T) {
	rec, err := os.ReadFile(filepath.Join("..", "timeline", "testdata", "streams", "catatonit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	replay := func(in string, fn func([]timeline.Episode) error) (int, ReadStats, error) {
		n := 0
		st, err := Replay(strings.NewReader(in), ReadOptions{}, timeline.New(timeline.Options{}), func(eps []timeline.Episode) error {
			n += len(eps)
			return fn(eps)
		})
		return n, st, err
	}
	ok := func([]timeline.Episode) error { return nil }
	if n, st, err := replay(string(rec), ok); err != nil || n != 1 || st.Records == 0 {
		t.Errorf("catatonit: %d episodes, %+v, %v; want 1", n, st, err)
	}
	var rerr *RecordError
	if n, _, err := replay(string(rec)+"not json\n", ok); !errors.As(err, &rerr) || n != 0 {
		t.Errorf("a bad last line: %d episodes, %v; want none (no flush) and a RecordError", n, err)
	}
	stop := errors.New("stop")
	if _, _, err := replay(string(rec), func(eps []timeline.Episode) error {
		if len(eps) > 0 {
			return stop
		}
		return nil
	}); err != stop {
		t.Errorf("fn's error came back as %v", err)
	}
}
