package tracer

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// referenceJSON is the event's JSON as sigscope wrote it with encoding/json
// before AppendJSON, from sigvocab's reading type (EventJSON, which its
// UnmarshalJSON reads through): the reference AppendJSON must match byte
// for byte.
func referenceJSON(e *sigvocab.Event) ([]byte, error) {
	procJSON := func(p *sigvocab.Process) sigvocab.ProcessJSON {
		return sigvocab.ProcessJSON{PID: p.PID, TID: p.TID, Comm: textsafe.UTF8(p.Comm.String()), NsPID: p.NsPID,
			PidNS: p.PidNS, CgroupID: p.CgroupID, CgroupV1ID: p.CgroupV1ID}
	}
	senderJSON := func(e *sigvocab.Event) *sigvocab.ProcessJSON {
		s := procJSON(&e.Sender)
		s.Exiting = e.SenderExiting
		for _, a := range e.SenderAncestors() {
			s.Ancestors = append(s.Ancestors, sigvocab.AncestorJSON{PID: a.PID, Comm: textsafe.UTF8(a.Comm.String())})
		}
		return &s
	}
	j := sigvocab.EventJSON{
		Time:   e.Time.Format(sigvocab.TimeFormat),
		Event:  e.Kind.String(),
		Flags:  e.Flags.Words(),
		Target: procJSON(&e.Target),
	}
	if e.Signal != 0 {
		j.Signal, j.Signo = e.Signal.String(), int32(e.Signal)
	}
	switch e.Kind {
	case sigvocab.KindExec, sigvocab.KindNSEmpty:
		j.Sender = senderJSON(e)
	case sigvocab.KindGenerate:
		j.Sender = senderJSON(e)
		j.Result = e.Result.String()
		j.Group = &e.Group
		fallthrough
	case sigvocab.KindDeliver:
		j.Fate = e.Fate.String()
		j.Code = e.Code.String()
		j.SiCode = &e.SiCode
		j.Handler = e.Handler.String()
	case sigvocab.KindExit:
		if e.Signal != 0 {
			j.CoreDumped = &e.CoreDumped
		} else {
			j.ExitCode = &e.ExitCode
		}
	}
	j.NetNS = e.NetNS
	if e.Kind == sigvocab.KindBlocked {
		j.Task = sigvocab.TaskToJSON(&e.Task)
	}
	if c := e.Conns; c != nil {
		j.Connections = sigvocab.ConnectionsToJSON(c)
	}
	return json.Marshal(&j)
}

// checkJSON holds e's AppendJSON (and MarshalJSON) to referenceJSON, then
// decodes both with encoding/json: valid JSON, valid UTF-8, equal values.
func checkJSON(t *testing.T, e *sigvocab.Event) {
	t.Helper()
	want, err := referenceJSON(e)
	if err != nil {
		t.Fatalf("reference: %v", err)
	}
	got := e.AppendJSON([]byte("[1,"))
	if !bytes.Equal(got[3:], want) || string(got[:3]) != "[1," {
		t.Fatalf("AppendJSON differs from encoding/json for %+v:\n got %s\nwant %s", *e, got[3:], want)
	}
	if m, err := e.MarshalJSON(); err != nil || !bytes.Equal(m, want) {
		t.Fatalf("MarshalJSON = %s, %v; want %s", m, err, want)
	}
	var a, b any
	if err := json.Unmarshal(got[3:], &a); err != nil {
		t.Fatalf("AppendJSON wrote invalid JSON (%v): %s", err, got[3:])
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatalf("the reference is invalid JSON (%v): %s", err, want)
	}
	if !reflect.DeepEqual(a, b) || !utf8.Valid(got) {
		t.Fatalf("AppendJSON decodes as %v, the reference as %v", a, b)
	}
}

