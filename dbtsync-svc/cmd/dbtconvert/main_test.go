package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// dbtconvert writes exactly the files of the golden conversions, byte for byte, for
// every real manifest and the semantic-layer ones: the golden files of
// internal/convert/testdata/golden are what the conversion gives, and this is what the
// tool writes of it (file by file, in parallel, with or without files created ahead),
// into a temporary directory and, where there is one, onto tmpfs.
func TestDbtconvertWritesTheGoldenFiles(t *testing.T) {
	manifests, _ := filepath.Glob(filepath.Join(devstack.RepoRoot(t), "..", "shared", "fixtures", "dbt", "*.json"))
	if len(manifests) == 0 {
		t.Fatal("no fixture manifests in ../shared/fixtures/dbt")
	}
	own, _ := filepath.Glob(filepath.Join("..", "..", "internal", "convert", "testdata", "semantic", "*.json"))
	outs := []string{""}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		outs = append(outs, "/dev/shm")
	}
	for _, manifest := range append(manifests, own...) {
		name := strings.TrimSuffix(filepath.Base(manifest), ".json")
		want, err := os.ReadFile(filepath.Join("..", "..", "internal", "convert", "testdata", "golden", name+".golden"))
		if err != nil {
			t.Fatalf("%s has no golden file (go test ./internal/convert -update): %v", name, err)
		}
		for _, root := range outs {
			t.Run(name+"/"+map[string]string{"": "disk", "/dev/shm": "tmpfs"}[root], func(t *testing.T) {
				out, err := os.MkdirTemp(root, "dbtconvert-golden-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(out) })
				r, err := convertManifest(manifest, out)
				if err != nil {
					t.Fatal(err)
				}
				if got := writtenGolden(t, out, r); !bytes.Equal(got, want) {
					t.Errorf("the files dbtconvert wrote differ from %s.golden", name)
				}
			})
		}
	}
}

// writtenGolden renders what was written under out as the golden files do: every file
// in path order, then the warnings.
func writtenGolden(t *testing.T, out string, r converted) []byte {
	t.Helper()
	var b bytes.Buffer
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := os.ReadFile(path)
		rel, _ := filepath.Rel(out, path)
		b.WriteString("=== " + filepath.ToSlash(rel) + "\n")
		b.Write(content)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("=== warnings\n")
	for _, w := range r.conv.Warnings {
		b.WriteString(w.Model + ": " + w.Message + "\n")
	}
	return b.Bytes()
}
