package tracer

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

func loadFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "events", name+".hex"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Records captured from the real kernel by the privileged tests
// (SIGSCOPE_RECORD_FIXTURES=...), replayed without root.
func TestDecodeRecordedEvents(t *testing.T) {
	cases := []struct {
		fixture string
		kind    Kind
		signal  Signal
		result  Result
		handler Disposition
		flags   Flags
		exit    int
		nsPID   uint32
	}{
		{"TestPID1IgnoresSIGTERM__inside", KindGenerate, SIGTERM, ResultIgnored, DispDefault, FlagPID1Ignored | FlagNSInit, 0, 1},
		{"TestPID1IgnoresSIGTERM__host", KindGenerate, SIGTERM, ResultIgnored, DispDefault, FlagPID1Ignored | FlagNSInit | FlagCrossNS, 0, 1},
		{"TestPID1HandlerDelivery__generate", KindGenerate, SIGTERM, ResultDelivered, DispHandler, FlagNSInit | FlagCrossNS, 0, 1},
		{"TestPID1HandlerDelivery__deliver", KindDeliver, SIGTERM, ResultDelivered, DispHandler, FlagNSInit, 0, 1},
		{"TestPID1HandlerDelivery__exit", KindExit, 0, 0, 0, FlagNSInit, 0, 1},
		{"TestNamespaceCascade__init-exit", KindExit, 0, 0, 0, FlagNSInit, 7, 1},
		{"TestNamespaceCascade__cascade-3", KindGenerate, SIGKILL, ResultDelivered, DispDefault, FlagNSCascade, 0, 0},
		{"TestNamespaceCascade__child-exit", KindExit, SIGKILL, 0, 0, 0, -1, 0},
		{"TestSigIgnPlainProcess__sig_ign", KindGenerate, SIGTERM, ResultIgnored, DispIgnore, FlagSigIgn, 0, 0},
		{"TestHostSIGKILLToInit__kill", KindGenerate, SIGKILL, ResultDelivered, DispDefault, FlagNSInit | FlagCrossNS, 0, 1},
		{"TestHostSIGKILLToInit__exit", KindExit, SIGKILL, 0, 0, FlagNSInit, -1, 1},
		{"TestNamespaceCascade__ns-empty", KindNSEmpty, SIGCHLD, 0, 0, FlagNSInit, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			var e Event
			if err := Decode(loadFixture(t, c.fixture), Clock{}, &e); err != nil {
				t.Fatal(err)
			}
			if e.Kind != c.kind || e.Signal != c.signal || e.Flags != c.flags {
				t.Errorf("got %s %s [%s], want %s %s [%s]", e.Kind, e.Signal, e.Flags, c.kind, c.signal, c.flags)
			}
			if c.kind != KindExit && (e.Result != c.result || e.Handler != c.handler) {
				t.Errorf("result %s handler %s, want %s %s", e.Result, e.Handler, c.result, c.handler)
			}
			if c.kind == KindExit && e.ExitCode != c.exit {
				t.Errorf("exit code %d, want %d", e.ExitCode, c.exit)
			}
			if c.nsPID != 0 && e.Target.NsPID != c.nsPID {
				t.Errorf("target ns_pid %d, want %d", e.Target.NsPID, c.nsPID)
			}
			if e.Target.PID == 0 || e.Target.PidNS == 0 || e.BootNS == 0 {
				t.Errorf("target identity missing: %+v boot %d", e.Target, e.BootNS)
			}
			if c.kind == KindGenerate && (e.Sender.PID == 0 || e.AncestorsCount == 0) {
				t.Errorf("sender missing: %+v ancestors %d", e.Sender, e.AncestorsCount)
			}
			testJSONRoundTrip(t, &e)
		})
	}
}

func testJSONRoundTrip(t *testing.T, e *Event) {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if back.Kind != e.Kind || back.Signal != e.Signal || back.Result != e.Result || back.Flags != e.Flags ||
		back.Handler != e.Handler || back.Target != e.Target || back.Sender != e.Sender ||
		back.ExitCode != e.ExitCode || back.Ancestors != e.Ancestors || !back.Time.Equal(e.Time) {
		t.Errorf("JSON round trip changed the event:\n%s\n%+v\n%+v", b, *e, back)
	}
}

