// Command dbtconvert converts a dbt manifest.json into data-model files in a directory,
// streaming the manifest (used by `make bench` to measure throughput and peak memory).
//
// With -stats it prints one JSON line to stdout: manifest size, elapsed seconds, MiB/s,
// the process's peak RSS (VmHWM) and its ratio to the manifest's size.
package main

import (
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
	out := flag.String("out", "", "output directory; files go to <out>/model/cubes/<model>.yml and <out>/model/views/<saved query>.yml (required)")
	quiet := flag.Bool("q", false, "print only the summary line (no warnings)")
	statsFlag := flag.Bool("stats", false, "print one JSON line of figures (MiB/s, peak RSS) instead of the summary")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the conversion to this file")
	flag.Parse()
	if *in == "" || *out == "" {
		flag.Usage()
		return fmt.Errorf("-manifest and -out are required")
	}
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
	if st, err := os.Stat(*in); err == nil {
		setGCBudget(st.Size())
	}
	start := time.Now()
	r, err := convertManifest(*in, *out)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	models, conv, decoded, size := r.models, r.conv, r.decoded, r.size
	if !*quiet && !*statsFlag {
		for _, w := range conv.Warnings {
			fmt.Fprintf(os.Stderr, "warning: %s: %s\n", w.Model, w.Message)
		}
	}
	mib := float64(size) / (1 << 20)
	if *statsFlag {
		peak := peakRSS()
		return json.NewEncoder(os.Stdout).Encode(stats{Manifest: *in, ManifestBytes: size, Models: models, Files: conv.Len(), Warnings: len(conv.Warnings),
			Seconds: round3(elapsed.Seconds()), DecodeSeconds: round3(decoded.Seconds()), MiBPerSecond: round3(mib / elapsed.Seconds()),
			PeakRSSBytes: peak, PeakRSSRatio: round3(float64(peak) / float64(size))})
	}
	fmt.Printf("converted %s: %.1f MiB, %d models, %d files, %d warnings in %s (decode %s): %.0f MiB/s\n",
		*in, mib, models, conv.Len(), len(conv.Warnings), elapsed.Round(time.Millisecond), decoded.Round(time.Millisecond), mib/elapsed.Seconds())
	return nil
}

// converted is what a conversion did.
type converted struct {
	size    int64 // the manifest's bytes
	models  int
	conv    *convert.Conversion // its files written, its warnings kept
	decoded time.Duration
}

