package textsafe

import "unicode/utf8"

// AppendJSON appends s as a quoted JSON string, byte for byte what
// encoding/json's Marshal writes for UTF8(s): invalid bytes as the text
// \xNN (so the JSON holds \\xNN), control characters, quote and backslash
// escaped, and <, >, &, U+2028 and U+2029 as \u escapes (Marshal's HTML
// escaping). It allocates nothing: the hand-written encoders of the hot
// paths (a trace line per signal) use it for every untrusted string.
func AppendJSON[S ~string | ~[]byte](dst []byte, s S) []byte {
	return appendJSON(dst, s, true)
}

// AppendJSONString appends s as a quoted JSON string, byte for byte what
// encoding/json's Marshal writes for s: invalid bytes become U+FFFD. It is
// for strings that are not untrusted (IDs already checked, names sigscope
// chose), where that loss cannot hide anything; untrusted strings take
// [AppendJSON].
func AppendJSONString[S ~string | ~[]byte](dst []byte, s S) []byte {
	return appendJSON(dst, s, false)
}

// appendJSON follows encoding/json's appendString (Go 1.26), with its HTML
// escaping; hexInvalid writes an invalid byte as UTF8 does instead of
// U+FFFD. FuzzAppendJSON holds the two to each other.
func appendJSON[S ~string | ~[]byte](dst []byte, s S, hexInvalid bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other C0 controls, and <, >, &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		// Decoded from a copy of at most one rune's bytes: the same answer
		// as decoding s itself, for a string or a []byte, without a
		// conversion that could allocate.
		var rb [utf8.UTFMax]byte
		r, size := utf8.DecodeRune(rb[:copy(rb[:], s[i:])])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			if hexInvalid {
				dst = append(dst, '\\', '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				dst = append(dst, `\ufffd`...)
			}
			start = i + 1
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// jsonSafe marks the ASCII bytes encoding/json writes as they are with
// HTML escaping on: printable ones and DEL, but ", \, <, > and &.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
