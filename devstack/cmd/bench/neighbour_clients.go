package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/analyticsco/platform/devstack/neighbour"
)

// The noisy-neighbour run's two clients each run as a child process of the bench binary
// (the environment variable neighbourClientVar names the role), each in a CPU cgroup of
// its own with a fixed quota: the flood cannot take the neighbour's client's CPU, so what
// the neighbour's latencies measure is the platform.

const neighbourClientVar = "BENCH_NEIGHBOUR_CLIENT"

// clientJob is what a client process reads on stdin.
type clientJob struct {
	State         neighbour.State
	Laps, Syncs   int
	Phase         string
	CapsWithin    time.Duration
	SyncTimeout   time.Duration
	BranchPrefix  string
	FloodPauseFor time.Duration
}

// clientResult is what a workload client writes on stdout.
type clientResult struct {
	Samples []neighbour.WireSample
	Laps    int
}

// runNeighbourClient is main for a client process; its exit code.
func runNeighbourClient(role string) int {
	dec := json.NewDecoder(os.Stdin)
	var job clientJob
	if err := dec.Decode(&job); err != nil {
		fmt.Fprintln(os.Stderr, "neighbour client:", err)
		return 2
	}
	ctx := context.Background()
	run := neighbour.Resume(job.State)
	out := json.NewEncoder(os.Stdout)
	switch role {
	case "workload":
		var res clientResult
		for range job.Laps {
			for _, s := range run.Lap(ctx) {
				res.Samples = append(res.Samples, s.Wire())
			}
		}
		for i := range job.Syncs {
			sctx, cancel := context.WithTimeout(ctx, job.SyncTimeout)
			s, _ := run.Sync(sctx, fmt.Sprintf("%s-%d", job.BranchPrefix, i))
			cancel()
			res.Samples = append(res.Samples, s.Wire())
		}
		res.Laps = run.State().Laps
		if err := out.Encode(res); err != nil {
			return 2
		}
		return 0
	case "flood":
		flood := run.StartFlood(ctx, job.FloodPauseFor)
		if err := flood.WaitAtCaps(ctx, job.CapsWithin); err != nil {
			fmt.Fprintf(os.Stdout, "error: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Fprintln(os.Stdout, "atcaps")
		}
		// Flood until the bench closes stdin.
		_, _ = io.Copy(io.Discard, io.MultiReader(dec.Buffered(), os.Stdin))
		if err := out.Encode(flood.Stop()); err != nil {
			return 2
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "neighbour client: unknown role %q\n", role)
	return 2
}

// cpuGroup is a CPU cgroup with a fixed quota (cgroup v1's cpu controller, else v2's
// cpu.max).
type cpuGroup struct {
	dir string
	v2  bool
}

// newCPUGroup creates the group name with quota CPU per period (for example 50ms per
// 100ms: half a core).
func newCPUGroup(name string, quota, period time.Duration) (*cpuGroup, error) {
	if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil {
		g := &cpuGroup{dir: filepath.Join("/sys/fs/cgroup/cpu", name)}
		if err := os.Mkdir(g.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if err := write(filepath.Join(g.dir, "cpu.cfs_period_us"), strconv.FormatInt(period.Microseconds(), 10)); err != nil {
			return nil, err
		}
		return g, write(filepath.Join(g.dir, "cpu.cfs_quota_us"), strconv.FormatInt(quota.Microseconds(), 10))
	}
	if raw, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(raw), "cpu") {
		_ = write("/sys/fs/cgroup/cgroup.subtree_control", "+cpu")
		g := &cpuGroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
		if err := os.Mkdir(g.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		return g, write(filepath.Join(g.dir, "cpu.max"), fmt.Sprintf("%d %d", quota.Microseconds(), period.Microseconds()))
	}
	return nil, errors.New("no writable CPU cgroup (neither /sys/fs/cgroup/cpu nor cgroup v2 with the cpu controller)")
}

func write(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// add moves pid, every thread of it, into the group.
func (g *cpuGroup) add(pid int) error {
	return write(filepath.Join(g.dir, "cgroup.procs"), strconv.Itoa(pid))
}

// throttled is how often and how long the group was held at its quota (cpu.stat).
func (g *cpuGroup) throttled() (periods int64, d time.Duration) {
	raw, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "nr_throttled":
			periods = n
		case "throttled_time": // v1: nanoseconds
			d = time.Duration(n)
		case "throttled_usec": // v2
			d = time.Duration(n) * time.Microsecond
		}
	}
	return periods, d
}

// remove deletes the group (its processes have ended).
func (g *cpuGroup) remove() { _ = os.Remove(g.dir) }

// clientProc is a running client process.
type clientProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startClient starts a client process of role in group g and sends it job.
func startClient(role string, g *cpuGroup, job clientJob) (*clientProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), neighbourClientVar+"="+role)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := g.add(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the %s client into %s: %w", role, g.dir, err)
	}
	if err := json.NewEncoder(stdin).Encode(job); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return &clientProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}, nil
}

// runWorkloadClient runs one phase of the neighbour's workload in a process in g.
func runWorkloadClient(g *cpuGroup, job clientJob) (neighbourPhase, int, error) {
	c, err := startClient("workload", g, job)
	if err != nil {
		return nil, 0, err
	}
	_ = c.stdin.Close()
	var res clientResult
	derr := json.NewDecoder(c.out).Decode(&res)
	werr := c.cmd.Wait()
	if derr != nil || werr != nil {
		return nil, 0, fmt.Errorf("the workload client: %v, %v", derr, werr)
	}
	out := neighbourPhase{}
	for _, w := range res.Samples {
		s := w.Unwire()
		out[s.Op] = append(out[s.Op], s)
	}
	return out, res.Laps, nil
}

// floodClient is the flood's process.
type floodClient struct{ c *clientProc }

// startFloodClient starts the flood in a process in g and waits until it has met its
// caps.
func startFloodClient(g *cpuGroup, job clientJob) (*floodClient, error) {
	c, err := startClient("flood", g, job)
	if err != nil {
		return nil, err
	}
	f := &floodClient{c}
	line, err := c.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "atcaps" {
		f.Stop()
		return nil, fmt.Errorf("the flood client: %q %v", strings.TrimSpace(line), err)
	}
	return f, nil
}

// Stop ends the flood and returns its answers.
func (f *floodClient) Stop() neighbour.Stats {
	_ = f.c.stdin.Close()
	var stats neighbour.Stats
	_ = json.NewDecoder(f.c.out).Decode(&stats)
	_ = f.c.cmd.Wait()
	return stats
}