func TestDecodeRejectsBadRecords(t *testing.T) {
	var e Event
	if err := Decode(make([]byte, RecordSize-1), Clock{}, &e); err == nil {
		t.Error("short record decoded")
	}
	raw := make([]byte, RecordSize)
	raw[unsafe.Offsetof(sigscopeEvent{}.Type)] = 9
	if err := Decode(raw, Clock{}, &e); err == nil {
		t.Error("unknown event type decoded")
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	raw := loadFixture(t, "TestPID1IgnoresSIGTERM__host")
	var e Event
	if n := testing.AllocsPerRun(1000, func() { _ = Decode(raw, Clock{}, &e) }); n != 0 {
		t.Errorf("Decode allocates %v times per record", n)
	}
}

// Rules that the live tests cannot all reach on one kernel, from raw facts.
func TestClassify(t *testing.T) {
	const (
		unkillable = signalUnkillable
		groupExit  = signalGroupExit
		inTarget   = factSenderInTargetNS
	)
	cascadeFacts := factInfoPriv | factSenderExiting | factSenderReaper | factTargetInSenderNS | inTarget
	cases := []struct {
		name string
		e    Event
		want Flags
	}{
		{"init drops TERM without handler",
			Event{Kind: KindGenerate, Signal: SIGTERM, Result: ResultIgnored, SigFlags: unkillable, Facts: inTarget | factTargetNSInit},
			FlagPID1Ignored | FlagNSInit},
		{"init drops KILL from inside",
			Event{Kind: KindGenerate, Signal: SIGKILL, Result: ResultIgnored, SigFlags: unkillable, Facts: inTarget | factTargetNSInit},
			FlagPID1Ignored | FlagNSInit},
		{"SIGCHLD ignored by default is no PID 1 verdict",
			Event{Kind: KindGenerate, Signal: SIGCHLD, Result: ResultIgnored, SigFlags: unkillable, Facts: inTarget | factTargetNSInit},
			FlagNSInit},
		{"explicit SIG_IGN at an init is sig_ign",
			Event{Kind: KindGenerate, Signal: SIGTERM, Result: ResultIgnored, Handler: DispIgnore, SigFlags: unkillable, Facts: inTarget | factTargetNSInit},
			FlagSigIgn | FlagNSInit},
		{"dying target",
			Event{Kind: KindGenerate, Signal: SIGTERM, Result: ResultIgnored, SigFlags: groupExit, Facts: inTarget},
			FlagTargetExiting},
		{"dying target with SIG_IGN is still target_exiting",
			Event{Kind: KindGenerate, Signal: SIGTERM, Result: ResultIgnored, Handler: DispIgnore, SigFlags: groupExit, Facts: inTarget},
			FlagTargetExiting},
		{"blocked at an init: queued",
			Event{Kind: KindGenerate, Signal: SIGTERM, Result: ResultDelivered, SigFlags: unkillable, Facts: factBlocked | factTargetNSInit},
			FlagBlocked | FlagNSInit | FlagCrossNS},
		{"delivered to a handler",
			Event{Kind: KindGenerate, Signal: SIGTERM, Result: ResultDelivered, Handler: DispHandler, SigFlags: unkillable, Facts: inTarget | factTargetNSInit},
			FlagNSInit},
		{"already pending is not a drop",
			Event{Kind: KindGenerate, Signal: SIGTERM, Result: ResultAlreadyPending, SigFlags: unkillable, Facts: inTarget},
			0},
		{"cascade",
			Event{Kind: KindGenerate, Signal: SIGKILL, Group: true, Facts: cascadeFacts, Sender: Process{PID: 10}, Target: Process{PID: 11}},
			FlagNSCascade},
		{"cascade into a nested namespace is cross_ns",
			Event{Kind: KindGenerate, Signal: SIGKILL, Group: true, Facts: cascadeFacts &^ inTarget, Sender: Process{PID: 10}, Target: Process{PID: 11}},
			FlagNSCascade | FlagCrossNS},
		{"zap of the init's own thread is not cascade",
			Event{Kind: KindGenerate, Signal: SIGKILL, Group: true, Facts: cascadeFacts, Sender: Process{PID: 10}, Target: Process{PID: 10}},
			0},
		{"OOM killer: PRIV SIGKILL from a non-reaper",
			Event{Kind: KindGenerate, Signal: SIGKILL, Group: true, Facts: factInfoPriv | factTargetInSenderNS | inTarget, Sender: Process{PID: 10}, Target: Process{PID: 11}},
			0},
		{"SIGKILL from an exiting reaper via kill(2) is not cascade",
			Event{Kind: KindGenerate, Signal: SIGKILL, Group: true, Facts: cascadeFacts &^ factInfoPriv, Sender: Process{PID: 10}, Target: Process{PID: 11}},
			0},
		{"thread-directed PRIV SIGKILL (ptrace exit-kill) is not cascade",
			Event{Kind: KindGenerate, Signal: SIGKILL, Group: false, Facts: cascadeFacts, Sender: Process{PID: 10}, Target: Process{PID: 11}},
			0},
		{"blocked TERM dequeued by an init with SIG_DFL is dropped",
			Event{Kind: KindDeliver, Signal: SIGTERM, Handler: DispDefault, SigFlags: unkillable, Facts: factTargetNSInit},
			FlagPID1Ignored | FlagNSInit},
		{"SIGKILL dequeued by an init is acted on",
			Event{Kind: KindDeliver, Signal: SIGKILL, Handler: DispDefault, SigFlags: unkillable, Facts: factTargetNSInit},
			FlagNSInit},
		{"group-exit SIGKILL deliver (UNKILLABLE wiped)",
			Event{Kind: KindDeliver, Signal: SIGKILL, Handler: DispDefault, SigFlags: groupExit},
			0},
		{"deliver to a handler",
			Event{Kind: KindDeliver, Signal: SIGTERM, Handler: DispHandler, SigFlags: unkillable, Facts: factTargetNSInit},
			FlagNSInit},
		{"exit of an init",
			Event{Kind: KindExit, Facts: factTargetNSInit, SigFlags: groupExit},
			FlagNSInit},
	}
	for _, c := range cases {
		if got := Classify(&c.e); got != c.want {
			t.Errorf("%s: [%s], want [%s]", c.name, got, c.want)
		}
	}
}

func TestJSONUntrustedComm(t *testing.T) {
	e := Event{Kind: KindGenerate, Signal: SIGTERM}
	copy(e.Target.Comm[:], "ev\x1b[31mil\xff\xfe\n")
	copy(e.Sender.Comm[:], "ok\u00e9")
	b, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b) || strings.ContainsAny(string(b), "\x1b\n") {
		t.Fatalf("JSON not safe: %q", b)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got := back["target"].(map[string]any)["comm"]
	if got != "ev\x1b[31mil\\xff\\xfe\n" {
		t.Errorf("target comm %q: invalid bytes must read back as \\xNN, controls as themselves", got)
	}
	if back["sender"].(map[string]any)["comm"] != "ok\u00e9" {
		t.Errorf("valid UTF-8 changed")
	}
}

func TestJSONFieldNames(t *testing.T) {
	var e Event
	if err := Decode(loadFixture(t, "TestPID1IgnoresSIGTERM__host"), Clock{}, &e); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(&e)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"time", "event", "signal", "signo", "result", "flags", "code", "handler", "sender", "target"} {
		if _, ok := m[k]; !ok {
			t.Errorf("generate JSON lacks %q: %s", k, b)
		}
	}
	for _, k := range []string{"pid", "tid", "comm", "ns_pid", "pidns", "cgroup_id", "ancestors"} {
		if _, ok := m["sender"].(map[string]any)[k]; !ok {
			t.Errorf("sender lacks %q: %s", k, b)
		}
	}
	if m["signal"] != "SIGTERM" || m["result"] != "ignored" || m["code"] != "user" || m["handler"] != "default" {
		t.Errorf("unexpected values: %s", b)
	}

	if err := Decode(loadFixture(t, "TestNamespaceCascade__init-exit"), Clock{}, &e); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(&e)
	m = nil
	_ = json.Unmarshal(b, &m)
	if m["exit_code"] != float64(7) || m["signal"] != nil || m["sender"] != nil {
		t.Errorf("exit JSON: %s", b)
	}
	if err := Decode(loadFixture(t, "TestNamespaceCascade__child-exit"), Clock{}, &e); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(&e)
	m = nil
	_ = json.Unmarshal(b, &m)
	if m["signal"] != "SIGKILL" || m["signo"] != float64(9) || m["core_dumped"] != false || m["exit_code"] != nil {
		t.Errorf("signaled exit JSON: %s", b)
	}
}

// BenchmarkDecode is one record into a reused Event, as the reader does.
func BenchmarkDecode(b *testing.B) {
	raw := loadFixture(b, "TestNamespaceCascade__init-exit") // 8-byte aligned, like the ring
	var e Event
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(raw, Clock{}, &e); err != nil {
			b.Fatal(err)
		}
	}
}
