package convert

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// scanner reads JSON from a window of bytes refilled from a reader (or from a slice that
// is all there is), validating what it reads as jsontext does with AllowInvalidUTF8 and
// AllowDuplicateNames: a manifest is mostly long SQL strings the conversion skips, and a
// general decoder spends most of a conversion consuming them byte by byte, while this
// one goes through a string sixteen bytes at a time (and, when it only looks for a
// value's end, capture.go, with IndexByte).
type scanner struct {
	buf   []byte
	pos   int
	r     io.Reader // nil: buf is all the input
	rerr  error     // what the reader returned last (io.EOF at the end)
	mark  int       // >= 0: fill keeps the bytes from here on (a value being captured)
	base  int64     // the input offset of buf[0]
	depth int       // open objects and arrays
}

// maxDepth is jsontext's nesting limit.
const maxDepth = 10000

func newStreamScanner(r io.Reader, size int) *scanner {
	return &scanner{buf: make([]byte, 0, size), r: r, mark: -1}
}

func newBytesScanner(b []byte) *scanner { return &scanner{buf: b, mark: -1} }

// fill reads more input into the window, keeping the bytes from mark (or pos) on; it
// reports whether there is more.
func (s *scanner) fill() bool {
	if s.r == nil || s.rerr != nil {
		return false
	}
	keep := s.pos
	if s.mark >= 0 && s.mark < keep {
		keep = s.mark
	}
	if keep > 0 {
		n := copy(s.buf, s.buf[keep:])
		s.buf = s.buf[:n]
		s.pos -= keep
		if s.mark >= 0 {
			s.mark -= keep
		}
		s.base += int64(keep)
	}
	if len(s.buf) == cap(s.buf) {
		grown := make([]byte, len(s.buf), 2*cap(s.buf))
		copy(grown, s.buf)
		s.buf = grown
	}
	for {
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if err != nil {
			s.rerr = err
		}
		if n > 0 || err != nil {
			return n > 0
		}
	}
}

// hold makes fill keep the bytes from pos on (unless an outer hold keeps more) and
// returns the outer hold as an input offset (-1 for none), for release: indexes into
// the window move on a fill, offsets do not.
func (s *scanner) hold() int64 {
	if s.mark >= 0 {
		return s.base + int64(s.mark)
	}
	s.mark = s.pos
	return -1
}

// release puts back the outer hold hold returned.
func (s *scanner) release(outer int64) {
	if outer < 0 {
		s.mark = -1
	} else {
		s.mark = int(outer - s.base)
	}
}

// fail is a syntax error at the current position (a read error, or the end of the
// input, when that is what stopped the scan).
func (s *scanner) fail(what string) error {
	if s.pos >= len(s.buf) {
		if s.rerr != nil && s.rerr != io.EOF {
			return fmt.Errorf("%w: %v", ErrNotJSON, s.rerr)
		}
		return fmt.Errorf("%w: %v %s", ErrNotJSON, io.ErrUnexpectedEOF, what)
	}
	return fmt.Errorf("%w: invalid character %q %s at offset %d", ErrNotJSON, s.buf[s.pos], what, s.base+int64(s.pos))
}

// ws skips whitespace and reports whether a byte follows.
func (s *scanner) ws() bool {
	if s.pos < len(s.buf) && s.buf[s.pos] > ' ' { // compact JSON: no whitespace at all
		return true
	}
	return s.wsSlow()
}

func (s *scanner) wsSlow() bool {
	for {
		for s.pos < len(s.buf) {
			switch s.buf[s.pos] {
			case ' ', '\t', '\n', '\r':
				s.pos++
			default:
				return true
			}
		}
		if !s.fill() {
			return false
		}
	}
}

// peek is the next byte after whitespace, 0 at the end of the input.
func (s *scanner) peek() byte {
	if pos := s.pos; pos < len(s.buf) && s.buf[pos] > ' ' {
		return s.buf[pos]
	}
	return s.peekSlow()
}

func (s *scanner) peekSlow() byte {
	if !s.wsSlow() {
		return 0
	}
	return s.buf[s.pos]
}

