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

	"github.com/sigscope/sigscope/tracer/sigvocab"
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
		kind    sigvocab.Kind
		signal  sigvocab.Signal
		result  sigvocab.Result
		handler sigvocab.Disposition
		flags   sigvocab.Flags
		exit    int
		nsPID   uint32
	}{
		{"TestPID1IgnoresSIGTERM__inside", sigvocab.KindGenerate, sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.DispDefault, sigvocab.FlagPID1Ignored | sigvocab.FlagNSInit, 0, 1},
		{"TestPID1IgnoresSIGTERM__host", sigvocab.KindGenerate, sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.DispDefault, sigvocab.FlagPID1Ignored | sigvocab.FlagNSInit | sigvocab.FlagCrossNS, 0, 1},
		{"TestPID1HandlerDelivery__generate", sigvocab.KindGenerate, sigvocab.SIGTERM, sigvocab.ResultDelivered, sigvocab.DispHandler, sigvocab.FlagNSInit | sigvocab.FlagCrossNS, 0, 1},
		{"TestPID1HandlerDelivery__deliver", sigvocab.KindDeliver, sigvocab.SIGTERM, sigvocab.ResultDelivered, sigvocab.DispHandler, sigvocab.FlagNSInit, 0, 1},
		{"TestPID1HandlerDelivery__exit", sigvocab.KindExit, 0, 0, 0, sigvocab.FlagNSInit, 0, 1},
		{"TestNamespaceCascade__init-exit", sigvocab.KindExit, 0, 0, 0, sigvocab.FlagNSInit, 7, 1},
		{"TestNamespaceCascade__cascade-3", sigvocab.KindGenerate, sigvocab.SIGKILL, sigvocab.ResultDelivered, sigvocab.DispDefault, sigvocab.FlagNSCascade, 0, 0},
		{"TestNamespaceCascade__child-exit", sigvocab.KindExit, sigvocab.SIGKILL, 0, 0, 0, -1, 0},
		{"TestSigIgnPlainProcess__sig_ign", sigvocab.KindGenerate, sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.DispIgnore, sigvocab.FlagSigIgn, 0, 0},
		{"TestHostSIGKILLToInit__kill", sigvocab.KindGenerate, sigvocab.SIGKILL, sigvocab.ResultDelivered, sigvocab.DispDefault, sigvocab.FlagNSInit | sigvocab.FlagCrossNS, 0, 1},
		{"TestHostSIGKILLToInit__exit", sigvocab.KindExit, sigvocab.SIGKILL, 0, 0, sigvocab.FlagNSInit, -1, 1},
		{"TestNamespaceCascade__ns-empty", sigvocab.KindNSEmpty, sigvocab.SIGCHLD, 0, 0, sigvocab.FlagNSInit, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			var e sigvocab.Event
			if err := Decode(loadFixture(t, c.fixture), Clock{}, &e); err != nil {
				t.Fatal(err)
			}
			if e.Kind != c.kind || e.Signal != c.signal || e.Flags != c.flags {
				t.Errorf("got %s %s [%s], want %s %s [%s]", e.Kind, e.Signal, e.Flags, c.kind, c.signal, c.flags)
			}
			if c.kind != sigvocab.KindExit && (e.Result != c.result || e.Handler != c.handler) {
				t.Errorf("result %s handler %s, want %s %s", e.Result, e.Handler, c.result, c.handler)
			}
			if c.kind == sigvocab.KindExit && e.ExitCode != c.exit {
				t.Errorf("exit code %d, want %d", e.ExitCode, c.exit)
			}
			if c.nsPID != 0 && e.Target.NsPID != c.nsPID {
				t.Errorf("target ns_pid %d, want %d", e.Target.NsPID, c.nsPID)
			}
			if e.Target.PID == 0 || e.Target.PidNS == 0 || e.BootNS == 0 {
				t.Errorf("target identity missing: %+v boot %d", e.Target, e.BootNS)
			}
			if c.kind == sigvocab.KindGenerate && (e.Sender.PID == 0 || e.AncestorsCount == 0) {
				t.Errorf("sender missing: %+v ancestors %d", e.Sender, e.AncestorsCount)
			}
			testJSONRoundTrip(t, &e)
		})
	}
}

func testJSONRoundTrip(t *testing.T, e *sigvocab.Event) {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var back sigvocab.Event
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
	var e sigvocab.Event
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
	var e sigvocab.Event
	if n := testing.AllocsPerRun(1000, func() { _ = Decode(raw, Clock{}, &e) }); n != 0 {
		t.Errorf("Decode allocates %v times per record", n)
	}
}

