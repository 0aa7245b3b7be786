package gateway_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/gateway/internal/app"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/gateway/internal/serviceaccounts"
	"github.com/analyticsco/platform/libs/audit"
)

type serviceAccount struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	CreatedBy *int64     `json:"createdBy"`
	CreatedAt *time.Time `json:"createdAt"`
}

type clientSecret struct {
	ClientID                string     `json:"clientId"`
	ServiceAccountID        int64      `json:"serviceAccountId"`
	ClientSecret            string     `json:"clientSecret"`
	LastUsedAt              *time.Time `json:"lastUsedAt"`
	RevokedAt               *time.Time `json:"revokedAt"`
	RotatedAt               *time.Time `json:"rotatedAt"`
	PreviousSecretExpiresAt *time.Time `json:"previousSecretExpiresAt"`
}

type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
}

type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

const testTokenTTL = 10 * time.Minute

// saHarness is the harness with an OAuth signing key, the service-account limits of
// these tests and the audit events in memory; dep changes the dependencies further.
func saHarness(t *testing.T, dep func(*app.Deps), opts ...func(*gateway.Options)) (*harness, *audit.Memory, ed25519.PublicKey) {
	t.Helper()
	rec := &audit.Memory{Service: "gateway"}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	h := newHarnessWith(t, func(d *app.Deps) {
		d.Audit, d.LastUsedFlush, d.OAuthKey = rec, time.Hour, priv
		d.ServiceAccounts = serviceaccounts.Limits{MaxPerAccount: 3, MaxSecrets: 2, MaxNameBytes: 32, TokenTTL: testTokenTTL,
			MaxScope: 3, Overlap: 5 * time.Second, Retention: time.Hour}
		if dep != nil {
			dep(d)
		}
	}, opts...)
	return h, rec, pub
}

func (h *harness) createSA(authz, name, role string) serviceAccount {
	h.t.Helper()
	code, hdr, raw := h.do("POST", "/api/v1/service-accounts", authz, map[string]any{"name": name, "role": role})
	if code != 201 {
		h.t.Fatalf("create service account %s: %d %s", name, code, raw)
	}
	var sa serviceAccount
	mustJSON(h.t, raw, &sa)
	if sa.Role != role || sa.Name != name || hdr.Get("Location") != "/api/v1/service-accounts/"+strconv.FormatInt(sa.ID, 10) {
		h.t.Fatalf("create service account: %s, Location %q", raw, hdr.Get("Location"))
	}
	return sa
}

func (h *harness) createSecret(authz string, saID int64) clientSecret {
	h.t.Helper()
	code, hdr, raw := h.do("POST", "/api/v1/service-accounts/"+strconv.FormatInt(saID, 10)+"/secrets", authz, nil)
	if code != 201 {
		h.t.Fatalf("create secret: %d %s", code, raw)
	}
	var s clientSecret
	mustJSON(h.t, raw, &s)
	if s.ClientID == "" || s.ClientSecret == "" || s.ServiceAccountID != saID || hdr.Get("Cache-Control") != "no-store" {
		h.t.Fatalf("create secret: %s (Cache-Control %q)", raw, hdr.Get("Cache-Control"))
	}
	return s
}

// tokenRequest posts a token request: form is the body, basic (when set) the client's
// id and secret sent by HTTP Basic.
func (h *harness) tokenRequest(form url.Values, basic ...string) (int, http.Header, []byte) {
	h.t.Helper()
	req, err := http.NewRequest("POST", h.gw.URL+"/api/v1/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if len(basic) == 2 {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(basic[0])+":"+url.QueryEscape(basic[1]))))
	}
	r := apitest.New(h.gw.URL).Send(h.t, req)
	return r.Status, r.Header, r.Body
}

