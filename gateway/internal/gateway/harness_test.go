package gateway_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/gateway/internal/app"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/platformctl"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
)

// echoed is what the echo services answer: who they are and what reached them.
type echoed struct {
	Service   string              `json:"service"`
	Path      string              `json:"path"`
	Principal *identity.Principal `json:"principal"`
	Headers   map[string][]string `json:"headers"`
	BodyLen   int                 `json:"bodyLen"`
}

type harness struct {
	t        *testing.T
	st       *store.Store
	authn    *auth.Authenticator
	seed     platformctl.SeedOutput
	issuer   credentials.Issuer
	gw       *gatewayServer
	signer   *identity.Signer
	upstream map[string]*httptest.Server
	clock    *fakeClock
	extra    map[string]string // more credentials created by the harness
	deps     app.Deps          // what the gateway was built from (another replica: replica)
}

// replica starts another gateway replica on the same identity store and services, from
// the same dependencies, until the test ends.
func (h *harness) replica() (*app.App, *gatewayServer) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	a, err := app.New(ctx, h.deps)
	if err != nil {
		h.t.Fatal(err)
	}
	return a, serveGateway(h.t, a)
}

// fakeClock is the gateway's clock, set forward by tests while the gateway's goroutines
// read it.
type fakeClock struct{ offset atomic.Int64 }

func (c *fakeClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// advance sets the clock d further; set puts it at d past the real time.
func (c *fakeClock) advance(d time.Duration) { c.offset.Add(int64(d)) }
func (c *fakeClock) set(d time.Duration)     { c.offset.Store(int64(d)) }

// newHarness starts FerretDB (behind the serializing proxy), seeds the identity store,
// and runs the real gateway in front of three echo services that verify the forwarded
// identity exactly as the real services do.
func newHarness(t *testing.T, opts ...func(*gateway.Options)) *harness {
	t.Helper()
	return newHarnessWith(t, nil, opts...)
}

// newHarnessWith is newHarness with the gateway's dependencies changed by dep first.
func newHarnessWith(t *testing.T, dep func(*app.Deps), opts ...func(*gateway.Options)) *harness {
	t.Helper()
	ctx := context.Background()
	m := devstack.MongoForTest(t)
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(ctx, m.URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "identity"))
	t.Cleanup(func() { plan.Check(t, db) }) // every query of the gateway's store, checked at the end
	st := store.New(db)
	if err := st.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	issuer := credentials.Issuer{Key: priv, KeyID: credentials.KeyID(pub), Issuer: "https://auth.test", Audience: "platform-api"}
	seed, err := platformctl.Seed(ctx, st, issuer, "http://gateway.test")
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	var key [32]byte
	_, _ = rand.Read(key[:])
	signer, err := identity.NewSigner(base64.StdEncoding.EncodeToString(key[:]))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, st: st, seed: seed, issuer: issuer, signer: signer, upstream: map[string]*httptest.Server{}, clock: &fakeClock{}, extra: map[string]string{}}
	upstreams := map[string][]*url.URL{}
	for _, name := range []string{"workspace-svc", "embed-svc", "dbtsync-svc"} {
		name := name
		srv := httptest.NewServer(identity.Require(signer, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(echoed{Service: name, Path: r.URL.Path, Principal: identity.FromContext(r.Context()), Headers: r.Header, BodyLen: len(body)})
		})))
		t.Cleanup(srv.Close)
		h.upstream[name] = srv
		u, _ := url.Parse(srv.URL)
		upstreams[name] = []*url.URL{u}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := app.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: st, Signer: signer,
		Keys: auth.NewKeySet([]crypto.PublicKey{pub}, ""), Issuer: issuer.Issuer, Audience: issuer.Audience, Upstreams: upstreams,
		BigBodyLimit: 8 << 20, UpstreamTimeout: 5 * time.Second, DialTimeout: time.Second, CacheTTL: time.Minute,
		RevocationPoll: -1, OpenAPIJSON: []byte(`{"openapi":"3.0.3"}`), Now: h.clock.now,
		Configure: func(o *gateway.Options) {
			for _, f := range opts {
				f(o)
			}
		}}
	if dep != nil {
		dep(&d)
	}
	h.deps = d
	a, err := app.New(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	h.authn = a.Auth
	h.gw = serveGateway(t, a)
	return h
}

// gatewayServer is the gateway's public listener, served by its own HTTP/1.1 server as
// in production, on a free port until the test ends.
type gatewayServer struct{ URL string }

func serveGateway(t testing.TB, a *app.App) *gatewayServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = a.Public.Serve(ln); close(done) }()
	t.Cleanup(func() {
		_ = a.Public.Close()
		<-done
		a.Gateway.CloseIdle()
	})
	return &gatewayServer{URL: "http://" + ln.Addr().String()}
}

func (h *harness) acme() platformctl.SeedAccount    { return h.seed.Accounts["acme"] }
func (h *harness) globex() platformctl.SeedAccount  { return h.seed.Accounts["globex"] }
func (h *harness) initech() platformctl.SeedAccount { return h.seed.Accounts["initech"] }

// do sends a request through the gateway with the tests' one HTTP client
// (devstack/apitest), hdr adding header name/value pairs, and returns the status,
// headers and body.
func (h *harness) do(method, path, authz string, body any, hdr ...string) (int, http.Header, []byte) {
	h.t.Helper()
	req, err := apitest.New(h.gw.URL).Request(method, path, authz, body)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r := apitest.New(h.gw.URL).Send(h.t, req)
	return r.Status, r.Header, r.Body
}

// doAt is do against another gateway replica's URL.
func (h *harness) doAt(base, method, path, authz string, body any) (int, http.Header, []byte) {
	h.t.Helper()
	req, err := apitest.New(base).Request(method, path, authz, body)
	if err != nil {
		h.t.Fatal(err)
	}
	r := apitest.New(base).Send(h.t, req)
	return r.Status, r.Header, r.Body
}

// token issues a bearer token for userID with the harness issuer.
func (h *harness) token(userID int64, ttl time.Duration) string {
	tok, _, err := h.issuer.Issue(userID, ttl)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}
