// Command dbtconvert converts a dbt manifest.json into data-model files in a directory,
// streaming the manifest (used by `make bench` to measure throughput and peak memory).
//
// With -stats it prints one JSON line to stdout: manifest size, elapsed seconds, MiB/s,
// the process's peak RSS (VmHWM) and its ratio to the manifest's size.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dbtconvert:", err)
		os.Exit(1)
	}
}

// stats is the -stats line.
type stats struct {
	Manifest      string  `json:"manifest"`
	ManifestBytes int64   `json:"manifestBytes"`
	Models        int     `json:"models"`
	Files         int     `json:"files"`
	Warnings      int     `json:"warnings"`
	Seconds       float64 `json:"seconds"`
	DecodeSeconds float64 `json:"decodeSeconds"`
	MiBPerSecond  float64 `json:"mibPerSecond"`
	PeakRSSBytes  int64   `json:"peakRssBytes"`
	PeakRSSRatio  float64 `json:"peakRssRatio"` // peak RSS / manifest size
}

func run() error {
	in := flag.String("manifest", "", "path of the manifest.json to convert (required)")
	out := flag.String("out", "", "output directory; files go to <out>/model/cubes/<model>.yml (required)")
	quiet := flag.Bool("q", false, "print only the summary line (no warnings)")
	statsFlag := flag.Bool("stats", false, "print one JSON line of figures (MiB/s, peak RSS) instead of the summary")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the conversion to this file")
	flag.Parse()
	if *in == "" || *out == "" {
		flag.Usage()
		return fmt.Errorf("-manifest and -out are required")
	}
	// The decoded models are small and long-lived while the decoder's garbage is not: a
	// tighter GC target keeps peak RSS well under the manifest's size at little CPU cost.
	debug.SetGCPercent(25)
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	proj, err := convert.DecodeManifest(bufio.NewReaderSize(f, 256<<10))
	if err != nil {
		return err
	}
	decoded := time.Since(start)
	models := len(proj.Models)
	conv := convert.Prepare(proj)
	proj = nil // the conversion holds what it still needs; each model goes once its file is written
	if err := os.MkdirAll(filepath.Join(*out, "model", "cubes"), 0o755); err != nil {
		return err
	}
	if err := writeFiles(conv, *out); err != nil {
		return err
	}
	elapsed := time.Since(start)
	if !*quiet && !*statsFlag {
		for _, w := range conv.Warnings {
			fmt.Fprintf(os.Stderr, "warning: %s: %s\n", w.Model, w.Message)
		}
	}
	mib := float64(st.Size()) / (1 << 20)
	if *statsFlag {
		peak := peakRSS()
		return json.NewEncoder(os.Stdout).Encode(stats{Manifest: *in, ManifestBytes: st.Size(), Models: models, Files: conv.Len(), Warnings: len(conv.Warnings),
			Seconds: round3(elapsed.Seconds()), DecodeSeconds: round3(decoded.Seconds()), MiBPerSecond: round3(mib / elapsed.Seconds()),
			PeakRSSBytes: peak, PeakRSSRatio: round3(float64(peak) / float64(st.Size()))})
	}
	fmt.Printf("converted %s: %.1f MiB, %d models, %d files, %d warnings in %s (decode %s): %.0f MiB/s\n",
		*in, mib, models, conv.Len(), len(conv.Warnings), elapsed.Round(time.Millisecond), decoded.Round(time.Millisecond), mib/elapsed.Seconds())
	return nil
}

// writeFiles renders and writes the files from one goroutine per CPU: creating thousands of
// small files is system-call bound, and rendering overlaps with another file's write.
func writeFiles(conv *convert.Conversion, out string) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= conv.Len() {
					return
				}
				file := conv.File(i)
				if err := os.WriteFile(filepath.Join(out, filepath.FromSlash(file.Path)), []byte(file.Content), 0o644); err != nil {
					errOnce.Do(func() { first = err })
					next.Store(int64(conv.Len()))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// peakRSS is the process's resident-set high-water mark (VmHWM), 0 where /proc is missing.
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(status) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kib, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
			if err == nil {
				return kib << 10
			}
		}
	}
	return 0
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
