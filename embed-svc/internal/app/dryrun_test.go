package app_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// generate-session with "dryRun": true resolves everything a mint resolves and answers
// what the session would carry, writing nothing; its errors are the mint's.
// Sequential: it compares Redis and MongoDB before and after.
func testDryRun(t *testing.T, e *env) {
	ctx := context.Background()
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	tenant := tname("dry")
	ext := "dry-" + uid("u")
	sessionKeys := func() int {
		keys, err := e.rdb.Keys(ctx, "embed:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	users, _ := e.app.Store.ExternalUserCount(ctx, acme.ID)
	redisBefore := sessionKeys()

	body := map[string]any{"deploymentId": dep, "externalId": ext, "dryRun": true, "creatorMode": true, "embedTenantName": tenant,
		"email": "dry@example.com", "securityContext": map[string]any{"region": "north"},
		"groupDefinitions":         []any{map[string]any{"name": "dry-group"}},
		"userAttributeDefinitions": []any{map[string]any{"name": "dry-attr", "type": "number"}},
		"groups":                   []string{"dry-group"}, "userAttributes": []any{map[string]any{"name": "dry-attr", "value": 3}},
		"settings": map[string]any{"allowAi": false}}
	r := e.do(t, "POST", "/api/v1/embed/generate-session", key, body)
	if r.Status != 200 {
		t.Fatalf("dry run = %d %s", r.Status, r.Body)
	}
	var out struct {
		DryRun    bool `json:"dryRun"`
		SessionID any  `json:"sessionId"`
		Effective struct {
			User struct {
				ID         int64  `json:"id"`
				Kind       string `json:"kind"`
				ExternalID string `json:"externalId"`
				Email      string `json:"email"`
			} `json:"user"`
			UserCreated     bool             `json:"userCreated"`
			EmbedTenantName string           `json:"embedTenantName"`
			CreatorMode     bool             `json:"creatorMode"`
			BranchName      string           `json:"branchName"`
			Groups          []string         `json:"groups"`
			UserAttributes  []map[string]any `json:"userAttributes"`
			SecurityContext map[string]any   `json:"securityContext"`
			Settings        map[string]any   `json:"settings"`
			ExpiresAt       time.Time        `json:"expiresAt"`
			Definitions     []map[string]any `json:"definitionsCreated"`
		} `json:"effective"`
	}
	r.json(t, &out)
	eff := out.Effective
	if !out.DryRun || out.SessionID != nil || eff.User.Kind != "external" || eff.User.ExternalID != strings.ToLower(ext) || eff.User.ID != 0 ||
		!eff.UserCreated || eff.User.Email != "dry@example.com" || eff.EmbedTenantName != tenant || !eff.CreatorMode || eff.BranchName != "main" {
		t.Fatalf("dry run answer %s", r.Body)
	}
	if !reflect.DeepEqual(eff.Groups, []string{"dry-group"}) || len(eff.UserAttributes) != 1 || eff.UserAttributes[0]["name"] != "dry-attr" ||
		eff.UserAttributes[0]["value"] != float64(3) || eff.SecurityContext["region"] != "north" || eff.Settings["allowAi"] != false ||
		len(eff.Definitions) != 2 || time.Until(eff.ExpiresAt) < 23*time.Hour {
		t.Fatalf("dry run effective values %s", r.Body)
	}
	// Nothing was written: no session id, no user, no counter, no tenant, no definition.
	if n := sessionKeys(); n != redisBefore {
		t.Errorf("Redis keys %d -> %d after a dry run", redisBefore, n)
	}
	if n, _ := e.app.Store.ExternalUserCount(ctx, acme.ID); n != users {
		t.Errorf("external users %d -> %d after a dry run", users, n)
	}
	if _, err := e.app.Store.ExternalUser(ctx, acme.ID, strings.ToLower(ext)); !errors.Is(err, embed.ErrNotFound) {
		t.Errorf("the dry run's user exists: %v", err)
	}
	if ok, _ := e.app.Store.TenantExists(ctx, acme.ID, tenant); ok {
		t.Error("the dry run's tenant exists")
	}
	if defs, _ := e.app.Store.FindDefinitions(ctx, acme.ID, tenant, []string{"dry-group", "dry-attr"}); len(defs) != 0 {
		t.Errorf("the dry run's definitions exist: %v", defs)
	}

	// An existing user: the dry run shows the change, the user keeps what it had.
	real := map[string]any{"deploymentId": dep, "externalId": ext, "groups": []string{"sales"}}
	e.mintAs(t, key, real)
	stored, err := e.app.Store.ExternalUser(ctx, acme.ID, strings.ToLower(ext))
	if err != nil {
		t.Fatal(err)
	}
	r = e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": ext, "groups": []string{"marketing"}, "dryRun": true})
	out.Effective.Groups = nil
	r.json(t, &out)
	if r.Status != 200 || out.Effective.UserCreated || out.Effective.User.ID != stored.ID || !reflect.DeepEqual(out.Effective.Groups, []string{"marketing"}) {
		t.Fatalf("dry run of a known user = %d %s", r.Status, r.Body)
	}
	after, _ := e.app.Store.ExternalUser(ctx, acme.ID, strings.ToLower(ext))
	if !reflect.DeepEqual(after.Groups, stored.Groups) {
		t.Fatalf("a dry run changed the user's groups: %v -> %v", stored.Groups, after.Groups)
	}

	// Errors are the mint's, status and message.
	for name, b := range map[string]map[string]any{
		"unknown group":         {"deploymentId": dep, "externalId": ext, "groups": []string{"no-such-group"}},
		"unknown attribute":     {"deploymentId": dep, "externalId": ext, "userAttributes": []any{map[string]any{"name": "nope", "value": "x"}}},
		"unknown internal user": {"deploymentId": dep, "internalId": "nobody-" + uid("x")},
		"unknown branch":        {"deploymentId": dep, "externalId": ext, "branchName": "no-such-branch"},
	} {
		mint := e.do(t, "POST", "/api/v1/embed/generate-session", key, b)
		b["dryRun"] = true
		dry := e.do(t, "POST", "/api/v1/embed/generate-session", key, b)
		if mint.Status < 400 || dry.Status != mint.Status || string(dry.Body) != string(mint.Body) {
			t.Errorf("%s: mint %d %s, dry run %d %s", name, mint.Status, mint.Body, dry.Status, dry.Body)
		}
	}
}
