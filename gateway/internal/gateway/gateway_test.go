package gateway_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/platformctl"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

type routeCase struct {
	name, method, path string
	body               any
	service            string // the upstream expected to answer when the gateway lets it through
}

// TestAuthenticationMatrix sends every credential kind to every route family through the
// real gateway and checks the exact status. 200 means the request reached the expected
// service with a verified identity.
func TestAuthenticationMatrix(t *testing.T) {
	h := newHarness(t)
	acme, globex, initech := h.acme(), h.globex(), h.initech()
	a1, a2 := acme.Deployments[0].ID, acme.Deployments[1].ID

	// An account key of a non-admin, and a revoked key, for the rows below.
	ctx := t.Context()
	dev, err := h.st.User(ctx, acme.Users["developer"].ID)
	if err != nil {
		t.Fatal(err)
	}
	devKey, err := platformctl.CreateKey(ctx, h.st, dev, identity.KeyAccount, nil, "dev", 0)
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := h.st.User(ctx, acme.Users["admin"].ID)
	revokedKey, err := platformctl.CreateKey(ctx, h.st, admin, identity.KeyAccount, nil, "revoked", 0)
	if err != nil {
		t.Fatal(err)
	}
	revokedID, _, _ := credentials.ParseAPIKey(revokedKey)
	if err := h.st.RevokeAPIKey(ctx, revokedID); err != nil {
		t.Fatal(err)
	}
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	foreign := h.issuer
	foreign.Key = otherPriv
	foreignTok, _, _ := foreign.Issue(acme.Users["admin"].ID, time.Hour)
	expiredTok := h.token(acme.Users["admin"].ID, -time.Hour)

	routes := []routeCase{
		{"workspace", "POST", fmt.Sprintf("/api/v1/deployments/%d/workspace/bulk-move", a1), map[string]any{"items": []any{}}, "workspace-svc"},
		{"folders", "POST", fmt.Sprintf("/api/v1/deployments/%d/folders", a1), map[string]any{"name": "x"}, "workspace-svc"},
		{"dbt-sync", "POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", a1), map[string]any{}, "dbtsync-svc"},
		{"build", "GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches", a1), nil, "dbtsync-svc"},
		{"generate-session-d1", "POST", "/api/v1/embed/generate-session", map[string]any{"deploymentId": a1, "externalId": "u1"}, "embed-svc"},
		{"generate-session-d2", "POST", "/api/v1/embed/generate-session", map[string]any{"deploymentId": a2, "externalId": "u1"}, "embed-svc"},
		{"revoke", "POST", "/api/v1/embed/session/revoke", map[string]any{"sessionId": "s"}, "embed-svc"},
		{"embed-tenants", "GET", "/api/v1/embed-tenants/acme-default/groups", nil, "embed-svc"},
		{"groups", "GET", "/api/v1/groups", nil, "embed-svc"},
		{"exchange", "POST", "/api/v1/embed/session/exchange", map[string]any{"sessionId": "s"}, "embed-svc"},
		{"data-token", "POST", fmt.Sprintf("/api/v1/deployments/%d/token", a1), map[string]any{}, "embed-svc"},
	}
	bearer := func(tok string) string { return "Bearer " + tok }
	apiKey := func(k string) string { return "Api-Key " + k }
	const (
		ok  = 200
		u   = 401
		f   = 403
		nf  = 404
		all = -1
	)
	// Columns in the order of routes above.
	unauth := []int{u, u, u, u, u, u, u, u, ok, u}
	cases := []struct {
		cred  string
		authz string
		want  []int
	}{
		{"none", "", unauth},
		{"garbage-bearer", "Bearer garbage", unauth},
		{"garbage-api-key", "Api-Key garbage", unauth},
		{"unknown-key", apiKey("pk_0123456789abcdef_" + strings.Repeat("A", 43)), unauth},
		{"revoked-key", apiKey(revokedKey), unauth},
		{"expired-jwt", bearer(expiredTok), unauth},
		{"foreign-signature-jwt", bearer(foreignTok), unauth},
		{"basic-scheme", "Basic dXNlcjpwYXNz", unauth},
		{"scheme-only", "Bearer", unauth},
		// Who may mint, revoke or administer embed tenants and catalogs is embed-svc's rule:
		// the gateway forwards every authenticated credential of the route's scheme (the
		// refusals are answered, and audited, by the service: e2e and access suites).
		{"acme-admin-bearer", bearer(acme.Users["admin"].Bearer), []int{ok, ok, ok, ok, u, u, ok, u, ok, ok, u}},
		{"acme-developer-bearer", bearer(acme.Users["developer"].Bearer), []int{ok, ok, ok, ok, u, u, ok, u, ok, ok, u}},
		{"acme-ai-bi-user-bearer", bearer(acme.Users["aiBiUser"].Bearer), []int{ok, ok, ok, ok, u, u, ok, u, ok, ok, u}},
		{"acme-viewer-bearer", bearer(acme.Users["viewer"].Bearer), []int{ok, ok, ok, ok, u, u, ok, u, ok, ok, u}},
		{"acme-admin-account-key", apiKey(acme.APIKeys["admin"]), []int{u, u, u, u, ok, ok, ok, ok, ok, ok, u}},
		{"acme-admin-scoped-key", apiKey(acme.APIKeys["adminScoped"]), []int{u, u, u, u, ok, ok, ok, ok, ok, ok, u}},
		{"acme-admin-personal-key", apiKey(acme.APIKeys["personal"]), []int{u, u, u, u, ok, ok, ok, ok, ok, ok, u}},
		{"acme-developer-account-key", apiKey(devKey), []int{u, u, u, u, ok, ok, ok, ok, ok, ok, u}},
		{"globex-admin-bearer", bearer(globex.Users["admin"].Bearer), []int{nf, nf, nf, nf, u, u, ok, u, ok, ok, u}},
		{"globex-admin-key", apiKey(globex.APIKeys["admin"]), []int{u, u, u, u, ok, ok, ok, ok, ok, ok, u}},
		{"initech-free-plan-admin-key", apiKey(initech.APIKeys["admin"]), []int{u, u, u, u, ok, ok, ok, ok, ok, ok, u}},
		{"initech-admin-bearer", bearer(initech.Users["admin"].Bearer), []int{nf, nf, nf, nf, u, u, ok, u, ok, ok, u}},
	}
	for _, c := range cases {
		want := c.want
		if len(want) == 10 { // the unauthenticated rows: every route but exchange
			want = []int{u, u, u, u, u, u, u, u, u, ok, u}
		}
		if len(want) != len(routes) {
			t.Fatalf("%s: table row has %d columns, want %d", c.cred, len(want), len(routes))
		}
		for i, rc := range routes {
			t.Run(c.cred+"/"+rc.name, func(t *testing.T) {
				code, hdr, body := h.do(rc.method, rc.path, c.authz, rc.body)
				if code != want[i] {
					t.Fatalf("%s %s with %s: status %d, want %d; body %s", rc.method, rc.path, c.cred, code, want[i], body)
				}
				switch code {
				case ok:
					var e echoed
					if err := json.Unmarshal(body, &e); err != nil || e.Service != rc.service {
						t.Fatalf("answered by %q (err %v), want %s: %s", e.Service, err, rc.service, body)
					}
					if rc.name == "exchange" {
						return
					}
					if e.Principal == nil || e.Principal.Account.ID == 0 || e.Principal.User == nil {
						t.Fatalf("service got no verified principal: %s", body)
					}
					// The deployment of a generate-session body is embed-svc's to check: the
					// gateway reads no body and attaches nothing.
					if strings.HasPrefix(rc.name, "generate-session") && e.Principal.Deployment != nil {
						t.Fatalf("a deployment attached from the body: %s", body)
					}
				case u:
					if hdr.Get("WWW-Authenticate") == "" {
						t.Fatalf("401 without WWW-Authenticate")
					}
					assertErrorBody(t, body, u)
				default:
					assertErrorBody(t, body, code)
				}
			})
		}
	}
	_ = all
}

