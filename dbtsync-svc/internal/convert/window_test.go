package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"github.com/analyticsco/platform/devstack"
)

// A manifest decodes to the same project whatever the size of the scanner's window and
// of the reads: with a window of 64 bytes fed a few bytes at a time, every name and
// value crosses a refill (a node's id once came out of a moved window).
func TestDecodeManifestIsTheSameThroughASmallWindow(t *testing.T) {
	fixtures, _ := filepath.Glob(filepath.Join(devstack.RepoRoot(t), "..", "shared", "fixtures", "dbt", "*.json"))
	own, _ := filepath.Glob(filepath.Join("testdata", "semantic", "*.json"))
	saved := scanWindow
	t.Cleanup(func() { scanWindow = saved })
	for _, path := range append(fixtures, own...) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		scanWindow = saved
		big, err := DecodeManifest(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		scanWindow = 64
		small, err := DecodeManifest(iotest.HalfReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatal(err)
		}
		if a, b := render(Build(big)), render(Build(small)); a != b {
			t.Errorf("%s converts differently through a small window", filepath.Base(path))
		}
		for i, m := range small.Models {
			if m.UniqueID != big.Models[i].UniqueID {
				t.Fatalf("%s: model %d is %q through a small window, %q through a large one", filepath.Base(path), i, m.UniqueID, big.Models[i].UniqueID)
			}
		}
	}
}

func render(r Result) string {
	var b bytes.Buffer
	for _, f := range r.Files {
		b.WriteString(f.Path + "\n" + f.Content)
	}
	for _, w := range r.Warnings {
		b.WriteString(w.Model + ": " + w.Message + "\n")
	}
	return b.String()
}
