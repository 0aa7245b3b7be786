package attack_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// A key scoped to deployment 1 must not mint a session in deployment 1 for alice, whom
// deployment 2 stored with an email, a group and `region: EU-only`: that would read those
// back and, with one more mint (`"value": null`, `"groups": []`), clear them for
// deployment 2 too. External users are the account's, stored once per externalId: a
// scoped key must reach only the users whose every deployment is in its scope.
func TestAScopedKeyCannotMintOrReadAUserOfAnotherDeployment(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	key, scoped := apitest.APIKey(acme.APIKeys["admin"]), apitest.APIKey(acme.APIKeys["adminScoped"]) // scoped to deployment 1
	dep1, dep2 := acme.Deployments[0].ID, acme.Deployments[1].ID
	const tenant = "reach-tenant"
	user := "/api/v1/embed-tenants/" + tenant + "/users/alice"

	for path, body := range map[string]map[string]any{
		"/api/v1/user-attributes": {"name": "reach_region", "type": "string"},
		"/api/v1/groups":          {"name": "reach-sales"},
	} {
		if r := a.call("POST", path, key, body); r.status != 200 && r.status != 201 {
			t.Fatalf("POST %s: %s", path, r)
		}
	}
	victim := embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep2, map[string]any{"externalId": "alice", "embedTenantName": tenant,
		"email": "alice@customer.example", "userAttributes": []any{map[string]any{"name": "reach_region", "value": "EU-only"}}, "groups": []any{"reach-sales"}}))
	before := a.call("GET", user, key, nil)
	if before.status != 200 || before.body["email"] != "alice@customer.example" || len(before.body["userAttributes"].([]any)) != 1 || len(before.body["groups"].([]any)) != 1 {
		t.Fatalf("alice as deployment 2 stored her: %s", before)
	}

	if r := a.call("GET", user, scoped, nil); r.status != 404 {
		t.Fatalf("the scoped key reads alice before any mint: want 404, got %s", r)
	}
	// Whatever it sends, dry run or not, the mint is refused and writes nothing.
	for name, extra := range map[string]map[string]any{
		"bare":        {},
		"clearing":    {"userAttributes": []any{map[string]any{"name": "reach_region", "value": nil}}, "groups": []any{}},
		"overwriting": {"email": "mallory@attacker.example", "userProfile": map[string]any{"displayName": "Mallory"}, "userAttributes": []any{map[string]any{"name": "reach_region", "value": "anywhere"}}},
	} {
		for _, dryRun := range []bool{true, false} {
			body := map[string]any{"externalId": "alice", "embedTenantName": tenant, "dryRun": dryRun}
			for k, v := range extra {
				body[k] = v
			}
			r := embedMint(a, acme.APIKeys["adminScoped"], dep1, body)
			if r.status != 403 || r.body["code"] != "key_out_of_scope" || !strings.Contains(r.message(), `"alice"`) ||
				strings.Contains(r.message(), strconv.FormatInt(dep2, 10)) {
				t.Fatalf("%s mint (dryRun %v) for alice with the key scoped to deployment 1: want 403 key_out_of_scope naming alice and not deployment 2, got %s",
					name, dryRun, r)
			}
		}
	}
	if r := a.call("GET", user, scoped, nil); r.status != 404 {
		t.Fatalf("the scoped key reads alice after its refused mints: want 404, got %s", r)
	}
	list := a.call("GET", "/api/v1/embed-tenants/"+tenant+"/users?first=200", scoped, nil)
	if list.status != 200 || len(list.body["items"].([]any)) != 0 {
		t.Fatalf("the scoped key lists the tenant's users: want an empty page, got %s", list)
	}
	after := a.call("GET", user, key, nil)
	if after.status != 200 || !reflect.DeepEqual(after.body, before.body) {
		t.Fatalf("alice after the scoped key's mints:\n%s\nwas\n%s", after, before)
	}
	sessions := a.call("GET", "/api/v1/embed/sessions?tenant="+tenant+"&externalId=alice&first=200", key, nil)
	if sessions.status != 200 || len(sessions.body["items"].([]any)) != 1 {
		t.Fatalf("alice's sessions: want deployment 2's only, got %s", sessions)
	}

	// The key still mints for, and reads, the users of its own deployment.
	embedSessionID(t, embedMint(a, acme.APIKeys["adminScoped"], dep1, map[string]any{"externalId": "ann", "embedTenantName": tenant}))
	if r := a.call("GET", "/api/v1/embed-tenants/"+tenant+"/users/ann", scoped, nil); r.status != 200 {
		t.Fatalf("the scoped key reads the user it minted: %s", r)
	}
	// Revoke by session id is not bound to the key's scope (the spec's Authentication 4).
	if r := a.call("POST", "/api/v1/embed/session/revoke", scoped, map[string]any{"sessionId": victim}); r.status != 204 {
		t.Fatalf("the scoped key revokes deployment 2's session by its id: %s", r)
	}
	if r := a.call("POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": victim}); r.status != 401 {
		t.Fatalf("alice's revoked session exchanged: %s", r)
	}
}
