package textsafe

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// checkAppendJSON holds AppendJSON and AppendJSONString to encoding/json:
// the same bytes as Marshal of UTF8(s) and of s, for a string and a []byte,
// valid JSON that decodes to UTF8(s) (to s when valid), after a prefix kept.
func checkAppendJSON(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(UTF8(s))
	if err != nil {
		t.Fatal(err)
	}
	wantLossy, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{"AppendJSON(string)", AppendJSON([]byte("x"), s), want},
		{"AppendJSON([]byte)", AppendJSON([]byte("x"), []byte(s)), want},
		{"AppendJSONString(string)", AppendJSONString([]byte("x"), s), wantLossy},
		{"AppendJSONString([]byte)", AppendJSONString([]byte("x"), []byte(s)), wantLossy},
	} {
		if string(c.got) != "x"+string(c.want) {
			t.Fatalf("%s of %q = %s, want x%s", c.name, s, c.got, c.want)
		}
	}
	var back string
	if err := json.Unmarshal(AppendJSON(nil, s), &back); err != nil || back != UTF8(s) {
		t.Fatalf("AppendJSON(%q) reads back as %q, %v; want %q", s, back, err, UTF8(s))
	}
	if !utf8.Valid(AppendJSON(nil, s)) || !utf8.Valid(AppendJSONString(nil, s)) {
		t.Fatalf("invalid UTF-8 written for %q", s)
	}
}

func TestAppendJSON(t *testing.T) {
	for _, s := range []string{
		"", "runc", "containerd-shim", "caf\u00e9", "a\"b\\c", "<script>&amp;</script>",
		"\x00\x01\b\f\n\r\t\x1b\x1f\x7f", "bad\xffutf8", "\xc3", "x\xc3(", "\xed\xa0\x80", "\xf4\x90\x80\x80",
		"line\u2028para\u2029", "\u0085\u202e", "\U0001F600", "\xef\xbf\xbd", `\xff`,
	} {
		checkAppendJSON(t, s)
	}
}

func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{"a", "\xff", "\x1b[1m", "\u2028", "\\", "<&>", "\"", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(checkAppendJSON)
}

func TestAppendJSONNoAlloc(t *testing.T) {
	buf := make([]byte, 0, 256)
	comm := []byte("bad\xff\x1bcomm\u2028")
	if n := testing.AllocsPerRun(100, func() {
		buf = AppendJSON(buf[:0], comm)
		buf = AppendJSONString(buf, "4eaed9df4c1da03033fb1dae0ca4834b50367ee078507c361ad1e6172ae0d50c")
	}); n != 0 {
		t.Fatalf("allocated %v times", n)
	}
}

// BenchmarkJSONAppendString is a container's strings, as trace writes them
// with every event about it: an ID, an image, a pod, a namespace.
func BenchmarkJSONAppendString(b *testing.B) {
	strs := []string{"4eaed9df4c1da03033fb1dae0ca4834b50367ee078507c361ad1e6172ae0d50c",
		"registry.example.com/team/web:1.24.3", "web-7d4b9c6f8-xk2pq", "default", "nginx"}
	b.ReportAllocs()
	buf := make([]byte, 0, 1024)
	for b.Loop() {
		buf = buf[:0]
		for _, s := range strs {
			buf = AppendJSON(buf, s)
		}
	}
}
