package convert

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/analyticsco/platform/devstack"
)

// readingSeeds are manifests JSON readers could read two ways, and their one reading.
var readingSeeds = []string{
	`{"metadata":{"x":1,"x":2,"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v99.json"},"nodes":{}}`,
	`{"nodes":{"model.p.m":{"resource_type":"model","name":"a","name":"b"}}}`,
	`{"nodes":{"model.p.m":{"resource_type":"model","name":"a","n\u0061me":"b"}}}`,
	`{"nodes":{"model.p.m":{"resource_type":"model","name":"a` + "\xff" + `"}}}`,
	`{"nodes":{"model.p.m":{"resource_type":"model","name":"m","raw_code":"` + "\xc3\x28" + `","raw_code":1}}}`,
	`{"nodes":{"m":{"raw_code":"\ud83d\ude00 \ud800"}}}`, `{"nodes":{"m":{"raw_code":"\ud83d\ude00"}}}`,
	`{"nodes":{},"macros":{"a":{"x":[{"k":1,"k":2}]}}}`, `{"nodes":{},"nodes":{}}`,
	`{"nodes":{"model.p.m":{"resource_type":"model","name":"m","meta":{"a":1,"a":2}}}}`,
	`{"nodes":{"model.p.m":{"resource_type":"model","name":"m","config":{"meta":{"a":"` + "\xed\xa0\x80" + `"}}}}}`,
	`{"nodes":{},"metrics":{"m":{"name":"m","type":"simple","type":"ratio"}}}`,
}

// One reading of a manifest: what the conversion decodes, jsontext (as json.Unmarshal
// reads JSON by default) takes as one valid value, so no duplicate member name and no
// invalid UTF-8 slipped through, at any depth, read or skipped; and a manifest decodes
// the same through a window of a few bytes.
func FuzzDecodeManifestReadsJSONOnce(f *testing.F) {
	for _, s := range readingSeeds {
		f.Add([]byte(s))
	}
	saved := scanWindow
	f.Cleanup(func() { scanWindow = saved })
	f.Fuzz(func(t *testing.T, in []byte) {
		scanWindow = saved
		p, err := DecodeManifest(bytes.NewReader(in))
		if err == nil && !jsontextValid(in) {
			t.Fatalf("%q decodes, but jsontext refuses it", in)
		}
		scanWindow = 16
		p2, err2 := DecodeManifest(iotest.OneByteReader(bytes.NewReader(in)))
		if (err == nil) != (err2 == nil) || err != nil && withoutOffset(err) != withoutOffset(err2) {
			t.Fatalf("%q: %v, through a small window %v", in, err, err2)
		}
		if err == nil && render(Build(p)) != render(Build(p2)) {
			t.Fatalf("%q converts differently through a small window", in)
		}
	})
}

// The seeds fail, each naming where, and the same through a small window.
func TestManifestsWithTwoReadingsFailNamingTheField(t *testing.T) {
	want := []string{
		`metadata: manifest is not valid JSON: duplicate member name "x" at offset 19`,
		`nodes["model.p.m"]: manifest is not valid JSON: duplicate member name "name" at offset 58`,
		`nodes["model.p.m"]: manifest is not valid JSON: duplicate member name "name" at offset 58`,
		`nodes["model.p.m"].name: manifest is not valid JSON: invalid UTF-8 in a string`,
		`nodes["model.p.m"].raw_code: manifest is not valid JSON: invalid UTF-8 in a string at offset 70`,
		`nodes.m.raw_code: manifest is not valid JSON: invalid character '\\' in a string at offset 40`,
		"",
		`macros: manifest is not valid JSON: duplicate member name "k" at offset 39`,
		`manifest is not valid JSON: duplicate member name "nodes" at offset 12`,
		`nodes["model.p.m"].meta: manifest is not valid JSON: duplicate member name "a"`,
		`nodes["model.p.m"].config.meta: manifest is not valid JSON: invalid UTF-8 in a string`,
		`metrics.m: manifest is not valid JSON: duplicate member name "type" at offset 55`,
	}
	saved := scanWindow
	t.Cleanup(func() { scanWindow = saved })
	for i, in := range readingSeeds {
		for _, window := range []int{saved, 16} {
			scanWindow = window
			_, err := DecodeManifest(iotest.HalfReader(strings.NewReader(in)))
			got := ""
			if err != nil {
				got = err.Error()
			}
			var fe *FieldError
			if window == saved && got != want[i] || window != saved && withoutOffset(err) != withoutOffset(errors.New(want[i])) {
				t.Errorf("%s (window %d): got %q, want %q", in, window, got, want[i])
			}
			if err != nil && !errors.Is(err, ErrNotJSON) || err != nil && i != 8 && !errors.As(err, &fe) {
				t.Errorf("%s: %v is not a FieldError of ErrNotJSON", in, err)
			}
		}
	}
}

