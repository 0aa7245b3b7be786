// Package gatewaytest runs the real gateway in front of a service under test: the
// gateway binary as a child process on free ports, with a seeded identity store (the
// `platformctl seed` accounts, users, keys and bearer tokens) on the given MongoDB.
// Tests talk to URL with the credentials in Seed, exactly as clients talk to the deployed
// gateway. It runs binaries rather than importing the gateway, so a service's tests
// depend on no other service's module.
package gatewaytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/identity"
)

// Seed is the output of `platformctl seed --json` (devstack.Seed).
type Seed = devstack.Seed

// Options configure Start.
type Options struct {
	MongoURI string // required: the identity store lives in a fresh database on it
	Database string // defaults to a unique name
	// Upstreams are the services' base URLs by name ("workspace-svc", "embed-svc",
	// "dbtsync-svc"), comma-separated for replicas; a missing one points at a closed port
	// (the gateway answers 503 for it).
	Upstreams map[string]string
	// SigningKey is the base64 identity key the services verify with; generated when "".
	SigningKey string
	// RedisURL turns on embed tokens (verified against EmbedJWKSURL, default the embed-svc
	// upstream's JWKS, with revocations in Redis); without it the gateway's Redis is a
	// closed port and no rate limit applies.
	RedisURL string
	// NATSURL is where the gateway answers the services' identity lookups (embed-svc's
	// generate-session asks them); without it the gateway's NATS is a closed port.
	NATSURL      string
	EmbedJWKSURL string
	EmbedIssuer  string // default https://embed.platform.local
	// UpstreamTimeout is how long the gateway waits for a service's response headers.
	UpstreamTimeout time.Duration
	// Env adds or overrides the gateway's variables.
	Env []string
}

// Stack is a running gateway with its seeded identity store.
type Stack struct {
	URL        string
	Seed       Seed
	SigningKey string
	Signer     *identity.Signer
}

// NewSigningKey returns a random base64 identity signing key.
func NewSigningKey() string {
	var key [32]byte
	_, _ = rand.Read(key[:])
	return base64.StdEncoding.EncodeToString(key[:])
}

const (
	issuer   = "https://auth.platform.test"
	audience = "platform-api"
)

// Start runs the gateway until the test ends.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	bin := binaries(t)
	if o.Database == "" {
		o.Database = devstack.UniqueName(t, "identity")
	}
	if o.SigningKey == "" {
		o.SigningKey = NewSigningKey()
	}
	signer, err := identity.NewSigner(o.SigningKey)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	private, public, err := devstack.WriteBearerKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, internal := devstack.FreeAddr(t), devstack.FreeAddr(t)
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LOG_LEVEL=warn", "SHUTDOWN_TIMEOUT=2s",
		"GATEWAY_ADDR=" + addr, "INTERNAL_ADDR=" + internal,
		"MONGODB_URI=" + o.MongoURI, "MONGODB_DATABASE=" + o.Database, "IDENTITY_SIGNING_KEY=" + o.SigningKey,
		"AUTH_JWT_PUBLIC_KEYS_FILE=" + public, "AUTH_JWT_ISSUER=" + issuer, "AUTH_JWT_AUDIENCE=" + audience,
		"AUTH_REVOCATION_POLL=200ms", "UPSTREAM_DIAL_TIMEOUT=1s",
		"REDIS_URL=" + cmpOr(o.RedisURL, "redis://127.0.0.1:1/0"), "NATS_URL=" + cmpOr(o.NATSURL, "nats://127.0.0.1:1"),
		"EMBED_TOKEN_ISSUER=" + cmpOr(o.EmbedIssuer, "https://embed.platform.local"),
	}
	if o.RedisURL == "" { // nothing to count on
		env = append(env, "RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "AUTH_FAILURE_LIMIT=0")
	}
	if o.EmbedJWKSURL != "" {
		env = append(env, "EMBED_JWKS_URL="+o.EmbedJWKSURL)
	}
	if o.UpstreamTimeout > 0 {
		env = append(env, "UPSTREAM_TIMEOUT="+o.UpstreamTimeout.String())
	}
	for name, v := range map[string]string{"workspace-svc": "WORKSPACE_URL", "embed-svc": "EMBED_URL", "dbtsync-svc": "DBTSYNC_URL"} {
		env = append(env, v+"="+cmpOr(o.Upstreams[name], "http://127.0.0.1:1"))
	}
	env = append(env, o.Env...)
	logs := start(t, filepath.Join(bin, "gateway"), env)
	waitReady(t, "http://"+internal+"/readyz", logs)

	seed := seedIdentities(t, bin, o, private, "http://"+addr, logs)
	return &Stack{URL: "http://" + addr, Seed: seed, SigningKey: o.SigningKey, Signer: signer}
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// seedIdentities runs `platformctl seed --json --identity-only`: the accounts, users,
// keys and tokens of the seed, without the catalog (which needs embed-svc).
func seedIdentities(t testing.TB, bin string, o Options, privateKey, gateway string, logs *devstack.LogBuffer) Seed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "platformctl"), "seed", "--json", "--identity-only")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "MONGODB_URI=" + o.MongoURI, "MONGODB_DATABASE=" + o.Database,
		"AUTH_JWT_PRIVATE_KEY_FILE=" + privateKey, "AUTH_JWT_ISSUER=" + issuer, "AUTH_JWT_AUDIENCE=" + audience,
		"GATEWAY_URL=" + gateway, "PLATFORM_STACK_FILE=" + filepath.Join(t.TempDir(), "none.json")}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("gatewaytest: platformctl seed: %v\n%s\n%s", err, errb.String(), logs.String())
	}
	var seed Seed
	if err := json.Unmarshal(out.Bytes(), &seed); err != nil {
		t.Fatalf("gatewaytest: seed output %q: %v", out.String(), err)
	}
	return seed
}

// start runs the binary until the test ends (SIGTERM, then SIGKILL after 5 s).
func start(t testing.TB, path string, env []string) *devstack.LogBuffer {
	t.Helper()
	logs := &devstack.LogBuffer{}
	cmd := exec.Command(path)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("gatewaytest: start %s: %v", path, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return logs
}

func waitReady(t testing.TB, url string, logs *devstack.LogBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gatewaytest: the gateway is not ready at %s: %v\n%s", url, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a deadline loop
	}
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds the gateway and platformctl once per test process, into a directory of
// the system's temp dir named after the process (those of processes that are gone are
// removed first).
func binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		removeStale()
		binDir = filepath.Join(os.TempDir(), "gatewaytest-bin-"+strconv.Itoa(os.Getpid()))
		if buildErr = os.MkdirAll(binDir, 0o755); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./gateway/cmd/gateway", "./gateway/cmd/platformctl")
		cmd.Dir = devstack.RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("gatewaytest: %v", buildErr)
	}
	return binDir
}

// removeStale removes the binary directories of test processes that have ended.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "gatewaytest-bin-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "gatewaytest-bin-"))
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue // not ours, or its process still runs
		}
		_ = os.RemoveAll(d)
	}
}
