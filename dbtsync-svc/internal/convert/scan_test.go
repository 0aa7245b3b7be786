package convert

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"github.com/go-json-experiment/json/jsontext"
)

// jsontextValid is whether jsontext, as json.Unmarshal reads the members the scanner
// hands it (by default: duplicate names and invalid UTF-8 refused), takes b as one JSON
// value and nothing more.
func jsontextValid(b []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if _, err := dec.ReadValue(); err != nil {
		return false
	}
	_, err := dec.ReadToken()
	return err == io.EOF
}

// scannerValid is whether the scanner takes b as one JSON value and nothing more,
// reading it from a slice, and from a stream a byte at a time (every value crosses a
// fill).
func scannerValid(t *testing.T, b []byte) bool {
	valid := func(s *scanner) bool { return s.skip() == nil && !s.ws() }
	inMemory := valid(newBytesScanner(b))
	streamed := valid(newStreamScanner(iotest.OneByteReader(bytes.NewReader(b)), 16))
	if inMemory != streamed {
		t.Fatalf("%q: valid %v from a slice, %v from a stream", b, inMemory, streamed)
	}
	return inMemory
}

// The scanner validates JSON as jsontext does, whatever the input: a manifest the
// conversion took before it takes now, and one it refused it refuses.
func FuzzScannerValidatesAsJSONText(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `""`, `"a\"b"`, `"\u00e9\ud800"`, `"\x"`, `"a` + "\x01" + `b"`, `{"a":[1,-2.5e+3,true,false,null]}`,
		`{"a" 1}`, `[1,]`, `{"a":1,}`, `01`, `-`, `1.`, `1e`, `tru`, `nul`, `"\u12"`, `"é"`, "\"\xff\"", `{"a":{"b":[{"c":"d"}]}}`,
		`"` + string(bytes.Repeat([]byte(`abc\"\\\n`), 20)) + `"`, `[` + string(bytes.Repeat([]byte(`"0123456789abcdef",`), 9)) + `1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := scannerValid(t, b), jsontextValid(b)
		if got != want {
			t.Fatalf("%q: scanner takes it %v, jsontext %v", b, got, want)
		}
		if !got {
			return
		}
		// A valid value read whole from a stream is its bytes, whatever the refills.
		raw, err := newStreamScanner(iotest.OneByteReader(bytes.NewReader(b)), 16).rawValue()
		if err != nil || !bytes.Equal(raw, bytes.Trim(b, " \t\r\n")) {
			t.Fatalf("%q: read as %q (%v)", b, raw, err)
		}
	})
}

// A string's value is what jsontext's Token.String gives, its end where jsontext ends it
// (and where the splitter's fast capture ends it).
func FuzzScannerStringIsJSONTexts(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\u00e9\n"`, "\"\xff\xfe\"", `"` + string(bytes.Repeat([]byte(`0123456789\"`), 9)) + `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dec := jsontext.NewDecoder(bytes.NewReader(b))
		tok, err := dec.ReadToken()
		if err != nil || tok.Kind() != '"' {
			return
		}
		want, wantEnd := tok.String(), int(dec.InputOffset())
		s := newBytesScanner(b)
		s.ws()
		start, end, escaped, ascii, err := s.str()
		if err != nil || end != wantEnd {
			t.Fatalf("%q: scanner ends at %d (%v), jsontext at %d", b, end, err, wantEnd)
		}
		if got := s.text(start, end, escaped, ascii); got != want {
			t.Fatalf("%q: scanner reads %q, jsontext %q", b, got, want)
		}
		// The splitter's fast capture of a string ends it there too.
		fast := newBytesScanner(b)
		fast.ws()
		if fastEnd, ok := fast.stringEndInWindow(len(b)); !ok || fastEnd != end {
			t.Fatalf("%q: the fast capture ends at %d (%v), the scan at %d", b, fastEnd, ok, end)
		}
	})
}

// capture ends a value where the validating scan does, for every valid value.
func FuzzCaptureEndsWhereTheValueEnds(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"}"}`, `[{"a":"\"]"},[]]`, `{"k":"` + string(bytes.Repeat([]byte(`x\\`), 20)) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || (b[0] != '{' && b[0] != '[') || !jsontextValid(b) {
			return
		}
		got, err := newStreamScanner(iotest.HalfReader(bytes.NewReader(b)), 16).capture()
		if err != nil || !bytes.Equal(got, bytes.TrimRight(b, " \t\r\n")) {
			t.Fatalf("%q: captured %q (%v)", b, got, err)
		}
	})
}
