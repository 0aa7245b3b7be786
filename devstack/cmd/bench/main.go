// Command bench measures the platform's request path and prints one table per
// registered scenario table from one run: requests/s, p50/p99 latency, errors and
// CPU microseconds per request of the process under test, the variants
// interleaved round by round so that drift on the machine hits all alike.
//
//	go run ./devstack/cmd/bench [-rounds 5] [-duration 3s] [-rate 0] [-workers 64] [-only gateway]
//
// It runs from the repository root after `make build` (it starts bin/gateway and
// bin/platformctl). See README.md for the method.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/analyticsco/platform/devstack"
)

type options struct {
	rounds   int
	duration time.Duration
	warmup   time.Duration
	rate     int
	workers  int
	only     string
	binDir   string
	// soak is the length of the mixed-traffic soak (0: none) at soakRate requests/s.
	soak     time.Duration
	soakRate int
	// soakSerialize, when set, runs the soak on a stack of its own with
	// DEVSTACK_MONGO_SERIALIZE set to it.
	soakSerialize string
	// manifestSize is gen-manifest's -size for the conversion row.
	manifestSize string
	// neighbourLaps and neighbourSyncs are the noisy-neighbour run's workload per phase
	// (0 laps: no run).
	neighbourLaps, neighbourSyncs int
	// neighbourClientCores is each client process's CPU quota in the noisy-neighbour run.
	neighbourClientCores float64

	loadBefore string // 1-minute load average when the run began
	// docsDir is where each table is also written as <table>.md (relative: under the
	// repository root); "" writes none.
	docsDir string
	args    []string // the flags as given, recorded in the docs files
}

func main() {
	if role := os.Getenv(neighbourClientVar); role != "" {
		os.Exit(runNeighbourClient(role))
	}
	backendMode := flag.Bool("backend", false, "internal: serve the bench backend on fd 3")
	proxyMode := flag.String("reverse-proxy", "", "internal: serve a bare httputil.ReverseProxy to this URL on fd 3")
	tunedProxyMode := flag.String("tuned-reverse-proxy", "", "internal: serve a tuned httputil.ReverseProxy (64 idle connections per host, a BufferPool) to this URL on fd 3")
	var o options
	flag.IntVar(&o.rounds, "rounds", 5, "measured rounds; each runs every variant once, in turn")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "length of one variant's run in a round")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "length of each variant's unmeasured warm-up run")
	flag.IntVar(&o.rate, "rate", 0, "requests/s per variant; 0 = as fast as -workers closed-loop workers go")
	flag.IntVar(&o.workers, "workers", 64, "load-generator workers, each with its own keep-alive connection")
	flag.StringVar(&o.only, "only", "", "run only this table (registered: "+tableNames()+"), the soak (soak) or the noisy-neighbour run (neighbour); default all but engines")
	flag.StringVar(&o.binDir, "bin", "", "directory with the built binaries (default <repo root>/bin)")
	flag.DurationVar(&o.soak, "soak", 30*time.Second, "length of the mixed-traffic soak on the real platform at -soak-rate (a warm-up and two measured segments, a third each); 0 = no soak")
	flag.IntVar(&o.soakRate, "soak-rate", 20, "requests/s of the soak (the local stack serves about 30 a second on 2 shared cores)")
	flag.StringVar(&o.soakSerialize, "soak-serialize", "", "run the soak on a stack of its own with DEVSTACK_MONGO_SERIALIZE set to this (all, writes, collections); default: the stack's default")
	flag.StringVar(&o.manifestSize, "manifest-size", "100MiB", "size of the generated manifest the conversion row converts")
	flag.IntVar(&o.neighbourLaps, "neighbour-laps", 30, "laps of the neighbour's workload in each phase of the noisy-neighbour run (quiet, flood); 0 = no run")
	flag.Float64Var(&o.neighbourClientCores, "neighbour-client-cores", 0.5, "CPU quota, in cores, of each of the noisy-neighbour run's two client processes (the flood's and the neighbour's), each in a CPU cgroup of its own")
	flag.IntVar(&o.neighbourSyncs, "neighbour-syncs", 5, "dbt syncs of the neighbour's in each phase of the noisy-neighbour run")
	flag.StringVar(&o.docsDir, "docs-dir", "docs/bench", "also write each table as <table>.md here (relative: under the repository root); \"\" writes none (-short writes none unless given)")
	short := flag.Bool("short", false, "CI-sized run: 1 round x 1 s, warm-up 500ms, soak 9 s, a 10 MiB manifest, 5 neighbour laps and 2 syncs (flags given explicitly win)")
	flag.Parse()
	if *short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, value := range map[string]string{"rounds": "1", "duration": "1s", "warmup": "500ms", "soak": "9s", "manifest-size": "10MiB",
			"neighbour-laps": "5", "neighbour-syncs": "2", "docs-dir": ""} {
			if !set[name] {
				_ = flag.Set(name, value)
			}
		}
	}
	o.args = os.Args[1:]
	benchOpts = o

	var err error
	switch {
	case *backendMode:
		err = serveBackend()
	case *proxyMode != "":
		err = serveBareProxy(*proxyMode)
	case *tunedProxyMode != "":
		err = serveTunedProxy(*tunedProxyMode)
	default:
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// benchOpts are the parsed flags, for scenarios that need them at set-up.
var benchOpts options

func tableNames() string {
	var names []string
	for _, t := range tables {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// logf reports progress on stderr; the table goes to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// selectTables picks the tables -only names (all when empty) and whether the soak and the
// noisy-neighbour run run.
func selectTables(o options) (selected []*Table, soak, neighbour bool) {
	for _, t := range tables {
		if o.only == t.Name || (o.only == "" && !t.OptIn) {
			selected = append(selected, t)
		}
	}
	return selected, o.soak > 0 && (o.only == "" || o.only == "soak"), o.neighbourLaps > 0 && (o.only == "" || o.only == "neighbour")
}

// repoRoot is the directory holding go.work, above the working directory.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return devstack.FindRepoRoot(wd)
}

// defaultBinDir is the repository's bin/, where make builds the binaries.
func defaultBinDir() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("run from the repository (or pass -bin): %w", err)
	}
	return filepath.Join(root, "bin"), nil
}

