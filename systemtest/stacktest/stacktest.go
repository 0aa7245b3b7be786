// Package stacktest runs the whole platform as real processes for system tests: the
// binaries built from this repository, MongoDB (FerretDB behind the serializing proxy),
// NATS and redis-server started here so a test can stop and restart them, each service
// as its own OS process (optionally several replicas), the gateway in front, and the
// seed. Tests talk to Stack.Gateway with the credentials in Stack.Seed, as clients do.
package stacktest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/platform"
)

// BinDir builds the stack's binaries (once per test process) and returns their directory.
func BinDir(t testing.TB) string {
	t.Helper()
	return platform.BinDir(t, platform.Stack...)
}

// Main wraps a package's TestMain so the built binaries are removed at the end.
func Main(m interface{ Run() int }) int {
	code := m.Run()
	platform.RemoveBinDir()
	return code
}

// Options configure Start.
type Options struct {
	Replicas int      // instances of each service (and of the dbtsync worker); default 1
	Env      []string // extra KEY=VALUE for every process (e.g. rate limits)
	Workers  int      // dbtsync worker processes; default 1
	// NATSNodes above 1 runs NATS as a JetStream cluster of that many nats-server
	// processes (Stack.NATSCluster) instead of one embedded server (Stack.NATS).
	NATSNodes int
	Gateways  int // gateway processes (all alike, each on its own address); default 1
	// RedisEnv are the REDIS_* settings of a Redis the test runs itself (a Sentinel group,
	// a Redis Cluster); with them no redis-server is started and Stack.Redis is nil.
	RedisEnv []string
}

// Stack is a running platform.
type Stack struct {
	Gateway     string
	Seed        Seed
	Mongo       *devstack.Mongo
	NATS        *devstack.NATS        // nil when NATSCluster runs
	NATSCluster *devstack.NATSCluster // with Options.NATSNodes > 1
	Redis       *devstack.Redis

	// Gateways are every gateway's URL (Options.Gateways); the first is Gateway.
	Gateways []string

	t       testing.TB
	bin     string
	dir     string
	layout  platform.Layout
	mu      sync.Mutex
	procs   []*Process // the table's order: services, workers, gateways
	logs    *devstack.LogBuffer
	console *devstack.Console // the processes' lines, prefixed, into logs
	stopped bool
}

// Process is one OS process of the stack: its Name ("workspace-svc-1"), public Addr,
// InternalAddr (/healthz, /readyz, /metrics) and Pid.
type Process = platform.Running

// Start runs the platform until the test ends.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	s := &Stack{t: t, bin: BinDir(t), dir: t.TempDir(), logs: &devstack.LogBuffer{}}
	s.console = devstack.NewConsole(s.logs)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	if s.Mongo, err = devstack.StartMongo(ctx, filepath.Join(s.dir, "mongo"), logger); err != nil {
		t.Fatalf("stacktest: FerretDB: %v", err)
	}
	var natsURL func(user string) string
	// Every process connects as its own NATS user, with only its subjects (the
	// platform's permission table, devstack.NATSUsers): the suites run under it.
	if o.NATSNodes > 1 {
		if s.NATSCluster, err = devstack.StartNATSCluster(ctx, filepath.Join(s.dir, "nats"), o.NATSNodes, logger, devstack.NATSUsersOnly()); err != nil {
			t.Fatalf("stacktest: NATS cluster: %v", err)
		}
		natsURL = s.NATSCluster.UserURL
	} else {
		if s.NATS, err = devstack.StartNATS(ctx, filepath.Join(s.dir, "nats"), "", logger, devstack.NATSUsersOnly()); err != nil {
			t.Fatalf("stacktest: NATS: %v", err)
		}
		natsURL = s.NATS.UserURL
	}
	redisEnv := o.RedisEnv
	if redisEnv == nil {
		if s.Redis, err = devstack.StartRedis(ctx, filepath.Join(s.dir, "redis"), "", logger); err != nil {
			t.Fatalf("stacktest: %v", err)
		}
		redisEnv = []string{"REDIS_URL=" + s.Redis.URL}
	}
	t.Cleanup(s.stop)

	keys, err := platform.EnsureKeys(filepath.Join(s.dir, "keys"))
	if err != nil {
		t.Fatalf("stacktest: %v", err)
	}
	s.layout = platform.Layout{
		MongoURI: s.Mongo.URI, Redis: redisEnv, NATSURL: natsURL, Keys: keys,
		Replicas: o.Replicas, Workers: o.Workers, Gateways: o.Gateways, Numbered: true,
		Addr:         func(string) string { return devstack.FreeAddr(t) },
		InternalAddr: func(string) string { return devstack.FreeAddr(t) },
		Env: []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
			"LOG_LEVEL=info", "SHUTDOWN_TIMEOUT=5s",
			// The suites' integrations name a git host that is never cloned.
			"DBT_SYNC_ALLOWED_HOSTS=git.example.com",
			// The suites send many wrong credentials from one address on purpose; the attack
			// suite turns the limit on where it tests it.
			"AUTH_FAILURE_LIMIT=0",
		},
		GatewayEnv: []string{"AUTH_REVOCATION_POLL=200ms", "AUTH_JWKS_REFRESH=2s"},
		Extra:      o.Env,
	}
	table, err := platform.Table(s.layout)
	if err != nil {
		t.Fatalf("stacktest: %v", err)
	}
	for _, p := range table {
		r, err := platform.Start(p, s.bin, s.console.Writer(p.Name))
		if err != nil {
			t.Fatalf("stacktest: %v", err)
		}
		s.mu.Lock()
		s.procs = append(s.procs, r)
		s.mu.Unlock()
		if p.Binary == platform.Gateway.Name {
			s.Gateways = append(s.Gateways, "http://"+p.Addr)
		}
	}
	s.Gateway = s.Gateways[0]
	if err := platform.WaitReady(ctx, platform.ReadyTimeout, s.Processes(), nil); err != nil {
		t.Fatalf("stacktest: %v", err)
	}
	s.Seed = s.runSeed(ctx)
	return s
}

