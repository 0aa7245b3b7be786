package token_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/analyticsco/platform/embed-svc/token"
)

// TestClaimsOnTheWire: aud is one string, as the contract says (jwt's ClaimStrings would
// write an array), and the claims read back as they were written.
func TestClaimsOnTheWire(t *testing.T) {
	c := token.Claims{Issuer: "https://embed.test", Audience: token.Audience, Subject: "ada", IssuedAt: jwt.NewNumericDate(time.Unix(1700000000, 0)),
		ExpiresAt: jwt.NewNumericDate(time.Unix(1700086400, 0)), ID: "j", SessionID: "s", AccountID: 1, DeploymentID: 2, Branch: "main",
		Settings: json.RawMessage(`{"allowAi":true}`)}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(raw, &wire); err != nil {
		t.Fatal(err)
	}
	if wire["aud"] != token.Audience || wire["exp"] != float64(1700086400) || wire["uid"] != nil || wire["rid"] != nil {
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
