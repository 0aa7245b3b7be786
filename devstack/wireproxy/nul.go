package wireproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
)

// MongoDB strings may hold NUL (U+0000); PostgreSQL's jsonb, where FerretDB's PostgreSQL
// handler keeps documents, refuses it ("unsupported Unicode escape sequence"). With
// EscapeNUL the proxy rewrites every string of a request (BSON string, code and symbol
// values) so that it holds no NUL, and every string of a reply back, bijectively:
//
//	U+0000 -> U+E000 U+E001    U+E000 -> U+E000 U+E000
//
// (U+E000 is the first private-use code point). A string round-trips unchanged, and two
// strings are equal stored exactly when they were equal sent, so equality filters and
// unique indexes keep their meaning; only the order of strings holding NUL or U+E000
// differs from MongoDB's.

const (
	escChar = "\uE000"
	escNUL  = escChar + "\uE001"
	escEsc  = escChar + escChar
)

var (
	escCharBytes = []byte(escChar)
	nulEscaper   = strings.NewReplacer("\x00", escNUL, escChar, escEsc)
	nulUnescaper = strings.NewReplacer(escNUL, "\x00", escEsc, escChar)
)

func escapeString(s string) (string, bool) {
	if !strings.ContainsRune(s, 0) && !strings.Contains(s, escChar) {
		return s, false
	}
	return nulEscaper.Replace(s), true
}

func unescapeString(s string) (string, bool) {
	if !strings.Contains(s, escChar) {
		return s, false
	}
	return nulUnescaper.Replace(s), true
}

var errBadBSON = errors.New("wireproxy: malformed BSON")

// rewriteMsg applies f to every string value of an OP_MSG's documents and returns the
// message with its lengths mended, or msg itself when nothing changed (or the message is
// not an OP_MSG, or does not parse: it is then forwarded as it came, for the server to
// judge). A checksummed message that changes loses its checksum.
func rewriteMsg(msg []byte, f func(string) (string, bool)) []byte {
	if opCode(msg) != opMsg || len(msg) < headerLen+4 {
		return msg
	}
	flags := msgFlags(msg)
	end := len(msg)
	if flags&flagChecksumPresent != 0 {
		end -= 4
	}
	out := make([]byte, 0, len(msg)+64)
	out = append(out, msg[:headerLen+4]...)
	changed := false
	for i := headerLen + 4; i < end; {
		kind := msg[i]
		out = append(out, kind)
		i++
		switch kind {
		case 0:
			n, doc, ch, err := rewriteDoc(msg[i:end], f)
			if err != nil {
				return msg
			}
			out, changed, i = append(out, doc...), changed || ch, i+n
		case 1:
			if i+4 > end {
				return msg
			}
			size := int(int32(binary.LittleEndian.Uint32(msg[i:])))
			if size < 4 || i+size > end {
				return msg
			}
			sec := msg[i+4 : i+size]
			id := bytes.IndexByte(sec, 0)
			if id < 0 {
				return msg
			}
			start := len(out)
			out = append(out, 0, 0, 0, 0)
			out = append(out, sec[:id+1]...)
			for j := id + 1; j < len(sec); {
				n, doc, ch, err := rewriteDoc(sec[j:], f)
				if err != nil {
					return msg
				}
				out, changed, j = append(out, doc...), changed || ch, j+n
			}
			binary.LittleEndian.PutUint32(out[start:], uint32(len(out)-start))
			i += size
		default:
			return msg
		}
	}
	if !changed {
		return msg
	}
	binary.LittleEndian.PutUint32(out[headerLen:], flags&^flagChecksumPresent)
	binary.LittleEndian.PutUint32(out[0:], uint32(len(out)))
	return out
}

