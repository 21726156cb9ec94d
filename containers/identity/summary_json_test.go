package identity

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// summaryTags is Summary without its MarshalJSON: what encoding/json
// writes from the json tags, the reference of the one writer.
type summaryTags Summary

// checkSummaryJSON holds AppendJSON to encoding/json's encoding of
// Summary, byte for byte, and checks the result is valid JSON.
func checkSummaryJSON(t *testing.T, i *Info) {
	t.Helper()
	want, err := json.Marshal(summaryTags(i.Summary()))
	if err != nil {
		t.Fatal(err)
	}
	checkSummaryMarshal(t, i.Summary())
	got := i.AppendJSON([]byte("x"))
	if !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Fatalf("AppendJSON differs from encoding/json for %+v:\n got %s\nwant %s", *i, got[1:], want)
	}
	var s Summary
	if err := json.Unmarshal(got[1:], &s); err != nil {
		t.Fatalf("invalid JSON (%v): %s", err, got[1:])
	}
}

// checkSummaryMarshal holds Summary.MarshalJSON to encoding/json's encoding
// of its tags, byte for byte, by an encoder that escapes HTML and by one
// that does not.
func checkSummaryMarshal(t *testing.T, s Summary) {
	t.Helper()
	for _, html := range []bool{true, false} {
		var got, want bytes.Buffer
		for v, buf := range map[any]*bytes.Buffer{s: &got, summaryTags(s): &want} {
			enc := json.NewEncoder(buf)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("MarshalJSON differs from encoding/json (HTML escaped: %v) for %+v:\n got %s\nwant %s", html, s, got.Bytes(), want.Bytes())
		}
	}
}

// Summaries no Info gives: strings that are not valid UTF-8, a stop
// signal as a runtime names it, an audit's result read back.
func TestSummaryMarshalJSON(t *testing.T) {
	for _, s := range []Summary{
		{},
		{Identity: Identity{ID: "a\xffb", Name: "<web> & \u2028", Image: "\xed\xa0\x80"}, StopSignal: "TERM", MainRuntime: "go\xfe"},
		{PreStop: &Hook{Kind: "exec\xff", Command: []string{"sh", "-c", "sleep 5 && kill -QUIT 1 </dev/null", "\xc3"}, URL: "/q?a=<1>&b", Seconds: -1}},
	} {
		checkSummaryMarshal(t, s)
	}
}

func TestSummaryAppendJSON(t *testing.T) {
	id := "4eaed9df4c1da03033fb1dae0ca4834b50367ee078507c361ad1e6172ae0d50c"
	for _, i := range []*Info{
		{},
		{Identity: Identity{ID: id, Runtime: "docker"}},
		{Identity: Identity{ID: id, Runtime: "containerd", Name: "web", Image: "registry.example.com/team/web:1.24.3", Pod: "web-7d4b9c6f8-xk2pq", Namespace: "default"}, MainPID: 28619, GracePeriod: 30, StopSignal: sigvocab.SIGTERM,
			PreStop: &Hook{Kind: "exec", Command: []string{"/bin/sh", "-c", "sleep 5 && nginx -s quit"}}},
		{Identity: Identity{ID: id, Runtime: "cri-o", Name: "POD"}, Sandbox: true, StopTimeout: -1, MainPID: -5,
			StopSignal: 34 + 3, PreStop: &Hook{Kind: "http", URL: "/quit?<a>&b\xff", Seconds: 3, Command: []string{}}},
		{Identity: Identity{ID: "bad\xff\"id", Runtime: "run\u2028time", Name: "web\xff\x1b[2J", Image: "\xed\xa0\x80", Pod: "<pod>", Namespace: "n\u2029s"}, StopSignal: 200, PreStop: &Hook{Kind: "k\xfe", Command: []string{"", "\x00"}}},
		{Identity: Identity{ID: id, Runtime: "podman"}, StopSignal: -3, PreStop: &Hook{Kind: "sleep", Seconds: 7}},
	} {
		checkSummaryJSON(t, i)
	}
}

func TestSummaryAppendJSONAllocatesNothing(t *testing.T) {
	i := &Info{Identity: Identity{ID: "4eaed9df4c1da03033fb1dae0ca4834b50367ee078507c361ad1e6172ae0d50c", Runtime: "containerd", Name: "web", Image: "nginx:1.27", Pod: "web-7d4b9c6f8-xk2pq", Namespace: "default"}, MainPID: 28619,
		GracePeriod: 30, StopSignal: sigvocab.Signal(34 + 3), PreStop: &Hook{Kind: "exec", Command: []string{"sleep", "5"}}}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = i.AppendJSON(buf[:0]) }); n != 0 {
		t.Errorf("AppendJSON allocates %v times", n)
	}
}

// FuzzSummaryJSON compares AppendJSON with encoding/json over any
// container identity a runtime or a recording could give.
func FuzzSummaryJSON(f *testing.F) {
	f.Add("4eaed9df4c1da03033fb1dae0ca4834b50367ee078507c361ad1e6172ae0d50c", "docker", "web", "nginx:1.27", "pod", "ns",
		int32(15), 10, 30, 4242, false, "exec", "sleep\x005", "", 0)
	f.Add("\xff", "cri-o", "POD", "", "", "", int32(37), 0, 0, 0, true, "http", "", "/x\xfe<", 3)
	f.Fuzz(func(t *testing.T, id, runtime, name, image, pod, namespace string, stopSignal int32,
		stopTimeout, grace, mainPID int, sandbox bool, hookKind, hookCommand, hookURL string, hookSeconds int) {
		i := &Info{Identity: Identity{ID: id, Runtime: runtime, Name: name, Image: image, Pod: pod, Namespace: namespace}, StopSignal: sigvocab.Signal(stopSignal), StopTimeout: stopTimeout, GracePeriod: grace, MainPID: mainPID, Sandbox: sandbox}
		if hookKind != "" {
			// NUL splits the command's arguments.
			i.PreStop = &Hook{Kind: hookKind, Command: splitNUL(hookCommand), URL: hookURL, Seconds: hookSeconds}
		}
		checkSummaryJSON(t, i)
	})
}

func splitNUL(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// BenchmarkSummaryJSON is a container's object in a `trace -o json` line.
func BenchmarkSummaryJSON(b *testing.B) {
	i := &Info{Identity: Identity{ID: "4eaed9df4c1da03033fb1dae0ca4834b50367ee078507c361ad1e6172ae0d50c", Runtime: "containerd", Name: "web", Image: "nginx:1.27", Pod: "web-7d4b9c6f8-xk2pq", Namespace: "default"}, MainPID: 28619,
		GracePeriod: 30, StopSignal: sigvocab.SIGTERM, PreStop: &Hook{Kind: "exec", Command: []string{"sleep", "5"}}}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = i.AppendJSON(buf[:0])
	}
}
