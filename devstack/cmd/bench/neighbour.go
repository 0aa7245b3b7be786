package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/neighbour"
)

// The noisy-neighbour run (devstack/neighbour): on a platform of its own,
// configured with neighbour.StackEnv, globex's fixed workload runs -neighbour-laps laps
// and -neighbour-syncs dbt syncs on the quiet platform, then the same while acme floods
// every share tenants have in common (from the moment the flood has met each of its
// limits). It prints globex's p50/p99 per operation, quiet and under the flood, and their
// ratios against the target: at most 2x, and for a sync 2x plus the longest job of the
// flooder's (a neighbour's job may wait for one that a worker is running).

// neighbourManifest is the neighbour's dbt project: jaffle_shop, dbt 1.10, from the shared
// fixtures (as the attack suite's run).
const neighbourManifest = "manifest-v12-dbt-1.10.json"

// neighbourTarget is the largest ratio, flooded over quiet, that the run accepts.
const neighbourTarget = 2.0

// neighbourPhase is one phase's samples, by operation.
type neighbourPhase map[string][]neighbour.Sample

// neighbourMeasure is a phase's cost to the platform: its processes' CPU and the wire
// proxy's figures over the phase.
type neighbourMeasure struct {
	wall  time.Duration
	cpu   time.Duration // user+system of every platform process
	proxy []wireRow
}

// runNeighbour runs the noisy-neighbour run and prints its table; false when a request of
// the neighbour's was not answered as the workload expects. The two clients run in
// processes of their own, each in a CPU cgroup with a quota of -neighbour-client-cores;
// the local engine's proxy runs in collections mode (reads beside writes, writes to one
// collection in turn).
func runNeighbour(ctx context.Context, env *Env, o options) (bool, error) {
	logf("neighbour: setting up")
	load0 := loadAvg()
	period := 100 * time.Millisecond
	quota := time.Duration(o.neighbourClientCores * float64(period))
	groups := map[string]*cpuGroup{}
	for _, name := range []string{"flood", "neighbour"} {
		g, err := newCPUGroup(fmt.Sprintf("bench-neighbour-%s-%d", name, os.Getpid()), quota, period)
		if err != nil {
			return false, fmt.Errorf("neighbour: the %s client's CPU cgroup: %w", name, err)
		}
		defer g.remove()
		groups[name] = g
	}
	p, err := env.platformWith(ctx, "neighbour", append(slices.Clone(neighbour.StackEnv), "DEVSTACK_MONGO_SERIALIZE=collections")...)
	if err != nil {
		return false, err
	}
	root, err := devstack.FindRepoRoot(env.BinDir)
	if err != nil {
		return false, err
	}
	manifest, err := os.ReadFile(filepath.Join(root, "..", "shared", "fixtures", "dbt", neighbourManifest))
	if err != nil {
		return false, fmt.Errorf("neighbour: the shared dbt fixtures: %w", err)
	}
	dir := filepath.Join(env.Dir, "neighbour-repos")
	run, err := neighbour.Prepare(ctx, neighbour.Options{Gateway: p.Gateway, Seed: p.Seed, Manifest: manifest, Dir: dir})
	if err != nil {
		return false, err
	}
	job := func(phase string) clientJob {
		return clientJob{State: run.State(), Laps: o.neighbourLaps, Syncs: o.neighbourSyncs, Phase: phase,
			CapsWithin: 2 * time.Minute, SyncTimeout: 3 * time.Minute, BranchPrefix: "neighbour/" + phase}
	}
	measure := func(f func() error) (neighbourMeasure, error) {
		before, _ := readProxyStats(ctx, p.Mongo)
		cpu0, start := cpuMicros(p.All.PIDs()), time.Now()
		err := f()
		m := neighbourMeasure{wall: time.Since(start), cpu: time.Duration(cpuMicros(p.All.PIDs())-cpu0) * time.Microsecond}
		if after, perr := readProxyStats(ctx, p.Mongo); perr == nil {
			m.proxy = diffProxyStats(before, after)
		}
		return m, err
	}

	logf("neighbour: %d laps and %d syncs on the quiet platform", o.neighbourLaps, o.neighbourSyncs)
	var quiet, loud neighbourPhase
	var laps int
	quietM, err := measure(func() (err error) {
		quiet, laps, err = runWorkloadClient(groups["neighbour"], job("quiet"))
		return err
	})
	if err != nil {
		return false, err
	}
	logf("neighbour: the flood, until it meets its limits")
	flood, err := startFloodClient(groups["flood"], job("flood"))
	if err != nil {
		return false, err
	}
	logf("neighbour: %d laps and %d syncs under the flood", o.neighbourLaps, o.neighbourSyncs)
	loudJob := job("flood")
	loudJob.State.Laps = laps
	loudM, err := measure(func() (err error) {
		loud, _, err = runWorkloadClient(groups["neighbour"], loudJob)
		return err
	})
	stats := flood.Stop()
	if err != nil {
		return false, err
	}
	drain, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	jobs, err := run.Drain(drain)
	if err != nil {
		// The syncs' allowance is then none: stricter, and the reason is on stderr.
		logf("neighbour: the flooder's jobs (the syncs' allowance is 0): %v", err)
	}
	var longest time.Duration
	for _, j := range jobs {
		longest = max(longest, j.Ran)
	}
	ok := printNeighbour(stdout, quiet, loud, stats, longest, o, load0)
	printNeighbourCost(stdout, quietM, loudM, groups, o)
	return ok, nil
}