// rewriteDoc reads the BSON document at the start of in and returns its length in in,
// the document with f applied to its string values (in itself when nothing changed) and
// whether anything did.
func rewriteDoc(in []byte, f func(string) (string, bool)) (int, []byte, bool, error) {
	if len(in) < 5 {
		return 0, nil, false, errBadBSON
	}
	n := int(int32(binary.LittleEndian.Uint32(in)))
	if n < 5 || n > len(in) || in[n-1] != 0 {
		return 0, nil, false, errBadBSON
	}
	doc := in[:n]
	var out []byte // nil until something changes
	for i := 4; i < n-1; {
		typ := doc[i]
		k := bytes.IndexByte(doc[i+1:n-1], 0)
		if k < 0 {
			return 0, nil, false, errBadBSON
		}
		head := doc[i : i+1+k+1] // type and key
		v := i + 1 + k + 1
		size, value, changed, err := rewriteValue(typ, doc[v:n-1], f)
		if err != nil {
			return 0, nil, false, err
		}
		if changed && out == nil {
			out = append(make([]byte, 0, n+64), doc[:i]...)
		}
		if out != nil {
			out = append(append(out, head...), value...)
		}
		i = v + size
	}
	if out == nil {
		return n, doc, false, nil
	}
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return n, out, true, nil
}

// fixedSize is the size of the BSON values of constant size, by type.
var fixedSize = map[byte]int{
	0x01: 8, 0x06: 0, 0x07: 12, 0x08: 1, 0x09: 8, 0x0A: 0, 0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16, 0x7F: 0, 0xFF: 0,
}

// rewriteValue reads one value of type typ at the start of in: its size, the value as
// rewritten, and whether it changed.
func rewriteValue(typ byte, in []byte, f func(string) (string, bool)) (int, []byte, bool, error) {
	if n, ok := fixedSize[typ]; ok {
		if n > len(in) {
			return 0, nil, false, errBadBSON
		}
		return n, in[:n], false, nil
	}
	switch typ {
	case 0x02, 0x0D, 0x0E: // string, JavaScript code, symbol: int32 length, bytes, NUL
		if len(in) < 4 {
			return 0, nil, false, errBadBSON
		}
		l := int(int32(binary.LittleEndian.Uint32(in)))
		if l < 1 || 4+l > len(in) {
			return 0, nil, false, errBadBSON
		}
		s, changed := f(string(in[4 : 4+l-1]))
		if !changed {
			return 4 + l, in[:4+l], false, nil
		}
		out := binary.LittleEndian.AppendUint32(nil, uint32(len(s)+1))
		return 4 + l, append(append(out, s...), 0), true, nil
	case 0x03, 0x04: // document, array
		return rewriteDoc(in, f)
	case 0x05: // binary: int32 length, subtype, bytes
		if len(in) < 5 {
			return 0, nil, false, errBadBSON
		}
		l := int(int32(binary.LittleEndian.Uint32(in)))
		if l < 0 || 5+l > len(in) {
			return 0, nil, false, errBadBSON
		}
		return 5 + l, in[:5+l], false, nil
	case 0x0B: // regular expression: two cstrings
		a := bytes.IndexByte(in, 0)
		if a < 0 {
			return 0, nil, false, errBadBSON
		}
		b := bytes.IndexByte(in[a+1:], 0)
		if b < 0 {
			return 0, nil, false, errBadBSON
		}
		return a + 1 + b + 1, in[:a+1+b+1], false, nil
	case 0x0C: // DBPointer: string, 12-byte ObjectId
		if len(in) < 4 {
			return 0, nil, false, errBadBSON
		}
		l := int(int32(binary.LittleEndian.Uint32(in)))
		if l < 1 || 4+l+12 > len(in) {
			return 0, nil, false, errBadBSON
		}
		return 4 + l + 12, in[:4+l+12], false, nil
	case 0x0F: // code with scope: int32 total length
		if len(in) < 4 {
			return 0, nil, false, errBadBSON
		}
		l := int(int32(binary.LittleEndian.Uint32(in)))
		if l < 4 || l > len(in) {
			return 0, nil, false, errBadBSON
		}
		return l, in[:l], false, nil
	}
	return 0, nil, false, errBadBSON
}
