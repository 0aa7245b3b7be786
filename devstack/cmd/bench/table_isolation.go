package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/analyticsco/platform/devstack"
)

// The isolation table: the dbt worker reads and converts each job's input in a child
// process it can kill (dbtsync-svc internal/isolate). dbtsync-svc's isolatebench
// converts as the worker does, in its own process or through that child (the manifest
// streamed over the child's stdin, the files back as frames), so the rows give the
// conversion's speed and peak memory on either side of the process boundary, and the
// worker's peak (parent and children together) for two concurrent uploads of the upload
// limit.
func init() {
	registerTable(&Table{
		Name:  "isolation",
		Title: "the dbt worker's conversion in its own process and through its convert child (dbtsync-svc isolatebench)",
		Scenarios: []Scenario{
			{Key: "inproc", Name: "convert manifest in the worker's process", Setup: setupIsolation(false, 1, false)},
			{Key: "child", Name: "convert manifest through the convert child", Setup: setupIsolation(true, 1, false)},
			{Key: "two", Name: "two uploads of the upload limit at once, through children", Setup: setupIsolation(true, 2, true)},
		},
		Notes:  isolationNotes,
		Legend: []string{"one conversion per round; MiB/s are the manifest bytes of every copy over the wall time; peak RSS: the worker's process, its largest child, and both sampled together every 10 ms"},
	})
}

// isolationTool is isolatebench, built into the temp dir, and a manifest of the upload
// limit generated for the "two" row.
type isolationTool struct {
	bin       string
	limitPath string
}

func (e *Env) isolationTool(ctx context.Context, needLimit bool) (isolationTool, error) {
	tool, err := memo(e, "isolatebench", func() (isolationTool, error) {
		wd, err := os.Getwd()
		if err != nil {
			return isolationTool{}, err
		}
		root, err := devstack.FindRepoRoot(wd)
		if err != nil {
			return isolationTool{}, fmt.Errorf("the isolation rows build isolatebench from the repository: %w", err)
		}
		tools := filepath.Join(e.Dir, "tools")
		build := exec.CommandContext(ctx, "go", "build", "-o", tools+"/", "./dbtsync-svc/cmd/isolatebench")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return isolationTool{}, fmt.Errorf("go build isolatebench: %v\n%s", err, out)
		}
		return isolationTool{bin: filepath.Join(tools, "isolatebench")}, nil
	})
	if err != nil || !needLimit {
		return tool, err
	}
	limit, err := memo(e, "limit-manifest", func() (string, error) {
		cv, err := e.Converter(ctx) // builds gen-manifest
		if err != nil {
			return "", err
		}
		path := filepath.Join(e.Dir, "manifest-limit.json")
		logf("generating a manifest of the upload limit (%s)", uploadLimit)
		gen := exec.CommandContext(ctx, filepath.Join(filepath.Dir(cv.bin), "gen-manifest"), "-size", uploadLimit, "-out", path)
		if out, err := gen.CombinedOutput(); err != nil {
			return "", fmt.Errorf("gen-manifest: %v\n%s", err, out)
		}
		return path, nil
	})
	tool.limitPath = limit
	return tool, err
}

// uploadLimit is just under dbtsync-svc's sync body limit (dbtsync.DefaultMaxSyncBodyBytes,
// 256 MiB): gen-manifest's sizes are approximate.
const uploadLimit = "250MiB"

// isolationStats is isolatebench's line.
type isolationStats struct {
	ManifestBytes   int64   `json:"manifestBytes"`
	Copies          int     `json:"copies"`
	Seconds         float64 `json:"seconds"`
	MiBPerSecond    float64 `json:"mibPerSecond"`
	ParentPeakRSS   int64   `json:"parentPeakRssBytes"`
	ChildPeakRSS    int64   `json:"childPeakRssBytes"`
	TogetherPeakRSS int64   `json:"togetherPeakRssBytes"`
	ParentCPU       float64 `json:"parentCpuSeconds"`
	ChildCPU        float64 `json:"childCpuSeconds"`
}

var isolationRuns struct {
	sync.Mutex
	byKey map[string][]isolationStats
}

func setupIsolation(child bool, copies int, atLimit bool) func(ctx context.Context, env *Env) (*Target, error) {
	key := map[bool]string{false: "inproc", true: "child"}[child]
	if atLimit {
		key = "two"
	}
	return func(ctx context.Context, env *Env) (*Target, error) {
		tool, err := env.isolationTool(ctx, atLimit)
		if err != nil {
			return nil, err
		}
		manifest := tool.limitPath
		if !atLimit {
			cv, err := env.Converter(ctx)
			if err != nil {
				return nil, err
			}
			manifest = cv.manifest
		}
		args := []string{"-manifest", manifest, "-copies", fmt.Sprint(copies)}
		if child {
			args = append(args, "-child")
		}
		return &Target{Measure: func(ctx context.Context) (roundResult, error) {
			cmd := exec.CommandContext(ctx, tool.bin, args...)
			cmd.Env = childEnv()
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				return roundResult{}, fmt.Errorf("isolatebench: %v: %s", err, strings.TrimSpace(stderr.String()))
			}
			wall := time.Since(start)
			var st isolationStats
			if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
				return roundResult{}, fmt.Errorf("isolatebench's line %q: %w", stdout.String(), err)
			}
			isolationRuns.Lock()
			if isolationRuns.byKey == nil {
				isolationRuns.byKey = map[string][]isolationStats{}
			}
			isolationRuns.byKey[key] = append(isolationRuns.byKey[key], st)
			isolationRuns.Unlock()
			d := time.Duration(st.Seconds * float64(time.Second))
			return roundResult{rps: 1 / wall.Seconds(), p50: d, p99: d, requests: 1, cpuPerReq: (st.ParentCPU + st.ChildCPU) * 1e6}, nil
		}}, nil
	}
}

// isolationNotes: each row's median speed and its peaks (the first run is the warm-up),
// and the child's cost against the in-process conversion.
func isolationNotes(map[string]*Summary) []string {
	isolationRuns.Lock()
	defer isolationRuns.Unlock()
	var lines []string
	rate := map[string]float64{}
	for _, key := range []string{"inproc", "child", "two"} {
		runs := isolationRuns.byKey[key]
		if len(runs) > 1 {
			runs = runs[1:]
		}
		if len(runs) == 0 {
			continue
		}
		var mibps []float64
		var st isolationStats
		for _, r := range runs {
			mibps = append(mibps, r.MiBPerSecond)
			st.ParentPeakRSS, st.ChildPeakRSS, st.TogetherPeakRSS = max(st.ParentPeakRSS, r.ParentPeakRSS), max(st.ChildPeakRSS, r.ChildPeakRSS), max(st.TogetherPeakRSS, r.TogetherPeakRSS)
		}
		rate[key] = median(mibps)
		lines = append(lines, fmt.Sprintf("%s: %d x %.1f MiB, %.0f MiB/s (median of %d); peak RSS: worker %.1f MiB, largest child %.1f MiB, together %.1f MiB (max of the runs)",
			key, runs[0].Copies, float64(runs[0].ManifestBytes)/(1<<20), rate[key], len(runs), mib(st.ParentPeakRSS), mib(st.ChildPeakRSS), mib(st.TogetherPeakRSS)))
	}
	if rate["inproc"] > 0 && rate["child"] > 0 {
		lines = append(lines, fmt.Sprintf("the child converts at %.2fx the in-process rate", rate["child"]/rate["inproc"]))
	}
	return lines
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
