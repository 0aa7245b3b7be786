package convert_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/devstack"
)

// benchManifest is the manifest the conversion benchmarks read: $CONVERT_BENCH_MANIFEST
// (cmd/gen-manifest writes one: go run ./cmd/gen-manifest -size 10MiB -out m.json), else
// the largest real fixture. Speed is make bench's; these split a conversion's time and
// allocations by phase.
func benchManifest(b *testing.B) []byte {
	b.Helper()
	path := os.Getenv("CONVERT_BENCH_MANIFEST")
	if path == "" {
		path = filepath.Join(devstack.RepoRoot(b), "..", "shared", "fixtures", "dbt", "manifest-v12-dbt-1.8.json")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Skip(err)
	}
	return raw
}

func BenchmarkDecodeManifest(b *testing.B) {
	raw := benchManifest(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := convert.DecodeManifest(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPrepare(b *testing.B) {
	raw := benchManifest(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		p := decodeUntimed(b, raw)
		convert.PrepareOwned(p)
	}
}

func BenchmarkRender(b *testing.B) {
	raw := benchManifest(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		p := decodeUntimed(b, raw)
		b.StopTimer()
		c := convert.PrepareOwned(p)
		b.StartTimer()
		var buf []byte
		for i := range c.Len() {
			_, buf = c.AppendFile(i, buf[:0])
		}
	}
}

// decodeUntimed decodes the manifest with the timer stopped.
func decodeUntimed(b *testing.B, raw []byte) *convert.Project {
	b.StopTimer()
	defer b.StartTimer()
	p, err := convert.DecodeManifest(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	return p
}