// printNeighbourCost prints what each phase cost the platform, the clients' throttling,
// and the wire proxy's waits by phase.
func printNeighbourCost(w io.Writer, quiet, loud neighbourMeasure, groups map[string]*cpuGroup, o options) {
	fmt.Fprintf(w, "# the platform's CPU (every process's user+system, /proc/<pid>/stat) and the MongoDB wire proxy (collections mode) by phase;\n")
	fmt.Fprintf(w, "# each client runs in a process of its own in a CPU cgroup of %.2f cores\n", o.neighbourClientCores)
	fmt.Fprintf(w, "%-8s %9s %10s %7s %10s %12s %12s\n", "phase", "wall", "CPU", "cores", "commands", "proxy wait", "proxy run")
	for _, ph := range []struct {
		name string
		m    neighbourMeasure
	}{{"quiet", quiet}, {"flood", loud}} {
		var n int64
		var wait, exec time.Duration
		for _, r := range ph.m.proxy {
			n, wait, exec = n+r.count, wait+r.waitSum, exec+r.execSum
		}
		fmt.Fprintf(w, "%-8s %9s %10s %7.2f %10d %12s %12s\n", ph.name, ph.m.wall.Round(time.Millisecond), ph.m.cpu.Round(time.Millisecond),
			ph.m.cpu.Seconds()/max(ph.m.wall.Seconds(), 1e-9), n, wait.Round(time.Millisecond), exec.Round(time.Millisecond))
	}
	for _, name := range []string{"flood", "neighbour"} {
		periods, d := groups[name].throttled()
		fmt.Fprintf(w, "the %s client's cgroup: throttled in %d periods, %s in all\n", name, periods, d.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "# the proxy's commands under the flood, every account together (the proxy sees collections, not accounts):\n")
	printProxyStats(w, loud.proxy, loud.wall)
}

// percentile is the q-th percentile (nearest rank) of the samples' times.
func percentile(samples []neighbour.Sample, q float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	d := make([]time.Duration, len(samples))
	for i, s := range samples {
		d[i] = s.Took
	}
	slices.Sort(d)
	return d[max(0, int(math.Ceil(q*float64(len(d))))-1)]
}

// failures counts the samples that are not the answer the workload expects.
func failures(samples []neighbour.Sample) (n int, first string) {
	for _, s := range samples {
		if s.Err != nil {
			if n == 0 {
				first = s.Err.Error()
			}
			n++
		}
	}
	return n, first
}

// printNeighbour prints the table and says whether every request of the neighbour's was
// answered as expected (the ratios are reported against the target, not judged: the
// embedded store serializes every tenant's commands).
func printNeighbour(w io.Writer, quiet, loud neighbourPhase, stats neighbour.Stats, longestJob time.Duration, o options, load0 string) bool {
	fmt.Fprintf(w, "# noisy neighbour: globex's fixed workload, quiet and while acme floods, one platform, one run\n")
	fmt.Fprintf(w, "# %d CPU cores (%s): %d laps and %d dbt syncs quiet, then the same under the flood; load average (1 min) at start %s, at end %s\n",
		runtime.NumCPU(), runtime.Version(), o.neighbourLaps, o.neighbourSyncs, load0, loadAvg())
	fmt.Fprintf(w, "%-24s %5s %10s %10s %10s %10s %7s %7s %7s %s\n", "operation", "n", "quiet p50", "quiet p99", "flood p50", "flood p99", "p50 x", "p99 x", "errors", "target")
	ok := true
	var allQuiet, allLoud []neighbour.Sample
	row := func(name string, q, l []neighbour.Sample, allow time.Duration) {
		qf, _ := failures(q)
		lf, first := failures(l)
		ok = ok && qf == 0 && lf == 0 && len(l) > 0
		q50, q99, l50, l99 := percentile(q, .5), percentile(q, .99), percentile(l, .5), percentile(l, .99)
		r50, r99 := ratio(l50, q50), ratio(l99, q99)
		target := fmt.Sprintf("<= %.0fx", neighbourTarget)
		met := r50 <= neighbourTarget && r99 <= neighbourTarget
		if allow > 0 {
			target = fmt.Sprintf("<= %.0fx + %s", neighbourTarget, fmtDur(allow))
			met = l50 <= time.Duration(neighbourTarget*float64(q50))+allow && l99 <= time.Duration(neighbourTarget*float64(q99))+allow
		}
		fmt.Fprintf(w, "%-24s %5d %10s %10s %10s %10s %7.2f %7.2f %7d %s %s\n", name, len(l),
			fmtDur(q50), fmtDur(q99), fmtDur(l50), fmtDur(l99), r50, r99, qf+lf, target, metOrNot(met))
		if first != "" {
			fmt.Fprintf(w, "  first error: %.300s\n", first)
		}
	}
	for _, op := range neighbour.Ops {
		allow := time.Duration(0)
		if op == neighbour.OpSync {
			allow = longestJob
		} else {
			allQuiet, allLoud = append(allQuiet, quiet[op]...), append(allLoud, loud[op]...)
		}
		row(op, quiet[op], loud[op], allow)
	}
	row("all requests (no sync)", allQuiet, allLoud, 0)
	fmt.Fprintf(w, "the flood's answers: %s\n", stats)
	fmt.Fprintf(w, "legend: n = samples per phase; p50/p99 = nearest rank over the phase's samples (with few samples p99 is the\n")
	fmt.Fprintf(w, "        slowest); a sync's time is its job's, createdAt to finishedAt; x = flood over quiet; target + = the\n")
	fmt.Fprintf(w, "        longest job of the flooder's, which a worker may be running when the neighbour's job arrives.\n")
	fmt.Fprintf(w, "        The target is reported, not judged (every tenant's commands share the local stack's one FerretDB);\n")
	fmt.Fprintf(w, "        errors (a 5xx, a 429 or a wrong answer to the neighbour) fail the run. [%s]\n", passFail(ok))
	return ok
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func metOrNot(met bool) string {
	if met {
		return "met"
	}
	return "NOT MET"
}