// jsonCases are events no recording holds: every kind and flag, names this
// tracer does not know, hostile comms, other time zones.
func jsonCases() []sigvocab.Event {
	evs := benchEvents()
	gen := evs[0]
	var out []sigvocab.Event
	add := func(f func(e *sigvocab.Event)) {
		e := gen
		f(&e)
		out = append(out, e)
	}
	add(func(e *sigvocab.Event) {})
	add(func(e *sigvocab.Event) {
		e.Flags = ^sigvocab.Flags(0)
		e.SenderExiting = true
		e.Group = false
		e.SiCode = -6
		e.Code = sigvocab.CodeTkill
	})
	add(func(e *sigvocab.Event) { e.Result, e.Handler, e.Fate = 200, 200, 200 })
	add(func(e *sigvocab.Event) { e.Signal = 34; e.AncestorsCount = 0 })
	add(func(e *sigvocab.Event) { e.Signal = 64 + 3; e.SiCode = 128; e.Code = sigvocab.CodeKernel })
	add(func(e *sigvocab.Event) { e.Signal = -7 })
	add(func(e *sigvocab.Event) {
		copy(e.Target.Comm[:], "x\x1b[2J\r\xff<&>\"\\")
		copy(e.Sender.Comm[:], "\xe2\x80\xa8\u2029\xc3\x00junk")
		copy(e.Ancestors[1].Comm[:], "0123456789abcdef") // no NUL: 16 bytes
		copy(e.Ancestors[2].Comm[:], "\xed\xa0\x80\u00e9\U0001F600")
	})
	add(func(e *sigvocab.Event) { e.Kind = sigvocab.KindExec; e.Signal = 0 })
	add(func(e *sigvocab.Event) {
		e.Kind = sigvocab.KindNSEmpty
		e.Signal = sigvocab.SIGCHLD
		e.SenderExiting = false
		e.AncestorsCount = 0
	})
	add(func(e *sigvocab.Event) { e.Kind = sigvocab.KindOOM; e.Signal = sigvocab.SIGKILL })
	add(func(e *sigvocab.Event) { e.Kind = sigvocab.KindExit; e.Signal = 0; e.ExitCode = 143 })
	add(func(e *sigvocab.Event) {
		e.Kind = sigvocab.KindExit
		e.Signal = 11
		e.ExitCode = -1
		e.CoreDumped = true
	})
	add(func(e *sigvocab.Event) { e.Kind = 77 })
	add(func(e *sigvocab.Event) { e.NetNS = 4026532771 }) // a watched stop signal
	add(func(e *sigvocab.Event) {
		e.Kind, e.Signal, e.NetNS = sigvocab.KindNet, 0, 4026532771
		c := &sigvocab.Connections{Since: e.Time.Add(-3 * time.Second), SeesRefused: true}
		c.Counts[sigvocab.NetAccepted] = sigvocab.NetCount{N: 12, First: c.Since.Add(time.Millisecond), Last: e.Time}
		c.Counts[sigvocab.NetCut] = sigvocab.NetCount{N: 1, First: e.Time, Last: e.Time}
		e.Conns = c
	})
	add(func(e *sigvocab.Event) {
		e.Kind, e.Signal = sigvocab.KindBlocked, 0
		e.Task = sigvocab.TaskReading{Role: sigvocab.RoleChild, Process: 4242, Syscall: 0, Arg: 3, FdKind: sigvocab.FdPipe, CPUNs: 1 << 40,
			OnCPU: true, Dispositions: 0x40, Threads: 0, MoreChildren: true}
	})
	add(func(e *sigvocab.Event) {
		e.Kind, e.Signal = sigvocab.KindBlocked, 0
		e.Task = sigvocab.TaskReading{Role: 9, Syscall: -1, Arg: ^uint64(0), FdKind: 15, Threads: 255, MoreThreads: true}
	})
	add(func(e *sigvocab.Event) { // a preStop exec hook's child, in slot 2
		e.Kind, e.Signal = sigvocab.KindBlocked, 0
		e.Task = sigvocab.TaskReading{Role: sigvocab.RoleExecChild, Process: 4242, Syscall: 230, CPUNs: 5, Slot: 2}
	})
	add(func(e *sigvocab.Event) { // split by cgroup: none yet, then two
		e.Kind, e.Signal, e.NetNS = sigvocab.KindNet, 0, 4026532771
		e.Conns = &sigvocab.Connections{Since: e.Time, SeesCgroups: true}
	})
	add(func(e *sigvocab.Event) {
		e.Kind, e.Signal, e.NetNS = sigvocab.KindNet, 0, 4026532771
		c := &sigvocab.Connections{Since: e.Time.Add(-time.Second), SeesCgroups: true}
		c.Counts[sigvocab.NetAccepted] = sigvocab.NetCount{N: 5, First: c.Since, Last: e.Time}
		c.ByCgroup = []sigvocab.CgroupCounts{{CgroupID: 9001, N: [sigvocab.NumNetKinds]uint64{2}}, {CgroupID: 1 << 40, N: [sigvocab.NumNetKinds]uint64{3, 0, 0, 0, 1}}}
		e.Conns = c
	})
	add(func(e *sigvocab.Event) { // counts that tell who spoke last
		e.Kind, e.Signal, e.NetNS = sigvocab.KindNet, 0, 4026532771
		c := &sigvocab.Connections{Since: e.Time.Add(-time.Second), SeesCgroups: true, SeesLastSpeaker: true, SeesProbes: true,
			SeesData: true, LastData: e.Time.Add(-time.Millisecond), SeesPeers: true,
			Peers: []sigvocab.PeerCounts{{Addr: netip.MustParseAddr("10.1.2.3"), N: [sigvocab.NumNetKinds]uint64{sigvocab.NetUnanswered: 9}},
				{Addr: netip.MustParseAddr("fd00::7"), N: [sigvocab.NumNetKinds]uint64{sigvocab.NetRefused: 3}}}}
		c.Probes[sigvocab.NetAccepted], c.Probes[sigvocab.NetRefused] = 12, 1
		c.Counts[sigvocab.NetUnanswered] = sigvocab.NetCount{N: 9, First: c.Since, Last: e.Time}
		c.Counts[sigvocab.NetIdleAtExit] = sigvocab.NetCount{N: 2, First: e.Time, Last: e.Time}
		c.ByCgroup = []sigvocab.CgroupCounts{{CgroupID: 9001, N: [sigvocab.NumNetKinds]uint64{sigvocab.NetUnanswered: 9, sigvocab.NetIdleAtExit: 2}}}
		e.Conns = c
	})
	for _, z := range []*time.Location{time.UTC, time.Local, time.FixedZone("IST", 5*3600+1800),
		time.FixedZone("NST", -(3*3600 + 1800)), time.FixedZone("LMT", -30), time.FixedZone("LMT", 3600+45),
		time.FixedZone("", 99*3600+59*60+59), time.FixedZone("", -100*3600), time.FixedZone("", 1<<30)} {
		add(func(e *sigvocab.Event) { e.Time = e.Time.In(z) })
	}
	for _, at := range []time.Time{{}, time.Unix(0, 0), time.Date(-1, 2, 3, 4, 5, 6, 7, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)} {
		add(func(e *sigvocab.Event) { e.Time = at })
	}
	return append(out, evs...)
}

