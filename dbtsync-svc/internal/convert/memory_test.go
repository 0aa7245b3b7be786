package convert_test

import (
	"io"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// bigNodeReader streams a manifest of one model whose member holds a string of size
// bytes (and whose description, or alias, is "after"), generated as it is read: the test holds none of it, so the heap the decode
// reaches is the decoder's own.
func bigNodeReader(member string, size int) io.Reader {
	head := `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{"model.p.m":{"resource_type":"model","name":"m",` +
		`"columns":{"id":{"name":"id","data_type":"int"}},"` + member + `":"`
	after := "description"
	if member == after {
		after = "alias"
	}
	tail := `","` + after + `":"after"}}}`
	chunk := []byte(strings.Repeat("select 1 from t -- é\\n ", 1<<10))
	body := &repeatReader{chunk: chunk, left: size / len(chunk) * len(chunk)}
	return io.MultiReader(strings.NewReader(head), body, strings.NewReader(tail))
}

// repeatReader reads left bytes of chunk repeated (whole chunks: no rune or escape is
// cut).
type repeatReader struct {
	chunk []byte
	at    int
	left  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.left > 0 {
		k := copy(p[n:min(len(p), n+r.left)], r.chunk[r.at:])
		r.at = (r.at + k) % len(r.chunk)
		n += k
		r.left -= k
	}
	return n, nil
}

// peakHeap runs f and returns the largest heap (live objects and dead ones not yet
// swept) seen while it ran, above the heap before it, sampling every 100µs.
func peakHeap(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	peak = max(peak, read())
	if peak < base {
		return 0
	}
	return peak - base
}

// The scan of a manifest of one node whose raw_code (or compiled_code) is 64 MiB holds
// a small part of it at a time: the SQL the conversion never reads is skipped as it
// streams, not captured with its node.
func TestDecodeManifestSkipsANodesSQLWithoutHoldingIt(t *testing.T) {
	const size = 64 << 20
	for _, member := range []string{"raw_code", "compiled_code"} {
		var p *convert.Project
		var err error
		peak := peakHeap(func() { p, err = convert.DecodeManifest(bigNodeReader(member, size)) })
		if err != nil {
			t.Fatalf("%s: %v", member, err)
		}
		if len(p.Models) != 1 || p.Models[0].Description != "after" || len(p.Models[0].Columns) != 1 {
			t.Fatalf("%s: the model read is %+v", member, p.Models)
		}
		t.Logf("%s of %d MiB: peak heap %.1f MiB (%.2fx the node)", member, size>>20, float64(peak)/(1<<20), float64(peak)/size)
		if peak > size/4 {
			t.Errorf("%s of %d MiB: the decode's heap peaked at %.1f MiB, over a quarter of the node", member, size>>20, float64(peak)/(1<<20))
		}
	}
}

// BenchmarkDecodeManifestBigNode reports the peak heap of the decode of one node with a
// 64 MiB raw_code, as a multiple of the node (peak/node).
func BenchmarkDecodeManifestBigNode(b *testing.B) {
	const size = 64 << 20
	b.SetBytes(size)
	var worst uint64
	for b.Loop() {
		var err error
		worst = max(worst, peakHeap(func() { _, err = convert.DecodeManifest(bigNodeReader("raw_code", size)) }))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(worst)/size, "peak/node")
	b.ReportMetric(float64(worst)/(1<<20), "peak-MiB")
}

// A member the conversion reads whole (a description of 16 MiB) is held while it is read,
// and copied once into the model: the decode's heap peaks at a small multiple of it.
func TestDecodeManifestHoldsAReadMemberAFewTimesAtMost(t *testing.T) {
	const size = 16 << 20
	var p *convert.Project
	var err error
	peak := peakHeap(func() { p, err = convert.DecodeManifest(bigNodeReader("description", size)) })
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Models) != 1 || len(p.Models[0].Description) < size*9/10 || p.Models[0].Alias != "after" {
		t.Fatalf("the model read is %d models", len(p.Models))
	}
	t.Logf("description of %d MiB: peak heap %.1f MiB (%.2fx the member)", size>>20, float64(peak)/(1<<20), float64(peak)/size)
	if peak > 4*size {
		t.Errorf("description of %d MiB: the decode's heap peaked at %.1f MiB, over 4x the member", size>>20, float64(peak)/(1<<20))
	}
}
