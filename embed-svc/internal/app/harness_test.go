package app_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/dbtsync-svc/client"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/gatewaytest"
	"github.com/analyticsco/platform/devstack/mongoplan"
	embedclient "github.com/analyticsco/platform/embed-svc/client"
	"github.com/analyticsco/platform/embed-svc/internal/app"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/libs/obs"
)

const issuer = "https://embed.platform.test"

// clock is a test clock that can be moved forward.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// redisCounter counts Redis commands (n) and round trips (rt: a pipeline is one) that the
// service sends, not the set-up of a new connection (hello, client, ping), which depends
// on what ran before.
type redisCounter struct{ n, rt atomic.Int64 }

func setUp(cmd redis.Cmder) bool {
	return cmd.Name() == "hello" || cmd.Name() == "client" || cmd.Name() == "ping"
}

func (c *redisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !setUp(cmd) {
			c.n.Add(1)
			c.rt.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if !setUp(cmd) {
				n++
			}
		}
		if n > 0 {
			c.n.Add(int64(n))
			c.rt.Add(1)
		}
		return next(ctx, cmds)
	}
}

// env is one full stack: FerretDB, Redis, NATS, embed-svc and the real gateway.
type env struct {
	gw     *gatewaytest.Stack
	api    *apitest.Client // the gateway's API
	svcURL string
	// internalURL serves the internal listener: /readyz and /metrics.
	internalURL string
	app         *app.App
	rdb         *redis.Client
	nc          *nats.Conn
	clock       *clock
	mongoCmd    *mongox.CommandCounter
	redisCmd    *redisCounter
	signer      *identity.Signer
	branches    atomic.Pointer[natsx.Server]
	reach       *reachFake
}

// reachFake answers workspace.embed.reach as workspace-svc would for a deployment whose
// every dashboard is granted to one account group: "dash-<group>" (padded to 16
// characters) per account group of the viewer, narrowed to the request's resources; it
// keeps the last request.
type reachFake struct {
	mu   sync.Mutex
	last embedclient.ReachRequest
	n    int
}

