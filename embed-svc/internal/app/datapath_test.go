package app_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// verifyIndependently checks token against the JWKS with lestrrat-go/jwx, a JWT library
// the platform does not use (what a data API of a customer would run), and returns its
// payload's claims.
func verifyIndependently(t *testing.T, e *env, token, audience string) map[string]any {
	t.Helper()
	set, err := jwk.Fetch(context.Background(), e.jwksURL())
	if err != nil {
		t.Fatalf("fetch JWKS: %v", err)
	}
	if _, err := jwt.Parse([]byte(token), jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithIssuer(issuer),
		jwt.WithAudience(audience), jwt.WithClock(jwt.ClockFunc(e.clock.Now))); err != nil {
		t.Fatalf("%s token does not verify against the JWKS with an independent library: %v", audience, err)
	}
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// The security context, effective groups and typed user attributes reach the data path:
// the data-API token carries them with tenant, user, deployment, branch and creator mode;
// GET /api/v1/embed/session shows the same values; and both tokens expire 24 h after
// generate-session, not after the exchange.
func testDataPathClaims(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	ext := uid("rls")
	body := map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": "acme-rls",
		"securityContext": map[string]any{"region": "north", "accountIds": []any{1, 2}}, "groups": []string{"sales"},
		"userAttributes": []any{map[string]any{"name": "region", "value": "eu"}, map[string]any{"name": "quota", "value": 10},
			map[string]any{"name": "regions", "value": []string{"eu", "us"}}}}
	minted := e.clock.Now()
	id := e.mint(t, body)
	e.clock.Advance(2 * time.Minute) // exchanged later than minted: the expiry still counts from the mint
	tok := e.exchange(t, id)
	wantExp := minted.Truncate(time.Second).Add(24 * time.Hour)
	if d := tok.ExpiresAt.Sub(wantExp); d < -time.Second || d > time.Second {
		t.Fatalf("token expiresAt %s, want 24 h after generate-session (%s)", tok.ExpiresAt, wantExp)
	}
	if !tok.RefreshAt.Equal(tok.ExpiresAt.Add(-time.Hour)) {
		t.Fatalf("refreshAt %s, want an hour before expiresAt %s", tok.RefreshAt, tok.ExpiresAt)
	}
	embedClaims := verifyIndependently(t, e, tok.Token, "platform-embed")
	if int64(embedClaims["exp"].(float64)) != tok.ExpiresAt.Unix() {
		t.Fatalf("embed token exp %v, want %d", embedClaims["exp"], tok.ExpiresAt.Unix())
	}

	r := e.do(t, "POST", fmt.Sprintf("/api/v1/deployments/%d/token", dep), bearer(tok.Token), nil)
	if r.Status != 200 {
		t.Fatalf("data token: %d %s", r.Status, r.Body)
	}
	var dt struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	r.json(t, &dt)
	c := verifyIndependently(t, e, dt.Token, "platform-data-api")
	want := map[string]any{
		"iss": issuer, "aud": "platform-data-api", "sub": strings.ToLower(ext), "acc": float64(acme.ID), "dep": float64(dep),
		"br": "main", "ten": "acme-rls", "int": false, "cm": false,
		"securityContext": map[string]any{"region": "north", "accountIds": []any{float64(1), float64(2)}},
		"groups":          []any{"sales"},
		"userAttributes":  map[string]any{"region": "eu", "quota": float64(10), "regions": []any{"eu", "us"}},
	}
	for k, v := range want {
		got := c[k]
		if arr, ok := got.([]any); ok && k == "aud" && len(arr) == 1 {
			got = arr[0]
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("data token claim %s = %#v, want %#v", k, got, v)
		}
	}
	for _, k := range []string{"iat", "exp", "jti"} {
		if c[k] == nil {
			t.Errorf("data token has no %s", k)
		}
	}
	if _, ok := c["sid"]; ok {
		t.Error("data token carries the session id")
	}
	if exp := int64(c["exp"].(float64)); exp > tok.ExpiresAt.Unix() || exp != dt.ExpiresAt.Unix() {
		t.Errorf("data token exp %d: want at most the session's (%d) and equal to expiresAt (%d)", exp, tok.ExpiresAt.Unix(), dt.ExpiresAt.Unix())
	}

	// The session as the embedded app sees it: the same effective values.
	r = e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil)
	if r.Status != 200 {
		t.Fatalf("session: %d %s", r.Status, r.Body)
	}
	var info struct {
		SecurityContext map[string]any `json:"securityContext"`
		Groups          []string       `json:"groups"`
		UserAttributes  []struct {
			Name  string `json:"name"`
			Value any    `json:"value"`
		} `json:"userAttributes"`
		EmbedTenantName string    `json:"embedTenantName"`
		ExpiresAt       time.Time `json:"expiresAt"`
	}
	r.json(t, &info)
	attrs := map[string]any{}
	for _, a := range info.UserAttributes {
		attrs[a.Name] = a.Value
	}
	if !reflect.DeepEqual(info.SecurityContext, want["securityContext"]) || !reflect.DeepEqual(attrs, want["userAttributes"]) ||
		strings.Join(info.Groups, ",") != "sales" || info.EmbedTenantName != "acme-rls" || !info.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Errorf("session view %+v differs from the data token's claims", info)
	}
}
