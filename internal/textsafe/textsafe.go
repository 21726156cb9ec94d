package textsafe

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// UTF8 returns s when it is valid UTF-8, else s with each invalid byte
// written as the four characters \xNN. Unlike a U+FFFD replacement, the
// original bytes can be read back. Control characters are left to the
// encoder (encoding/json escapes them).
func UTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			writeHex(&b, s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Terminal returns s escaped for a terminal: control characters (C0, DEL,
// C1), invalid UTF-8 and backslashes are written as \xNN, \u00NN or \\, so
// the result is printable and unambiguous. Printable text is unchanged and
// the common case does not allocate.
func Terminal(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeHex(&b, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x80 && !unicode.IsPrint(r) && r != ' ':
			writeHex(&b, byte(r))
		case r >= 0x80 && (unicode.IsControl(r) || !unicode.IsPrint(r) && !unicode.IsSpace(r)):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigits[(r>>uint(shift))&0xf])
			}
		case r >= 0x80 && unicode.IsSpace(r):
			b.WriteByte(' ') // odd spaces would break table columns
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

func writeHex(b *strings.Builder, c byte) {
	b.WriteString(`\x`)
	b.WriteByte(hexDigits[c>>4])
	b.WriteByte(hexDigits[c&0xf])
}

// Cell fits an already escaped string into a table cell of at most n
// characters (runes, n > 3): a longer one is cut at a character boundary,
// never inside a \xNN or \uNNNN escape, and ends in "...". A 10 kB pod name
// then keeps its row one line of a readable width.
func Cell(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut, runes := 0, 0
	for i := 0; i < len(s); {
		size := 1
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'x':
				size = min(4, len(s)-i)
			case 'u':
				size = min(6, len(s)-i)
			default:
				size = 2
			}
		} else {
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		w := utf8.RuneCountInString(s[i : i+size])
		if runes+w > n-3 {
			break
		}
		runes += w
		i += size
		cut = i
	}
	return s[:cut] + "..."
}