func assertErrorBody(t *testing.T, body []byte, status int) {
	t.Helper()
	var e struct {
		Status  int    `json:"status"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Status != status || e.Message == "" || e.Code == "" {
		t.Fatalf("error body %s, want {\"status\": %d, \"code\": ..., \"message\": ...}", body, status)
	}
	if _, ok := errs.Codes[e.Code]; !ok {
		t.Fatalf("error body %s: code %q is not one of errs.Codes", body, e.Code)
	}
}

// TestPrincipalForwarded checks what a service learns of the caller: role, account,
// deployment from the path, key kind and scope; a body is forwarded as it came.
func TestPrincipalForwarded(t *testing.T) {
	h := newHarness(t)
	acme := h.acme()
	a1 := acme.Deployments[0].ID

	_, _, body := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", a1), "Bearer "+acme.Users["aiBiUser"].Bearer, nil)
	var e echoed
	mustJSON(t, body, &e)
	p := e.Principal
	if p.Credential != identity.CredentialBearer || p.User.ID != acme.Users["aiBiUser"].ID || p.Role() != identity.RoleAIBIUser ||
		p.Account.ID != acme.ID || p.Deployment == nil || p.Deployment.ID != a1 || p.Deployment.ProductionBranch != "main" {
		t.Fatalf("principal = %+v", p)
	}
	if p.User.Email != acme.Users["aiBiUser"].Email {
		t.Fatalf("email = %q", p.User.Email)
	}

	_, _, body = h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+acme.APIKeys["adminScoped"], map[string]any{"deploymentId": a1, "externalId": "x"})
	e = echoed{}
	mustJSON(t, body, &e)
	p = e.Principal
	if p.Credential != identity.CredentialAPIKey || p.KeyKind != identity.KeyAccount || len(p.KeyScope) != 1 || p.KeyScope[0] != a1 ||
		p.Deployment != nil || p.Account.Plan != "enterprise" || !p.Account.EmbeddingEnabled || !p.Account.UseCreatorMode {
		t.Fatalf("principal = %+v", p)
	}
	if want, _ := json.Marshal(map[string]any{"deploymentId": a1, "externalId": "x"}); e.BodyLen != len(want) {
		t.Fatalf("the service got %d bytes of a %d-byte body", e.BodyLen, len(want))
	}
}

// TestClientIdentityHeadersAreStripped: a client-sent identity never reaches a service
// as trusted, whether forged, replayed from a real signature, or in other internal headers.
func TestClientIdentityHeadersAreStripped(t *testing.T) {
	h := newHarness(t)
	acme := h.acme()
	a1 := acme.Deployments[0].ID
	// A validly signed principal claiming to be the admin: replaying it must not work.
	forged, _ := h.signer.Sign(&identity.Principal{Credential: identity.CredentialBearer, Account: identity.Account{ID: acme.ID},
		User: &identity.User{ID: acme.Users["admin"].ID, Role: identity.RoleAdmin}, Deployment: &identity.Deployment{ID: a1}})
	path := fmt.Sprintf("/api/v1/deployments/%d/workspace", a1)

	code, _, body := h.do("GET", path, "Bearer "+acme.Users["viewer"].Bearer, nil, identity.Header, forged, "X-Platform-Role", "admin", "X-Platform-User", "1")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var e echoed
	mustJSON(t, body, &e)
	if e.Principal.Role() != identity.RoleViewer || e.Principal.User.ID != acme.Users["viewer"].ID {
		t.Fatalf("service trusted a client identity: %+v", e.Principal)
	}
	for k := range e.Headers {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), identity.HeaderPrefix) && k != identity.Header {
			t.Fatalf("client header %s reached the service", k)
		}
	}
	if got := e.Headers[identity.Header]; len(got) != 1 || got[0] == forged {
		t.Fatalf("identity header = %v", got)
	}
	// Without credentials, a forged identity header changes nothing: 401 at the gateway.
	code, _, _ = h.do("GET", path, "", nil, identity.Header, forged)
	if code != 401 {
		t.Fatalf("forged identity without credentials: %d, want 401", code)
	}
	// And a service reached directly, bypassing the gateway, refuses a missing or
	// tampered identity.
	for _, hv := range []string{"", forged + "x", strings.Replace(forged, ".", "x.", 1)} {
		svc := apitest.New(h.upstream["workspace-svc"].URL)
		req, _ := svc.Request("GET", path, "", nil)
		if hv != "" {
			req.Header.Set(identity.Header, hv)
		}
		if r := svc.Send(t, req); r.Status != 401 {
			t.Fatalf("service without a valid identity: %d, want 401", r.Status)
		}
	}
}

func TestCachedCredentialsHonourExpiryAndRevocation(t *testing.T) {
	h := newHarness(t)
	acme := h.acme()
	path := fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID)

	t.Run("bearer-not-honoured-past-expiry", func(t *testing.T) {
		tok := h.token(acme.Users["viewer"].ID, 10*time.Second)
		if code, _, body := h.do("GET", path, "Bearer "+tok, nil); code != 200 {
			t.Fatalf("fresh token: %d %s", code, body)
		}
		h.clock.set(11 * time.Second)
		defer func() { h.clock.set(0) }()
		if code, _, _ := h.do("GET", path, "Bearer "+tok, nil); code != 401 {
			t.Fatalf("cached token past expiry: %d, want 401", code)
		}
	})
	t.Run("api-key-revocation-seen-after-poll", func(t *testing.T) {
		admin, _ := h.st.User(t.Context(), acme.Users["admin"].ID)
		key, err := platformctl.CreateKey(t.Context(), h.st, admin, identity.KeyAccount, nil, "to-revoke", 0)
		if err != nil {
			t.Fatal(err)
		}
		gen := map[string]any{"deploymentId": acme.Deployments[0].ID}
		if code, _, body := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+key, gen); code != 200 {
			t.Fatalf("fresh key: %d %s", code, body)
		}
		id, _, _ := credentials.ParseAPIKey(key)
		since := time.Now()
		if err := h.st.RevokeAPIKey(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		// What the revocation poller does once per AUTH_REVOCATION_POLL.
		if err := h.authn.Evict(t.Context(), since.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+key, gen); code != 401 {
			t.Fatalf("revoked key: %d, want 401", code)
		}
	})
	t.Run("role-change-reaches-the-service-despite-cached-signatures", func(t *testing.T) {
		tok := "Bearer " + acme.Users["developer"].Bearer
		_, _, body := h.do("GET", path, tok, nil)
		var e echoed
		mustJSON(t, body, &e)
		if e.Principal.Role() != identity.RoleDeveloper {
			t.Fatalf("role %q", e.Principal.Role())
		}
		dev, _ := h.st.User(t.Context(), acme.Users["developer"].ID)
		since := time.Now()
		if _, err := h.st.UpsertUser(t.Context(), store.UserSpec{AccountID: dev.AccountID, Username: dev.Username, Email: dev.Email, Role: identity.RoleViewer}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_, _ = h.st.UpsertUser(t.Context(), store.UserSpec{AccountID: dev.AccountID, Username: dev.Username, Email: dev.Email, Role: identity.RoleDeveloper})
			_ = h.authn.Evict(t.Context(), time.Now().Add(-time.Minute))
		}()
		if err := h.authn.Evict(t.Context(), since.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		_, _, body = h.do("GET", path, tok, nil)
		mustJSON(t, body, &e)
		if e.Principal.Role() != identity.RoleViewer {
			t.Fatalf("after the role change the service still sees %q", e.Principal.Role())
		}
	})
	t.Run("api-key-with-a-wrong-secret-never-matches-a-cached-key", func(t *testing.T) {
		key := acme.APIKeys["admin"]
		gen := map[string]any{"deploymentId": acme.Deployments[0].ID}
		if code, _, _ := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+key, gen); code != 200 {
			t.Fatal("key should work")
		}
		wrong := key[:len(key)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(key, "A")]
		if code, _, _ := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+wrong, gen); code != 401 {
			t.Fatalf("wrong secret with a cached key id: %d, want 401", code)
		}
	})
}

func TestRoutingAndLimits(t *testing.T) {
	h := newHarness(t)
	acme := h.acme()
	a1 := acme.Deployments[0].ID
	tok := "Bearer " + acme.Users["admin"].Bearer

	t.Run("unknown-path-404-json", func(t *testing.T) {
		for _, p := range []string{"/nope", "/api/v1/unknown", "/api/v1/deployments/1", "/api/v1/deployments/abc/folders", "/api/v1/deployments/01/folders",
			fmt.Sprintf("/api/v1/deployments/%d/other", a1), fmt.Sprintf("/api/v1/deployments/%d/../%d/folders", a1, a1+1)} {
			code, _, body := h.do("GET", p, tok, nil)
			if code != 404 {
				t.Fatalf("%s: %d, want 404", p, code)
			}
			assertErrorBody(t, body, 404)
		}
	})
	t.Run("deployment-of-another-account-404", func(t *testing.T) {
		g := h.globex().Deployments[0].ID
		code, _, body := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", g), tok, nil)
		if code != 404 {
			t.Fatalf("%d %s", code, body)
		}
		code2, _, body2 := h.do("GET", "/api/v1/deployments/999999/workspace", tok, nil)
		if code2 != 404 || string(body2) != strings.Replace(string(body), fmt.Sprint(g), "999999", 1) {
			t.Fatalf("another account's deployment must look exactly like a missing one: %s vs %s", body, body2)
		}
	})
	t.Run("routes-reach-their-service", func(t *testing.T) {
		for p, svc := range map[string]string{
			fmt.Sprintf("/api/v1/deployments/%d/folders/3", a1):           "workspace-svc",
			fmt.Sprintf("/api/v1/deployments/%d/workbooks/3", a1):         "workspace-svc",
			fmt.Sprintf("/api/v1/deployments/%d/reports/3", a1):           "workspace-svc",
			fmt.Sprintf("/api/v1/deployments/%d/dbt-sync/abc", a1):        "dbtsync-svc",
			fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", a1): "dbtsync-svc",
			"/build/api/v1/anything":                                      "dbtsync-svc",
		} {
			code, _, body := h.do("GET", p, tok, nil)
			var e echoed
			mustJSON(t, body, &e)
			if code != 200 || e.Service != svc || e.Path != p {
				t.Fatalf("%s: %d answered by %s at %s, want %s", p, code, e.Service, e.Path, svc)
			}
		}
	})
	t.Run("body-limit-413", func(t *testing.T) {
		big := `{"name":"` + strings.Repeat("x", 1<<20) + `"}`
		code, _, body := h.do("POST", fmt.Sprintf("/api/v1/deployments/%d/folders", a1), tok, big)
		if code != 413 {
			t.Fatalf("%d, want 413", code)
		}
		assertErrorBody(t, body, 413)
		// The dbt-sync route takes manifests beyond the default limit.
		code, _, body = h.do("POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", a1), tok, big)
		var e echoed
		mustJSON(t, body, &e)
		if code != 200 || e.BodyLen != len(big) {
			t.Fatalf("dbt-sync with %d bytes: %d, body reached service: %d", len(big), code, e.BodyLen)
		}
		huge := strings.Repeat("x", 8<<20+1)
		if code, _, _ := h.do("POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", a1), tok, huge); code != 413 {
			t.Fatalf("dbt-sync over its limit: %d, want 413", code)
		}
	})
	t.Run("hop-by-hop-and-forwarded-headers", func(t *testing.T) {
		_, _, body := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", a1), tok, nil,
			"Connection", "X-Drop-Me", "X-Drop-Me", "1", "X-Forwarded-For", "6.6.6.6", "Keep-Alive", "timeout=5", "X-Keep", "yes")
		var e echoed
		mustJSON(t, body, &e)
		if _, ok := e.Headers["X-Drop-Me"]; ok {
			t.Fatal("a header named in Connection was forwarded")
		}
		if _, ok := e.Headers["Keep-Alive"]; ok {
			t.Fatal("Keep-Alive was forwarded")
		}
		if got := e.Headers["X-Forwarded-For"]; len(got) != 1 || got[0] != "127.0.0.1" {
			t.Fatalf("X-Forwarded-For = %v: a client's claim about earlier hops must be replaced", got)
		}
		if got := e.Headers["X-Keep"]; len(got) != 1 || got[0] != "yes" {
			t.Fatalf("ordinary header lost: %v", e.Headers)
		}
	})
	t.Run("openapi-served", func(t *testing.T) {
		code, hdr, body := h.do("GET", "/api/v1/openapi.json", "", nil)
		if code != 200 || hdr.Get("Content-Type") != "application/json" || !strings.Contains(string(body), "openapi") {
			t.Fatalf("%d %s %s", code, hdr.Get("Content-Type"), body)
		}
	})
	t.Run("reference-public-and-read-only", func(t *testing.T) {
		// Public like the document: no credential needed, and a wrong one changes nothing.
		for _, authz := range []string{"", "Bearer not-a-jwt"} {
			code, hdr, body := h.do("GET", "/api/v1/docs", authz, nil)
			if code != 200 || hdr.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(string(body), `<redoc spec-url="/api/v1/openapi.json">`) ||
				!strings.HasPrefix(hdr.Get("Content-Security-Policy"), "default-src 'none'") || hdr.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatalf("GET /api/v1/docs with %q: %d %v", authz, code, hdr)
			}
		}
		if code, _, body := h.do("HEAD", "/api/v1/docs", "", nil); code != 200 || len(body) != 0 {
			t.Fatalf("HEAD: %d with %d bytes", code, len(body))
		}
		for _, route := range gateway.OwnRoutes() {
			method, path, _ := strings.Cut(route, " ")
			if strings.HasPrefix(path, "/api/v1/api-keys") || strings.HasPrefix(path, "/api/v1/service-accounts") || path == "/api/v1/oauth/token" {
				continue // an admin's routes and the token endpoint (TestAPIKeyLifecycle, TestServiceAccountLifecycle request each one)
			}
			if code, _, _ := h.do(method, path, "", nil); code != 200 {
				t.Fatalf("%s: %d", route, code)
			}
			code, hdr, body := h.do("POST", path, "", nil)
			if code != 405 || hdr.Get("Allow") != "GET, HEAD" {
				t.Fatalf("POST %s: %d, Allow %q", path, code, hdr.Get("Allow"))
			}
			assertErrorBody(t, body, 405)
		}
		if code, _, _ := h.do("GET", "/api/v1/docs/redoc.standalone.js", "", nil); code != 404 {
			t.Fatalf("the page is one route; a path under it: %d", code)
		}
	})
	t.Run("request-id", func(t *testing.T) {
		// The platform's request id is the gateway's own; a client's short and safe
		// X-Request-Id travels beside it, and any other is dropped, as is a client's
		// X-Client-Request-Id.
		for _, tc := range []struct{ sent, want string }{
			{"req-123", "req-123"},
			{strings.Repeat("r", 65), ""},
			{"a b", ""},
		} {
			_, hdr, body := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", a1), tok, nil,
				"X-Request-Id", tc.sent, "X-Client-Request-Id", "forged")
			var e echoed
			mustJSON(t, body, &e)
			rid := hdr.Get("X-Request-Id")
			got, client := e.Headers["X-Request-Id"], e.Headers["X-Client-Request-Id"]
			if rid == "" || rid == tc.sent || len(got) != 1 || got[0] != rid {
				t.Fatalf("sent %q: client answered %q, service got %v", tc.sent, rid, got)
			}
			if (tc.want == "" && len(client) != 0) || (tc.want != "" && (len(client) != 1 || client[0] != tc.want)) {
				t.Fatalf("sent %q: service got X-Client-Request-Id %v, want %q", tc.sent, client, tc.want)
			}
		}
	})
}

func TestUnavailableServices(t *testing.T) {
	// A port nothing listens on: the service is down. The port stays bound (not
	// listening) for the test, so no server another test starts meanwhile takes it.
	down, _ := url.Parse("http://" + boundNotListening(t))
	// A service that accepts connections but never answers.
	hang, _ := net.Listen("tcp", "127.0.0.1:0")
	defer hang.Close()
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	hung, _ := url.Parse("http://" + hang.Addr().String())
	h := newHarness(t, func(o *gateway.Options) {
		o.Upstreams["workspace-svc"] = []*url.URL{down}
		o.Upstreams["dbtsync-svc"] = []*url.URL{hung}
		o.UpstreamTimeout = 300 * time.Millisecond
	})
	acme := h.acme()
	tok := "Bearer " + acme.Users["admin"].Bearer
	start := time.Now()
	code, _, body := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID), tok, nil)
	if code != 503 {
		t.Fatalf("service down: %d %s, want 503", code, body)
	}
	assertErrorBody(t, body, 503)
	code, _, body = h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", acme.Deployments[0].ID), tok, nil)
	if code != 504 {
		t.Fatalf("service hanging: %d %s, want 504", code, body)
	}
	assertErrorBody(t, body, 504)
	if time.Since(start) > 20*time.Second {
		t.Fatalf("the gateway hung for %s", time.Since(start))
	}
	// The other services keep serving.
	code, _, _ = h.do("GET", "/api/v1/groups", "Api-Key "+acme.APIKeys["admin"], nil)
	if code != 200 {
		t.Fatalf("embed-svc route while others are down: %d", code)
	}
}

func mustJSON(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
}

func TestReplicasRoundRobinAndRouteAroundADeadOne(t *testing.T) {
	var hits [2]int
	var mu sync.Mutex
	var replicas []*url.URL
	var signer *identity.Signer
	h := newHarness(t, func(o *gateway.Options) {
		signer = o.Signer
		for i := 0; i < 2; i++ {
			i := i
			srv := httptest.NewServer(identity.Require(signer, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits[i]++
				mu.Unlock()
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(200)
			})))
			t.Cleanup(srv.Close)
			u, _ := url.Parse(srv.URL)
			replicas = append(replicas, u)
		}
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		dead, _ := url.Parse("http://" + ln.Addr().String())
		ln.Close()
		o.Upstreams["workspace-svc"] = replicas
		o.Upstreams["dbtsync-svc"] = []*url.URL{dead, replicas[0]}
	})
	acme := h.acme()
	tok := "Bearer " + acme.Users["admin"].Bearer
	for i := 0; i < 10; i++ {
		if code, _, _ := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID), tok, nil); code != 200 {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	mu.Lock()
	if hits[0] != 5 || hits[1] != 5 {
		t.Fatalf("round robin over two replicas: %v", hits)
	}
	mu.Unlock()
	// One replica of dbtsync-svc is dead: every request without a body still succeeds.
	for i := 0; i < 6; i++ {
		if code, _, body := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", acme.Deployments[0].ID), tok, nil); code != 200 {
			t.Fatalf("request %d with a dead replica: %d %s", i, code, body)
		}
	}
}

// TestHardeningHeaders: every answer, errors included, carries nosniff (error
// bodies echo the path), and the client's credential never travels past the gateway:
// the service gets the signed identity, not the API key or bearer token.
func TestHardeningHeaders(t *testing.T) {
	h := newHarness(t)
	acme := h.acme()
	a1 := acme.Deployments[0].ID
	bearer := "Bearer " + acme.Users["admin"].Bearer
	for _, c := range []struct{ method, path, authz string }{
		{"GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", a1), bearer},
		{"GET", "/api/v1/no-such-route/<script>", bearer},
		{"GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", a1), ""},
	} {
		code, hdr, _ := h.do(c.method, c.path, c.authz, nil)
		if hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options = %q", c.method, c.path, code, hdr.Get("X-Content-Type-Options"))
		}
	}
	for _, c := range []struct {
		method, path, authz string
		body                any
	}{
		{"GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", a1), bearer, nil},
		{"POST", "/api/v1/embed/generate-session", "Api-Key " + acme.APIKeys["admin"], map[string]any{"deploymentId": a1, "externalId": "x"}},
	} {
		authz := c.authz
		code, _, body := h.do(c.method, c.path, authz, c.body)
		var e echoed
		mustJSON(t, body, &e)
		if code != 200 || e.Principal == nil {
			t.Fatalf("%d %s", code, body)
		}
		for name, vals := range e.Headers {
			for _, v := range vals {
				if strings.EqualFold(name, "Authorization") || strings.Contains(v, strings.TrimPrefix(strings.TrimPrefix(authz, "Bearer "), "Api-Key ")) {
					t.Errorf("the service received the client's credential in %s", name)
				}
			}
		}
	}
}

// TestRevocationSeenDespiteAWritersSlowClock: the change poller compares the
// writer's updatedAt with its own clock; a revocation written by a host whose clock is
// 3 s behind is still seen within a few polls, not after the cache TTL (a minute here).
func TestRevocationSeenDespiteAWritersSlowClock(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.authn.WatchChanges(ctx, 100*time.Millisecond)
	acme := h.acme()
	admin, _ := h.st.User(t.Context(), acme.Users["admin"].ID)
	key, err := platformctl.CreateKey(t.Context(), h.st, admin, identity.KeyAccount, nil, "slow-clock", 0)
	if err != nil {
		t.Fatal(err)
	}
	gen := map[string]any{"deploymentId": acme.Deployments[0].ID}
	if code, _, body := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+key, gen); code != 200 {
		t.Fatalf("fresh key: %d %s", code, body)
	}
	// A few polls pass, so the key's creation is long since seen; then the key is cached
	// again by a request.
	time.Sleep(300 * time.Millisecond)
	if code, _, body := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+key, gen); code != 200 {
		t.Fatalf("key: %d %s", code, body)
	}
	id, _, _ := credentials.ParseAPIKey(key)
	slow := h.st.WithClock(func() time.Time { return time.Now().UTC().Add(-3 * time.Second).Truncate(time.Millisecond) })
	if err := slow.RevokeAPIKey(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		code, _, _ := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+key, gen)
		if code == 401 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a key revoked with a clock 3 s behind is still honoured 2 s later (%d)", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDefaultEmbedTenantIsValidated: an account's default embed tenant is used
// as a scope and inside MongoDB field paths by embed-svc, so the operator's value must be
// a valid tenant name; a bad one is refused and nothing is stored.
func TestDefaultEmbedTenantIsValidated(t *testing.T) {
	h := newHarness(t)
	for _, bad := range []string{"a.b", "$where", "Upper-Case", "x", "tenant with spaces", strings.Repeat("a", 40)} {
		_, err := h.st.UpsertAccount(t.Context(), store.AccountSpec{Name: "tenant-check", Plan: store.PlanEnterprise, DefaultEmbedTenant: bad})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("default embed tenant %q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := h.st.AccountByName(t.Context(), "tenant-check"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused account was stored: %v", err)
	}
	a, err := h.st.UpsertAccount(t.Context(), store.AccountSpec{Name: "tenant-check", Plan: store.PlanEnterprise, DefaultEmbedTenant: "north-region"})
	if err != nil || a.DefaultEmbedTenant != "north-region" {
		t.Fatalf("a valid default tenant: %+v %v", a, err)
	}
}

// boundNotListening is a loopback address whose port a socket of the test holds without
// listening: a connection to it is refused, and no other listener can take the port.
func boundNotListening(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