// want consumes the byte c after whitespace.
func (s *scanner) want(c byte, what string) error {
	if s.peek() != c {
		return s.fail(what)
	}
	s.pos++
	return nil
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// The SWAR constants as variables: the compiler keeps them in registers through a loop
// instead of loading each as an immediate every time round.
var swarOnes, swarHighs, swarQuote, swarBackslash, swarSpace, swarOpen, swarClose uint64 = ones, highs, '"' * ones, '\\' * ones, ' ' * ones, '{' * ones, '}' * ones

// str consumes the string at pos (its opening quote) and returns where its raw bytes,
// quotes included, are in buf (valid until the next fill), whether it holds an escape
// sequence and whether it is all ASCII (false: maybe not).
func (s *scanner) str() (start, end int, escaped, ascii bool, err error) {
	start, outer := s.pos, s.hold()
	var seen uint64 // the bytes read OR'd: no high bit, all ASCII
	i := s.pos + 1
	for {
		j, words := plain(s.buf, i)
		seen |= words
		b := s.buf
		if j+1 < len(b) {
			switch b[j] {
			case '"':
				s.pos = j + 1
				s.release(outer)
				return start, j + 1, escaped, seen&highs == 0, nil
			case '\\':
				escaped = true
				switch b[j+1] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
					i = j + 2
					continue
				}
			}
		}
		n := 0
		if j < len(b) && b[j] == '"' {
			s.pos = j + 1
			s.release(outer)
			return start, j + 1, escaped, seen&highs == 0, nil
		} else if j < len(b) && b[j] == '\\' {
			escaped = true
			n = escapeLen(b, j)
		} else if j < len(b) { // a control character
			n = -bodyBad
		} else {
			n = -bodyMore
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
			s.pos = j
		}
		s.release(outer)
		return 0, 0, false, false, s.fail("in a string")
	}
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
// when b ends within it, or -bodyBad when it is not one.
func escapeLen(b []byte, p int) int {
	if p+1 >= len(b) {
		return -bodyMore
	}
	switch b[p+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if p+6 > len(b) {
			return -bodyMore
		}
		for _, c := range b[p+2 : p+6] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return -bodyBad
			}
		}
		return 6
	}
	return -bodyBad
}

// text is the value of the string at buf[start:end] as jsontext's Token.String gives it
// (invalid UTF-8 becomes U+FFFD).
func (s *scanner) text(start, end int, escaped, ascii bool) string {
	if raw := s.buf[start+1 : end-1]; !escaped && (ascii || utf8.Valid(raw)) {
		return string(raw)
	}
	b, _ := jsontext.AppendUnquote(nil, s.buf[start:end])
	return string(b)
}

// key consumes an object member's name and returns it: its raw bytes when it has no
// escape (valid until the next fill), else its unescaped value.
func (s *scanner) key() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.fail("at the start of an object member's name")
	}
	start, end, escaped, _, err := s.str()
	if err != nil {
		return nil, err
	}
	if !escaped {
		return s.buf[start+1 : end-1], nil
	}
	return jsontext.AppendUnquote(nil, s.buf[start:end])
}

// number consumes a JSON number.
func (s *scanner) number() error {
	digits := func() int {
		n := 0
		for {
			for s.pos < len(s.buf) && '0' <= s.buf[s.pos] && s.buf[s.pos] <= '9' {
				s.pos++
				n++
			}
			if s.pos < len(s.buf) || !s.fill() {
				return n
			}
		}
	}
	at := func(c byte) bool { return (s.pos < len(s.buf) || s.fill()) && s.buf[s.pos] == c }
	if at('-') {
		s.pos++
	}
	if at('0') {
		s.pos++
	} else if digits() == 0 {
		return s.fail("in a number")
	}
	if at('.') {
		s.pos++
		if digits() == 0 {
			return s.fail("in a number's fraction")
		}
	}
	if at('e') || at('E') {
		s.pos++
		if at('+') || at('-') {
			s.pos++
		}
		if digits() == 0 {
			return s.fail("in a number's exponent")
		}
	}
	return nil
}

