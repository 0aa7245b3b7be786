package attack_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// One embed tenant, or one key, must not act outside its scope nor take more than its
// share of what every tenant shares (Redis, the embed database, the audit trail). One
// stack for all of them; each attack works on users, tenants and sessions of its own.
func TestEmbedTenantAttacks(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: append([]string{
		"EMBED_MAX_LIVE_SESSIONS_PER_ACCOUNT=150", "EMBED_MAX_LIST_SCAN=50", "EMBED_MAX_DEFINITION_CHANGES=60",
	}, noRateLimits...)})
	a := newAPI(s)
	acme, globex := s.Seed.Accounts["acme"], s.Seed.Accounts["globex"]
	key, scoped := apitest.APIKey(acme.APIKeys["admin"]), apitest.APIKey(acme.APIKeys["adminScoped"])
	dep1, dep2 := acme.Deployments[0].ID, acme.Deployments[1].ID
	opt, err := redis.ParseURL(s.Redis.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })

	// A key scoped to deployment 1 must not list or revoke deployment 2's sessions nor
	// replace the account's embed settings.
	t.Run("TestScopedKeyActsOnlyOnItsDeployments", func(t *testing.T) {
		victim := embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep2, map[string]any{"externalId": "scope-victim", "embedTenantName": "scope-tenant"}))
		embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep1, map[string]any{"externalId": "scope-own", "embedTenantName": "scope-tenant"}))
		if r := a.call("GET", fmt.Sprintf("/api/v1/embed/sessions?deploymentId=%d", dep2), scoped, nil); r.status != 403 || r.body["code"] != "key_out_of_scope" {
			t.Fatalf("listing deployment 2 with a key scoped to 1: want 403 key_out_of_scope, got %s", r)
		}
		for after := ""; ; {
			r := a.call("GET", "/api/v1/embed/sessions?tenant=scope-tenant&first=200"+after, scoped, nil)
			if r.status != 200 {
				t.Fatalf("list: %s", r)
			}
			for _, it := range r.body["items"].([]any) {
				if dep := it.(map[string]any)["deploymentId"].(float64); int64(dep) != dep1 {
					t.Fatalf("the scoped key listed a session of deployment %v: %s", dep, r)
				}
			}
			page := r.body["pageInfo"].(map[string]any)
			if page["hasNextPage"] != true {
				break
			}
			after = "&after=" + url.QueryEscape(page["endCursor"].(string))
		}
		if r := a.call("POST", "/api/v1/embed/sessions/revoke", scoped, map[string]any{"deploymentId": dep2}); r.status != 403 || r.body["code"] != "key_out_of_scope" {
			t.Fatalf("revoking deployment 2 with a key scoped to 1: want 403 key_out_of_scope, got %s", r)
		}
		for _, sel := range []map[string]any{{"tenant": "scope-tenant"}, {"externalId": "scope-victim", "tenant": "scope-tenant"}} {
			if r := a.call("POST", "/api/v1/embed/sessions/revoke", scoped, sel); r.status != 200 {
				t.Fatalf("revoke %v inside the scope: %s", sel, r)
			}
		}
		embedToken(t, a, victim) // deployment 2's session still works
		for _, w := range []struct{ method, path string }{{"PUT", "/api/v1/embed/settings"}, {"POST", "/api/v1/groups"}} {
			body := map[string]any{}
			if w.path == "/api/v1/groups" {
				body["name"] = "scoped-write"
			}
			if r := a.call(w.method, w.path, scoped, body); r.status != 403 || r.body["code"] != "key_out_of_scope" {
				t.Fatalf("%s %s with a scoped key: want 403 key_out_of_scope, got %s", w.method, w.path, r)
			}
		}
		if r := a.call("DELETE", "/api/v1/embed-tenants/scope-tenant/users/scope-victim", scoped, nil); r.status != 403 {
			t.Fatalf("a scoped key deletes an external user: %s", r)
		}
		if r := a.call("GET", "/api/v1/embed-tenants/scope-tenant/users/scope-victim", scoped, nil); r.status != 404 {
			t.Fatalf("a scoped key reads a user of deployment 2: want 404, got %s", r)
		}
	})

	// Values must not accumulate on a user without bound, each session copying them into
	// Redis.
	t.Run("TestUserValuesAreBoundedAndSessionsStaySmall", func(t *testing.T) {
		fifteen := strings.Repeat("v", 15000)
		mintValues := func(names ...string) reply {
			var defs, values []any
			for _, n := range names {
				defs = append(defs, map[string]any{"name": n, "type": "string"})
				values = append(values, map[string]any{"name": n, "value": fifteen})
			}
			return embedMint(a, acme.APIKeys["admin"], dep1, map[string]any{"externalId": "whale", "creatorMode": true, "embedTenantName": "whale-tenant",
				"userAttributeDefinitions": defs, "userAttributes": values, "securityContext": map[string]any{"blob": strings.Repeat("s", 15000)}})
		}
		embedSessionID(t, mintValues("a1", "a2"))
		embedSessionID(t, mintValues("a3", "a4"))
		r := mintValues("a5")
		if r.status != 413 || !strings.Contains(r.message(), "limit of 65536 bytes") || strings.Contains(r.message(), "EMBED_") {
			t.Fatalf("a fifth 15 KB value (75 KB in all): want 413 naming the limit of 65536 bytes (not its setting), got %s", r)
		}
		if g := a.call("GET", "/api/v1/embed-tenants/whale-tenant/user-attributes", key, nil); len(g.body["items"].([]any)) != 4 {
			t.Fatalf("the refused mint wrote its definition: %s", g)
		}
		// 40 more sessions of the user hold about a kilobyte each in Redis.
		before := usedMemory(t, rdb)
		for range 40 {
			embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep1, map[string]any{"externalId": "whale", "creatorMode": true, "embedTenantName": "whale-tenant",
				"securityContext": map[string]any{"blob": strings.Repeat("s", 15000)}}))
		}
		if grew := usedMemory(t, rdb) - before; grew > 40*8<<10 {
			t.Fatalf("40 sessions of a user with 60 KB of values and a 15 KB securityContext took %d bytes of Redis", grew)
		}
	})

	// No tenant can fill Redis: an account's live sessions are bounded, and another
	// account mints and revokes as before.
	t.Run("TestAnAccountsLiveSessionsAreBounded", func(t *testing.T) {
		gkey, gdep := globex.APIKeys["admin"], globex.Deployments[0].ID
		var last reply
		for i := range 151 {
			if last = embedMint(a, gkey, gdep, map[string]any{"externalId": fmt.Sprintf("flood-%d", i)}); last.status != 200 {
				break
			}
		}
		if last.status != 403 || last.body["code"] != "live_session_limit" || !strings.Contains(last.message(), "150 live embed sessions") || strings.Contains(last.message(), "EMBED_") {
			t.Fatalf("globex past 150 live sessions: want 403 live_session_limit naming 150 (not its setting), got %s", last)
		}
		id := embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep1, map[string]any{"externalId": "neighbour"}))
		if r := a.call("POST", "/api/v1/embed/session/revoke", key, map[string]any{"sessionId": id}); r.status != 204 {
			t.Fatalf("acme's revoke while globex is at its limit: %s", r)
		}
	})

	// One generate-session must not force 2,000 definition writes. The stack's limit is
	// 60: above the 50 statements of one update command that FerretDB alone never answers.
	t.Run("TestDefinitionChurnIsOneCappedBatch", func(t *testing.T) {
		body := func(n int, desc string) map[string]any {
			var defs []any
			for i := range n {
				defs = append(defs, map[string]any{"name": fmt.Sprintf("churn-%d", i), "type": "string", "description": desc})
			}
			return map[string]any{"externalId": "churner", "creatorMode": true, "embedTenantName": "churn-tenant", "userAttributeDefinitions": defs}
		}
		if r := embedMint(a, acme.APIKeys["admin"], dep1, body(61, "a")); r.status != 400 || !strings.Contains(r.message(), "limit of 60 per request") || strings.Contains(r.message(), "EMBED_") {
			t.Fatalf("61 new definitions: want 400 naming the limit of 60 (not its setting), got %s", r)
		}
		embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep1, body(60, "a")))
		embedProcess := s.Process("embed-svc-1")
		before := definitionUpdates(t, embedProcess.InternalAddr)
		for _, d := range []string{"b", "a", "b", "a"} {
			embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep1, body(60, d)))
		}
		if n := definitionUpdates(t, embedProcess.InternalAddr) - before; n != 4 {
			t.Fatalf("4 mints each changing 60 definitions sent %d update commands, want 4 (one batch each)", n)
		}
	})

	// A mint racing a delete of its user must not leave a working session of a deleted user.
	t.Run("TestDeletingAUserWinsOverMintsRacingIt", func(t *testing.T) {
		for round := range 8 {
			ext := fmt.Sprintf("racer-%d", round)
			embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep1, map[string]any{"externalId": ext, "embedTenantName": "race-tenant"}))
			user := a.call("GET", "/api/v1/embed-tenants/race-tenant/users/"+ext, key, nil)
			deletedID := user.body["id"]
			replies := make([]reply, 5)
			var wg sync.WaitGroup
			for i := range replies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i == 0 {
						replies[i] = a.call("DELETE", "/api/v1/embed-tenants/race-tenant/users/"+ext, key, nil)
						return
					}
					replies[i] = embedMint(a, acme.APIKeys["admin"], dep1, map[string]any{"externalId": ext, "embedTenantName": "race-tenant"})
				}()
			}
			wg.Wait()
			if replies[0].status != 200 {
				t.Fatalf("round %d: delete: %s", round, replies[0])
			}
			for _, r := range replies[1:] {
				if r.status == 409 && r.body["code"] == "external_user_deleting" {
					continue
				}
				id := embedSessionID(t, r)
				ex := a.call("POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": id})
				if ex.status != 200 {
					continue
				}
				info := a.call("GET", "/api/v1/embed/session", apitest.Bearer(ex.body["token"].(string)), nil)
				if u, _ := info.body["user"].(map[string]any); info.status == 200 && u["id"] == deletedID {
					t.Fatalf("round %d: a session of the deleted user %v works after the delete", round, deletedID)
				}
			}
		}
	})

	// Anyone holding a used session id, without credentials, must not write an event into
	// its account's trail on every request.
	t.Run("TestRefusedExchangesOfOneIDAreAuditedOnceAMinute", func(t *testing.T) {
		id := embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep1, map[string]any{"externalId": "replayed"}))
		embedToken(t, a, id)
		for range 300 {
			if r := a.call("POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": id}); r.status != 401 {
				t.Fatalf("a replayed id: %s", r)
			}
		}
		// A revoke recorded after the flood: once it is in the trail, so is every event
		// published before it (one stream, in order).
		marker := embedSessionID(t, embedMint(a, acme.APIKeys["admin"], dep1, map[string]any{"externalId": "marker"}))
		if r := a.call("POST", "/api/v1/embed/session/revoke", key, map[string]any{"sessionId": marker}); r.status != 204 {
			t.Fatalf("revoke: %s", r)
		}
		admin := apitest.Bearer(acme.Users["admin"].Bearer)
		apitest.Eventually(t, 20*time.Second, "the revoke after the flood is in the trail", func() (bool, string) {
			r := a.call("GET", "/api/v1/audit?action=embed.session.revoke&first=5", admin, nil)
			items, _ := r.body["items"].([]any)
			return r.status == 200 && len(items) > 0, r.String()
		})
		r := a.call("GET", "/api/v1/audit?action=embed.session.exchange&first=200", admin, nil)
		var refused []map[string]any
		for _, it := range r.body["items"].([]any) {
			ev := it.(map[string]any)
			if out := ev["outcome"].(map[string]any); out["status"] == float64(401) && ev["actor"].(map[string]any)["externalId"] == "replayed" {
				refused = append(refused, ev)
			}
		}
		if len(refused) != 1 {
			t.Fatalf("300 refused exchanges of one id left %d events in the account's trail, want 1", len(refused))
		}
		if d, _ := refused[0]["details"].(map[string]any); d["failedAttempts"] != float64(1) {
			t.Fatalf("the event's details: %v", refused[0]["details"])
		}
	})
}

// usedMemory is Redis's used_memory.
func usedMemory(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatalf("no used_memory in %q", info)
	return 0
}

// definitionUpdates is embed-svc's count of update commands on the definitions.
func definitionUpdates(t *testing.T, internalAddr string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + internalAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mongodb_client_commands_total{") && strings.Contains(line, `collection="definitions"`) && strings.Contains(line, `command="update"`) {
			f := strings.Fields(line)
			n, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return int64(n)
		}
	}
	return 0
}
