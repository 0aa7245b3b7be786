package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/analyticsco/platform/devstack"
)

// converter is dbtsync-svc's dbtconvert, built into the temp dir, and the
// manifest generated for it by gen-manifest.
type converter struct {
	bin      string
	manifest string
	size     int64
}

// Converter builds dbtconvert and gen-manifest from the repository and generates
// the manifest once (-manifest-size, 100MiB by default).
func (e *Env) Converter(ctx context.Context) (converter, error) {
	return memo(e, "converter", func() (converter, error) {
		wd, err := os.Getwd()
		if err != nil {
			return converter{}, err
		}
		root, err := devstack.FindRepoRoot(wd)
		if err != nil {
			return converter{}, fmt.Errorf("the conversion row builds dbtconvert from the repository: %w", err)
		}
		tools := filepath.Join(e.Dir, "tools")
		build := exec.CommandContext(ctx, "go", "build", "-o", tools+"/", "./dbtsync-svc/cmd/dbtconvert", "./dbtsync-svc/cmd/gen-manifest")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return converter{}, fmt.Errorf("go build dbtconvert gen-manifest: %v\n%s", err, out)
		}
		cv := converter{bin: filepath.Join(tools, "dbtconvert"), manifest: filepath.Join(e.Dir, "manifest.json")}
		logf("generating a %s manifest", benchOpts.manifestSize)
		gen := exec.CommandContext(ctx, filepath.Join(tools, "gen-manifest"), "-size", benchOpts.manifestSize, "-out", cv.manifest)
		if out, err := gen.CombinedOutput(); err != nil {
			return converter{}, fmt.Errorf("gen-manifest: %v\n%s", err, out)
		}
		st, err := os.Stat(cv.manifest)
		if err != nil {
			return converter{}, err
		}
		cv.size = st.Size()
		return cv, nil
	})
}

// conversionRuns keeps each measured conversion for the note under the table.
var conversionRuns struct {
	sync.Mutex
	size    int64
	mibps   []float64
	peakRSS []int64 // bytes
}

func setupConversion(ctx context.Context, env *Env) (*Target, error) {
	cv, err := env.Converter(ctx)
	if err != nil {
		return nil, err
	}
	conversionRuns.Lock()
	conversionRuns.size = cv.size
	conversionRuns.Unlock()
	// The generated files go to tmpfs when there is one: the service stores a branch
	// version in MongoDB, not files, and creating thousands of fresh files on this
	// machine's disk (ext4 with discard) costs more than converting them, so on disk the
	// figure would measure the file system instead of the converter.
	outRoot := env.Dir
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "bench-converted-"); err == nil {
			outRoot = d
			env.addCloser(func() error { return os.RemoveAll(d) })
		}
	}
	out := filepath.Join(outRoot, "converted")
	return &Target{Measure: func(ctx context.Context) (roundResult, error) {
		if err := os.RemoveAll(out); err != nil {
			return roundResult{}, err
		}
		cmd := exec.CommandContext(ctx, cv.bin, "-q", "-manifest", cv.manifest, "-out", out)
		cmd.Env = childEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if err != nil {
			return roundResult{}, fmt.Errorf("dbtconvert: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		// wait4's rusage of this very child: RUSAGE_CHILDREN would report the
		// largest of every child ever waited for (go build among them).
		ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			return roundResult{}, fmt.Errorf("dbtconvert: no rusage on %s", "this platform")
		}
		cpu := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
		conversionRuns.Lock()
		conversionRuns.mibps = append(conversionRuns.mibps, float64(cv.size)/(1<<20)/wall.Seconds())
		conversionRuns.peakRSS = append(conversionRuns.peakRSS, ru.Maxrss<<10) // KiB on Linux
		conversionRuns.Unlock()
		return roundResult{rps: 1 / wall.Seconds(), p50: wall, p99: wall, requests: 1, cpuPerReq: cpu}, nil
	}}, nil
}

// conversionLine reports the conversion against its bars: at least 400 MiB/s and
// peak RSS at most 0.5x the manifest. The first run is the warm-up.
func conversionLine() string {
	conversionRuns.Lock()
	defer conversionRuns.Unlock()
	runs := len(conversionRuns.mibps)
	mibps, rss := conversionRuns.mibps, conversionRuns.peakRSS
	if runs > 1 {
		mibps, rss = mibps[1:], rss[1:]
	}
	if len(mibps) == 0 {
		return "convert: no run"
	}
	rate := median(append([]float64(nil), mibps...))
	var peak int64
	for _, r := range rss {
		peak = max(peak, r)
	}
	ratio := float64(peak) / float64(conversionRuns.size)
	return fmt.Sprintf("convert: %.1f MiB manifest, %.0f MiB/s (median of %d) [need >= 400: %s], peak RSS %.1f MiB = %.2fx the manifest (max of the runs) [need <= 0.5x: %s]",
		float64(conversionRuns.size)/(1<<20), rate, len(mibps), passFail(rate >= 400), float64(peak)/(1<<20), ratio, passFail(ratio <= 0.5))
}
