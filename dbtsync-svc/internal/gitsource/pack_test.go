package gitsource

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Packs as servers send them: whole objects, and deltas against a base named by its
// offset in the pack (OFS, what git and go-git's server send) or by its hash (REF). Every
// object of the pack reads back from the store with its content and hash.
func TestPackDeltasResolveToTheirObjects(t *testing.T) {
	t.Parallel()
	for _, refDeltas := range []bool{false, true} {
		t.Run(fmt.Sprintf("ref-deltas-%v", refDeltas), func(t *testing.T) {
			t.Parallel()
			st := memory.NewStorage()
			want := map[plumbing.Hash][]byte{}
			var hashes []plumbing.Hash
			body := strings.Repeat("select a, b, c from a_rather_long_table_name -- padding\n", 100)
			for i := range 8 {
				content := fmt.Appendf(nil, "-- model %d\n%s-- end %d\n", i, body[:len(body)-i*40], i)
				o := st.NewEncodedObject()
				o.SetType(plumbing.BlobObject)
				w, _ := o.Writer()
				_, _ = w.Write(content)
				_ = w.Close()
				h, err := st.SetEncodedObject(o)
				if err != nil {
					t.Fatal(err)
				}
				want[h] = content
				hashes = append(hashes, h)
			}
			dir := t.TempDir()
			var pack bytes.Buffer
			if _, err := packfile.NewEncoder(&pack, st, refDeltas).Encode(hashes, 10); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "pack"), pack.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			store, err := explodePack(context.Background(), filepath.Join(dir, "pack"), dir, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			if st, err := os.Stat(filepath.Join(dir, "deltas")); err != nil || st.Size() == 0 {
				t.Fatal("the encoder sent no delta: the case tests nothing")
			}
			for h, content := range want {
				o, ok := store.objs[h]
				if !ok {
					t.Fatalf("object %s is not in the store", h)
				}
				got, _ := io.ReadAll(store.reader(o))
				if !bytes.Equal(got, content) || o.typ != plumbing.BlobObject {
					t.Errorf("object %s reads %d bytes of type %v", h, len(got), o.typ)
				}
			}
		})
	}
}

// A delta that copies past its base, or writes more than it declares, is refused.
func TestMalformedDeltasAreRefused(t *testing.T) {
	t.Parallel()
	base := io.NewSectionReader(strings.NewReader("0123456789"), 0, 10)
	cases := map[string][]byte{
		"copy-past-the-base":     {10, 5, 0x91, 8, 5}, // copy 5 from offset 8
		"insert-past-the-result": {10, 2, 3, 'a', 'b', 'c'},
		"wrong-base-size":        {9, 1, 1, 'a'},
		"trailing-bytes":         {10, 1, 1, 'a', 1},
		"truncated":              {10, 4, 0x91},
		"command-zero":           {10, 1, 0},
		"a-size-that-never-ends": bytes.Repeat([]byte{0xff}, 12),
	}
	for name, delta := range cases {
		var out bytes.Buffer
		if err := patchDelta(&out, base, bufioReader(delta)); err == nil {
			t.Errorf("%s: accepted, wrote %q", name, out.String())
		}
	}
	var out bytes.Buffer
	if err := patchDelta(&out, base, bufioReader([]byte{10, 6, 0x91, 2, 3, 3, 'x', 'y', 'z'})); err != nil || out.String() != "234xyz" {
		t.Errorf("a valid delta: %q %v", out.String(), err)
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