// withoutOffset is err's message without the offsets it names: an error the splitter
// finds says where in the input, one a worker finds in the members handed to it only
// which field, and which of the two finds one depends on the window.
func withoutOffset(err error) string {
	if err == nil {
		return ""
	}
	return offsetRE.ReplaceAllString(err.Error(), "")
}

var offsetRE = regexp.MustCompile(` at offset [0-9]+`)

// Duplicates are found by the names, not by their hashes: with every hash the same,
// an object of many distinct names is taken and one repeated name is refused, in a small
// object and in an indexed one.
func TestDuplicateNamesAreComparedWhole(t *testing.T) {
	for _, n := range []int{3, smallNames, 5 * smallNames} {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf(`"k%d":%d`, i, i))
		}
		distinct := "{" + strings.Join(names, ",") + "}"
		repeated := "{" + strings.Join(names, ",") + `,"k` + fmt.Sprint(n/2) + `":0}`
		for _, collide := range []bool{false, true} {
			s := newBytesScanner([]byte(distinct))
			s.names.collide = collide
			if err := s.skip(); err != nil {
				t.Fatalf("%d distinct names (collide %v): %v", n, collide, err)
			}
			s = newBytesScanner([]byte(repeated))
			s.names.collide = collide
			if err := s.skip(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`duplicate member name "k%d"`, n/2)) {
				t.Fatalf("%d names and a repeat (collide %v): %v", n, collide, err)
			}
		}
	}
	// Names of sibling objects are no duplicates; names of the enclosing object are
	// not either; an escape spells the same name.
	for in, ok := range map[string]bool{`[{"a":1},{"a":2}]`: true, `{"a":{"a":{"a":1}},"b":{"a":2}}`: true, `{"a":1,"\u0061":2}`: false, `{"é":1,"\u00e9":2}`: false} {
		if err := newBytesScanner([]byte(in)).skip(); (err == nil) != ok {
			t.Errorf("%s: %v", in, err)
		}
	}
}

// After a large value held whole, the window goes back to its size.
func TestScannerWindowShrinksAfterALargeValue(t *testing.T) {
	in := `["` + strings.Repeat("x", 1<<20) + `",` + strings.Repeat(`"y",`, 1<<20) + `1]`
	s := newStreamScanner(iotest.HalfReader(strings.NewReader(in)), 4096)
	if err := s.want('[', ""); err != nil {
		t.Fatal(err)
	}
	if raw, err := s.rawValue(); err != nil || len(raw) != 1<<20+2 {
		t.Fatalf("%d bytes, %v", len(raw), err)
	}
	grown := cap(s.buf)
	for s.peek() == ',' {
		s.pos++
		if err := s.skip(); err != nil {
			t.Fatal(err)
		}
	}
	if grown < 1<<20 || cap(s.buf) > 4096 {
		t.Fatalf("the window grew to %d bytes and is %d after", grown, cap(s.buf))
	}
}