func TestJSONMatchesEncodingJSON(t *testing.T) {
	for _, e := range jsonCases() {
		checkJSON(t, &e)
	}
}

// The records the privileged tests captured, decoded and written.
func TestJSONRecordedEvents(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "events", "*.hex"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded events: %v", err)
	}
	for _, p := range paths {
		raw := loadFixture(t, strings.TrimSuffix(filepath.Base(p), ".hex"))
		for _, clk := range []Clock{{}, {offset: 1795400553511313658 - 5_000_000_000_000}} {
			var e sigvocab.Event
			if err := Decode(raw, clk, &e); err != nil {
				t.Fatal(err)
			}
			checkJSON(t, &e)
		}
	}
}

// A line per signal must not cost the garbage collector anything.
func TestJSONAllocatesNothing(t *testing.T) {
	evs := jsonCases()
	buf := make([]byte, 0, 4096)
	for _, e := range evs {
		if e.Time.Year() < 0 || e.Time.Year() > 9999 || e.Signal < 0 || e.Signal > sigvocab.MaxSignal {
			continue // the fallbacks no kernel's event takes
		}
		if n := testing.AllocsPerRun(100, func() { buf = e.AppendJSON(buf[:0]) }); n != 0 {
			t.Errorf("AppendJSON allocates %v times for %s", n, buf)
		}
	}
}

// FuzzJSON compares AppendJSON with encoding/json's reference over any
// record the kernel could write (the recorded ones as seeds), with any
// flags, fate, time and zone on top, and kinds no kernel writes.
func FuzzJSON(f *testing.F) {
	for _, raw := range fuzzFixtures(f) {
		var e sigvocab.Event
		if err := Decode(raw, Clock{}, &e); err != nil {
			f.Fatal(err)
		}
		f.Add(raw, uint8(e.Kind), uint16(e.Flags), uint8(e.Fate), int64(0), uint32(0), int32(0))
	}
	f.Add(fuzzRecord(sigvocab.KindGenerate, nil), uint8(0x80|77), uint16(0xffff), uint8(99), int64(-62135596800-1), uint32(999999999), int32(-30))
	typeAt := unsafe.Offsetof(sigscopeEvent{}.Type)
	f.Fuzz(func(t *testing.T, raw []byte, kind uint8, flags uint16, fate uint8, sec int64, nsec uint32, zone int32) {
		rec := make([]byte, RecordSize)
		copy(rec, raw)
		rec[typeAt] = uint8(sigvocab.Kinds[int(kind&0x7f)%len(sigvocab.Kinds)])
		var e sigvocab.Event
		if err := Decode(rec, Clock{}, &e); err != nil {
			t.Fatal(err)
		}
		if kind&0x80 != 0 {
			e.Kind = sigvocab.Kind(kind & 0x7f) // kinds no kernel writes
		}
		e.Flags, e.Fate = sigvocab.Flags(flags), sigvocab.Fate(fate)
		if sec != 0 || nsec != 0 {
			e.Time = time.Unix(sec, int64(nsec%1_000_000_000))
		}
		e.Time = e.Time.In(time.FixedZone("", int(zone)))
		checkJSON(t, &e)
	})
}
