// Command isolatebench converts a manifest as the dbt worker does, in its own process or
// through the worker's convert child (internal/isolate), and prints one JSON line of
// figures: wall time, MiB/s, and the peak RSS of this process, of its children and of
// both together (sampled from /proc every 10 ms). `make bench` runs it for its isolation
// table: the 100 MiB manifest either way, and two concurrent conversions of a manifest
// of the upload limit through children (the worker's peak for two such uploads).
//
// The parent streams the manifest from a file where the worker streams it from the
// object store; everything else (the child's limits, its pipes, the frames) is the
// worker's.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/isolate"
)

type stats struct {
	ManifestBytes     int64   `json:"manifestBytes"`
	Copies            int     `json:"copies"`
	Child             bool    `json:"child"`
	Files             int     `json:"files"`
	Seconds           float64 `json:"seconds"`
	MiBPerSecond      float64 `json:"mibPerSecond"` // manifest bytes of every copy over the wall time
	ParentPeakRSS     int64   `json:"parentPeakRssBytes"`
	ChildPeakRSS      int64   `json:"childPeakRssBytes"` // the largest child's own peak (getrusage)
	TogetherPeakRSS   int64   `json:"togetherPeakRssBytes"`
	ChildUserCPUSecs  float64 `json:"childCpuSeconds"`
	ParentUserCPUSecs float64 `json:"parentCpuSeconds"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == isolate.Subcommand {
		isolate.Main(isolate.ChildOptions{})
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "isolatebench:", err)
		os.Exit(1)
	}
}

func run() error {
	manifest := flag.String("manifest", "", "the manifest.json to convert (required)")
	child := flag.Bool("child", false, "convert through the worker's convert child instead of in this process")
	copies := flag.Int("copies", 1, "conversions of the manifest at once")
	flag.Parse()
	if *manifest == "" {
		return fmt.Errorf("-manifest is required")
	}
	st, err := os.Stat(*manifest)
	if err != nil {
		return err
	}
	self, err := isolate.SelfCommand()
	if err != nil {
		return err
	}
	runner := &isolate.Runner{Command: self, Env: isolate.ChildEnv(os.Environ())}
	var peak atomic.Int64
	stop := sampleRSS(&peak)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, *copies)
	files := make([]int, *copies)
	for i := range *copies {
		wg.Go(func() {
			files[i], errs[i] = convertOnce(*manifest, *child, runner)
		})
	}
	wg.Wait()
	wall := time.Since(start)
	stop()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	var own, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &own)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	out := stats{ManifestBytes: st.Size(), Copies: *copies, Child: *child, Files: files[0], Seconds: wall.Seconds(),
		MiBPerSecond:  float64(st.Size()) * float64(*copies) / (1 << 20) / wall.Seconds(),
		ParentPeakRSS: own.Maxrss << 10, ChildPeakRSS: kids.Maxrss << 10, TogetherPeakRSS: peak.Load(),
		ParentUserCPUSecs: cpuSeconds(own), ChildUserCPUSecs: cpuSeconds(kids)}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func cpuSeconds(ru syscall.Rusage) float64 {
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// convertOnce converts the manifest as the worker does and returns the files made.
func convertOnce(path string, child bool, runner *isolate.Runner) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if child {
		res, err := runner.Run(context.Background(), isolate.Input{Source: dbtsync.SourceManifest, Manifest: f, ProgressEvery: 100})
		return len(res.Files), err
	}
	proj, err := dbtsync.DecodeManifest(bufio.NewReaderSize(f, 256<<10))
	if err != nil {
		return 0, err
	}
	conv := convert.Prepare(proj)
	res := make([]convert.File, conv.Len())
	for i := range res {
		res[i] = conv.File(i)
	}
	return len(res), nil
}

// sampleRSS keeps in peak the largest sum of this process's resident set and its
// children's, sampled every 10 ms until stop.
func sampleRSS(peak *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	me := os.Getpid()
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			sum := rss(me)
			for _, c := range childPids(me) {
				sum += rss(c)
			}
			if sum > peak.Load() {
				peak.Store(sum)
			}
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// rss is a process's resident set now (VmRSS), in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// childPids are the processes whose parent is pid (each thread's children file).
func childPids(pid int) []int {
	var out []int
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(field); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
