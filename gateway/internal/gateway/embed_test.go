package gateway_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/embed-svc/revocation"
	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/embedauth"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/redisx"
)

// embedKeys plays embed-svc's side of the contract: a JWKS endpoint (which, like every
// service route, demands the gateway's signed identity) and tokens signed by its keys.
type embedKeys struct {
	mu      sync.Mutex
	keys    map[string]ed25519.PrivateKey
	current string
	fetches int
	signer  *identity.Signer
}

func (k *embedKeys) rotate(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	k.mu.Lock()
	defer k.mu.Unlock()
	kid := fmt.Sprintf("k%d", len(k.keys)+1)
	k.keys[kid] = priv
	k.current = kid
}

func (k *embedKeys) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, err := k.signer.Verify(r.Header.Get(identity.Header)); err != nil {
		w.WriteHeader(401)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fetches++
	var keys []map[string]string
	for kid, priv := range k.keys {
		keys = append(keys, map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig", "alg": "EdDSA",
			"x": base64.RawURLEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
}

func (k *embedKeys) token(t *testing.T, claims token.Claims) string {
	k.mu.Lock()
	kid, priv := k.current, k.keys[k.current]
	k.mu.Unlock()
	if claims.Issuer == "" {
		claims.Issuer = "https://embed.test"
	}
	if claims.Audience == "" {
		claims.Audience = token.Audience
	}
	if claims.ExpiresAt == nil {
		claims.ExpiresAt = jwt.NewNumericDate(time.Now().Add(24 * time.Hour))
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEmbedTokens(t *testing.T) {
	red := devstack.RedisForTest(t)
	ropts, _ := redis.ParseURL(red.URL)
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	reg := prometheus.NewRegistry()
	redisx.NewMetrics(reg).Instrument(rdb)
	ek := &embedKeys{keys: map[string]ed25519.PrivateKey{}}
	ek.rotate(t)
	jwks := httptest.NewServer(ek)
	defer jwks.Close()

	h := newHarness(t, func(o *gateway.Options) {
		ek.signer = o.Signer
		keys := auth.NewKeySet(nil, jwks.URL).WithRequestDecorator(embedauth.SignedRequest(o.Signer)).WithMinRefresh(0)
		o.Embed = embedauth.New(keys, "https://embed.test", rdb, o.Auth, nil).Instrument(reg)
	})
	acme, globex := h.acme(), h.globex()
	a1, a2 := acme.Deployments[0].ID, acme.Deployments[1].ID
	external := token.Claims{Registered: token.Registered{Subject: "ext-user"}, SessionID: "sid-ext", AccountID: acme.ID,
		DeploymentID: a1, Branch: "main", Tenant: "acme-default", Settings: json.RawMessage(`{"allowAi":false}`)}
	tok := ek.token(t, external)
	bearer := "Bearer " + tok

	t.Run("embed-routes-get-the-session-principal", func(t *testing.T) {
		for _, p := range []string{"/api/v1/embed/session", "/api/v1/embed/session/ai-credentials", fmt.Sprintf("/api/v1/deployments/%d/token", a1)} {
			code, _, body := h.do("POST", p, bearer, map[string]any{})
			if code != 200 {
				t.Fatalf("%s: %d %s", p, code, body)
			}
			var e echoed
			mustJSON(t, body, &e)
			pr := e.Principal
			if pr.Credential != identity.CredentialEmbed || pr.Embed == nil || pr.Embed.SessionID != "sid-ext" || pr.Embed.Subject != "ext-user" ||
				pr.Embed.DeploymentID != a1 || pr.Account.ID != acme.ID || pr.User != nil {
				t.Fatalf("%s: principal %+v embed %+v", p, pr, pr.Embed)
			}
			var claims map[string]any
			if err := json.Unmarshal(pr.Embed.Claims, &claims); err != nil || claims["set"].(map[string]any)["allowAi"] != false {
				t.Fatalf("raw claims not forwarded: %s", pr.Embed.Claims)
			}
		}
	})
	t.Run("data-token-for-another-deployment-404", func(t *testing.T) {
		code, _, _ := h.do("POST", fmt.Sprintf("/api/v1/deployments/%d/token", a2), bearer, map[string]any{})
		if code != 404 {
			t.Fatalf("%d, want 404", code)
		}
	})
	t.Run("embed-token-is-not-a-user-bearer", func(t *testing.T) {
		code, _, _ := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", a1), bearer, nil)
		if code != 401 {
			t.Fatalf("%d, want 401", code)
		}
	})
	t.Run("revoke-forwards-what-the-service-decides-on", func(t *testing.T) {
		// Who may revoke is embed-svc's rule (an internal admin's session): the gateway
		// forwards an embed token with the session's kind and user, and the service refuses
		// an external user or an internal viewer (the e2e and access suites check the 403).
		principalOf := func(tok string) *identity.Principal {
			t.Helper()
			code, _, body := h.do("POST", "/api/v1/embed/session/revoke", "Bearer "+tok, map[string]any{"sessionId": "x"})
			var e echoed
			if code != 200 || json.Unmarshal(body, &e) != nil || e.Principal == nil || e.Principal.Embed == nil {
				t.Fatalf("revoke with an embed token: %d %s", code, body)
			}
			return e.Principal
		}
		if p := principalOf(strings.TrimPrefix(bearer, "Bearer ")); p.Embed.Internal || p.User != nil {
			t.Fatalf("external embed user forwarded as %+v", p)
		}
		adminTok := ek.token(t, token.Claims{Registered: token.Registered{Subject: acme.Users["admin"].Username}, SessionID: "sid-admin",
			AccountID: acme.ID, DeploymentID: a1, Internal: true, UserID: acme.Users["admin"].ID})
		if p := principalOf(adminTok); !p.Embed.Internal || p.Role() != identity.RoleAdmin {
			t.Fatalf("internal admin embed token forwarded as %+v", p)
		}
		viewerTok := ek.token(t, token.Claims{Registered: token.Registered{Subject: "v"}, SessionID: "sid-viewer",
			AccountID: acme.ID, DeploymentID: a1, Internal: true, UserID: acme.Users["viewer"].ID})
		if p := principalOf(viewerTok); p.Role() != identity.RoleViewer {
			t.Fatalf("internal viewer embed token forwarded as %+v", p)
		}
		// A token claiming a user of another account is refused outright.
		forged := ek.token(t, token.Claims{Registered: token.Registered{Subject: "x"}, SessionID: "sid-f",
			AccountID: acme.ID, DeploymentID: a1, Internal: true, UserID: globex.Users["admin"].ID})
		if code, _, _ := h.do("POST", "/api/v1/embed/session/revoke", "Bearer "+forged, map[string]any{"sessionId": "x"}); code != 401 {
			t.Fatalf("embed token with a user of another account: %d, want 401", code)
		}
	})
	t.Run("rejected-tokens", func(t *testing.T) {
		_, other, _ := ed25519.GenerateKey(rand.Reader)
		wrongKey := jwt.NewWithClaims(jwt.SigningMethodEdDSA, external)
		wrongKey.Header["kid"] = ek.current
		wrongKeyTok, _ := wrongKey.SignedString(other)
		badIss := external
		badIss.Issuer = "https://evil.test"
		badAud := external
		badAud.Audience = "platform-api"
		expired := external
		expired.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute))
		noSID := external
		noSID.SessionID = ""
		for name, tk := range map[string]string{"wrong-key": wrongKeyTok, "issuer": ek.token(t, badIss), "audience": ek.token(t, badAud),
			"expired": ek.token(t, expired), "no-sid": ek.token(t, noSID), "garbage": "a.b.c"} {
			if code, hdr, _ := h.do("GET", "/api/v1/embed/session", "Bearer "+tk, nil); code != 401 || hdr.Get("WWW-Authenticate") == "" {
				t.Fatalf("%s: %d, want 401 with a challenge", name, code)
			}
		}
	})
	t.Run("revoked-session-rejected-on-the-next-request", func(t *testing.T) {
		c := external
		c.SessionID = "sid-to-revoke"
		tk := ek.token(t, c)
		if code, _, _ := h.do("GET", "/api/v1/embed/session", "Bearer "+tk, nil); code != 200 {
			t.Fatalf("before revoke: %d", code)
		}
		if err := rdb.Set(context.Background(), revocation.SessionKey("sid-to-revoke"), "1", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := h.do("GET", "/api/v1/embed/session", "Bearer "+tk, nil); code != 401 {
			t.Fatalf("after revoke: %d, want 401", code)
		}
	})
	t.Run("key-rotation-without-restart", func(t *testing.T) {
		ek.rotate(t)
		tk := ek.token(t, external)
		if code, _, body := h.do("GET", "/api/v1/embed/session", "Bearer "+tk, nil); code != 200 {
			t.Fatalf("token of a new key: %d %s", code, body)
		}
		if code, _, _ := h.do("GET", "/api/v1/embed/session", bearer, nil); code != 200 {
			t.Fatalf("token of the previous key, still published: %d", code)
		}
		ek.mu.Lock()
		fetches := ek.fetches
		ek.mu.Unlock()
		if fetches < 2 {
			t.Fatalf("JWKS fetched %d times; a new kid must trigger a fetch", fetches)
		}
	})
	t.Run("redis-down-503-then-recovers", func(t *testing.T) {
		if err := red.Stop(); err != nil {
			t.Fatal(err)
		}
		code, _, body := h.do("GET", "/api/v1/embed/session", bearer, nil)
		if code != 503 {
			t.Fatalf("redis down: %d %s, want 503", code, body)
		}
		if err := red.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, _, _ = h.do("GET", "/api/v1/embed/session", bearer, nil)
			if code == 200 || time.Now().After(deadline) {
				break
			}
		}
		if code != 200 {
			t.Fatalf("after redis is back: %d", code)
		}
	}) // Every revocation check was counted by its result, and the one Redis could not
	// answer is a Redis client error too (what the alerts read).
	for series, atLeast := range map[string]float64{
		`gateway_embed_revocation_checks_total{result="ok"}`:      1,
		`gateway_embed_revocation_checks_total{result="revoked"}`: 1,
		`gateway_embed_revocation_checks_total{result="error"}`:   1,
		`redis_client_errors_total{command="exists"}`:             1,
		`redis_client_commands_total{command="exists"}`:           3,
	} {
		if got := gathered(t, reg, series); got < atLeast {
			t.Errorf("%s = %v, want at least %v", series, got, atLeast)
		}
	}
}

// gathered is the value of one series of reg, written as name{label="value",...}.
func gathered(t *testing.T, reg *prometheus.Registry, series string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := mf.GetName()
			if len(ls) > 0 {
				name += "{" + strings.Join(ls, ",") + "}"
			}
			if name == series {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}