// literal consumes true, false or null.
func (s *scanner) literal(word string) error {
	for len(s.buf)-s.pos < len(word) && s.fill() {
	}
	if len(s.buf)-s.pos < len(word) || string(s.buf[s.pos:s.pos+len(word)]) != word {
		return s.fail("in a literal (expecting " + word + ")")
	}
	s.pos += len(word)
	return nil
}

// scalar consumes a string, number or literal at pos.
func (s *scanner) scalar() error {
	switch c := s.buf[s.pos]; {
	case c == '"':
		_, _, _, _, err := s.str()
		return err
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.fail("at the start of a value")
}

// skip consumes one value, validating it.
func (s *scanner) skip() error {
	if !s.ws() {
		return s.fail("at the start of a value")
	}
	if c := s.buf[s.pos]; c != '{' && c != '[' {
		return s.scalar()
	}
	// Containers, iteratively: stack holds whether each open one is an object.
	var stack []bool
	for {
		// At the start of a value.
		if !s.ws() {
			return s.fail("at the start of a value")
		}
		switch c := s.buf[s.pos]; c {
		case '{', '[':
			if s.depth+len(stack) >= maxDepth {
				return fmt.Errorf("%w: exceeded max depth of %d at offset %d", ErrNotJSON, maxDepth, s.base+int64(s.pos))
			}
			s.pos++
			stack = append(stack, c == '{')
			if c2 := s.peek(); c2 == '}' && c == '{' || c2 == ']' && c == '[' {
				s.pos++
				stack = stack[:len(stack)-1]
				break
			}
			if c == '{' {
				if err := s.memberName(); err != nil {
					return err
				}
			}
			continue
		default:
			if err := s.scalar(); err != nil {
				return err
			}
		}
		// After a value: a comma and the next one, or the end of containers.
		for {
			if len(stack) == 0 {
				return nil
			}
			obj := stack[len(stack)-1]
			switch s.peek() {
			case ',':
				s.pos++
				if obj {
					if err := s.memberName(); err != nil {
						return err
					}
				}
			case '}', ']':
				if (s.buf[s.pos] == '}') != obj {
					return s.fail("after a value (mismatched close)")
				}
				s.pos++
				stack = stack[:len(stack)-1]
				continue
			default:
				return s.fail("after a value (expecting ',' or a close)")
			}
			break
		}
	}
}

// memberName consumes a member's name and its colon.
func (s *scanner) memberName() error {
	if s.peek() != '"' {
		return s.fail("at the start of an object member's name")
	}
	if _, _, _, _, err := s.str(); err != nil {
		return err
	}
	return s.want(':', "after an object member's name")
}

// object calls fn with each member's name (valid during the call) of the object at
// the current position; fn consumes the member's value.
func (s *scanner) object(fn func(name []byte) error) error {
	if err := s.want('{', "at the start of an object"); err != nil {
		return err
	}
	if s.depth++; s.depth > maxDepth {
		return fmt.Errorf("%w: exceeded max depth of %d", ErrNotJSON, maxDepth)
	}
	defer func() { s.depth-- }()
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		name, err := s.key()
		if err != nil {
			return err
		}
		if err := s.want(':', "after an object member's name"); err != nil {
			return err
		}
		if err := fn(name); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.fail("after an object member (expecting ',' or '}')")
		}
	}
}

// array calls fn for each element of the array at the current position; fn consumes it.
func (s *scanner) array(fn func() error) error {
	if err := s.want('[', "at the start of an array"); err != nil {
		return err
	}
	if s.depth++; s.depth > maxDepth {
		return fmt.Errorf("%w: exceeded max depth of %d", ErrNotJSON, maxDepth)
	}
	defer func() { s.depth-- }()
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for {
		if err := fn(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.fail("after an array element (expecting ',' or ']')")
		}
	}
}

// rawValue consumes a value, validating it, and returns its bytes (valid until the
// next fill).
func (s *scanner) rawValue() ([]byte, error) {
	if !s.ws() {
		return nil, s.fail("at the start of a value")
	}
	startAbs, outer := s.base+int64(s.pos), s.hold()
	err := s.skip()
	s.release(outer)
	if err != nil {
		return nil, err
	}
	return s.buf[int(startAbs-s.base):s.pos], nil
}
