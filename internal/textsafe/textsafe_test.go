package textsafe

import (
	"testing"
	"unicode/utf8"
)

func TestTerminal(t *testing.T) {
	cases := []struct{ in, want string }{
		{"nginx", "nginx"},
		{"sh -c app", "sh -c app"},
		{"evil\x1b[2J", `evil\x1b[2J`},
		{"a\nb\rc\td", `a\x0ab\x0dc\x09d`},
		{"back\\slash", `back\\slash`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"caf\u00e9", "caf\u00e9"},
		{"c1\u0085x", `c1\u0085x`},
		{"del\x7f", `del\x7f`},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"", ""},
	}
	for _, c := range cases {
		if got := Terminal(c.in); got != c.want {
			t.Errorf("Terminal(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestUTF8(t *testing.T) {
	cases := []struct{ in, want string }{
		{"runc", "runc"},
		{"caf\u00e9", "caf\u00e9"},
		{"x\xc3", `x\xc3`},
		{"\xff\xfe", `\xff\xfe`},
		{"ctl\x01", "ctl\x01"}, // valid UTF-8: escaping is the encoder's job
	}
	for _, c := range cases {
		got := UTF8(c.in)
		if got != c.want {
			t.Errorf("UTF8(%q) = %q, want %q", c.in, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("UTF8(%q) is not valid UTF-8", c.in)
		}
	}
}

func FuzzSafe(f *testing.F) {
	for _, s := range []string{"a", "\xff", "\x1b[1m", "\u202e", "\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if u := UTF8(s); !utf8.ValidString(u) {
			t.Fatalf("UTF8(%q) invalid", s)
		}
		term := Terminal(s)
		if !utf8.ValidString(term) {
			t.Fatalf("Terminal(%q) invalid UTF-8", s)
		}
		for _, r := range term {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Fatalf("Terminal(%q) = %q keeps control %U", s, term, r)
			}
		}
	})
}

func TestTerminalNoAllocPlain(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Terminal("containerd-shim") }); n != 0 {
		t.Fatalf("plain string allocated %v times", n)
	}
}

func TestCell(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456..."},
		{`ab\x1b[31m`, 8, `ab...`}, // the escape is not split
		{`abcd\x1bxyz`, 10, `abcd...`},
		{`abc\x1bxyzw`, 10, `abc\x1b...`},
		{"héllo wörld", 8, "héllo..."}, // runes, not bytes
		{`a\\b\\c\\d\\e`, 8, `a\\b...`},
	} {
		got := Cell(tc.in, tc.n)
		if got != tc.want {
			t.Errorf("Cell(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > tc.n {
			t.Errorf("Cell(%q, %d) = %q: invalid UTF-8 or too long", tc.in, tc.n, got)
		}
	}
}
