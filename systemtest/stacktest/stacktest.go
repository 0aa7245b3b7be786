// Package stacktest runs the whole platform as real processes for system tests: the
// binaries built from this repository, MongoDB (FerretDB behind the serializing proxy),
// NATS and redis-server started here so a test can stop and restart them, each service
// as its own OS process (optionally several replicas), the gateway in front, and the
// seed. Tests talk to Stack.Gateway with the credentials in Stack.Seed, as clients do.
package stacktest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/identity"
)

// Binaries built once per test process.
var binaries = []struct{ name, pkg string }{
	{"gateway", "./gateway/cmd/gateway"},
	{"platformctl", "./gateway/cmd/platformctl"},
	{"workspace-svc", "./workspace-svc/cmd/workspace-svc"},
	{"embed-svc", "./embed-svc/cmd/embed-svc"},
	{"dbtsync-svc", "./dbtsync-svc/cmd/dbtsync-svc"},
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// BinDir builds the binaries (once per test process) and returns their directory.
func BinDir(t testing.TB) string {
	t.Helper()
	root := devstack.RepoRoot(t)
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "stacktest-bin-")
		if buildErr != nil {
			return
		}
		args := []string{"build", "-o", binDir + "/"}
		for _, b := range binaries {
			args = append(args, b.pkg)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("stacktest: %v", buildErr)
	}
	return binDir
}

// Main wraps a package's TestMain so the built binaries are removed at the end.
func Main(m interface{ Run() int }) int {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
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
	env     []string
	keys    stackKeys
	natsURL func(user string) string
	mu      sync.Mutex
	procs   map[string]*Process
	logs    *devstack.LogBuffer
	console *devstack.Console // the processes' lines, prefixed, into logs
	stopped bool
}

// Process is one OS process of the stack.
type Process struct {
	Name string
	Addr string // its public HTTP address (the API for services, /healthz)
	// InternalAddr is its internal listener (INTERNAL_ADDR): /healthz, /readyz, /metrics.
	InternalAddr string
	cmd          *exec.Cmd
	args         []string
	env          []string
	done         chan struct{}
}

// Start runs the platform until the test ends.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	if o.Replicas < 1 {
		o.Replicas = 1
	}
	if o.Workers < 1 {
		o.Workers = 1
	}
	s := &Stack{t: t, bin: BinDir(t), dir: t.TempDir(), procs: map[string]*Process{}, logs: &devstack.LogBuffer{}}
	s.console = devstack.NewConsole(s.logs)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	if s.Mongo, err = devstack.StartMongo(ctx, filepath.Join(s.dir, "mongo"), logger); err != nil {
		t.Fatalf("stacktest: FerretDB: %v", err)
	}
	// Every process connects as its own NATS user, with only its subjects (the
	// platform's permission table, devstack.NATSUsers): the suites run under it.
	if o.NATSNodes > 1 {
		if s.NATSCluster, err = devstack.StartNATSCluster(ctx, filepath.Join(s.dir, "nats"), o.NATSNodes, logger, devstack.NATSUsersOnly()); err != nil {
			t.Fatalf("stacktest: NATS cluster: %v", err)
		}
		s.natsURL = s.NATSCluster.UserURL
	} else {
		if s.NATS, err = devstack.StartNATS(ctx, filepath.Join(s.dir, "nats"), "", logger, devstack.NATSUsersOnly()); err != nil {
			t.Fatalf("stacktest: NATS: %v", err)
		}
		s.natsURL = s.NATS.UserURL
	}
	redisEnv := o.RedisEnv
	if redisEnv == nil {
		if s.Redis, err = devstack.StartRedis(ctx, filepath.Join(s.dir, "redis"), "", logger); err != nil {
			t.Fatalf("stacktest: %v", err)
		}
		redisEnv = []string{"REDIS_URL=" + s.Redis.URL}
	}
	t.Cleanup(s.stop)

	keys := s.writeKeys()
	s.keys = keys
	s.env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		"MONGODB_URI=" + s.Mongo.URI, "NATS_URL=" + s.natsURL("platformctl"),
		"IDENTITY_SIGNING_KEY=" + keys.identity, "DBT_CREDENTIALS_KEY=" + keys.dbt, "EMBED_KEY_ENCRYPTION_KEY=" + keys.embed,
		"LOG_LEVEL=info", "SHUTDOWN_TIMEOUT=5s", "DBT_SYNC_ALLOW_FILE_URLS=true",
		// The suites' integrations name a git host that is never cloned.
		"DBT_SYNC_ALLOWED_HOSTS=git.example.com",
		// The suites send many wrong credentials from one address on purpose; the attack
		// suite turns the limit on where it tests it.
		"AUTH_FAILURE_LIMIT=0",
	}, append(redisEnv, o.Env...)...)

	var urls = map[string][]string{}
	for _, svc := range []string{"workspace-svc", "embed-svc", "dbtsync-svc"} {
		for i := 0; i < o.Replicas; i++ {
			name := fmt.Sprintf("%s-%d", svc, i+1)
			p := s.spawn(name, svc, nil, "HTTP_ADDR")
			urls[svc] = append(urls[svc], "http://"+p.Addr)
		}
	}
	for i := 0; i < o.Workers; i++ {
		s.spawn(fmt.Sprintf("dbtsync-worker-%d", i+1), "dbtsync-svc", []string{"worker"}, "HTTP_ADDR")
	}
	for i := range max(o.Gateways, 1) {
		name := "gateway"
		if i > 0 {
			name = fmt.Sprintf("gateway-%d", i+1)
		}
		p := s.spawn(name, "gateway", nil, "GATEWAY_ADDR",
			"WORKSPACE_URL="+strings.Join(urls["workspace-svc"], ","),
			"EMBED_URL="+strings.Join(urls["embed-svc"], ","),
			"DBTSYNC_URL="+strings.Join(urls["dbtsync-svc"], ","),
			"AUTH_JWT_PUBLIC_KEYS_FILE="+keys.jwtPublic,
			"AUTH_JWT_ISSUER=https://auth.platform.local", "AUTH_JWT_AUDIENCE=platform-api",
			"AUTH_REVOCATION_POLL=200ms", "AUTH_JWKS_REFRESH=2s",
		)
		s.Gateways = append(s.Gateways, "http://"+p.Addr)
	}
	s.Gateway = s.Gateways[0]
	for _, p := range s.Processes() {
		s.WaitReady(ctx, p.Name)
	}
	s.Seed = s.runSeed(ctx, keys)
	return s
}

