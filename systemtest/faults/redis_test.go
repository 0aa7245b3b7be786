package faults_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// embedCollections are embed-svc's collections a mint writes to (embed-svc README,
// internal/store/mongostore): tenants, tenant-scoped definitions, external users and
// the per-account user counter.
var embedCollections = []string{"tenants", "definitions", "external_users", "counters"}

// TestRedisStopped: with Redis down, generate-session, exchange and revoke each answer
// 503 with the error body within the client's timeout, a failed mint leaves MongoDB
// exactly as it was, and once Redis is back every one of them works again with no
// service restarted.
func TestRedisStopped(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	key, dep := acme.APIKeys["admin"], acme.Deployments[0].ID

	// Sessions made while Redis is up, to exchange and revoke while it is down.
	unexchanged := sessionIDOf(t, mint(a, key, dep, map[string]any{"externalId": "redis-before-1"}))
	live := sessionIDOf(t, mint(a, key, dep, map[string]any{"externalId": "redis-before-2"}))
	liveToken := tokenOf(t, exchange(a, live))
	pids := map[string]int{"embed-svc-1": s.Process("embed-svc-1").Pid(), "gateway": s.Process("gateway").Pid()}

	before := storeSnapshot(t, s.Mongo.URI, "embed", embedCollections...)
	if err := s.Redis.Stop(); err != nil {
		t.Fatal(err)
	}

	// Each mint below would write a new user, values and memberships, or a new tenant
	// with its definitions, if it got as far as writing.
	newUser := map[string]any{"externalId": "redis-down-user", "email": "down@example.com",
		"groups": []string{"sales"}, "userAttributes": []map[string]any{{"name": "region", "value": "emea"}}}
	newTenant := map[string]any{"externalId": "redis-down-creator", "creatorMode": true, "embedTenantName": "redis-down-tenant",
		"groupDefinitions": []map[string]any{{"name": "partners"}}, "userAttributeDefinitions": []map[string]any{{"name": "tier", "type": "string"}},
		"groups": []string{"partners"}, "userAttributes": []map[string]any{{"name": "tier", "value": "gold"}}}
	cases := []struct {
		name string
		send func() reply
	}{
		{"generate-session-503-new-external-user", func() reply { return mint(a, key, dep, newUser) }},
		{"generate-session-503-new-tenant-with-definitions", func() reply { return mint(a, key, dep, newTenant) }},
		{"exchange-503", func() reply { return exchange(a, unexchanged) }},
		{"revoke-503", func() reply { return revoke(a, key, live) }},
		{"embed-token-request-503-revocation-unknowable", func() reply { return sessionInfo(a, liveToken) }},
	}
	var wg sync.WaitGroup
	got := make([]reply, len(cases))
	for i, c := range cases {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = c.send() }()
	}
	wg.Wait()
	for i, c := range cases {
		r := got[i]
		if r.err != nil || r.status != 503 || !r.errorBody() {
			t.Errorf("%s: want 503 with {status, message} within %s, got %s", c.name, requestTimeout, r)
		}
	}

	after := storeSnapshot(t, s.Mongo.URI, "embed", embedCollections...)
	for _, c := range embedCollections {
		if added := newDocs(before[c], after[c]); len(added) > 0 {
			t.Errorf("generate-session answered 503 for Redis but left new or changed documents in embed.%s: %v", c, added)
		}
	}
	if code := a.call("GET", "/api/v1/embed-tenants/redis-down-tenant/groups", apitest.APIKey(key), nil).status; code != 404 {
		t.Errorf("the tenant of a failed mint exists: GET its groups answered %d, want 404", code)
	}

	if err := s.Redis.Restart(contextFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	var sessionID string
	apitest.Eventually(t, 30*time.Second, "generate-session works again after Redis returns", func() (bool, string) {
		r := mint(a, key, dep, newUser)
		sessionID, _ = r.body["sessionId"].(string)
		return r.status == 200 && sessionID != "", r.String()
	})
	token := tokenOf(t, exchange(a, sessionID))
	info := sessionInfo(a, token)
	user, _ := info.body["user"].(map[string]any)
	if info.status != 200 || user["externalId"] != "redis-down-user" || fmt.Sprint(info.body["groups"]) != "[sales]" {
		t.Errorf("session of the user minted after recovery: want redis-down-user in group sales, got %s", info)
	}
	if r := revoke(a, key, sessionID); r.status != 204 {
		t.Errorf("revoke after recovery: want 204, got %s", r)
	}
	if r := sessionInfo(a, token); r.status != 401 {
		t.Errorf("revoked token after recovery: want 401, got %s", r)
	}
	// The session revoked while Redis was down (503) is still live: the 503 changed nothing.
	if r := sessionInfo(a, liveToken); r.status != 200 {
		t.Errorf("token whose revoke failed with 503: want still 200, got %s", r)
	}
	if n := countDocs(t, s.Mongo.URI, "embed", "external_users", bsonFilter("externalId", "redis-down-user")); n != 1 {
		t.Errorf("external users with externalId redis-down-user: %d, want 1", n)
	}
	for name, pid := range pids {
		if got := s.Process(name).Pid(); got != pid {
			t.Errorf("%s was restarted (pid %d, then %d); recovery must not need a restart", name, pid, got)
		}
	}
}
