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
	"syscall"
	"time"

	"github.com/analyticsco/platform/devstack"
)

// transferItems is the size of the deployment the transfer table exports and imports.
const transferItems = 10_000

func init() {
	registerTable(&Table{
		Name: "transfer",
		Title: fmt.Sprintf("workspace export and import of a deployment of %d items (folders with grants and embed grants, reports, workbooks with drafts, a fifth published), in process over the in-memory store",
			transferItems),
		Baseline: "export",
		Scenarios: []Scenario{
			{Key: "export", Name: "export (items/s)", Setup: setupTransfer("export")},
			{Key: "import", Name: "import into an empty deployment (items/s)", Setup: setupTransfer("import")},
		},
		Notes: func(map[string]*Summary) []string { return transferLines() },
		Legend: []string{
			"legend: each row is workspace-svc's cmd/transferbench, run once per bench run as a child (it seeds the",
			"        deployment, untimed, then runs the phase): req/s = items/s by wall time, p50/p99 = the phase's wall",
			"        time, cpu_us/req = the child's CPU (seeding included) / items; the rounds repeat that one measurement.",
			"        peak heap = what the phase held above the seeded store (sampled every 10 ms); peak RSS = the child's.",
			"        ItemsByKey is served from an index, as MongoDB's key index does; an insert still scans for its key.",
		},
	})
}

// transferRun is one phase's figures as transferbench printed them, and its child's
// peak RSS.
type transferRun struct {
	Phase          string  `json:"phase"`
	Items          int     `json:"items"`
	Seconds        float64 `json:"seconds"`
	ItemsPerSecond float64 `json:"itemsPerSecond"`
	BundleBytes    int64   `json:"bundleBytes"`
	PeakHeapBytes  uint64  `json:"peakHeapBytes"`
	peakRSS        int64
	cpu            time.Duration
}

var transferRuns struct {
	sync.Mutex
	byPhase map[string]*transferRun
}

// transferBench builds workspace-svc's transferbench into the temp dir once.
func (e *Env) transferBench(ctx context.Context) (string, error) {
	return memo(e, "transferbench", func() (string, error) {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		root, err := devstack.FindRepoRoot(wd)
		if err != nil {
			return "", fmt.Errorf("the transfer table builds transferbench from the repository: %w", err)
		}
		tools := filepath.Join(e.Dir, "tools")
		build := exec.CommandContext(ctx, "go", "build", "-o", tools+"/", "./workspace-svc/cmd/transferbench")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build transferbench: %v\n%s", err, out)
		}
		return filepath.Join(tools, "transferbench"), nil
	})
}

func setupTransfer(phase string) func(ctx context.Context, env *Env) (*Target, error) {
	return func(ctx context.Context, env *Env) (*Target, error) {
		bin, err := env.transferBench(ctx)
		if err != nil {
			return nil, err
		}
		return &Target{Measure: func(ctx context.Context) (roundResult, error) {
			run, err := runTransfer(ctx, bin, phase)
			if err != nil {
				return roundResult{}, err
			}
			wall := time.Duration(run.Seconds * float64(time.Second))
			return roundResult{rps: run.ItemsPerSecond, p50: wall, p99: wall, requests: uint64(run.Items),
				cpuPerReq: float64(run.cpu.Microseconds()) / float64(run.Items)}, nil
		}}, nil
	}
}

// runTransfer runs one phase once per bench run; later rounds answer the same figures.
func runTransfer(ctx context.Context, bin, phase string) (*transferRun, error) {
	transferRuns.Lock()
	defer transferRuns.Unlock()
	if run := transferRuns.byPhase[phase]; run != nil {
		return run, nil
	}
	logf("transfer: seeding %d items and running the %s", transferItems, phase)
	cmd := exec.CommandContext(ctx, bin, "-items", fmt.Sprint(transferItems), "-phase", phase)
	cmd.Env = childEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("transferbench -phase %s: %v: %s", phase, err, strings.TrimSpace(stderr.String()))
	}
	var run transferRun
	if err := json.Unmarshal(stdout.Bytes(), &run); err != nil {
		return nil, fmt.Errorf("transferbench -phase %s answered %q: %w", phase, stdout.String(), err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		run.peakRSS = ru.Maxrss << 10 // KiB on Linux
		run.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if transferRuns.byPhase == nil {
		transferRuns.byPhase = map[string]*transferRun{}
	}
	transferRuns.byPhase[phase] = &run
	return &run, nil
}

// transferLines are the figures under the table.
func transferLines() []string {
	transferRuns.Lock()
	defer transferRuns.Unlock()
	var out []string
	for _, phase := range []string{"export", "import"} {
		run := transferRuns.byPhase[phase]
		if run == nil {
			out = append(out, phase+": no run")
			continue
		}
		out = append(out, fmt.Sprintf("%s: %d items in %.2f s = %.0f items/s; bundle %.1f MiB; peak heap %.1f MiB above the seeded store; child peak RSS %.1f MiB",
			phase, run.Items, run.Seconds, run.ItemsPerSecond, float64(run.BundleBytes)/(1<<20), float64(run.PeakHeapBytes)/(1<<20), float64(run.peakRSS)/(1<<20)))
	}
	return out
}