type stackKeys struct{ identity, dbt, embed, jwtPrivate, jwtPublic string }

func (s *Stack) writeKeys() stackKeys {
	secret := func() string {
		var b [32]byte
		_, _ = rand.Read(b[:])
		return base64.StdEncoding.EncodeToString(b[:])
	}
	k := stackKeys{identity: secret(), dbt: secret(), embed: secret()}
	var err error
	if k.jwtPrivate, k.jwtPublic, err = devstack.WriteBearerKeys(s.dir); err != nil {
		s.t.Fatal(err)
	}
	return k
}

// spawn starts binary as process name on a free port given in addrVar.
func (s *Stack) spawn(name, binary string, args []string, addrVar string, extraEnv ...string) *Process {
	s.t.Helper()
	addr, internal := devstack.FreeAddr(s.t), devstack.FreeAddr(s.t)
	var env []string
	for _, kv := range s.env {
		// The dbt worker runs untrusted repositories and serves no API: it never gets the
		// key that signs forwarded identities. A service gets only its own key, derived
		// from the gateway's (it can sign for no other service); the gateway the key.
		if key, ok := strings.CutPrefix(kv, "IDENTITY_SIGNING_KEY="); ok {
			switch {
			case strings.HasPrefix(name, "dbtsync-worker"):
				continue
			case binary != "gateway":
				sk, err := identity.ServiceKey(key, binary)
				if err != nil {
					s.t.Fatalf("stacktest: %s: %v", name, err)
				}
				kv = "IDENTITY_SIGNING_KEY=" + sk
			}
		}
		env = append(env, kv)
	}
	natsUser := binary
	if len(args) > 0 && args[0] == "worker" {
		natsUser = "dbtsync-worker"
	}
	env = append(append(env, addrVar+"="+addr, "INTERNAL_ADDR="+internal, "OTEL_SERVICE_NAME="+name,
		"NATS_URL="+s.natsURL(natsUser)), extraEnv...)
	p := &Process{Name: name, Addr: addr, InternalAddr: internal, args: append([]string{filepath.Join(s.bin, binary)}, args...), env: env}
	s.mu.Lock()
	s.procs[name] = p
	s.mu.Unlock()
	s.launch(p)
	return p
}

func (s *Stack) launch(p *Process) {
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Env = p.env
	w := s.console.Writer(p.Name)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("stacktest: start %s: %v", p.Name, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()
}

// Processes lists the processes, gateway last.
func (s *Stack) Processes() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Process
	for _, p := range s.procs {
		if p.Name != "gateway" {
			out = append(out, p)
		}
	}
	if g, ok := s.procs["gateway"]; ok {
		out = append(out, g)
	}
	return out
}

// Process returns a process by name ("gateway", "workspace-svc-1", "dbtsync-worker-1", ...).
func (s *Stack) Process(name string) *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[name]
	if p == nil {
		s.t.Fatalf("stacktest: no process %q", name)
	}
	return p
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL to a process and waits for it to exit.
func (s *Stack) Kill(name string) {
	p := s.Process(name)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Restart starts a stopped or killed process again (same address and environment) and
// waits until it is ready.
func (s *Stack) Restart(ctx context.Context, name string) {
	p := s.Process(name)
	select {
	case <-p.done:
	default:
		s.t.Fatalf("stacktest: %s is still running", name)
	}
	s.launch(p)
	s.WaitReady(ctx, name)
}

// WaitReady polls the process's /readyz (on its internal listener) until 200.
func (s *Stack) WaitReady(ctx context.Context, name string) {
	s.t.Helper()
	p := s.Process(name)
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.InternalAddr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-p.done:
			s.t.Fatalf("stacktest: %s exited before it was ready\n%s", name, s.Logs())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.t.Fatalf("stacktest: %s not ready at http://%s/readyz (last error %v)\n%s", name, p.InternalAddr, err, s.Logs())
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a deadline loop
	}
}

// Logs returns everything the processes printed so far, each line prefixed by its process.
func (s *Stack) Logs() string { return s.logs.String() }

func (s *Stack) runSeed(ctx context.Context, k stackKeys) Seed {
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
	cmd.Env = append(append(append([]string{}, s.env...), "AUTH_JWT_PRIVATE_KEY_FILE="+s.keys.jwtPrivate, "AUTH_JWT_ISSUER=https://auth.platform.local",
		"AUTH_JWT_AUDIENCE=platform-api", "GATEWAY_URL="+s.Gateway, "MONGODB_DATABASE=identity",
		"PLATFORM_STACK_FILE="+filepath.Join(s.dir, "no-stack.json")), env...)
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
	procs := make([]*Process, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
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
