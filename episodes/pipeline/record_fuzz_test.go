package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// recordingShape is what ReadRecordingWith must find in a recording,
// counted from its bytes alone: its lines end at '\n'; a line is blank when
// only white space; the bytes after the last '\n' are an unfinished line.
type recordingShape struct {
	lines    int  // every line, the unfinished one included
	complete int  // non-blank lines that end in '\n'
	tail     bool // an unfinished line that is not blank
}

func shapeOf(b []byte) recordingShape {
	var s recordingShape
	counts := func(l []byte) bool {
		return len(l)+1 > MaxRecordLine || strings.TrimSpace(string(l)) != ""
	}
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		s.lines++
		if counts(b[:i]) {
			s.complete++
		}
		b = b[i+1:]
	}
	if len(b) > 0 {
		s.lines++
		s.tail = counts(b)
	}
	return s
}

// A recording of any bytes is read without a panic. With SkipInvalid, each
// non-blank line is a record or a skipped line, except an invalid unfinished
// last line, which is Truncated; without it, the first invalid line (the one
// SkipInvalid reports first) ends the read with a *RecordError. Each record
// writes back (AppendRecord) as a valid line that reads as itself.
func FuzzReadRecording(f *testing.F) {
	line := `{"time":"2026-11-25T02:14:50.706250783Z","event":"exit","flags":["ns_init"],"target":{"pid":30038,"tid":30038,"comm":"catatonit","ns_pid":1,"pidns":4026532180,"cgroup_id":3255,"cgroup_v1_id":9539},"exit_code":143,"container":{"id":"67b731fb4e4375c8ccc1fb2ff64451cabd722888bebffc20e51deb51b5cce43f","name":"e2e-init-catatonit","runtime":"docker","stop_timeout_s":10,"main_pid":30038}}`
	host := `{"time":"2026-11-25T02:14:50Z","event":"generate","signo":15,"flags":[],"target":{"pid":42,"ns_pid":42,"pidns":4026531836},"sender":{"pid":77,"ns_pid":3,"pidns":4026532177},"container":{"id":"abc","runtime":"docker","name":"web\\xff"}}`
	for _, s := range []string{
		line + "\n",
		line + "\n" + line[:len(line)/2], // cut mid-write
		line,                             // no newline, valid
		"\n  \r\n\t\n" + line + "\r\n\n",
		"{not json\n" + line + "\n[]\n",
		host + "\n" + line + "\n",
		"\xff\xfe\n" + line,
		"",
	} {
		f.Add([]byte(s))
	}
	// testdata/fuzz/FuzzReadRecording holds lines of the timeline's streams.

	f.Fuzz(func(t *testing.T, b []byte) {
		shape := shapeOf(b)
		var lines [][]byte
		st, err := ReadRecordingWith(bytes.NewReader(b), ReadOptions{SkipInvalid: true},
			func(e *sigvocab.Event, target, sender *identity.Info) error {
				if e == nil {
					t.Fatal("a nil event")
				}
				l, err := AppendRecord(nil, e, target, sender)
				if err != nil {
					t.Fatalf("AppendRecord of a record read: %v", err)
				}
				lines = append(lines, l)
				return nil
			})
		if err != nil {
			t.Fatalf("SkipInvalid read: %v", err)
		}
		if st.Records != len(lines) {
			t.Fatalf("%d records, fn called %d times", st.Records, len(lines))
		}
		want := shape.complete
		if shape.tail {
			want++
		}
		if st.Truncated {
			want--
		}
		if st.Records+st.Skipped != want {
			t.Fatalf("%+v: %d records and %d skipped, want %d non-blank lines (%+v)", st, st.Records, st.Skipped, want, shape)
		}
		if st.Truncated && !shape.tail {
			t.Fatalf("Truncated without an unfinished last line (%+v)", shape)
		}
		if (st.Skipped > 0) != (st.FirstSkipped != nil) {
			t.Fatalf("%d skipped, first %v", st.Skipped, st.FirstSkipped)
		}
		if fs := st.FirstSkipped; fs != nil && (fs.Line < 1 || fs.Line > shape.lines || fs.Err == nil) {
			t.Fatalf("first skipped line %d of %d: %v", fs.Line, shape.lines, fs.Err)
		}

		// Without SkipInvalid: the same read up to the first invalid line.
		n := 0
		st2, err := ReadRecordingWith(bytes.NewReader(b), ReadOptions{}, func(*sigvocab.Event, *identity.Info, *identity.Info) error {
			n++
			return nil
		})
		if st.FirstSkipped == nil {
			if err != nil || st2.Records != st.Records || st2.Truncated != st.Truncated || n != st.Records {
				t.Fatalf("no invalid line, but: %v, %+v (SkipInvalid: %+v)", err, st2, st)
			}
		} else {
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("an invalid line, and error %T %v", err, err)
			}
			if re.Line != st.FirstSkipped.Line || re.Line < 1 || re.Line > shape.lines {
				t.Fatalf("error at line %d of %d; SkipInvalid skipped line %d first", re.Line, shape.lines, st.FirstSkipped.Line)
			}
			if st2.Records != n || st2.Records > st.Records || st2.Skipped != 0 {
				t.Fatalf("stopped at line %d with %+v after %d calls", re.Line, st2, n)
			}
		}

		// What a record writes is one valid line that reads back as one
		// record, and writes the same again (but comms, see recordJSON).
		for _, l := range lines {
			if !utf8.Valid(l) || !json.Valid(l) || bytes.Count(l, []byte("\n")) != 1 || l[len(l)-1] != '\n' {
				t.Fatalf("AppendRecord wrote %q", l)
			}
			var again []byte
			st3, err := ReadRecordingWith(bytes.NewReader(l), ReadOptions{}, func(e *sigvocab.Event, target, sender *identity.Info) error {
				var err error
				again, err = AppendRecord(nil, e, target, sender)
				return err
			})
			if err != nil || st3.Records != 1 || st3.Truncated {
				t.Fatalf("the line written reads as %+v, %v:\n%s", st3, err, l)
			}
			if !reflect.DeepEqual(testutil.JSONWithout(t, l, "comm"), testutil.JSONWithout(t, again, "comm")) {
				t.Fatalf("a record written and read writes another:\n%s%s", l, again)
			}
		}
	})
}