func run(o options) error {
	if o.rounds < 1 || o.duration <= 0 || o.workers < 1 || o.rate < 0 {
		return errors.New("need -rounds >= 1, -duration > 0, -workers >= 1 and -rate >= 0")
	}
	selected, runSoakToo, runNeighbourToo := selectTables(o)
	if len(selected) == 0 && !runSoakToo && !runNeighbourToo {
		return fmt.Errorf("-only %q: no such table (registered: %s, soak, neighbour)", o.only, tableNames())
	}
	if o.binDir == "" {
		dir, err := defaultBinDir()
		if err != nil {
			return err
		}
		o.binDir = dir
	}
	if o.docsDir != "" && !filepath.IsAbs(o.docsDir) {
		root, err := repoRoot()
		if err != nil {
			return fmt.Errorf("run from the repository (or pass an absolute -docs-dir, or -docs-dir \"\"): %w", err)
		}
		o.docsDir = docsDirFor(o.docsDir, root)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.loadBefore = loadAvg()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	env, err := NewEnv(o.binDir, log)
	if err != nil {
		return err
	}
	defer env.Close()

	failed, printed := false, false
	// runOne runs a table, the soak or the noisy-neighbour run, after a blank line but for
	// the first, and writes what it printed to the docs directory.
	runOne := func(doc *benchDoc, f func(ctx context.Context, env *Env, o options) (bool, error)) error {
		if printed {
			fmt.Println()
		}
		printed = true
		var buf bytes.Buffer
		stdout = io.MultiWriter(os.Stdout, &buf)
		doc.Date, doc.Machine, doc.Args, doc.LoadStart = time.Now(), machine(), o.args, loadAvg()
		ok, err := f(ctx, env, o)
		stdout = os.Stdout
		if ctx.Err() != nil {
			return errors.New("interrupted; children stopped and temp dir removed")
		}
		failed = failed || !ok
		if err == nil && buf.Len() > 0 {
			doc.LoadEnd, doc.Output = loadAvg(), buf.String()
			if path, werr := writeBenchDoc(o.docsDir, *doc); werr != nil {
				logf("writing %s.md: %v", doc.Name, werr)
			} else if path != "" {
				logf("wrote %s", path)
			}
		}
		return err
	}
	soakDoc := func() *benchDoc { return &benchDoc{Name: "soak", Title: "the soak"} }
	for _, t := range selected {
		// The soak runs on the platform as it is after start-up, before the operations
		// table fills it with thousands of folders and sessions: it measures stability at
		// a steady state, which the table's leftovers would turn into a different test.
		if t.Name == "operations" && runSoakToo {
			if err := runOne(soakDoc(), runSoak); err != nil {
				return err
			}
			runSoakToo = false
		}
		doc := &benchDoc{Name: t.Name, Title: t.Title, Baseline: t.Baseline}
		if err := runOne(doc, func(ctx context.Context, env *Env, o options) (bool, error) {
			ok, rows, err := runTable(ctx, env, t, o)
			doc.Rows = rows
			return ok, err
		}); err != nil {
			return err
		}
	}
	if runSoakToo {
		if err := runOne(soakDoc(), runSoak); err != nil {
			return err
		}
	}
	// Last, on a platform of its own: the flood fills its store and queues.
	if runNeighbourToo {
		if err := runOne(&benchDoc{Name: "neighbour", Title: "the noisy neighbour"}, runNeighbour); err != nil {
			return err
		}
	}
	if failed {
		return errors.New("some rows failed (see above)")
	}
	return nil
}

// Summary is one row of a table: medians over the rounds.
type Summary struct {
	Key, Name string
	Err       error // the row could not be set up or did not answer
	Proc      *Proc

	RPS       float64 // successful responses per second
	P50, P99  time.Duration
	Errors    uint64  // failed requests, summed over the rounds
	CPUPerReq float64 // microseconds of the measured process per request
	GenPerReq float64 // microseconds of the load generator (this process) per request
	ErrSample []string

	rounds []roundResult
}

type roundResult struct {
	rps, cpuPerReq, genPerReq float64
	p50, p99                  time.Duration
	requests, errors          uint64
	errs                      []string
}

type row struct {
	sc     Scenario
	target *Target
	client *http.Client
	sum    *Summary
}

func (r *row) workers(o options) int {
	if r.target != nil && r.target.Workers > 0 {
		return r.target.Workers
	}
	return o.workers
}

func runTable(ctx context.Context, env *Env, t *Table, o options) (ok bool, sums []*Summary, err error) {
	rows := make([]*row, 0, len(t.Scenarios))
	for _, sc := range t.Scenarios {
		r := &row{sc: sc, sum: &Summary{Key: sc.Key, Name: sc.Name}}
		rows = append(rows, r)
		logf("setting up %s", sc.Name)
		tgt, err := sc.Setup(ctx, env)
		if err == nil {
			err = probe(ctx, tgt)
		}
		if ctx.Err() != nil {
			return false, nil, ctx.Err()
		}
		if err != nil {
			r.sum.Err = err
			var skip ErrSkip
			if errors.As(err, &skip) {
				logf("%s skipped: %s", sc.Name, skip.Reason)
			} else {
				logf("%s failed: %v", sc.Name, err)
			}
			continue
		}
		r.target, r.sum.Proc = tgt, tgt.Proc
		r.client = loadClient(r.workers(o))
		defer r.client.CloseIdleConnections()
	}

	if o.warmup > 0 {
		logf("warm-up: %s per variant", o.warmup)
		for _, r := range rows {
			if r.target != nil {
				if _, err := measure(ctx, r, o, o.warmup); err != nil {
					return false, nil, err
				}
			}
		}
	}
	for round := 1; round <= o.rounds; round++ {
		logf("round %d/%d", round, o.rounds)
		for _, r := range rows {
			if r.target == nil {
				continue
			}
			rr, err := measure(ctx, r, o, o.duration)
			if err != nil {
				return false, nil, err
			}
			r.sum.rounds = append(r.sum.rounds, rr)
		}
	}

	results := map[string]*Summary{}
	for _, r := range rows {
		r.sum.finish()
		results[r.sum.Key] = r.sum
	}
	printTable(stdout, t, rows, results, o)
	ok = true
	for _, r := range rows {
		sums = append(sums, r.sum)
		var skip ErrSkip
		if r.sum.Err != nil && !errors.As(r.sum.Err, &skip) {
			ok = false
		}
	}
	return ok, sums, nil
}

// loadClient is the load generator's HTTP client for one row, kept across rounds
// so every round measures warm keep-alive connections: one per worker.
func loadClient(workers int) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil, // never an HTTP_PROXY from the environment
			DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: workers,
		},
	}
}