// convertManifest converts the manifest at in into files under out.
func convertManifest(in, out string) (converted, error) {
	start := time.Now()
	f, err := os.Open(in)
	if err != nil {
		return converted{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return converted{}, err
	}
	cubesDir := filepath.Join(out, "model", "cubes")
	newDirs := missingDirs(cubesDir)
	if err := os.MkdirAll(cubesDir, 0o755); err != nil {
		return converted{}, err
	}
	var pre *precreate
	var onModel func(*convert.Model)
	if !inMemory(cubesDir) {
		pre = startPrecreate(out)
		onModel = pre.model
	}
	proj, err := convert.DecodeManifestNotify(f, onModel)
	created := pre.finish()
	if err != nil {
		// A manifest that does not convert leaves the output as it found it.
		removeAll(created)
		removeAll(newDirs)
		return converted{}, err
	}
	r := converted{size: st.Size(), models: len(proj.Models), decoded: time.Since(start)}
	r.conv = convert.PrepareOwned(proj) // each model's columns go once its cube has them
	proj = nil                          // the conversion holds what it still needs; each cube goes once its file is written
	written, err := writeFiles(r.conv, out)
	// Only the files of the conversion stay: MayConvert follows Prepare's rules, so this
	// removes nothing unless a write failed or the rules ever part.
	for _, p := range created {
		if _, ok := written[p]; !ok {
			_ = os.Remove(p)
		}
	}
	return r, err
}

// precreate creates the (empty) files of the models while the manifest is still being
// decoded: on a disk file system, creating thousands of new files is the bulk of a
// conversion's time, and it needs only the model names, while the contents need the whole
// manifest (tests, semantic models and metrics name the models from anywhere in it). Once
// decoding ends it stops, and the writers create whatever it did not reach. Not on tmpfs
// (inMemory): there creating a file is no slower than opening one, and creating ahead
// only adds system calls.
type precreate struct {
	mu      sync.Mutex
	wake    *sync.Cond
	queue   []string // paths of models decoded and not yet created; the decoder never waits for the disk
	stopped bool
	done    chan struct{}
	created []string // files this run created, never files that were there before
}

func startPrecreate(out string) *precreate {
	pc := &precreate{done: make(chan struct{})}
	pc.wake = sync.NewCond(&pc.mu)
	go func() {
		defer close(pc.done)
		var batch []string
		for {
			pc.mu.Lock()
			for len(pc.queue) == 0 && !pc.stopped {
				pc.wake.Wait()
			}
			if pc.stopped {
				pc.mu.Unlock()
				return
			}
			batch, pc.queue = pc.queue, batch[:0]
			pc.mu.Unlock()
			for _, rel := range batch {
				path := filepath.Join(out, filepath.FromSlash(rel))
				if createEmpty(path) {
					pc.created = append(pc.created, path)
				}
			}
		}
	}()
	return pc
}

// model is the decoder's callback.
func (pc *precreate) model(m *convert.Model) {
	if !convert.MayConvert(m) {
		return
	}
	pc.mu.Lock()
	pc.queue = append(pc.queue, convert.PathFor(m))
	pc.mu.Unlock()
	pc.wake.Signal()
}

// finish stops creating (the batch under way completes) and returns the files created
// (none when there was no precreate).
func (pc *precreate) finish() []string {
	if pc == nil {
		return nil
	}
	pc.mu.Lock()
	pc.stopped = true
	pc.mu.Unlock()
	pc.wake.Signal()
	<-pc.done
	return pc.created
}

// missingDirs lists dir and its parents that do not exist yet, innermost first.
func missingDirs(dir string) []string {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			return missing
		}
		missing = append(missing, d)
	}
}

// removeAll removes paths (files, or directories once empty), in order.
func removeAll(paths []string) {
	for _, p := range paths {
		_ = os.Remove(p)
	}
}

// writeFiles renders and writes the files from one goroutine per CPU: writing thousands of
// small files is system-call bound, and rendering overlaps with another file's write. It
// returns the paths written, also when it fails.
func writeFiles(conv *convert.Conversion, out string) (map[string]struct{}, error) {
	for _, dir := range conv.Dirs() {
		if err := os.MkdirAll(filepath.Join(out, filepath.FromSlash(dir)), 0o755); err != nil {
			return nil, err
		}
	}
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	paths := make([]string, conv.Len())
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte // one buffer per writer: a file's content is garbage once written
			for {
				i := int(next.Add(1) - 1)
				if i >= conv.Len() {
					return
				}
				rel, content := conv.AppendFile(i, buf[:0])
				buf = content
				path := filepath.Join(out, filepath.FromSlash(rel))
				if err := writeFile(path, content); err != nil {
					errOnce.Do(func() { first = err })
					next.Store(int64(conv.Len()))
					return
				}
				paths[i] = path
			}
		}()
	}
	wg.Wait()
	written := make(map[string]struct{}, len(paths))
	for _, p := range paths {
		if p != "" {
			written[p] = struct{}{}
		}
	}
	return written, first
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

// setGCBudget bounds the heap by the manifest's size instead of by the live heap: the
// decoded models and their cubes are small and long-lived while the decoder's garbage is
// not, so a memory limit of 0.46x the manifest (at least 32 MiB) with a lax GC target
// collects only when the heap nears it. Peak RSS stays under half the manifest (the
// live heap peaks at about a quarter, when every cube is built), with a few collections
// (0.6x before: fewer collections, a higher peak). Should the live heap ever pass the
// limit, the runtime collects more often (capped at half the CPU), never fails.
func setGCBudget(manifestBytes int64) {
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(max(32<<20, manifestBytes*46/100))
}
