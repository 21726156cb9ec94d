package timeline

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func dockerStopEpisode(t *testing.T) Episode {
	s := newSim(t, nsA, 5151, "sh", dockerInfo(idA, "web", 10))
	k1, k2 := s.kid(5152, 7, "sleep"), s.kid(5153, 8, "sleep")
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).
		kill(10003*ms, runc).
		initExit(10003*ms+28*time.Microsecond, sigvocab.SIGKILL, 0).
		cascade(10003*ms+120*time.Microsecond, k1).
		cascade(10003*ms+134*time.Microsecond, k2).
		kidExit(10003*ms+141*time.Microsecond, k1, sigvocab.SIGKILL, 0).
		kidExit(10003*ms+236*time.Microsecond, k2, sigvocab.SIGKILL, 0)
	return only(t, newEngine(Options{}), s.in)
}

func keys(m map[string]any) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// The field names issue 4 fixes for `sigscope timeline -o json`, and the
// values of the docker stop case.
func TestEpisodeJSON(t *testing.T) {
	ep := dockerStopEpisode(t)
	b, m := marshalMap(t, ep)
	wantKeys := []string{"cascade_kills", "container", "exit_after_s", "exit_at", "exit_signal", "exit_status", "grace_period_s",
		"hint", "kill_after_s", "kill_at", "kill_sender", "main", "main_is_init", "outcome", "start", "steps", "stop_at", "stop_duration_s", "stop_sender",
		"stop_signal", "stop_timeout_s", "stop_verdict"}
	if got := keys(m); !slices.Equal(got, wantKeys) {
		t.Errorf("keys\n %v\nwant\n %v", got, wantKeys)
	}
	if got := keys(m["container"].(map[string]any)); !slices.Equal(got, []string{"id", "image", "name", "pidns", "runtime"}) {
		t.Errorf("container keys %v", got)
	}
	for k, want := range map[string]any{
		"outcome": "ignored_by_init", "stop_signal": "SIGTERM", "stop_verdict": "pid1_ignored",
		"stop_at": "2026-11-21T20:16:59.095361713Z", "kill_at": "2026-11-21T20:17:09.098361713Z",
		"exit_at": "2026-11-21T20:17:09.098389713Z", "grace_period_s": 10.0, "kill_after_s": 10.003,
		"exit_after_s": 10.003028, "exit_status": 137.0, "exit_signal": "SIGKILL",
	} {
		if m[k] != want {
			t.Errorf("%s = %#v, want %#v", k, m[k], want)
		}
	}
	snd := m["stop_sender"].(map[string]any)
	if got := keys(snd); !slices.Equal(got, []string{"ancestors", "comm", "pid"}) || snd["comm"] != "runc" {
		t.Errorf("stop_sender %v", snd)
	}
	if anc := snd["ancestors"].([]any); len(anc) != 2 || anc[0].(map[string]any)["comm"] != "containerd-shim" {
		t.Errorf("ancestors %v", anc)
	}
	ck := m["cascade_kills"].([]any)
	if len(ck) != 2 || !slices.Equal(keys(ck[0].(map[string]any)), []string{"comm", "ns_pid", "pid"}) {
		t.Errorf("cascade_kills %v", ck)
	}
	steps := m["steps"].([]any)
	first := steps[0].(map[string]any)
	if got := keys(first); !slices.Equal(got, []string{"at", "flags", "kind", "sender", "signal", "target", "text", "time"}) {
		t.Errorf("step keys %v", got)
	}
	if sigkill := steps[2].(map[string]any); sigkill["at"] != 10.003 || sigkill["kind"] != "sigkill" {
		t.Errorf("SIGKILL step %v", sigkill)
	}
	if v := steps[1].(map[string]any); v["verdict"] != "pid1_ignored" || v["kind"] != "kernel_verdict" {
		t.Errorf("verdict step %v", v)
	}
	if x := steps[3].(map[string]any); x["exit_status"] != 137.0 || x["kind"] != "main_exit" {
		t.Errorf("init exit step %v", x)
	}

	// Read back, written again: the same bytes.
	var back Episode
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back)
	if !bytes.Equal(b, b2) {
		t.Errorf("round trip changed the JSON:\n%s\n%s", b, b2)
	}
	if back.Steps[2].At != 10003*ms || back.GracePeriod != 10*time.Second || back.ExitSignal != sigvocab.SIGKILL {
		t.Errorf("read back: at %v grace %v exit signal %s", back.Steps[2].At, back.GracePeriod, back.ExitSignal)
	}
}

// marshalMap is v's JSON, and that JSON read as a map.
func marshalMap(t *testing.T, v any) ([]byte, map[string]any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return b, m
}

// A pod's workload and the revision it ran, in the JSON and read back.
func TestEpisodeJSONRevision(t *testing.T) {
	ep := dockerStopEpisode(t)
	ep.Owner = &Owner{Kind: "StatefulSet", Name: "db"}
	ep.Revision = &Revision{Controller: "StatefulSet/db", Hash: "db-6c8d5f7b9", Label: LabelControllerRevisionHash}
	b, m := marshalMap(t, ep)
	if r, _ := m["revision"].(map[string]any); r["controller"] != "StatefulSet/db" || r["hash"] != "db-6c8d5f7b9" || r["label"] != "controller-revision-hash" {
		t.Errorf("revision %v", m["revision"])
	}
	var back Episode
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Revision == nil || *back.Revision != *ep.Revision {
		t.Errorf("read back: %+v, want %+v", back.Revision, ep.Revision)
	}
	if b2, _ := json.Marshal(back); !bytes.Equal(b, b2) {
		t.Errorf("round trip changed the JSON:\n%s\n%s", b, b2)
	}
}