// probe sends one request and wants a success, so a broken route shows as a
// failed row with its answer instead of a table of errors.
func probe(ctx context.Context, tgt *Target) error {
	if tgt.Measure != nil {
		return nil
	}
	if tgt.Prepare != nil {
		if err := tgt.Prepare(ctx, 0); err != nil {
			return err
		}
	}
	var vt vegeta.Target
	if err := tgt.Targeter(&vt); err != nil {
		return err
	}
	req, err := vt.Request()
	if err != nil {
		return err
	}
	c := loadClient(1)
	defer c.CloseIdleConnections()
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Whole answers for Check (a bulk move's is tens of KiB); errors print 500 bytes.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("probe %s %s: %s %s", vt.Method, vt.URL, resp.Status, strings.TrimSpace(string(body[:min(len(body), 500)])))
	}
	if tgt.Check != nil {
		if err := tgt.Check(body); err != nil {
			return fmt.Errorf("probe %s %s: %w", vt.Method, vt.URL, err)
		}
	}
	return nil
}

// measure runs one variant for d and reads the CPU time of its process and of the
// bench itself before and after.
func measure(ctx context.Context, r *row, o options, d time.Duration) (roundResult, error) {
	if r.target.Measure != nil {
		return r.target.Measure(ctx)
	}
	if r.target.Prepare != nil {
		if err := r.target.Prepare(ctx, d); err != nil {
			return roundResult{}, err
		}
	}
	workers := r.workers(o)
	atk := vegeta.NewAttacker(
		vegeta.Client(r.client),
		vegeta.Connections(workers),
		vegeta.KeepAlive(true),
		vegeta.Workers(uint64(workers)),
		vegeta.MaxWorkers(uint64(workers)),
	)
	// Freq 0 is vegeta's "as fast as the workers go".
	rate := vegeta.Rate{Freq: o.rate, Per: time.Second}
	pids := r.target.Proc.PIDs()
	self := []int{os.Getpid()}

	cpu0, gen0 := cpuMicros(pids), cpuMicros(self)
	start := time.Now()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			atk.Stop()
		case <-stopped:
		}
	}()
	var m vegeta.Metrics
	for res := range atk.Attack(r.target.Targeter, rate, d, r.sc.Key) {
		// A pool of single-use targets that ran dry ends the run early; that is
		// not a failed request.
		if res.Error == vegeta.ErrNoTargets.Error() {
			continue
		}
		if r.target.Check != nil && res.Error == "" && res.Code >= 200 && res.Code < 300 {
			if err := r.target.Check(res.Body); err != nil {
				res.Code, res.Error = 0, err.Error()
			}
		}
		m.Add(res)
	}
	wall := time.Since(start)
	close(stopped)
	cpu1, gen1 := cpuMicros(pids), cpuMicros(self)
	m.Close()
	if err := ctx.Err(); err != nil {
		return roundResult{}, err
	}
	ok := uint64(m.Success*float64(m.Requests) + 0.5)
	rr := roundResult{
		rps:      float64(ok) / wall.Seconds(),
		p50:      m.Latencies.P50,
		p99:      m.Latencies.P99,
		requests: m.Requests,
		errors:   m.Requests - ok,
		errs:     m.Errors,
	}
	if m.Requests > 0 {
		rr.cpuPerReq = (cpu1 - cpu0) / float64(m.Requests)
		rr.genPerReq = (gen1 - gen0) / float64(m.Requests)
	}
	return rr, nil
}

func (s *Summary) finish() {
	if s.Err != nil || len(s.rounds) == 0 {
		return
	}
	pick := func(f func(roundResult) float64) float64 {
		v := make([]float64, len(s.rounds))
		for i, r := range s.rounds {
			v[i] = f(r)
		}
		return median(v)
	}
	s.RPS = pick(func(r roundResult) float64 { return r.rps })
	s.P50 = time.Duration(pick(func(r roundResult) float64 { return float64(r.p50) }))
	s.P99 = time.Duration(pick(func(r roundResult) float64 { return float64(r.p99) }))
	s.CPUPerReq = pick(func(r roundResult) float64 { return r.cpuPerReq })
	s.GenPerReq = pick(func(r roundResult) float64 { return r.genPerReq })
	for _, r := range s.rounds {
		s.Errors += r.errors
		for _, e := range r.errs {
			if !slices.Contains(s.ErrSample, e) && len(s.ErrSample) < 3 {
				s.ErrSample = append(s.ErrSample, e)
			}
		}
	}
}

func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
