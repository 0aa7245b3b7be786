// Package gatewaytest runs the real gateway in-process for other modules' black-box
// tests: a seeded identity store on the given MongoDB, the production route table,
// authentication and identity signing, in front of the services under test. Tests talk
// to URL with the credentials in Seed, exactly as clients talk to the deployed gateway.
// Only tests import it.
package gatewaytest

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/gateway/internal/app"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/platformctl"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
)

// Re-exported seed shapes, so tests can read Seed without importing internals.
type (
	SeedOutput     = platformctl.SeedOutput
	SeedAccount    = platformctl.SeedAccount
	SeedUser       = platformctl.SeedUser
	SeedDeployment = platformctl.SeedDeployment
)

// Options configure Start.
type Options struct {
	MongoURI string // required: the identity store lives in a fresh database on it
	Database string // defaults to a unique name
	// Upstream URLs by service name ("workspace-svc", "embed-svc", "dbtsync-svc"),
	// comma-separated for several replicas; missing ones point at a closed port (the
	// gateway answers 503 for them).
	Upstreams map[string]string
	// SigningKey is the base64 identity key shared with the services; generated when "".
	SigningKey string
	// Embed verifies embed session tokens. When nil and RedisURL is set, the gateway's
	// real verifier is used: embed-svc's JWKS (EmbedJWKSURL, default the embed-svc
	// upstream's JWKS path) and revocations in Redis.
	Embed        gateway.EmbedAuthenticator
	RedisURL     string
	EmbedJWKSURL string
	EmbedIssuer  string // default https://embed.platform.local
	// UpstreamTimeout is how long the gateway waits for a service's response headers
	// (default 30s).
	UpstreamTimeout time.Duration
	// Configure may adjust the gateway options last.
	Configure func(*gateway.Options)
}

// Stack is a running in-process gateway with its seeded identity store.
type Stack struct {
	URL        string
	Seed       SeedOutput
	SigningKey string
	Signer     *identity.Signer
	issuer     credentials.Issuer
	st         *store.Store
}

// NewSigningKey returns a random base64 identity signing key.
func NewSigningKey() string {
	var key [32]byte
	_, _ = rand.Read(key[:])
	return base64.StdEncoding.EncodeToString(key[:])
}

// Start runs the gateway until the test ends.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	ctx := context.Background()
	client, err := mongox.Connect(ctx, o.MongoURI, nil)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	if o.Database == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Database = "identity_" + base64.RawURLEncoding.EncodeToString(b[:])
		o.Database = sanitize(o.Database)
	}
	st := store.New(client.Database(o.Database))
	if err := st.EnsureIndexes(ctx); err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	issuer := credentials.Issuer{Key: priv, KeyID: credentials.KeyID(pub), Issuer: "https://auth.platform.test", Audience: "platform-api"}
	if o.SigningKey == "" {
		o.SigningKey = NewSigningKey()
	}
	signer, err := identity.NewSigner(o.SigningKey)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	upstreams := map[string][]*url.URL{}
	for _, name := range []string{"workspace-svc", "embed-svc", "dbtsync-svc"} {
		raw := o.Upstreams[name]
		if raw == "" {
			raw = "http://127.0.0.1:1" // nothing listens: 503
		}
		urls, err := gateway.ParseUpstreams(raw)
		if err != nil {
			t.Fatalf("gatewaytest: upstream %s: %v", name, err)
		}
		upstreams[name] = urls
	}
	wctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := app.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: st, Signer: signer,
		Keys: auth.NewKeySet([]crypto.PublicKey{pub}, ""), Issuer: issuer.Issuer, Audience: issuer.Audience,
		Upstreams: upstreams, Embed: o.Embed, EmbedJWKSURL: o.EmbedJWKSURL, EmbedIssuer: o.EmbedIssuer,
		BigBodyLimit: 256 << 20, UpstreamTimeout: o.UpstreamTimeout, DialTimeout: time.Second,
		RevocationPoll: 200 * time.Millisecond, OpenAPIJSON: []byte(`{}`), Configure: o.Configure}
	if o.Embed == nil && o.RedisURL != "" {
		ropts, err := redis.ParseURL(o.RedisURL)
		if err != nil {
			t.Fatalf("gatewaytest: %v", err)
		}
		rdb := redis.NewClient(ropts)
		t.Cleanup(func() { _ = rdb.Close() })
		d.Redis = rdb
	}
	a, err := app.New(wctx, d)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	seed, err := platformctl.Seed(ctx, st, issuer, srv.URL)
	if err != nil {
		t.Fatalf("gatewaytest: seed: %v", err)
	}
	return &Stack{URL: srv.URL, Seed: seed, SigningKey: o.SigningKey, Signer: signer, issuer: issuer, st: st}
}

// Token issues a bearer token for a user, valid for ttl (negative: already expired).
func (s *Stack) Token(t testing.TB, userID int64, ttl time.Duration) string {
	t.Helper()
	tok, _, err := s.issuer.Issue(userID, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			out[i] = '_'
		}
	}
	return string(out)
}
