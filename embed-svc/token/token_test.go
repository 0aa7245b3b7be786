package token_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/analyticsco/platform/embed-svc/token"
)

// TestClaimsOnTheWire: aud is one string, as the contract says (jwt's ClaimStrings would
// write an array), and the claims read back as they were written.
func TestClaimsOnTheWire(t *testing.T) {
	c := token.Claims{Registered: token.Registered{Issuer: "https://embed.test", Audience: token.Audience, Subject: "ada",
		IssuedAt: jwt.NewNumericDate(time.Unix(1700000000, 0)), ExpiresAt: jwt.NewNumericDate(time.Unix(1700086400, 0)), ID: "j"}, SessionID: "s", AccountID: 1, DeploymentID: 2, Branch: "main",
		Settings: json.RawMessage(`{"allowAi":true}`)}
	raw, got := onTheWire(t, c)
	if got["aud"] != token.Audience || got["exp"] != float64(1700086400) || got["uid"] != nil || got["rid"] != nil {
		t.Fatalf("on the wire: %s", raw)
	}
	var back token.Claims
	if err := json.Unmarshal(raw, &back); err != nil || back.SessionID != "s" || !back.ExpiresAt.Equal(c.ExpiresAt.Time) || string(back.Settings) != `{"allowAi":true}` {
		t.Fatalf("read back %+v (%v)", back, err)
	}
}

func TestClaimsComplete(t *testing.T) {
	for name, c := range map[string]token.Claims{
		"no-sid": {AccountID: 1, DeploymentID: 2}, "no-acc": {SessionID: "s", DeploymentID: 2}, "no-dep": {SessionID: "s", AccountID: 1},
	} {
		if err := c.Complete(); !errors.Is(err, token.ErrIncomplete) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (token.Claims{SessionID: "s", AccountID: 1, DeploymentID: 2}).Complete(); err != nil {
		t.Fatal(err)
	}
}

// TestDataAndAIClaimsOnTheWire: the data-API token and the AI credential keep the claim
// names and JSON types customers' verifiers read (aud one string, iat and exp whole
// seconds, uid only for internal users, no sid in a data token).
func TestDataAndAIClaimsOnTheWire(t *testing.T) {
	reg := token.Registered{Issuer: "https://embed.test", Subject: "ada", IssuedAt: jwt.NewNumericDate(time.Unix(1700000000, 0)),
		ExpiresAt: jwt.NewNumericDate(time.Unix(1700003600, 0)), ID: "j"}
	wire := func(c any) map[string]any {
		_, m := onTheWire(t, c)
		return m
	}
	data := reg
	data.Audience = token.DataAPIAudience
	got := wire(token.DataClaims{Registered: data, AccountID: 1, DeploymentID: 2, Branch: "main", Tenant: "t", CreatorMode: true,
		SecurityContext: json.RawMessage(`{"region":"north"}`), Groups: []string{"sales"},
		UserAttributes: map[string]json.RawMessage{"quota": json.RawMessage(`10`)}})
	want := map[string]any{"iss": "https://embed.test", "aud": "platform-data-api", "sub": "ada", "iat": float64(1700000000),
		"exp": float64(1700003600), "jti": "j", "acc": float64(1), "dep": float64(2), "br": "main", "ten": "t", "int": false, "cm": true,
		"securityContext": map[string]any{"region": "north"}, "groups": []any{"sales"}, "userAttributes": map[string]any{"quota": float64(10)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("data token claims on the wire:\n got %v\nwant %v", got, want)
	}
	if got := wire(token.DataClaims{Registered: data, Internal: true, UserID: 7}); got["uid"] != float64(7) || got["int"] != true {
		t.Fatalf("an internal user's data token: %v", got)
	}
	ai := reg
	ai.Audience = token.AIAudience
	got = wire(token.AIClaims{Registered: ai, SessionID: "s", AccountID: 1, DeploymentID: 2, Branch: "main", Tenant: "t"})
	want = map[string]any{"iss": "https://embed.test", "aud": "platform-ai", "sub": "ada", "iat": float64(1700000000),
		"exp": float64(1700003600), "jti": "j", "sid": "s", "acc": float64(1), "dep": float64(2), "br": "main", "ten": "t"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("AI credential claims on the wire:\n got %v\nwant %v", got, want)
	}
}

func TestOnlyPremiumAndEnterprisePlansEmbed(t *testing.T) {
	for plan, want := range map[string]bool{"premium": true, "enterprise": true, "free": false, "": false, "Premium": false} {
		if got := token.PlanAllowsEmbedding(plan); got != want {
			t.Errorf("PlanAllowsEmbedding(%q) = %v, want %v", plan, got, want)
		}
	}
}

// onTheWire is claims as JSON, and that JSON read back as a generic object.
func onTheWire(t *testing.T, claims any) ([]byte, map[string]any) {
	t.Helper()
	raw, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return raw, m
}
