package tracer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Fuzz targets for the decoders of what comes from outside the process: the
// BPF ring buffer's records, the task iterator's records and the JSON lines
// of a recording. test/fuzz.sh runs them; `go test` runs their seeds.

// fuzzRecord is one raw record of the given kind, built from the generated
// struct so that no layout is written by hand.
func fuzzRecord(kind sigvocab.Kind, fill func(r *sigscopeEvent)) []byte {
	r := sigscopeEvent{TsNs: 1_000_000_007, Type: uint8(kind), Signo: int32(sigvocab.SIGTERM)}
	r.Target = sigscopeProc{Pid: 4242, Tid: 4242, NsPid: 1, Pidns: 4026532177, CgroupId: 3255, CgroupV1Id: 9539}
	copy(r.Target.Comm[:], []int8{'s', 'h'})
	r.Sender = sigscopeProc{Pid: 100, Tid: 101, NsPid: 100, Pidns: 4026531836, CgroupId: 1}
	copy(r.Sender.Comm[:], []int8{'r', 'u', 'n', 'c'})
	if fill != nil {
		fill(&r)
	}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&r)), RecordSize)...)
}

// fuzzFixtures returns the records the privileged tests captured from real
// kernels (testdata/events/*.hex).
func fuzzFixtures(f *testing.F) [][]byte {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "events", "*.hex"))
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		out = append(out, raw)
	}
	if len(out) == 0 {
		f.Fatal("no recorded events in testdata/events")
	}
	return out
}

// Any bytes give an error or an event, never a panic; an event is a known
// kind and its JSON (valid UTF-8) reads back as the same event.
func FuzzDecode(f *testing.F) {
	for _, raw := range fuzzFixtures(f) {
		f.Add(raw, int64(0))
		f.Add(raw, int64(1_700_000_000_000_000_000))
	}
	f.Add(fuzzRecord(sigvocab.KindOOM, nil), int64(0))
	f.Add(fuzzRecord(sigvocab.KindExec, func(r *sigscopeEvent) {
		r.AncestorsLen = 9 // more than the record holds
		for i := range r.Ancestors {
			r.Ancestors[i].Pid = uint32(i + 1)
			copy(r.Ancestors[i].Comm[:], []int8{'p', int8('0' + i), -1, 0x1b})
		}
	}), int64(-1))
	f.Add(fuzzRecord(sigvocab.KindExit, func(r *sigscopeEvent) { r.ExitCode = 0x8b }), int64(0)) // SIGSEGV, core dumped
	f.Add(fuzzRecord(sigvocab.KindGenerate, func(r *sigscopeEvent) {
		r.Signo, r.SiCode, r.Group, r.Facts = int32(sigvocab.SIGKILL), 0x80, 1, ^uint32(0)
		for i := range r.Target.Comm {
			r.Target.Comm[i] = -1 // 16 bytes of 0xff, no NUL
		}
	}), int64(0))
	f.Add(fuzzRecord(sigvocab.KindDeliver, func(r *sigscopeEvent) { r.Signo = -5; r.Handler = 2 }), int64(0))
	f.Add(make([]byte, RecordSize), int64(0))
	f.Add(make([]byte, RecordSize-1), int64(0))
	f.Add([]byte{}, int64(0))

	f.Fuzz(func(t *testing.T, raw []byte, offset int64) {
		var e sigvocab.Event
		err := Decode(raw, Clock{offset: offset}, &e)
		if len(raw) < RecordSize {
			if err == nil {
				t.Fatalf("a %d-byte record decoded (want %d bytes)", len(raw), RecordSize)
			}
			return
		}
		if err != nil {
			return
		}
		known := false
		for _, k := range sigvocab.Kinds {
			known = known || e.Kind == k
		}
		if !known {
			t.Fatalf("decoded kind %d", e.Kind)
		}
		if e.Kind.String() == "unknown" {
			t.Fatalf("kind %d has no name", e.Kind)
		}
		if !bytes.Equal(e.Raw, raw[:RecordSize]) {
			t.Fatal("Raw is not the record")
		}
		if e.BootNS != binary.NativeEndian.Uint64(raw) {
			t.Fatalf("BootNS %d is not the record's timestamp", e.BootNS)
		}
		if e.AncestorsCount < 0 || e.AncestorsCount > sigvocab.MaxAncestors {
			t.Fatalf("%d ancestors", e.AncestorsCount)
		}
		if e.Kind == sigvocab.KindExit && (e.ExitCode < -1 || e.ExitCode > 255 || (e.Signal != 0) != (e.ExitCode == -1)) {
			t.Fatalf("exit: signal %d, code %d", e.Signal, e.ExitCode)
		}

		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		if !utf8.Valid(b) || !json.Valid(b) {
			t.Fatalf("MarshalJSON wrote invalid JSON: %q", b)
		}
		var back sigvocab.Event
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("the JSON of a decoded event does not read back: %v\n%s", err, b)
		}
		if back.Kind != e.Kind || back.Signal != e.Signal || back.Flags != e.Flags || back.Fate != e.Fate ||
			back.ExitCode != e.ExitCode || back.CoreDumped != e.CoreDumped {
			t.Fatalf("JSON round trip changed the event:\n%s\n%+v\n%+v", b, e, back)
		}
		// Result and group are a generate event's, si_code and handler a
		// generate or deliver event's. Result and handler compare by name:
		// every value without one is written "unknown".
		signal := e.Kind == sigvocab.KindGenerate || e.Kind == sigvocab.KindDeliver
		if e.Kind == sigvocab.KindGenerate && (back.Result.String() != e.Result.String() || back.Group != e.Group) ||
			signal && (back.Handler.String() != e.Handler.String() || back.SiCode != e.SiCode || back.Code != e.Code) {
			t.Fatalf("JSON round trip changed result, group, si_code or handler:\n%s\n%+v\n%+v", b, e, back)
		}
		// RFC 3339 offsets are whole minutes: a local zone with seconds in
		// its offset (LMT, before 1900) cannot be written exactly.
		if _, off := e.Time.Zone(); off%60 == 0 && !back.Time.Equal(e.Time) {
			t.Fatalf("time %s read back as %s", e.Time.Format(sigvocab.TimeFormat), back.Time.Format(sigvocab.TimeFormat))
		}
		procs := [][2]sigvocab.Process{{e.Target, back.Target}}
		if e.Kind == sigvocab.KindGenerate || e.Kind == sigvocab.KindExec { // the kinds with a sender
			procs = append(procs, [2]sigvocab.Process{e.Sender, back.Sender})
		}
		for _, p := range procs {
			a, z := p[0], p[1]
			a.Comm, z.Comm = sigvocab.Comm{}, sigvocab.Comm{}
			if a != z {
				t.Fatalf("process %+v read back as %+v", p[0], p[1])
			}
		}
	})
}