// A string that streams past (skipStr) is validated as one held whole, wherever the
// refills cut it: in a rune, in an escape, in a surrogate pair.
func TestSkippedStringsAreValidatedAcrossRefills(t *testing.T) {
	for in, ok := range map[string]bool{
		`"` + strings.Repeat("é€😀", 50) + `"`: true, `"` + strings.Repeat(`\ud83d\ude00\n\u00e9`, 20) + `"`: true,
		`"` + strings.Repeat("é", 40) + "\xc3" + `"`: false, `"` + strings.Repeat("a", 40) + `\ud83d\u0041"`: false,
		`"` + strings.Repeat("a", 40) + `\ude00"`: false, `"` + strings.Repeat("a", 40) + "\xf0\x9f\x98" + `"`: false,
	} {
		for _, window := range []int{16, 17, 19, 64} {
			s := newStreamScanner(iotest.OneByteReader(strings.NewReader(in)), window)
			s.ws()
			if err := s.skipStr(); (err == nil) != ok || err == nil && s.ws() {
				t.Errorf("%q through a window of %d: %v, want valid %v", in, window, err, ok)
			}
			if ok && cap(s.buf) > 2*window {
				t.Errorf("%q: the window grew to %d bytes", in, cap(s.buf))
			}
		}
	}
}

// A node handed on as the members the conversion reads (nodeReads) reads as the whole
// node does, for every node of every real manifest.
func TestNodesReadAsTheirWholeNode(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(devstack.RepoRoot(t), "..", "shared", "fixtures", "dbt", "*.json"))
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := DecodeManifest(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		models := map[string]*Model{}
		for _, m := range p.Models {
			models[m.UniqueID] = m
		}
		n := 0
		eachNode(t, raw, func(id string, node []byte) {
			np := &nodeParser{}
			np.reset(node)
			m, _, _, err := np.parseNode()
			if err != nil {
				t.Fatalf("%s %s: %v", filepath.Base(path), id, err)
			}
			if m == nil {
				return
			}
			m.UniqueID = id
			n++
			if !reflect.DeepEqual(m, models[id]) {
				t.Errorf("%s %s reads as\n%+v\nwhole, and as\n%+v\nthrough the splitter", filepath.Base(path), id, m, models[id])
			}
		})
		if n != len(p.Models) || n == 0 {
			t.Errorf("%s: %d models whole, %d through the splitter", filepath.Base(path), n, len(p.Models))
		}
	}
}

// eachNode calls fn with each node of the manifest raw, whole.
func eachNode(t *testing.T, raw []byte, fn func(id string, node []byte)) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	next := func() jsontext.Token {
		tok, err := dec.ReadToken()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	next() // {
	for dec.PeekKind() == '"' {
		if next().String() != "nodes" {
			if err := dec.SkipValue(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		next() // {
		for dec.PeekKind() == '"' {
			id := next().String()
			v, err := dec.ReadValue()
			if err != nil {
				t.Fatal(err)
			}
			if v.Kind() == '{' {
				fn(id, bytes.Clone(v))
			}
		}
		return
	}
	t.Fatal("no nodes")
}

// Names, the check the API's upload reader uses, refuses what the scanner refuses: a
// name its object has, and names past its limit.
func TestNamesRefuseADuplicateAndNamesPastTheLimit(t *testing.T) {
	n := NewNames(3)
	n.Open()
	if err := n.Add([]byte("a")); err != nil {
		t.Fatal(err)
	}
	n.Open()
	if err := n.Add([]byte("a")); err != nil { // an inner object's own name
		t.Fatal(err)
	}
	n.Close()
	if err := n.Add([]byte("a")); !errors.Is(err, ErrDuplicateName) || !errors.Is(err, ErrNotJSON) {
		t.Fatalf("a repeated name: %v", err)
	}
	for _, name := range []string{"b", "c"} {
		if err := n.Add([]byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	var limit *ManifestLimitError
	if err := n.Add([]byte("d")); !errors.As(err, &limit) || limit.Value != 3 {
		t.Fatalf("a fourth name: %v", err)
	}
}
