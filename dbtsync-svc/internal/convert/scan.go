package convert

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/bits"
	"strconv"
	"unicode/utf8"

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

// smallNames is how many names an object has before they are indexed by hash: below
// it, a scan of their fingerprints is faster (a node has some twenty members).
const smallNames = 32

// nameSeed hashes member names (one seed per process: an input cannot aim at it).
var nameSeed = maphash.MakeSeed()

// nameStack holds the member names of the open objects, to refuse a name its object
// already has, as jsontext does: names are compared whole, after unescaping.
type nameStack struct {
	names  []byte   // the names, back to back
	ends   []int    // where each name ends in names
	hashes []uint64 // each name's fingerprint, or its hash once its object is indexed
	levels []nameLevel
	spare  map[uint64]int // an index kept for the next large object
	// max is the most names the open objects may hold together (0: no limit): past it
	// the scan fails with a *ManifestLimitError.
	max     int
	collide bool   // every hash is 0 (a test of collisions)
	scratch []byte // key's unescaped name
}

// nameLevel is one open object's names.
type nameLevel struct {
	first int            // its first name's index
	index map[uint64]int // hash to name index, once it has smallNames names
	more  []int          // names whose hash an earlier name has (a collision)
}

func (ns *nameStack) open() { ns.levels = append(ns.levels, nameLevel{first: len(ns.ends)}) }

func (ns *nameStack) close() {
	lv := &ns.levels[len(ns.levels)-1]
	if lv.index != nil {
		clear(lv.index)
		ns.spare = lv.index
	}
	k := lv.first
	if k > 0 {
		ns.names = ns.names[:ns.ends[k-1]]
	} else {
		ns.names = ns.names[:0]
	}
	ns.ends, ns.hashes = ns.ends[:k], ns.hashes[:k]
	ns.levels = ns.levels[:len(ns.levels)-1]
}

// reset empties the stack, keeping its storage.
func (ns *nameStack) reset() {
	for len(ns.levels) > 0 {
		ns.close()
	}
}

func (ns *nameStack) name(k int) []byte {
	from := 0
	if k > 0 {
		from = ns.ends[k-1]
	}
	return ns.names[from:ns.ends[k]]
}

// add records name (read at input offset at) in the innermost open object and returns
// its index (for name), failing when that object already has it.
func (ns *nameStack) add(name []byte, at int64) (int, error) {
	lv := &ns.levels[len(ns.levels)-1]
	k := len(ns.ends)
	if lv.index == nil && k-lv.first >= smallNames {
		lv.index, ns.spare = ns.spare, nil
		if lv.index == nil {
			lv.index = make(map[uint64]int, 2*smallNames)
		}
		for i := lv.first; i < k; i++ {
			ns.hashes[i] = ns.hash(ns.name(i))
			ns.index(lv, i)
		}
	}
	var h uint64
	if lv.index == nil {
		h = ns.fingerprint(name)
		for i := lv.first; i < k; i++ {
			if ns.hashes[i] == h && bytes.Equal(ns.name(i), name) {
				return 0, duplicateName(name, at)
			}
		}
	} else {
		h = ns.hash(name)
		if i, ok := lv.index[h]; ok {
			if bytes.Equal(ns.name(i), name) {
				return 0, duplicateName(name, at)
			}
			for _, i := range lv.more {
				if ns.hashes[i] == h && bytes.Equal(ns.name(i), name) {
					return 0, duplicateName(name, at)
				}
			}
		}
	}
	if ns.max > 0 && k >= ns.max {
		return 0, &ManifestLimitError{Limit: "member names of the objects open at once", Value: int64(ns.max)}
	}
	ns.names = append(ns.names, name...)
	ns.ends = append(ns.ends, len(ns.names))
	ns.hashes = append(ns.hashes, h)
	if lv.index != nil {
		ns.index(lv, k)
	}
	return k, nil
}