// Absent facts are absent fields; cascade_kills is always a list; a
// namespace without Info is {"pidns": N}.
func TestEpisodeJSONOmits(t *testing.T) {
	s := newSim(t, nsA, 5151, "sh", nil)
	s.kill(0, runc).initExit(ms, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)
	b, _ := json.Marshal(ep)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"stop_signal", "stop_sender", "stop_at", "stop_verdict", "grace_period_s", "kill_after_s", "exit_after_s", "oom_victims", "steps_omitted"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s present in %s", k, b)
		}
	}
	if !strings.Contains(string(b), `"container":{"pidns":4026532177}`) || !strings.Contains(string(b), `"cascade_kills":[]`) {
		t.Errorf("container or cascade_kills: %s", b)
	}
	if m["outcome"] != "killed" || m["exit_status"] != 137.0 {
		t.Errorf("outcome %v exit %v", m["outcome"], m["exit_status"])
	}
}

// Comms and names are untrusted: the JSON stays valid UTF-8 with every
// byte recoverable, and the text has no control bytes.
func TestUntrustedStrings(t *testing.T) {
	evil := "a\xff\x1b[2J\nb"
	info := &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "docker", Name: "n\xfe\x07", Image: "i\x1b]0;x\x07"}}
	s := newSim(t, nsA, 5151, evil, info)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispDefault, false).kill(time.Second, runc).initExit(time.Second+ms, sigvocab.SIGKILL, 0)
	ep := only(t, newEngine(Options{}), s.in)

	b, err := json.Marshal(ep)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		t.Fatalf("invalid JSON or UTF-8: %q", b)
	}
	if !strings.Contains(string(b), `"comm":"a\\xff\u001b[2J\nb"`) {
		t.Errorf("comm not kept recoverably: %s", b)
	}
	var out bytes.Buffer
	if err := ep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, c := range []byte{0x1b, 0x07, 0xff, 0xfe} {
		if strings.IndexByte(text, c) >= 0 {
			t.Errorf("text has byte %#x:\n%s", c, text)
		}
	}
	if !utf8.ValidString(text) || !strings.Contains(text, `PID 1 a\xff\x1b[2J\x0ab (host 5151)`) {
		t.Errorf("text:\n%s", text)
	}
	if n := strings.Count(text, "\n"); n != 1+len(ep.Steps)+2 {
		t.Errorf("%d lines, want header + %d steps + outcome + hint: a newline in a comm forged a line?\n%s", n, len(ep.Steps), text)
	}
}

func TestWriteText(t *testing.T) {
	ep := dockerStopEpisode(t)
	var b bytes.Buffer
	if err := ep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `container web (3f2a1b9c4d5e, docker, image sigscope/web:test, pid ns 4026532177) at 2026-11-21T20:16:59.095361713Z
+0.000s  runc (4242) sends SIGTERM to PID 1 sh (host 5151)
+0.000s  kernel: ignored — PID 1 has no SIGTERM handler
+10.003s runc (4242) sends SIGKILL to PID 1 sh (host 5151)
+10.003s PID 1 sh (host 5151) killed by SIGKILL (exit status 137)
+10.003s kernel: namespace cascade — SIGKILL to sleep (ns pid 7, host 5152)
+10.003s kernel: namespace cascade — SIGKILL to sleep (ns pid 8, host 5153)
+10.003s sleep (ns pid 7, host 5152) killed by SIGKILL (exit status 137)
+10.003s sleep (ns pid 8, host 5153) killed by SIGKILL (exit status 137)
outcome: ignored_by_init — PID 1 (sh) did not act on SIGTERM (pid1_ignored); SIGKILL 10.003s after SIGTERM (grace period 10s); exit status 137; the namespace cascade killed 2 process(es)
hint: PID 1 (sh) has no SIGTERM handler: the kernel drops SIGTERM sent to a namespace init. Use the exec form of ENTRYPOINT/CMD, ` + "`exec`" + ` the app in the entrypoint script, or run an init such as tini (docker run --init).
`
	if got := b.String(); got != want {
		t.Errorf("text\n%s\nwant\n%s", got, want)
	}
}

// Every outcome renders a summary and, where there is something to fix, a
// hint; the pod form of the header.
func TestTextPerOutcome(t *testing.T) {
	info := &identity.Info{Identity: identity.Identity{ID: idA, Runtime: "containerd", Name: "app", Pod: "web-0", Namespace: "shop"}, GracePeriod: 30}
	s := newSim(t, nsA, 5151, "app", info)
	s.stop(0, sigvocab.SIGTERM, sigvocab.DispHandler, false).deliver(ms, sigvocab.SIGTERM, sigvocab.DispHandler).initExit(2*ms, 0, 0)
	ep := only(t, newEngine(Options{}), s.in)
	var b bytes.Buffer
	if err := ep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if !strings.HasPrefix(text, "pod shop/web-0 container app (3f2a1b9c4d5e, containerd, pid ns 4026532177) at ") ||
		!strings.Contains(text, "outcome: graceful — PID 1 (app) took SIGTERM (handler) and exited; exit 0.002s after SIGTERM; exit status 0\n") ||
		strings.Contains(text, "hint:") {
		t.Errorf("text:\n%s", text)
	}
}
