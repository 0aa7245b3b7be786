package convert

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// capture consumes the object or array at the current position without validating it
// (whoever parses the bytes does) and returns its bytes (valid until the next fill): it
// only follows strings (to their closing quote) and brackets, eight bytes at a time.
func (s *scanner) capture() ([]byte, error) {
	if !s.ws() {
		return nil, s.fail("at the start of a value")
	}
	startAbs, outer := s.base+int64(s.pos), s.hold()
	defer s.release(outer)
	o, h, dq, open, cls, sp := swarOnes, swarHighs, swarQuote, swarOpen, swarClose, swarSpace
	depth, i := 0, s.pos
	for {
		b := s.buf
		// Outside strings: the next quote or bracket ('[' and ']' are '{' and '}'
		// without the 0x20 bit).
		for ; i+8 <= len(b); i += 8 {
			w := binary.LittleEndian.Uint64(b[i : i+8])
			q, x, y := w^dq, (w|sp)^open, (w|sp)^cls
			if t := (((q - o) &^ q) | ((x - o) &^ x) | ((y - o) &^ y)) & h; t != 0 {
				i += bits.TrailingZeros64(t) / 8
				goto found
			}
		}
		for ; i < len(b); i++ {
			switch b[i] {
			case '"', '{', '}', '[', ']':
				goto found
			}
		}
		if iAbs := s.base + int64(i); !s.fill() {
			s.pos = len(s.buf)
			return nil, s.fail("in a value")
		} else {
			i = int(iAbs - s.base)
		}
		continue
	found:
		switch b[i] {
		case '"':
			if end := shortStringEnd(b, i+1); end > 0 {
				i = end
				continue
			}
			end, ok := s.stringEnd(i)
			if !ok {
				s.pos = len(s.buf)
				return nil, s.fail("in a string")
			}
			i = end
			continue
		case '{', '[':
			depth++
		default: // '}', ']'
			depth--
		}
		i++
		if depth <= 0 {
			s.pos = i
			return s.buf[int(startAbs-s.base):i], nil
		}
	}
}

// shortStringEnd is the index after the closing quote of a string whose bytes start at
// b[j], when that quote comes within sixteen bytes and before any backslash; 0 when not
// (a longer string, or one with an escape, takes stringEnd).
func shortStringEnd(b []byte, j int) int {
	o, h, dq, bsl := swarOnes, swarHighs, swarQuote, swarBackslash
	for k := j; k < j+16 && k+8 <= len(b); k += 8 {
		w := binary.LittleEndian.Uint64(b[k : k+8])
		q, e := w^dq, w^bsl
		t, u := ((q-o)&^q)&h, ((e-o)&^e)&h
		switch {
		case t != 0 && (u == 0 || bits.TrailingZeros64(t) < bits.TrailingZeros64(u)):
			return k + bits.TrailingZeros64(t)/8 + 1
		case u != 0:
			return 0
		}
	}
	return 0
}

// stringEnd is the index after the closing quote of the string whose opening quote is
// at buf[i], filling the window as needed (buf[i:] is kept).
func (s *scanner) stringEnd(i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(s.buf[j:], '"')
		if k < 0 {
			iAbs, jAbs := s.base+int64(i), s.base+int64(len(s.buf))
			if !s.fill() {
				return 0, false
			}
			i, j = int(iAbs-s.base), int(jAbs-s.base)
			continue
		}
		j += k
		// A quote after an odd number of backslashes is escaped.
		n := 0
		for b := j - 1; b > i && s.buf[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, true
		}
		j++
	}
}

// stringEndInWindow is the index after the closing quote of the string at pos, when it
// is in the window and at most max bytes long (quotes included); its bytes are not
// validated.
func (s *scanner) stringEndInWindow(max int) (int, bool) {
	i := s.pos
	b := s.buf[:min(len(s.buf), i+max)]
	if end := shortStringEnd(b, i+1); end > 0 {
		return end, true
	}
	for j := i + 1; ; j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		n := 0 // a quote after an odd number of backslashes is escaped
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, true
		}
	}
}