// Rules that the live tests cannot all reach on one kernel, from raw facts.
func TestClassify(t *testing.T) {
	const (
		unkillable = sigvocab.SignalUnkillable
		groupExit  = sigvocab.SignalGroupExit
		inTarget   = sigvocab.FactSenderInTargetNS
	)
	cascadeFacts := sigvocab.FactInfoPriv | sigvocab.FactSenderExiting | sigvocab.FactSenderReaper | sigvocab.FactTargetInSenderNS | inTarget
	cases := []struct {
		name string
		e    sigvocab.Event
		want sigvocab.Flags
	}{
		{"init drops TERM without handler",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultIgnored, SigFlags: unkillable, Facts: inTarget | sigvocab.FactTargetNSInit},
			sigvocab.FlagPID1Ignored | sigvocab.FlagNSInit},
		{"init drops KILL from inside",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGKILL, Result: sigvocab.ResultIgnored, SigFlags: unkillable, Facts: inTarget | sigvocab.FactTargetNSInit},
			sigvocab.FlagPID1Ignored | sigvocab.FlagNSInit},
		{"SIGCHLD ignored by default is no PID 1 verdict",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGCHLD, Result: sigvocab.ResultIgnored, SigFlags: unkillable, Facts: inTarget | sigvocab.FactTargetNSInit},
			sigvocab.FlagNSInit},
		{"explicit SIG_IGN at an init is sig_ign",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultIgnored, Handler: sigvocab.DispIgnore, SigFlags: unkillable, Facts: inTarget | sigvocab.FactTargetNSInit},
			sigvocab.FlagSigIgn | sigvocab.FlagNSInit},
		{"dying target",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultIgnored, SigFlags: groupExit, Facts: inTarget},
			sigvocab.FlagTargetExiting},
		{"dying target with SIG_IGN is still target_exiting",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultIgnored, Handler: sigvocab.DispIgnore, SigFlags: groupExit, Facts: inTarget},
			sigvocab.FlagTargetExiting},
		{"blocked at an init: queued",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultDelivered, SigFlags: unkillable, Facts: sigvocab.FactBlocked | sigvocab.FactTargetNSInit},
			sigvocab.FlagBlocked | sigvocab.FlagNSInit | sigvocab.FlagCrossNS},
		{"delivered to a handler",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultDelivered, Handler: sigvocab.DispHandler, SigFlags: unkillable, Facts: inTarget | sigvocab.FactTargetNSInit},
			sigvocab.FlagNSInit},
		{"already pending is not a drop",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultAlreadyPending, SigFlags: unkillable, Facts: inTarget},
			0},
		{"cascade",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGKILL, Group: true, Facts: cascadeFacts, Sender: sigvocab.Process{PID: 10}, Target: sigvocab.Process{PID: 11}},
			sigvocab.FlagNSCascade},
		{"cascade into a nested namespace is cross_ns",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGKILL, Group: true, Facts: cascadeFacts &^ inTarget, Sender: sigvocab.Process{PID: 10}, Target: sigvocab.Process{PID: 11}},
			sigvocab.FlagNSCascade | sigvocab.FlagCrossNS},
		{"zap of the init's own thread is not cascade",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGKILL, Group: true, Facts: cascadeFacts, Sender: sigvocab.Process{PID: 10}, Target: sigvocab.Process{PID: 10}},
			0},
		{"OOM killer: PRIV SIGKILL from a non-reaper",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGKILL, Group: true, Facts: sigvocab.FactInfoPriv | sigvocab.FactTargetInSenderNS | inTarget, Sender: sigvocab.Process{PID: 10}, Target: sigvocab.Process{PID: 11}},
			0},
		{"SIGKILL from an exiting reaper via kill(2) is not cascade",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGKILL, Group: true, Facts: cascadeFacts &^ sigvocab.FactInfoPriv, Sender: sigvocab.Process{PID: 10}, Target: sigvocab.Process{PID: 11}},
			0},
		{"thread-directed PRIV SIGKILL (ptrace exit-kill) is not cascade",
			sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGKILL, Group: false, Facts: cascadeFacts, Sender: sigvocab.Process{PID: 10}, Target: sigvocab.Process{PID: 11}},
			0},
		{"blocked TERM dequeued by an init with SIG_DFL is dropped",
			sigvocab.Event{Kind: sigvocab.KindDeliver, Signal: sigvocab.SIGTERM, Handler: sigvocab.DispDefault, SigFlags: unkillable, Facts: sigvocab.FactTargetNSInit},
			sigvocab.FlagPID1Ignored | sigvocab.FlagNSInit},
		{"SIGKILL dequeued by an init is acted on",
			sigvocab.Event{Kind: sigvocab.KindDeliver, Signal: sigvocab.SIGKILL, Handler: sigvocab.DispDefault, SigFlags: unkillable, Facts: sigvocab.FactTargetNSInit},
			sigvocab.FlagNSInit},
		{"group-exit SIGKILL deliver (UNKILLABLE wiped)",
			sigvocab.Event{Kind: sigvocab.KindDeliver, Signal: sigvocab.SIGKILL, Handler: sigvocab.DispDefault, SigFlags: groupExit},
			0},
		{"deliver to a handler",
			sigvocab.Event{Kind: sigvocab.KindDeliver, Signal: sigvocab.SIGTERM, Handler: sigvocab.DispHandler, SigFlags: unkillable, Facts: sigvocab.FactTargetNSInit},
			sigvocab.FlagNSInit},
		{"exit of an init",
			sigvocab.Event{Kind: sigvocab.KindExit, Facts: sigvocab.FactTargetNSInit, SigFlags: groupExit},
			sigvocab.FlagNSInit},
	}
	for _, c := range cases {
		if got := sigvocab.Classify(&c.e); got != c.want {
			t.Errorf("%s: [%s], want [%s]", c.name, got, c.want)
		}
	}
}

func TestJSONUntrustedComm(t *testing.T) {
	e := sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM}
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
	var e sigvocab.Event
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
	var e sigvocab.Event
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(raw, Clock{}, &e); err != nil {
			b.Fatal(err)
		}
	}
}
