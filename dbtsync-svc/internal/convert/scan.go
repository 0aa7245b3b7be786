package convert

import (
	"fmt"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// scanner reads JSON from a window of bytes refilled from a reader (or from a slice that
// is all there is), validating what it reads as jsontext does by default (duplicate
// member names and invalid UTF-8 refused): a manifest is mostly long SQL strings the
// conversion skips, and a general decoder spends most of a conversion consuming them
// byte by byte, while this one goes through a string sixteen bytes at a time (and, when
// it only looks for a value's end, capture.go, with IndexByte).
type scanner struct {
	buf    []byte
	pos    int
	r      io.Reader // nil: buf is all the input
	rerr   error     // what the reader returned last (io.EOF at the end), or a *ManifestLimitError
	mark   int       // >= 0: fill keeps the bytes from here on (a value being captured)
	base   int64     // the input offset of buf[0] (noOffset: unknown)
	depth  int       // open objects and arrays
	window int       // the window's size when nothing is held (it shrinks back to it)
	// maxHold is the most bytes fill keeps from mark (0: no limit): past it the scan
	// fails with a *ManifestLimitError.
	maxHold int
	names   nameStack // the member names of the open objects
}

// maxDepth is jsontext's nesting limit.
const maxDepth = 10000

func newStreamScanner(r io.Reader, size int) *scanner {
	return &scanner{buf: make([]byte, 0, size), r: r, mark: -1, window: size}
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
	switch {
	case len(s.buf) == cap(s.buf):
		if s.mark >= 0 && s.maxHold > 0 && len(s.buf)-s.mark >= s.maxHold {
			s.rerr = &ManifestLimitError{Limit: "bytes of one value the conversion reads", Value: int64(s.maxHold)}
			return false
		}
		grown := make([]byte, len(s.buf), 2*cap(s.buf))
		copy(grown, s.buf)
		s.buf = grown
	case s.mark < 0 && cap(s.buf) > 4*s.window && len(s.buf) <= s.window/2:
		// Back to the window's size once a large held value is gone.
		s.buf = append(make([]byte, 0, s.window), s.buf...)
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
	if le, ok := s.rerr.(*ManifestLimitError); ok {
		return le
	}
	if s.pos >= len(s.buf) {
		if s.rerr != nil && s.rerr != io.EOF {
			return fmt.Errorf("%w: %v", ErrNotJSON, s.rerr)
		}
		return fmt.Errorf("%w: %v %s", ErrNotJSON, io.ErrUnexpectedEOF, what)
	}
	return fmt.Errorf("%w: invalid character %q %s%s", ErrNotJSON, s.buf[s.pos], what, atOffset(s.base, s.pos))
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

// key consumes an object member's name and returns it: its raw bytes when it has no
// escape (valid until the next fill), else its unescaped value (valid until the next
// key).
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
	s.names.scratch, _ = jsontext.AppendUnquote(s.names.scratch[:0], s.buf[start:end])
	return s.names.scratch, nil
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
		return s.skipStr()
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
	open := len(s.names.levels)
	err := s.skipValue()
	for err != nil && len(s.names.levels) > open { // the objects it was in
		s.names.close()
	}
	return err
}

func (s *scanner) skipValue() error {
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
				return fmt.Errorf("%w: exceeded max depth of %d%s", ErrNotJSON, maxDepth, atOffset(s.base, s.pos))
			}
			s.pos++
			if c2 := s.peek(); c2 == '}' && c == '{' || c2 == ']' && c == '[' {
				s.pos++
				break
			}
			stack = append(stack, c == '{')
			if c == '{' {
				s.names.open()
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
				if obj {
					s.names.close()
				}
				continue
			default:
				return s.fail("after a value (expecting ',' or a close)")
			}
			break
		}
	}
}

// memberName consumes a member's name and its colon; a name the object has already
// had fails.
func (s *scanner) memberName() error {
	at := s.base + int64(s.pos)
	name, err := s.key()
	if err != nil {
		return err
	}
	if _, err := s.names.add(name, at); err != nil {
		return err
	}
	return s.want(':', "after an object member's name")
}

// object calls fn with each member's name (valid during the call) of the object at
// the current position; fn consumes the member's value. A name the object has already
// had fails, and an error fn returns is placed at its member (FieldError).
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
	s.names.open()
	defer s.names.close()
	for {
		at := s.base + int64(s.pos)
		name, err := s.key()
		if err != nil {
			return err
		}
		k, err := s.names.add(name, at)
		if err != nil {
			return err
		}
		if err := s.want(':', "after an object member's name"); err != nil {
			return err
		}
		// The name's copy: a refill (the colon's, or the value's) moves the window.
		if err := fn(s.names.name(k)); err != nil {
			return atMember(s.names.name(k), err)
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

// array calls fn for each element of the array at the current position; fn consumes
// it. An error fn returns is placed at its element (FieldError).
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
	for i := 0; ; i++ {
		if err := fn(); err != nil {
			return atPath("["+strconv.Itoa(i)+"]", err)
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