// A record with a result or disposition that has no name is written
// "unknown", and reads back so (FuzzDecode found it refused:
// testdata/fuzz/FuzzDecode/a649ebd45c45ae0a).
func TestUnknownResultAndHandlerReadBack(t *testing.T) {
	raw := fuzzRecord(sigvocab.KindGenerate, func(r *sigscopeEvent) { r.Result, r.Handler = 9, 7 })
	var e, back sigvocab.Event
	if err := Decode(raw, Clock{}, &e); err != nil {
		t.Fatal(err)
	}
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"result":"unknown"`) || !strings.Contains(string(b), `"handler":"unknown"`) {
		t.Fatalf("written as %s", b)
	}
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatalf("%s does not read back: %v", b, err)
	}
	if back.Result.String() != "unknown" || back.Handler.String() != "unknown" {
		t.Errorf("read back as result %s, handler %s", back.Result, back.Handler)
	}
	if err := back.UnmarshalJSON([]byte(`{"time":"2026-11-25T02:14:50Z","event":"generate","result":"lost","flags":[],"target":{}}`)); err == nil {
		t.Error("a result that is neither a name nor \"unknown\" was read")
	}
}

// fuzzStreamLines returns the lines of the timeline's recorded streams,
// real `trace -o json` output.
func fuzzStreamLines(f *testing.F) []string {
	f.Helper()
	paths, _ := filepath.Glob(filepath.Join("..", "episodes", "timeline", "testdata", "streams", "*.jsonl"))
	var out []string
	for _, p := range paths {
		fh, err := os.Open(p)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
		fh.Close()
	}
	return out
}

// Any bytes are an error or an event; an event's JSON is valid UTF-8, reads
// back, and a second round trip changes nothing but comms (see withoutComms).
func FuzzEventUnmarshalJSON(f *testing.F) {
	for _, raw := range fuzzFixtures(f) {
		var e sigvocab.Event
		if err := Decode(raw, Clock{}, &e); err != nil {
			f.Fatal(err)
		}
		b, err := e.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, l := range fuzzStreamLines(f) {
		f.Add([]byte(l))
	}
	for _, s := range []string{
		`{"time":"2026-11-25T02:14:50.706250783Z","event":"exit","flags":["ns_init"],"target":{"pid":1,"tid":1,"comm":"sh","ns_pid":1,"pidns":4026532180,"cgroup_id":1,"cgroup_v1_id":0},"exit_code":143}`,
		`{"time":"2026-11-25T02:14:50Z","event":"oom","flags":[],"target":{"pid":7,"comm":"\\xff\u001b[31m"}}`,
		`{"time":"1970-01-01T00:00:00+05:30","event":"exec","flags":[],"sender":{"pid":2,"comm":"runc","ancestors":[{"pid":1},{"pid":1},{"pid":1},{"pid":1},{"pid":1}]},"target":{"pid":3}}`,
		`{"time":"2026-11-25T02:14:50Z","event":"deliver","signo":64,"fate":"unknown","handler":"handler","si_code":-6,"flags":["blocked"],"target":{}}`,
		`{"time":"2026-11-25T02:14:50Z","event":"generate","flags":["nope"],"target":{}}`,
		`{"time":"yesterday","event":"generate"}`,
		`null`, `{}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, b []byte) {
		var e sigvocab.Event
		if e.UnmarshalJSON(b) != nil {
			return
		}
		if e.AncestorsCount < 0 || e.AncestorsCount > sigvocab.MaxAncestors {
			t.Fatalf("%d ancestors", e.AncestorsCount)
		}
		m1, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON of an event read from %q: %v", b, err)
		}
		if !utf8.Valid(m1) || !json.Valid(m1) {
			t.Fatalf("MarshalJSON wrote invalid JSON: %q", m1)
		}
		var back sigvocab.Event
		if err := back.UnmarshalJSON(m1); err != nil {
			t.Fatalf("an event read from %q wrote %s, which does not read back: %v", b, m1, err)
		}
		m2, err := back.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(testutil.JSONWithout(t, m1, "comm"), testutil.JSONWithout(t, m2, "comm")) {
			t.Fatalf("marshal∘unmarshal is not stable after one round:\n%s\n%s", m1, m2)
		}
	})
}

