package app_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// The session a mint keeps in Redis is bounded by MaxSessionBytes whatever the request
// holds: a maximal securityContext, the largest picture, a user with values at their
// limits. The session's description and its data token still carry all of them.
func testSessionInRedisIsBounded(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	tn := tname("big")
	pic := "https://cdn.example.com/" + strings.Repeat("p", 2048-len("https://cdn.example.com/"))
	var defs, values []any
	for _, name := range []string{"v1", "v2", "v3"} {
		defs = append(defs, map[string]any{"name": name, "type": "string"})
		values = append(values, map[string]any{"name": name, "value": strings.Repeat("x", 16000)})
	}
	id := e.mint(t, map[string]any{"deploymentId": dep, "externalId": strings.Repeat("<", 255), "creatorMode": true, "embedTenantName": tn,
		"userProfile": map[string]any{"picture": pic, "displayName": strings.Repeat("<", 255)}, "email": strings.Repeat("<", 255),
		"securityContext":          map[string]any{"blob": strings.Repeat("s", 16000)},
		"userAttributeDefinitions": defs, "userAttributes": values})
	n, err := e.rdb.StrLen(context.Background(), "embed:session:"+embed.PublicSessionHandle(id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a mint with 48 KB of values, a 16 KB securityContext and a 2 KB picture keeps %d bytes in Redis", n)
	if n > embed.MaxSessionBytes+21 || n > 3000 {
		t.Fatalf("the session in Redis is %d bytes", n)
	}
	tok := e.exchange(t, id)
	r := e.do(t, "POST", fmt.Sprintf("/api/v1/deployments/%d/token", dep), bearer(tok.Token), nil)
	var dt struct{ Token string }
	r.json(t, &dt)
	parts := strings.Split(dt.Token, ".")
	if len(parts) != 3 {
		t.Fatalf("data token %d: %s", r.Status, r.Body)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		SecurityContext map[string]string `json:"securityContext"`
		UserAttributes  map[string]string `json:"userAttributes"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || len(claims.SecurityContext["blob"]) != 16000 || len(claims.UserAttributes) != 3 {
		t.Fatalf("the data token does not carry the values and the securityContext: %v", err)
	}
}