// hash is name's hash in an indexed object: seeded, so that no input can aim at it.
func (ns *nameStack) hash(name []byte) uint64 {
	if ns.collide {
		return 0
	}
	return maphash.Bytes(nameSeed, name)
}

// fingerprint tells most names of a small object apart at little cost: their length
// and their first and last eight bytes (equal ones are compared whole).
func (ns *nameStack) fingerprint(name []byte) uint64 {
	if ns.collide {
		return 0
	}
	n := len(name)
	if n >= 8 {
		return binary.LittleEndian.Uint64(name) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(name[n-8:]), 29) ^ uint64(n)<<58
	}
	var f uint64
	for i, c := range name {
		f |= uint64(c) << (8 * i)
	}
	return f ^ uint64(n)<<58
}

// index puts name i into lv's index.
func (ns *nameStack) index(lv *nameLevel, i int) {
	if _, taken := lv.index[ns.hashes[i]]; taken {
		lv.more = append(lv.more, i)
		return
	}
	lv.index[ns.hashes[i]] = i
}

// ErrDuplicateName is a member name its object already has (wrapped in ErrNotJSON).
var ErrDuplicateName = errors.New("duplicate member name")

func duplicateName(name []byte, at int64) error {
	return fmt.Errorf("%w: %w %s%s", ErrNotJSON, ErrDuplicateName, strconv.Quote(string(name)), atOffset(at, 0))
}

// atOffset says where in the input buf[i] of a window at base is ("" when the window's
// bytes are not the input's: noOffset).
func atOffset(base int64, i int) string {
	if base < 0 {
		return ""
	}
	return " at offset " + strconv.FormatInt(base+int64(i), 10)
}

// noOffset is the base of a scanner whose bytes are no stretch of the input (a node's
// members the splitter handed on).
const noOffset = -1 << 62

// FieldError is a manifest that cannot be read at one field: Path is where, from the
// manifest's root (nodes["model.p.m"].columns.id.name, metadata).
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// atMember places err at the member name (inside any place err already has).
func atMember(name []byte, err error) error {
	seg := string(name)
	if !isIdentifier(name) {
		seg = "[" + strconv.Quote(seg) + "]"
	}
	return atPath(seg, err)
}

// atPath places err at seg, a path segment (a name, or [index] or ["name"]).
func atPath(seg string, err error) error {
	switch fe, ok := err.(*FieldError); {
	case err == errStopped:
		return err
	case !ok:
		return &FieldError{Path: seg, Err: err}
	case fe.Path[0] == '[':
		fe.Path = seg + fe.Path
	default:
		fe.Path = seg + "." + fe.Path
	}
	return err
}

// isIdentifier is whether name can stand in a path as .name.
func isIdentifier(name []byte) bool {
	for i, c := range name {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return len(name) > 0
}

// ManifestLimitError is a manifest read that passed one of its ManifestLimits: its
// message names the limit and its value.
type ManifestLimitError struct {
	Limit string // what is counted, as the message says it
	Value int64  // the limit
}

func (e *ManifestLimitError) Error() string {
	return fmt.Sprintf("the manifest read is over its limit of %d %s", e.Value, e.Limit)
}

// Names refuses a duplicate member name as the scanner does, for a JSON reader of its
// own (the API's, which streams an upload token by token): Open and Close each object,
// Add each of its names.
type Names struct{ ns nameStack }

// NewNames is a Names that holds at most max names in the open objects together (0: no
// limit); past it Add fails with a *ManifestLimitError.
func NewNames(max int) *Names { return &Names{ns: nameStack{max: max}} }

func (n *Names) Open()  { n.ns.open() }
func (n *Names) Close() { n.ns.close() }

// Add records name, unescaped, in the innermost open object; a name that object already
// has fails with ErrDuplicateName.
func (n *Names) Add(name []byte) error {
	_, err := n.ns.add(name, noOffset)
	return err
}
