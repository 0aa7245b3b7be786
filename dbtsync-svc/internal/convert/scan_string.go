package convert

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// The SWAR constants as variables: the compiler keeps them in registers through a loop
// instead of loading each as an immediate every time round.
var swarOnes, swarHighs, swarQuote, swarBackslash, swarSpace, swarOpen, swarClose uint64 = ones, highs, '"' * ones, '\\' * ones, ' ' * ones, '{' * ones, '}' * ones

// str consumes the string at pos (its opening quote) and returns where its raw bytes,
// quotes included, are in buf (valid until the next fill), whether it holds an escape
// sequence and whether it is all ASCII (false: maybe not). The string is held whole:
// skipStr is the one that streams.
func (s *scanner) str() (start, end int, escaped, ascii bool, err error) {
	start, outer := s.pos, s.hold()
	var seen uint64 // the bytes read OR'd: no high bit, all ASCII
	i := s.pos + 1
	for {
		j, words := plain(s.buf, i)
		seen |= words
		b := s.buf
		n := 0
		switch {
		case j >= len(b):
			n = -bodyMore
		case b[j] == '"':
			s.pos = j + 1
			s.release(outer)
			if seen&highs != 0 && !utf8.Valid(b[start+1:j]) {
				return 0, 0, false, false, s.badUTF8(b[:j], start+1)
			}
			return start, j + 1, escaped, seen&highs == 0, nil
		case b[j] == '\\':
			escaped = true
			if j+1 < len(b) {
				switch b[j+1] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
					i = j + 2
					continue
				}
			}
			n = escapeLen(b, j)
		default: // a control character
			n = -bodyBad
		}
		switch {
		case n > 0:
			i = j + n
			continue
		case n == -bodyMore:
			startAbs, jAbs := s.base+int64(start), s.base+int64(j)
			if s.fill() {
				start, i = int(startAbs-s.base), int(jAbs-s.base)
				continue
			}
			s.pos = len(s.buf)
		default:
			if seen&highs != 0 && !utf8.Valid(b[start+1:j]) { // the earlier error
				s.release(outer)
				return 0, 0, false, false, s.badUTF8(b[:j], start+1)
			}
			s.pos = j
		}
		s.release(outer)
		return 0, 0, false, false, s.fail("in a string")
	}
}

// skipStr consumes the string at pos (its opening quote), validating it as str does,
// without holding it: a string of any length streams through the window, which keeps
// only an escape sequence or a rune that a refill cuts.
func (s *scanner) skipStr() error {
	i := s.pos + 1
	from := i // the bytes from here on are not yet checked for UTF-8
	var seen uint64
	for {
		j, words := plain(s.buf, i)
		seen |= words
		b := s.buf
		n := 0
		switch {
		case j >= len(b):
			n = -bodyMore
		case b[j] == '"':
			if seen&highs != 0 && !utf8.Valid(b[from:j]) {
				return s.badUTF8(b[:j], from)
			}
			s.pos = j + 1
			return nil
		case b[j] == '\\':
			n = escapeLen(b, j)
		default:
			n = -bodyBad
		}
		switch {
		case n > 0:
			i = j + n
			continue
		case n == -bodyMore:
			keep := min(j, len(b))
			if keep == len(b) { // a rune the window's end cuts is kept for the next round
				for k := len(b) - 1; k >= from && k >= len(b)-utf8.UTFMax+1; k-- {
					if b[k] < utf8.RuneSelf {
						break
					}
					if utf8.RuneStart(b[k]) {
						if !utf8.FullRune(b[k:]) {
							keep = k
						}
						break
					}
				}
			}
			if seen&highs != 0 && !utf8.Valid(b[from:keep]) {
				return s.badUTF8(b[:keep], from)
			}
			seen, s.pos = 0, keep
			if s.fill() {
				i, from = s.pos, s.pos
				continue
			}
			s.pos = len(s.buf)
		default:
			if seen&highs != 0 && !utf8.Valid(b[from:j]) { // the earlier error
				return s.badUTF8(b[:j], from)
			}
			s.pos = j
		}
		return s.fail("in a string")
	}
}