// Processes lists the processes: the services, the dbt workers, then the gateways.
func (s *Stack) Processes() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.procs)
}

// Process returns a process by name ("gateway", "workspace-svc-1", "dbtsync-worker-1", ...).
func (s *Stack) Process(name string) *Process {
	s.t.Helper()
	for _, p := range s.Processes() {
		if p.Name == name {
			return p
		}
	}
	s.t.Fatalf("stacktest: no process %q", name)
	return nil
}

// Kill sends SIGKILL to a process and waits for it to exit.
func (s *Stack) Kill(name string) { s.Process(name).Kill() }

// Restart starts a stopped or killed process again (same address, environment and keys)
// and waits until it is ready.
func (s *Stack) Restart(ctx context.Context, name string) {
	s.t.Helper()
	if err := s.Process(name).Restart(); err != nil {
		s.t.Fatalf("stacktest: %v", err)
	}
	s.WaitReady(ctx, name)
}

// WaitReady polls the process's /readyz (on its internal listener) until 200.
func (s *Stack) WaitReady(ctx context.Context, name string) {
	s.t.Helper()
	if err := platform.WaitReady(ctx, platform.ReadyTimeout, []*Process{s.Process(name)}, nil); err != nil {
		s.t.Fatalf("stacktest: %v", err)
	}
}

// Logs returns everything the processes printed so far, each line prefixed by its process.
func (s *Stack) Logs() string { return s.logs.String() }

func (s *Stack) runSeed(ctx context.Context) Seed {
	s.t.Helper()
	stdout, stderr, err := s.Platformctl(ctx, nil, "seed", "--json")
	if err != nil {
		s.t.Fatalf("stacktest: platformctl seed: %v\n%s\n%s", err, stderr, s.Logs())
	}
	var seed Seed
	if err := json.Unmarshal(stdout, &seed); err != nil {
		s.t.Fatalf("stacktest: seed output: %v\n%s", err, stdout)
	}
	return seed
}

// Platformctl runs the platformctl binary with args against the stack (its MongoDB,
// NATS, gateway and bearer-token key; env adds or overrides variables) and returns what
// it printed.
func (s *Stack) Platformctl(ctx context.Context, env []string, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "platformctl"), args...)
	base := append(slices.Clone(s.layout.Env), s.layout.Extra...)
	cmd.Env = append(s.layout.PlatformctlEnv(base, s.Gateway, filepath.Join(s.dir, "no-stack.json")), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.Bytes(), errb.Bytes(), err
}

func (s *Stack) stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	platform.StopAll(s.Processes(), 15*time.Second)
	if s.t.Failed() {
		s.t.Logf("stack logs:\n%s", tail(s.Logs(), 200))
	}
	if s.Redis != nil {
		_ = s.Redis.Close()
	}
	if s.NATSCluster != nil {
		s.NATSCluster.Close()
	} else {
		s.NATS.Close()
	}
	_ = s.Mongo.Close()
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
