// Package gatewaytest runs the real gateway in front of a service under test: the
// gateway binary as a child process on free ports, with a seeded identity store (the
// `platformctl seed` accounts, users, keys and bearer tokens) on the given MongoDB.
// Tests talk to URL with the credentials in Seed, exactly as clients talk to the deployed
// gateway. It runs binaries (devstack/platform builds and starts them) rather than
// importing the gateway, so a service's tests depend on no other service's module.
package gatewaytest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/platform"
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
func NewSigningKey() string { return platform.NewSecret() }

// Start runs the gateway until the test ends.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	bin := platform.BinDir(t, platform.Gateway, platform.Platformctl)
	if o.Database == "" {
		o.Database = devstack.UniqueName(t, "identity")
	}
	keys, err := platform.EnsureKeys(t.TempDir())
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	if o.SigningKey != "" {
		keys.IdentitySigningKey = o.SigningKey
	}
	signer, err := identity.NewSigner(keys.IdentitySigningKey)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	l := gatewayLayout(t, o, keys)
	table, err := platform.Table(l)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	logs := &devstack.LogBuffer{}
	gw, err := platform.Start(table[0], bin, logs)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	t.Cleanup(func() { gw.Stop(5 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := platform.WaitReady(ctx, 30*time.Second, []*platform.Running{gw}, nil); err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	url := "http://" + gw.Addr
	env := append(l.PlatformctlEnv(minimalEnv(), url, filepath.Join(t.TempDir(), "none.json")), "MONGODB_DATABASE="+o.Database)
	seed := seedIdentities(ctx, t, bin, env, logs)
	return &Stack{URL: url, Seed: seed, SigningKey: keys.IdentitySigningKey, Signer: signer}
}

// closed is an address nothing listens on: what the gateway gets for a server the
// test does not run (it answers 503 for the routes that need it).
const closed = "127.0.0.1:1"

// gatewayLayout is one gateway on free ports in front of o's upstreams.
func gatewayLayout(t testing.TB, o Options, keys platform.Keys) platform.Layout {
	upstreams := map[string]string{}
	for _, b := range []platform.Binary{platform.WorkspaceSvc, platform.EmbedSvc, platform.DBTSyncSvc} {
		upstreams[b.Name] = cmp.Or(o.Upstreams[b.Name], "http://"+closed)
	}
	env := append(minimalEnv(), "LOG_LEVEL=warn", "SHUTDOWN_TIMEOUT=2s", "MONGODB_DATABASE="+o.Database,
		"AUTH_REVOCATION_POLL=200ms", "UPSTREAM_DIAL_TIMEOUT=1s",
		"EMBED_TOKEN_ISSUER="+cmp.Or(o.EmbedIssuer, "https://embed.platform.local"))
	if o.RedisURL == "" { // nothing to count on
		env = append(env, "RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "RATE_LIMIT_PLAN_FREE=0", "RATE_LIMIT_PLAN_PREMIUM=0", "RATE_LIMIT_PLAN_ENTERPRISE=0", "AUTH_FAILURE_LIMIT=0")
	}
	if o.EmbedJWKSURL != "" {
		env = append(env, "EMBED_JWKS_URL="+o.EmbedJWKSURL)
	}
	if o.UpstreamTimeout > 0 {
		env = append(env, "UPSTREAM_TIMEOUT="+o.UpstreamTimeout.String())
	}
	natsURL := cmp.Or(o.NATSURL, "nats://"+closed)
	return platform.Layout{
		MongoURI: o.MongoURI, Redis: []string{"REDIS_URL=" + cmp.Or(o.RedisURL, "redis://"+closed+"/0")},
		NATSURL: func(string) string { return natsURL }, Keys: keys, Upstreams: upstreams,
		Addr:         func(string) string { return devstack.FreeAddr(t) },
		InternalAddr: func(string) string { return devstack.FreeAddr(t) },
		Env:          env, Extra: o.Env,
	}
}

func minimalEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
}

// seedIdentities runs `platformctl seed --json --identity-only`: the accounts, users,
// keys and tokens of the seed, without the catalog (which needs embed-svc).
func seedIdentities(ctx context.Context, t testing.TB, bin string, env []string, logs *devstack.LogBuffer) Seed {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, platform.Platformctl.Name), "seed", "--json", "--identity-only")
	cmd.Env = env
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