// tokenFor gets a token by the client-credentials grant, the secret in the body.
func (h *harness) tokenFor(s clientSecret, scope string) tokenAnswer {
	h.t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_secret": {s.ClientSecret}}
	if scope != "" {
		form.Set("scope", scope)
	}
	code, hdr, raw := h.tokenRequest(form)
	if code != 200 {
		h.t.Fatalf("token: %d %s", code, raw)
	}
	var tok tokenAnswer
	mustJSON(h.t, raw, &tok)
	if tok.TokenType != "Bearer" || tok.ExpiresIn != int64(testTokenTTL/time.Second) || hdr.Get("Cache-Control") != "no-store" {
		h.t.Fatalf("token answer: %s (Cache-Control %q)", raw, hdr.Get("Cache-Control"))
	}
	return tok
}

// principalAt calls a forwarded route with authz and returns the status and the
// principal the echo service received.
func (h *harness) principalAt(method, path, authz string) (int, echoed) {
	h.t.Helper()
	code, _, raw := h.do(method, path, authz, nil)
	var e echoed
	if code == 200 {
		mustJSON(h.t, raw, &e)
	}
	return code, e
}

func (h *harness) userCount() int64 {
	h.t.Helper()
	n, err := h.st.Database().Collection("users").CountDocuments(context.Background(), map[string]any{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestServiceAccountLifecycle: an admin creates a service account and a client secret;
// the secret buys a token by the body and by HTTP Basic; the token is accepted on a
// workspace and a dbt-sync route under the service account's role, a scoped token only
// on its deployments; a second library verifies the token; the secret rotates (the old
// one working for the overlap) and is revoked; deleting the service account stops its
// tokens and keys within the revocation poll. Every change is audited.
func TestServiceAccountLifecycle(t *testing.T) {
	h, rec, pub := saHarness(t, func(d *app.Deps) { d.RevocationPoll = 100 * time.Millisecond })
	acme := h.acme()
	admin := "Bearer " + acme.Users["admin"].Bearer
	dep, other := acme.Deployments[0].ID, acme.Deployments[1].ID

	sa := h.createSA(admin, "ci-deployer", "developer")
	if sa.CreatedBy == nil || *sa.CreatedBy != acme.Users["admin"].ID {
		t.Fatalf("createdBy: %+v", sa)
	}
	code, _, raw := h.do("GET", "/api/v1/service-accounts", admin, nil)
	if code != 200 || !strings.Contains(string(raw), `"name":"ci-deployer"`) {
		t.Fatalf("list: %d %s", code, raw)
	}
	sec := h.createSecret(admin, sa.ID)

	// By the body, unscoped: every deployment of the account, under the role.
	tok := h.tokenFor(sec, "")
	bearer := "Bearer " + tok.AccessToken
	for _, path := range []string{
		"/api/v1/deployments/" + strconv.FormatInt(dep, 10) + "/folders",
		"/api/v1/deployments/" + strconv.FormatInt(other, 10) + "/dbt-sync/job-1",
	} {
		code, e := h.principalAt("GET", path, bearer)
		if code != 200 || e.Principal == nil || e.Principal.User == nil || e.Principal.User.ID != sa.ID ||
			e.Principal.User.Role != "developer" || e.Principal.Credential != "bearer" || len(e.Principal.KeyScope) != 0 {
			t.Fatalf("%s with the token: %d %+v", path, code, e.Principal)
		}
	}

	// By HTTP Basic, scoped to one deployment: the other is 403 key_out_of_scope, as for
	// a scoped key; another account's deployment is 404, as for any credential.
	code, _, raw = h.tokenRequest(url.Values{"grant_type": {"client_credentials"}, "scope": {strconv.FormatInt(dep, 10)}}, sec.ClientID, sec.ClientSecret)
	if code != 200 {
		t.Fatalf("token by Basic: %d %s", code, raw)
	}
	var scoped tokenAnswer
	mustJSON(t, raw, &scoped)
	if scoped.Scope != strconv.FormatInt(dep, 10) {
		t.Fatalf("scoped token scope %q", scoped.Scope)
	}
	sb := "Bearer " + scoped.AccessToken
	if code, e := h.principalAt("GET", "/api/v1/deployments/"+strconv.FormatInt(dep, 10)+"/dbt-sync/job-1", sb); code != 200 ||
		len(e.Principal.KeyScope) != 1 || e.Principal.KeyScope[0] != dep {
		t.Fatalf("scoped token on its deployment: %d %+v", code, e.Principal)
	}
	code, _, raw = h.do("GET", "/api/v1/deployments/"+strconv.FormatInt(other, 10)+"/folders", sb, nil)
	if code != 403 || !strings.Contains(string(raw), `"code":"key_out_of_scope"`) {
		t.Fatalf("scoped token on another deployment: %d %s, want 403 key_out_of_scope", code, raw)
	}
	if code, _, raw = h.do("GET", "/api/v1/deployments/"+strconv.FormatInt(h.globex().Deployments[0].ID, 10)+"/folders", bearer, nil); code != 404 {
		t.Fatalf("token on another account's deployment: %d %s, want 404", code, raw)
	}
	// A scoped token cannot make an account-wide change, even an admin's.
	code, _, raw = h.do("GET", "/api/v1/api-keys", sb, nil)
	if code != 403 {
		t.Fatalf("scoped developer token on api-keys: %d %s", code, raw)
	}

	// An independent library (lestrrat-go/jwx) verifies the token with the gateway's
	// public key and reads what the gateway promised.
	parsed, err := jwt.Parse([]byte(scoped.AccessToken), jwt.WithKey(jwa.EdDSA(), pub), jwt.WithValidate(true),
		jwt.WithIssuer(h.issuer.Issuer), jwt.WithAudience(h.issuer.Audience), jwt.WithClock(jwt.ClockFunc(h.clock.now)))
	if err != nil {
		t.Fatalf("jwx refuses the token: %v", err)
	}
	sub, _ := parsed.Subject()
	jti, _ := parsed.JwtID()
	exp, _ := parsed.Expiration()
	iat, _ := parsed.IssuedAt()
	var scope, clientID string
	_ = parsed.Get("scope", &scope)
	_ = parsed.Get("client_id", &clientID)
	if sub != strconv.FormatInt(sa.ID, 10) || jti == "" || scope != strconv.FormatInt(dep, 10) || clientID != sec.ClientID ||
		exp.Sub(iat) != testTokenTTL {
		t.Fatalf("claims: sub %q jti %q scope %q client_id %q exp-iat %s", sub, jti, scope, clientID, exp.Sub(iat))
	}

	// Rotation: a new secret works at once; the old one for the overlap, then not.
	code, _, raw = h.do("POST", "/api/v1/service-accounts/"+strconv.FormatInt(sa.ID, 10)+"/secrets/"+sec.ClientID+"/rotate", admin, nil)
	if code != 200 {
		t.Fatalf("rotate: %d %s", code, raw)
	}
	var rotated clientSecret
	mustJSON(t, raw, &rotated)
	if rotated.ClientID != sec.ClientID || rotated.ClientSecret == sec.ClientSecret || rotated.PreviousSecretExpiresAt == nil {
		t.Fatalf("rotate answer: %s", raw)
	}
	h.tokenFor(rotated, "")
	h.tokenFor(sec, "")
	h.clock.advance(6 * time.Second)
	if code, _, raw := h.tokenRequest(url.Values{"grant_type": {"client_credentials"}, "client_id": {sec.ClientID}, "client_secret": {sec.ClientSecret}}); code != 401 {
		t.Fatalf("the rotated-out secret after the overlap: %d %s", code, raw)
	}
	h.clock.set(0) // the change poller looks back from the gateway's clock; the store stamps the real one

	// Revocation: the token endpoint refuses the secret at once; it stays listed.
	code, _, raw = h.do("DELETE", "/api/v1/service-accounts/"+strconv.FormatInt(sa.ID, 10)+"/secrets/"+sec.ClientID, admin, nil)
	if code != 200 || !strings.Contains(string(raw), `"revokedAt":"`) {
		t.Fatalf("revoke: %d %s", code, raw)
	}
	code, hdr, raw := h.tokenRequest(url.Values{"grant_type": {"client_credentials"}}, rotated.ClientID, rotated.ClientSecret)
	var oe oauthError
	mustJSON(t, raw, &oe)
	if code != 401 || oe.Error != "invalid_client" || oe.Description == "" || hdr.Get("WWW-Authenticate") != `Basic realm="platform"` {
		t.Fatalf("a revoked secret by Basic: %d %s (WWW-Authenticate %q)", code, raw, hdr.Get("WWW-Authenticate"))
	}
	code, _, raw = h.do("GET", "/api/v1/service-accounts/"+strconv.FormatInt(sa.ID, 10)+"/secrets", admin, nil)
	if code != 200 || !strings.Contains(string(raw), sec.ClientID) || strings.Contains(string(raw), "sas_") {
		t.Fatalf("list secrets: %d %s", code, raw)
	}
	code, _, raw = h.do("GET", "/api/v1/service-accounts/"+strconv.FormatInt(sa.ID, 10)+"/secrets/"+sec.ClientID, admin, nil)
	var one clientSecret
	mustJSON(t, raw, &one)
	if code != 200 || one.ClientID != sec.ClientID || one.RevokedAt == nil || one.RotatedAt == nil || one.LastUsedAt == nil || one.ClientSecret != "" {
		t.Fatalf("get secret: %d %s", code, raw)
	}

	// Deletion: a token already issued, and an API key the service account owns, stop
	// within the revocation poll; the service account is gone.
	sec2 := h.createSecret(admin, sa.ID)
	live := "Bearer " + h.tokenFor(sec2, "").AccessToken
	key := h.createKey(admin, map[string]any{"name": "sa-key", "kind": "account", "owner": map[string]any{"type": "serviceAccount", "id": sa.ID}})
	if key.Owner.Type != "serviceAccount" || key.Owner.ID != sa.ID {
		t.Fatalf("key owner: %+v", key.Owner)
	}
	folders := "/api/v1/deployments/" + strconv.FormatInt(dep, 10) + "/folders"
	if code, _ := h.principalAt("GET", folders, live); code != 200 {
		t.Fatalf("live token before the delete: %d", code)
	}
	if code := h.generate(key.Token); code != 200 {
		t.Fatalf("service account's key before the delete: %d", code)
	}
	code, _, raw = h.do("DELETE", "/api/v1/service-accounts/"+strconv.FormatInt(sa.ID, 10), admin, nil)
	if code != 204 {
		t.Fatalf("delete: %d %s", code, raw)
	}
	deleted := time.Now()
	for {
		tc, _ := h.principalAt("GET", folders, live)
		kc := h.generate(key.Token)
		if tc == 401 && kc == 401 {
			break
		}
		if time.Since(deleted) > 1500*time.Millisecond {
			t.Fatalf("1.5 s after the delete: token %d, key %d; want both 401", tc, kc)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _, _ := h.do("GET", "/api/v1/service-accounts/"+strconv.FormatInt(sa.ID, 10), admin, nil); code != 404 {
		t.Fatalf("get a deleted service account: %d, want 404", code)
	}
	if code, _, raw := h.tokenRequest(url.Values{"grant_type": {"client_credentials"}, "client_id": {sec2.ClientID}, "client_secret": {sec2.ClientSecret}}); code != 401 {
		t.Fatalf("a deleted service account's secret: %d %s", code, raw)
	}

	want := map[string]int{serviceaccounts.ActionCreate: 1, serviceaccounts.ActionDelete: 1, serviceaccounts.ActionSecretCreate: 2,
		serviceaccounts.ActionSecretRotate: 1, serviceaccounts.ActionSecretRevoke: 1}
	got := map[string]int{}
	for _, ev := range rec.Events() {
		if strings.HasPrefix(ev.Action, "platform.service_account") {
			if ev.Outcome.Result != audit.Success || ev.AccountID != acme.ID || ev.Actor.UserID != acme.Users["admin"].ID {
				t.Errorf("event %s: %+v", ev.Action, ev)
			}
			got[ev.Action]++
		}
	}
	for a, n := range want {
		if got[a] != n {
			t.Errorf("%s: %d events, want %d (%v)", a, got[a], n, got)
		}
	}
}

// TestServiceAccountRoles: a viewer service account's token cannot do an admin thing
// (manage API keys or service accounts); an admin service account's token can, and an
// account key it owns carries the admin role to generate-session, where the contract
// requires an admin's key.
func TestServiceAccountRoles(t *testing.T) {
	h, _, _ := saHarness(t, nil)
	acme := h.acme()
	admin := "Bearer " + acme.Users["admin"].Bearer

	viewer := h.createSA(admin, "reader", "viewer")
	vt := "Bearer " + h.tokenFor(h.createSecret(admin, viewer.ID), "").AccessToken
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/api-keys"}, {"POST", "/api/v1/service-accounts"}, {"GET", "/api/v1/service-accounts"},
	} {
		if code, _, raw := h.do(c.method, c.path, vt, map[string]any{"name": "x", "role": "admin"}); code != 403 {
			t.Errorf("%s %s with a viewer service account: %d %s, want 403", c.method, c.path, code, raw)
		}
	}
	if code, e := h.principalAt("GET", "/api/v1/deployments/"+strconv.FormatInt(acme.Deployments[0].ID, 10)+"/folders", vt); code != 200 || e.Principal.User.Role != "viewer" {
		t.Fatalf("viewer token on a bearer route: %d %+v", code, e.Principal)
	}

	boss := h.createSA(admin, "automation", "admin")
	bt := "Bearer " + h.tokenFor(h.createSecret(admin, boss.ID), "").AccessToken
	// Without an owner, the key is the calling service account's own.
	key := h.createKey(bt, map[string]any{"name": "minting", "kind": "account"})
	if key.Owner.Type != "serviceAccount" || key.Owner.ID != boss.ID {
		t.Fatalf("key made by a service account: owner %+v", key.Owner)
	}
	code, _, raw := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+key.Token, map[string]any{"deploymentId": acme.Deployments[0].ID})
	var e echoed
	mustJSON(t, raw, &e)
	if code != 200 || e.Principal.Credential != "api_key" || e.Principal.KeyKind != "account" || e.Principal.User.ID != boss.ID || e.Principal.User.Role != "admin" {
		t.Fatalf("generate-session with the service account's key: %d %+v", code, e.Principal)
	}
}

// TestServiceAccountRefusals: each refusal has its status, code (or OAuth error) and a
// message naming the limit, and changes nothing.
func TestServiceAccountRefusals(t *testing.T) {
	h, rec, _ := saHarness(t, nil)
	acme := h.acme()
	admin := "Bearer " + acme.Users["admin"].Bearer
	sa := h.createSA(admin, "svc", "developer")
	sec := h.createSecret(admin, sa.ID)
	saPath := "/api/v1/service-accounts/" + strconv.FormatInt(sa.ID, 10)

	usersBefore := h.userCount()
	for _, c := range []struct {
		name, method, path, authz string
		body                      any
		status                    int
		want                      string
	}{
		{"create-400-no-name", "POST", "/api/v1/service-accounts", admin, map[string]any{"role": "viewer"}, 400, "name is required"},
		{"create-400-long-name", "POST", "/api/v1/service-accounts", admin, map[string]any{"name": strings.Repeat("n", 33), "role": "viewer"}, 400, "over the limit of 32"},
		{"create-400-role", "POST", "/api/v1/service-accounts", admin, map[string]any{"name": "x", "role": "owner"}, 400, "role must be"},
		{"create-400-unknown-field", "POST", "/api/v1/service-accounts", admin, map[string]any{"name": "x", "role": "viewer", "scope": []int{1}}, 400, "scope"},
		{"create-403-developer", "POST", "/api/v1/service-accounts", "Bearer " + acme.Users["developer"].Bearer, map[string]any{"name": "x", "role": "viewer"}, 403, "admin role"},
		{"create-403-scoped-key", "POST", "/api/v1/service-accounts", "Api-Key " + acme.APIKeys["adminScoped"], map[string]any{"name": "x", "role": "viewer"}, 403, "key_out_of_scope"},
		{"create-403-personal-key", "POST", "/api/v1/service-accounts", "Api-Key " + acme.APIKeys["personal"], map[string]any{"name": "x", "role": "viewer"}, 403, "personal_key"},
		{"create-401-none", "POST", "/api/v1/service-accounts", "", map[string]any{"name": "x", "role": "viewer"}, 401, ""},
		{"get-404-other-account", "GET", saPath, "Bearer " + h.globex().Users["admin"].Bearer, nil, 404, "not found"},
		{"get-404-person", "GET", "/api/v1/service-accounts/" + strconv.FormatInt(acme.Users["viewer"].ID, 10), admin, nil, 404, "not found"},
		{"get-404-malformed", "GET", "/api/v1/service-accounts/abc", admin, nil, 404, "not found"},
		{"secret-404-malformed", "GET", saPath + "/secrets/nope", admin, nil, 404, "not found"},
		{"secret-405", "PUT", saPath + "/secrets", admin, map[string]any{}, 405, "allowed: GET, POST"},
		{"key-400-sa-as-user", "POST", "/api/v1/api-keys", admin, map[string]any{"name": "k", "kind": "account", "owner": map[string]any{"type": "user", "id": sa.ID}}, 400, "is a service account"},
		{"key-400-person-as-sa", "POST", "/api/v1/api-keys", admin, map[string]any{"name": "k", "kind": "account", "owner": map[string]any{"type": "serviceAccount", "id": acme.Users["viewer"].ID}}, 400, "is a person"},
	} {
		code, _, raw := h.do(c.method, c.path, c.authz, c.body)
		if code != c.status || !strings.Contains(string(raw), c.want) {
			t.Errorf("%s: %d %s, want %d containing %q", c.name, code, raw, c.status, c.want)
		}
	}

	// The limits: three service accounts per account, two secrets each.
	h.createSA(admin, "two", "viewer")
	h.createSA(admin, "three", "viewer")
	code, _, raw := h.do("POST", "/api/v1/service-accounts", admin, map[string]any{"name": "four", "role": "viewer"})
	if code != 400 || !strings.Contains(string(raw), `"code":"service_account_limit"`) || !strings.Contains(string(raw), "3 service accounts") {
		t.Fatalf("a fourth service account: %d %s", code, raw)
	}
	h.createSecret(admin, sa.ID)
	code, _, raw = h.do("POST", saPath+"/secrets", admin, nil)
	if code != 400 || !strings.Contains(string(raw), `"code":"client_secret_limit"`) || !strings.Contains(string(raw), "2 live client secrets") {
		t.Fatalf("a third secret: %d %s", code, raw)
	}
	if n := h.userCount(); n != usersBefore+2 {
		t.Fatalf("users: %d, want %d (only the two good creates)", n, usersBefore+2)
	}
	secrets, _ := h.st.ClientSecrets(context.Background(), sa.ID, time.Time{})
	if len(secrets) != 2 {
		t.Fatalf("secrets: %d, want 2", len(secrets))
	}

	// The token endpoint: RFC 6749 §5.2 bodies, nothing issued.
	good := func() url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_id": {sec.ClientID}, "client_secret": {sec.ClientSecret}}
	}
	with := func(k, v string) url.Values { f := good(); f.Set(k, v); return f }
	for _, c := range []struct {
		name   string
		form   url.Values
		basic  []string
		status int
		err    string
	}{
		{"token-401-wrong-secret", with("client_secret", "sas_wrong"), nil, 401, "invalid_client"},
		{"token-401-unknown-client", with("client_id", "sa_000000000000000000000000"), nil, 401, "invalid_client"},
		{"token-401-basic-wrong", url.Values{"grant_type": {"client_credentials"}}, []string{sec.ClientID, "sas_wrong"}, 401, "invalid_client"},
		{"token-400-grant", with("grant_type", "password"), nil, 400, "unsupported_grant_type"},
		{"token-400-no-grant", with("grant_type", ""), nil, 400, "invalid_request"},
		{"token-400-scope-other-account", with("scope", strconv.FormatInt(h.globex().Deployments[0].ID, 10)), nil, 400, "invalid_scope"},
		{"token-400-scope-garbage", with("scope", "all"), nil, 400, "invalid_scope"},
		{"token-400-scope-too-wide", with("scope", "1 2 3 4"), nil, 400, "invalid_scope"},
		{"token-400-two-methods", good(), []string{sec.ClientID, sec.ClientSecret}, 400, "invalid_request"},
	} {
		code, hdr, raw := h.tokenRequest(c.form, c.basic...)
		var oe oauthError
		_ = json.Unmarshal(raw, &oe)
		if code != c.status || oe.Error != c.err || oe.Description == "" || hdr.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d %s, want %d %s", c.name, code, raw, c.status, c.err)
		}
		basicChallenge := hdr.Get("WWW-Authenticate") == `Basic realm="platform"`
		if basicChallenge != (c.status == 401 && c.basic != nil) {
			t.Errorf("%s: WWW-Authenticate %q", c.name, hdr.Get("WWW-Authenticate"))
		}
	}
	code, _, raw = h.do("POST", "/api/v1/oauth/token", "", map[string]any{"grant_type": "client_credentials"})
	if code != 400 || !strings.Contains(string(raw), `"error":"invalid_request"`) {
		t.Fatalf("a JSON token request: %d %s", code, raw)
	}
	code, _, raw = h.tokenRequest(url.Values{"grant_type": {"client_credentials"}, "pad": {strings.Repeat("x", 9<<10)}})
	if code != 413 {
		t.Fatalf("an oversized token request: %d %s, want 413", code, raw)
	}
	code, hdr, _ := h.do("GET", "/api/v1/oauth/token", "", nil)
	if code != 405 || hdr.Get("Allow") != "POST" {
		t.Fatalf("GET token: %d Allow %q", code, hdr.Get("Allow"))
	}
	if after, _ := h.st.ClientSecret(context.Background(), sec.ClientID); after.LastUsedAt != nil {
		t.Fatalf("a refused request marked the secret used: %v", after.LastUsedAt)
	}
	refused := 0
	for _, ev := range rec.Events() {
		if strings.HasPrefix(ev.Action, "platform.service_account") && ev.Outcome.Result != audit.Success {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no refused change was audited")
	}
}

// TestTokenEndpointFailuresAreLimited: failed client authentications count against the
// client address's AUTH_FAILURE_LIMIT like any 401; over it, failures are 429.
func TestTokenEndpointFailuresAreLimited(t *testing.T) {
	ropts, _ := redis.ParseURL(devstack.RedisForTest(t).URL)
	rdb := redis.NewClient(ropts)
	t.Cleanup(func() { _ = rdb.Close() })
	h, _, _ := saHarness(t, nil, func(o *gateway.Options) {
		o.RateLimiter = ratelimit.New(rdb, devstack.UniqueName(t, "rl")+":")
		o.AuthFailureLimit = ratelimit.Limit{N: 3, Window: time.Minute}
	})
	admin := "Bearer " + h.acme().Users["admin"].Bearer
	sec := h.createSecret(admin, h.createSA(admin, "svc", "viewer").ID)
	bad := url.Values{"grant_type": {"client_credentials"}, "client_id": {sec.ClientID}, "client_secret": {"sas_guess"}}
	var codes []int
	for range 5 {
		code, _, _ := h.tokenRequest(bad)
		codes = append(codes, code)
	}
	if codes[0] != 401 || codes[4] != 429 {
		t.Fatalf("failed token requests: %v, want 401 first and 429 over the limit", codes)
	}
	// A good secret is still served from the throttled address.
	h.tokenFor(sec, "")
}