// Any bytes are an error (not whole records) or one snapshot per pid, the
// last record's for a pid that repeats.
func FuzzDecodeTaskStates(f *testing.F) {
	rec := func(r taskstateTaskState) []byte {
		return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&r)), taskStateSize)...)
	}
	tini := taskstateTaskState{Pid: 42, NsPid: 1, Pidns: 4026532180, SigFlags: 0x40, Blocked: 1 << 14, Handled: 1 << 1, Ignored: 1 << 2}
	copy(tini.Comm[:], []int8{'t', 'i', 'n', 'i'})
	waiter := taskstateTaskState{Pid: 43, NsPid: 7, Pidns: 4026532180, SigFlags: 0x4, RealBlocked: ^uint64(0), Blocked: 1}
	f.Add(rec(tini))
	f.Add(append(rec(tini), rec(waiter)...))
	f.Add(append(rec(tini), rec(tini)...))
	f.Add(rec(tini)[:taskStateSize-1])
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw)%taskStateSize != 0 {
			if err := decodeTaskStates(raw, map[int]sigvocab.TaskSnapshot{}); err == nil {
				t.Fatalf("%d bytes (not whole %d-byte records) decoded", len(raw), taskStateSize)
			}
			raw = raw[:len(raw)-len(raw)%taskStateSize] // and the whole records in it
		}
		out := map[int]sigvocab.TaskSnapshot{-1: {}} // an entry that was there before stays
		if err := decodeTaskStates(raw, out); err != nil {
			t.Fatalf("%d whole records: %v", len(raw)/taskStateSize, err)
		}
		// Each record is its pid's entry unless a later one has the same
		// pid; nothing else is added or removed. (Checked without
		// reflect.DeepEqual, whose coverage only makes the fuzzer chase
		// noise.)
		n := len(raw) / taskStateSize
		recs := make([]taskstateTaskState, n)
		distinct := 0
		for i := range recs {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&recs[i])), taskStateSize), raw[i*taskStateSize:])
		}
		for i := range recs {
			last := true
			for j := i + 1; j < n && last; j++ {
				last = recs[j].Pid != recs[i].Pid
			}
			if !last {
				continue
			}
			distinct++
			if got := out[int(recs[i].Pid)]; got != snapshotOf(&recs[i]) {
				t.Fatalf("record %d: pid %d decoded as %+v, want %+v", i, recs[i].Pid, got, snapshotOf(&recs[i]))
			}
		}
		if _, kept := out[-1]; !kept || len(out) != distinct+1 {
			t.Fatalf("%d entries from %d pids, and the one there before", len(out), distinct)
		}
		for pid, s := range out {
			if pid != -1 && (s.PID != pid || s.PID < 0 || s.NSPID < 0) {
				t.Fatalf("pid %d: snapshot %+v", pid, s)
			}
			for sig := sigvocab.Signal(1); sig <= sigvocab.MaxSignal; sig++ {
				_ = sigvocab.PredictFate(sig, s.State(sig), true).String()
			}
		}
	})
}