func (f *reachFake) serve(t *testing.T, nc *nats.Conn) {
	srv := natsx.NewServer(nc, natsx.ServerOptions{})
	err := embedclient.ServeReach(srv, func(_ context.Context, req embedclient.ReachRequest) (embedclient.ReachReply, error) {
		f.mu.Lock()
		f.last, f.n = req, f.n+1
		f.mu.Unlock()
		out := embedclient.ReachReply{Dashboards: []embedclient.ReachDashboard{}}
		for _, g := range req.AccountGroups {
			id := fmt.Sprintf("%-16.16s", "dash-"+g)
			id = strings.ReplaceAll(id, " ", "_")
			if req.Resources != nil && !slices.Contains(*req.Resources, id) {
				continue
			}
			out.Dashboards = append(out.Dashboards, embedclient.ReachDashboard{PublicID: id, WorkbookID: int64(len(out.Dashboards) + 1),
				AccessSource: "group", Subject: embedclient.ReachSubjectRef{Type: "group", Scope: "account", GroupName: g}})
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
}

// request is the last reach request and how many there were.
func (f *reachFake) request() (embedclient.ReachRequest, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, f.n
}

// branchResponder answers dbtsync.branches.resolve like dbtsync-svc: "main" is
// production, "feature-*" exists and is served, "stale-*" exists and is not served.
func branchResponder(t *testing.T, nc *nats.Conn) *natsx.Server {
	srv := natsx.NewServer(nc, natsx.ServerOptions{})
	err := client.Serve(srv, func(_ context.Context, req client.ResolveRequest) (client.ResolveReply, error) {
		switch {
		case req.BranchName == req.ProductionBranch:
			return client.ResolveReply{Exists: true, Served: true, Production: true}, nil
		case strings.HasPrefix(req.BranchName, "feature-"):
			return client.ResolveReply{Exists: true, Served: true}, nil
		case strings.HasPrefix(req.BranchName, "stale-"):
			return client.ResolveReply{Exists: true}, nil
		}
		return client.ResolveReply{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// keyringRead is the signing keyring's one read of its whole collection, allowed: a
// handful of keys (a rotation deletes those whose tokens have all expired), read in
// activation order on every reload.
var keyringRead = mongoplan.Allowance{Func: "keys.(*Keyring).reload", Collection: "signing_keys",
	Reason: "the keyring is a handful of keys, read whole on every reload"}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, devstack.MongoForTest(t))
}

// newEnvOn is newEnv on mongo, a FerretDB whose proxy serialises as the test chooses.
func newEnvOn(t *testing.T, mongo *devstack.Mongo) *env {
	t.Helper()
	rs := devstack.RedisForTest(t)
	ns := devstack.NATSForTest(t)
	ctx := context.Background()

	e := &env{clock: &clock{}, mongoCmd: &mongox.CommandCounter{}, redisCmd: &redisCounter{}}
	plan := mongoplan.NewRecorder() // every query of the service and its trail, checked at the end
	client, err := mongox.ConnectWith(ctx, mongo.URI, mongox.ConnectOptions{Counter: e.mongoCmd, Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	auditClient, err := mongox.ConnectWith(ctx, mongo.URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = auditClient.Disconnect(context.Background()) })
	database := devstack.UniqueName(t, "embed")
	t.Cleanup(func() {
		plan.Check(t, client.Database(database), keyringRead)
		plan.Check(t, auditClient.Database("audit"))
		plan.CheckAllowancesUsed(t, keyringRead)
	})
	ropts, err := redis.ParseURL(rs.URL)
	if err != nil {
		t.Fatal(err)
	}
	e.rdb = redis.NewClient(ropts)
	e.rdb.AddHook(e.redisCmd)
	t.Cleanup(func() { _ = e.rdb.Close() })
	e.nc, err = nats.Connect(ns.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nc.Close)
	e.branches.Store(branchResponder(t, e.nc))
	e.reach = &reachFake{}
	e.reach.serve(t, e.nc)

	signingKey := gatewaytest.NewSigningKey()
	e.signer, _ = identity.NewSigner(signingKey)
	var encKey [32]byte
	copy(encKey[:], "embed-svc-test-key-0123456789abc")
	a, err := app.New(ctx, app.Deps{
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: obs.NewRegistry(), Signer: e.signer,
		Mongo: client, Database: database,
		Redis: e.rdb, NATS: e.nc, KeyEncryptionKey: base64.StdEncoding.EncodeToString(encKey[:]), TokenIssuer: issuer,
		KeyPublishDelay: 10 * time.Minute, KeyRefresh: time.Hour, BranchTimeout: 2 * time.Second, Now: e.clock.Now,
		// The trail's ingester gets a client of its own: the round-trip budgets count the
		// service's own commands.
		Audit:    app.AuditDeps{Mongo: auditClient, Relay: 100 * time.Millisecond},
		Webhooks: testWebhookLimits,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.app = a
	svc := httptest.NewServer(a.Handler)
	t.Cleanup(svc.Close)
	e.svcURL = svc.URL
	internal := httptest.NewServer(a.Internal)
	t.Cleanup(internal.Close)
	e.internalURL = internal.URL

	// The gateway's real embed-token verifier (embed-svc's JWKS, revocations in Redis),
	// and the identity lookups it answers on NATS (a deployment's account, an internal user).
	e.gw = gatewaytest.Start(t, gatewaytest.Options{
		MongoURI: mongo.URI, SigningKey: signingKey, Upstreams: map[string]string{"embed-svc": svc.URL},
		RedisURL: rs.URL, NATSURL: ns.URL, EmbedIssuer: issuer,
	})
	e.api = apitest.New(e.gw.URL)
	return e
}

type claims struct {
	jwt.RegisteredClaims
	SID string         `json:"sid"`
	Acc int64          `json:"acc"`
	Dep int64          `json:"dep"`
	Br  string         `json:"br"`
	Ten string         `json:"ten"`
	CM  bool           `json:"cm"`
	Int bool           `json:"int"`
	UID int64          `json:"uid"`
	Set map[string]any `json:"set"`
	Res *struct {
		Dashboards []string `json:"dashboards"`
	} `json:"res"`
}

func fetchJWKS(url string) (map[string]ed25519.PublicKey, error) {
	r := apitest.New(url).Do("GET", "", "", nil)
	if r.Err != nil {
		return nil, r.Err
	}
	var set struct {
		Keys []struct{ Kty, Crv, X, Kid, Use, Alg string } `json:"keys"`
	}
	if err := json.Unmarshal(r.Body, &set); err != nil {
		return nil, err
	}
	out := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" || k.Use != "sig" {
			return nil, fmt.Errorf("bad jwk %+v", k)
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil {
			return nil, err
		}
		out[k.Kid] = ed25519.PublicKey(x)
	}
	return out, nil
}

func (e *env) jwksURL() string { return e.gw.URL + "/api/v1/embed/.well-known/jwks.json" }

// parseToken verifies an embed-svc JWT against the keys published through the gateway.
func parseToken(jwksURL, token, audience string) (*claims, error) {
	keys, err := fetchJWKS(jwksURL)
	if err != nil {
		return nil, err
	}
	var c claims
	_, err = jwt.ParseWithClaims(token, &c, func(tok *jwt.Token) (any, error) {
		kid, _ := tok.Header["kid"].(string)
		k, ok := keys[kid]
		if !ok {
			return nil, fmt.Errorf("unknown kid %q", kid)
		}
		return k, nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer(issuer), jwt.WithAudience(audience), jwt.WithExpirationRequired())
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// resp is an answer of the API as the tests' one HTTP client (devstack/apitest) got it.
type resp struct{ apitest.Response }

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	r.Decode(t, v)
}

// message is the error body's message (the body must be the platform's error body).
func (r resp) message(t *testing.T) string {
	t.Helper()
	return r.Error(t).Message
}

// do sends a request through the gateway.
func (e *env) do(t *testing.T, method, path, auth string, body any) resp {
	t.Helper()
	return resp{e.api.Call(t, method, path, auth, body)}
}

// direct sends a request to base (embed-svc's own listeners), bypassing the gateway.
func direct(t *testing.T, base, method, path string, body any) resp {
	t.Helper()
	return resp{apitest.New(base).Call(t, method, path, "", body)}
}

func apiKey(k string) string { return "Api-Key " + k }
func bearer(k string) string { return "Bearer " + k }

func (e *env) acme() devstack.SeedAccount   { return e.gw.Seed.Accounts["acme"] }
func (e *env) globex() devstack.SeedAccount { return e.gw.Seed.Accounts["globex"] }

// mint generates a session through the gateway with acme's admin key and expects 200.
func (e *env) mint(t *testing.T, body map[string]any) string {
	t.Helper()
	return e.mintAs(t, apiKey(e.acme().APIKeys["admin"]), body)
}

func (e *env) mintAs(t *testing.T, auth string, body map[string]any) string {
	t.Helper()
	r := e.do(t, "POST", "/api/v1/embed/generate-session", auth, body)
	if r.Status != 200 {
		t.Fatalf("generate-session = %d %s", r.Status, r.Body)
	}
	var out struct {
		SessionID string `json:"sessionId"`
	}
	r.json(t, &out)
	if len(out.SessionID) < 22 {
		t.Fatalf("session id %q is shorter than 128 bits", out.SessionID)
	}
	return out.SessionID
}

type tokenResp struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
	RefreshAt time.Time `json:"refreshAt"`
}

func (e *env) exchange(t *testing.T, sessionID string) tokenResp {
	t.Helper()
	r := e.do(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": sessionID})
	if r.Status != 200 {
		t.Fatalf("exchange = %d %s", r.Status, r.Body)
	}
	var out tokenResp
	r.json(t, &out)
	return out
}

type sessionInfo struct {
	SessionID string `json:"sessionId"`
	User      struct {
		Kind        string  `json:"kind"`
		ID          int64   `json:"id"`
		ExternalID  *string `json:"externalId"`
		Username    *string `json:"username"`
		Email       *string `json:"email"`
		DisplayName *string `json:"displayName"`
		Picture     *string `json:"picture"`
	} `json:"user"`
	AccountID      int64  `json:"accountId"`
	DeploymentID   int64  `json:"deploymentId"`
	BranchName     string `json:"branchName"`
	Production     bool   `json:"production"`
	EmbedTenant    string `json:"embedTenantName"`
	CreatorMode    bool   `json:"creatorMode"`
	Groups         []string
	UserAttributes []struct {
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	} `json:"userAttributes"`
	Settings  map[string]any `json:"settings"`
	IssuedAt  time.Time      `json:"issuedAt"`
	ExpiresAt time.Time      `json:"expiresAt"`
}

// session mints, exchanges and reads the session back through the gateway.
func (e *env) session(t *testing.T, body map[string]any) (sessionInfo, tokenResp) {
	t.Helper()
	tok := e.exchange(t, e.mint(t, body))
	r := e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil)
	if r.Status != 200 {
		t.Fatalf("GET session = %d %s", r.Status, r.Body)
	}
	var info sessionInfo
	r.json(t, &info)
	return info, tok
}

func (info sessionInfo) attrs() map[string]string {
	out := map[string]string{}
	for _, a := range info.UserAttributes {
		out[a.Name] = string(a.Value)
	}
	return out
}

var uniq atomic.Int64

// uid returns a fresh name for the test's own data.
func uid(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, uniq.Add(1))
}

// tname returns a fresh, valid embed tenant name.
func tname(prefix string) string {
	return fmt.Sprintf("%s-%08x", prefix, uniq.Add(1)*2654435761%(1<<32))
}

// parallel runs fn(i) n times at once and waits.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			fn(i)
		}(i)
	}
	close(start)
	wg.Wait()
}

// jsonUnmarshalB64 decodes one base64url segment of a JWT.
func jsonUnmarshalB64(seg string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