// badUTF8 is the error for the invalid UTF-8 in b[from:].
func (s *scanner) badUTF8(b []byte, from int) error {
	k := from
	for k < len(b) {
		r, n := utf8.DecodeRune(b[k:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		k += n
	}
	return fmt.Errorf("%w: invalid UTF-8 in a string%s", ErrNotJSON, atOffset(s.base, k))
}

// plain is the index in b, from i on, of the first quote, backslash or control
// character (len(b) when there is none), and the OR of the bytes it read. Sixteen bytes
// at a time: per byte x of a word w, x-1 underflows (setting its high bit) when x^'"'
// or x^'\\' is zero, x-' ' does when x is a control character, and masking with ^w
// clears the bytes of 0x80 and more; a borrow only runs up from a flagged byte, so the
// lowest flagged byte is exact.
func plain(b []byte, i int) (int, uint64) {
	o, h, dq, bsl, sp := swarOnes, swarHighs, swarQuote, swarBackslash, swarSpace
	var seen uint64
	for ; i+16 <= len(b); i += 16 {
		w := binary.LittleEndian.Uint64(b[i : i+8])
		v := binary.LittleEndian.Uint64(b[i+8 : i+16])
		seen |= w | v
		t := ((w ^ dq - o) | (w ^ bsl - o) | (w - sp)) &^ w
		u := ((v ^ dq - o) | (v ^ bsl - o) | (v - sp)) &^ v
		if (t|u)&h != 0 {
			if t &= h; t != 0 {
				return i + bits.TrailingZeros64(t)/8, seen
			}
			return i + 8 + bits.TrailingZeros64(u&h)/8, seen
		}
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c == '"' || c == '\\' || c < ' ' {
			return i, seen
		}
		seen |= uint64(c)
	}
	return len(b), seen
}

const (
	bodyMore = 1 + iota // escapeLen: the input ends within the escape
	bodyBad             // escapeLen: not an escape
)

// escapeLen is the length of the escape sequence at b[p] (a backslash), or -bodyMore
// when b ends within it, or -bodyBad when it is not one. A UTF-16 surrogate is only
// valid in a pair (\uD800-\uDBFF, then \uDC00-\uDFFF), which is one sequence here.
func escapeLen(b []byte, p int) int {
	if p+1 >= len(b) {
		return -bodyMore
	}
	switch b[p+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		r, n := hex4(b, p+2)
		switch {
		case n < 0:
			return n
		case r < 0xd800 || r > 0xdfff:
			return 6
		case r > 0xdbff: // a low surrogate first
			return -bodyBad
		}
		if p+7 >= len(b) {
			return -bodyMore
		}
		if b[p+6] != '\\' || b[p+7] != 'u' {
			return -bodyBad
		}
		if r2, n := hex4(b, p+8); n < 0 || r2 < 0xdc00 || r2 > 0xdfff {
			if n == -bodyMore {
				return n
			}
			return -bodyBad
		}
		return 12
	}
	return -bodyBad
}

// hex4 is the value of the four hexadecimal digits at b[p], with n 4, or n -bodyMore
// when b ends within them, or -bodyBad when they are not.
func hex4(b []byte, p int) (r rune, n int) {
	if p+4 > len(b) {
		for _, c := range b[p:] { // a bad digit before the end is bad whatever follows
			if !isHex(c) {
				return 0, -bodyBad
			}
		}
		return 0, -bodyMore
	}
	for _, c := range b[p : p+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, -bodyBad
		}
	}
	return r, 4
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// text is the value of the string at buf[start:end] as jsontext's Token.String gives it
// (invalid UTF-8 becomes U+FFFD).
func (s *scanner) text(start, end int, escaped, ascii bool) string {
	if raw := s.buf[start+1 : end-1]; !escaped && (ascii || utf8.Valid(raw)) {
		return string(raw)
	}
	b, _ := jsontext.AppendUnquote(nil, s.buf[start:end])
	return string(b)
}
