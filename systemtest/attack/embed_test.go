package attack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// embedMint sends generate-session for deployment dep with the account API key.
func embedMint(a *api, key string, dep int64, body map[string]any) reply {
	req := map[string]any{"deploymentId": dep}
	for k, v := range body {
		req[k] = v
	}
	return a.call("POST", "/api/v1/embed/generate-session", apitest.APIKey(key), req)
}

func embedToken(t *testing.T, a *api, sessionID string) string {
	t.Helper()
	r := a.call("POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": sessionID})
	tok, _ := r.body["token"].(string)
	if r.status != 200 || tok == "" {
		t.Fatalf("exchange: want 200 with a token, got %s", r)
	}
	return tok
}

func embedSessionID(t *testing.T, r reply) string {
	t.Helper()
	id, _ := r.body["sessionId"].(string)
	if r.status != 200 || id == "" {
		t.Fatalf("generate-session: want 200 with a sessionId, got %s", r)
	}
	return id
}

// Oversized embed input (a securityContext, arrays) against the embed caps, and a full
// Redis against revocation.
func TestEmbedAttacks(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: append([]string{
		"EMBED_MAX_ARRAY_ENTRIES=20", "EMBED_MAX_DEFINITIONS_PER_SCOPE=30", "EMBED_MAX_TENANTS_PER_ACCOUNT=4",
	}, noRateLimits...)})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	key, dep := acme.APIKeys["admin"], acme.Deployments[0].ID

	// An ~800 KiB securityContext must not be accepted and kept in Redis for 24 h.
	t.Run("SecurityContextOverTheCapIs413", func(t *testing.T) {
		big := map[string]any{"blob": strings.Repeat("s", 17<<10)}
		r := embedMint(a, key, dep, map[string]any{"externalId": "sc-big", "securityContext": big})
		if r.status != 413 || !strings.Contains(r.message(), "securityContext") || !strings.Contains(r.message(), "limit of 16384 bytes") || strings.Contains(r.message(), "EMBED_") {
			t.Fatalf("17 KiB securityContext: want 413 naming the limit, got %s", r)
		}
		ok := map[string]any{"blob": strings.Repeat("s", 15<<10)}
		embedSessionID(t, embedMint(a, key, dep, map[string]any{"externalId": "sc-ok", "securityContext": ok}))
	})

	// Unbounded arrays would mean tens of thousands of upserts per request.
	t.Run("ArraysOverTheCapAre400", func(t *testing.T) {
		var groups []string
		var attrs, defs []map[string]any
		for i := 0; i < 21; i++ {
			groups = append(groups, fmt.Sprintf("g%d", i))
			attrs = append(attrs, map[string]any{"name": fmt.Sprintf("a%d", i), "value": "x"})
			defs = append(defs, map[string]any{"name": fmt.Sprintf("d%d", i)})
		}
		for field, v := range map[string]any{"groups": groups, "userAttributes": attrs} {
			r := embedMint(a, key, dep, map[string]any{"externalId": "arrays", field: v})
			if r.status != 400 || !strings.Contains(r.message(), field) || !strings.Contains(r.message(), "limit of 20") || strings.Contains(r.message(), "EMBED_") {
				t.Fatalf("21 %s: want 400 naming the limit, got %s", field, r)
			}
		}
		r := embedMint(a, key, dep, map[string]any{"externalId": "arrays", "creatorMode": true, "embedTenantName": "arrays-tenant", "groupDefinitions": defs})
		if r.status != 400 || !strings.Contains(r.message(), "groupDefinitions") || !strings.Contains(r.message(), "limit of 20") || strings.Contains(r.message(), "EMBED_") {
			t.Fatalf("21 groupDefinitions: want 400 naming the limit, got %s", r)
		}
		if u := a.call("GET", "/api/v1/embed-tenants/arrays-tenant/groups", apitest.APIKey(key), nil); u.status == 200 && len(u.body["items"].([]any)) > 0 {
			t.Fatalf("a refused mint wrote definitions: %s", u)
		}
	})

	t.Run("TestCap_DefinitionsPerScope", func(t *testing.T) {
		existing := a.call("GET", "/api/v1/groups?first=100", apitest.APIKey(key), nil)
		attrs := a.call("GET", "/api/v1/user-attributes?first=100", apitest.APIKey(key), nil)
		if existing.status != 200 || attrs.status != 200 {
			t.Fatalf("list definitions: %s / %s", existing, attrs)
		}
		n := len(existing.body["items"].([]any)) + len(attrs.body["items"].([]any))
		for i := n; i < 30; i++ {
			if r := a.call("POST", "/api/v1/groups", apitest.APIKey(key), map[string]any{"name": fmt.Sprintf("cap-%d", i)}); r.status != 200 && r.status != 201 {
				t.Fatalf("definition %d of 30: %s", i+1, r)
			}
		}
		r := a.call("POST", "/api/v1/groups", apitest.APIKey(key), map[string]any{"name": "one-too-many"})
		if r.status != 400 || !strings.Contains(r.message(), "limit of 30") || strings.Contains(r.message(), "EMBED_") {
			t.Fatalf("definition past the limit: want 400 naming the limit of 30 (not its setting), got %s", r)
		}
		// A tenant scope has its own count: a mint defining groups there still works.
		embedSessionID(t, embedMint(a, key, dep, map[string]any{"externalId": "defs", "creatorMode": true, "embedTenantName": "defs-tenant",
			"groupDefinitions": []any{map[string]any{"name": "tenant-group"}}, "groups": []any{"tenant-group"}}))
	})

	t.Run("TestCap_TenantsPerAccount", func(t *testing.T) {
		refused := ""
		for i := 0; i < 6; i++ {
			tenant := fmt.Sprintf("cap-tenant-%d", i)
			r := embedMint(a, key, dep, map[string]any{"externalId": "tenants", "embedTenantName": tenant})
			if r.status == 400 {
				refused = tenant
				if !strings.Contains(r.message(), "has 4 embed tenants, the limit") || strings.Contains(r.message(), "EMBED_") {
					t.Fatalf("tenant past the limit: want 400 naming the limit of 4 (not its setting), got %s", r)
				}
				break
			}
			embedSessionID(t, r)
		}
		if refused == "" {
			t.Fatal("six new tenants were accepted with EMBED_MAX_TENANTS_PER_ACCOUNT=4")
		}
		// Tenants that exist keep working at the limit.
		embedSessionID(t, embedMint(a, key, dep, map[string]any{"externalId": "tenants", "embedTenantName": "cap-tenant-0"}))
	})

	// Redis filled to maxmemory must not bring a revoked session back, and a mint that
	// cannot be stored is a clean 503.
	t.Run("RevokedStaysRevokedWhenRedisIsFull", func(t *testing.T) {
		revoked := embedSessionID(t, embedMint(a, key, dep, map[string]any{"externalId": "full-revoked"}))
		revokedToken := embedToken(t, a, revoked)
		live := embedToken(t, a, embedSessionID(t, embedMint(a, key, dep, map[string]any{"externalId": "full-live"})))
		if r := a.call("POST", "/api/v1/embed/session/revoke", apitest.APIKey(key), map[string]any{"sessionId": revoked}); r.status != 204 {
			t.Fatalf("revoke: %s", r)
		}
		if r := a.call("GET", "/api/v1/embed/session", apitest.Bearer(revokedToken), nil); r.status != 401 {
			t.Fatalf("revoked token before the flood: want 401, got %s", r)
		}

		ctx := context.Background()
		opt, err := redis.ParseURL(s.Redis.URL)
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		if p, _ := rdb.ConfigGet(ctx, "maxmemory-policy").Result(); p["maxmemory-policy"] != "noeviction" {
			t.Fatalf("the stack's Redis runs maxmemory-policy %q, want noeviction", p["maxmemory-policy"])
		}
		info, _ := rdb.Info(ctx, "memory").Result()
		var used int64
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				fmt.Sscan(v, &used)
			}
		}
		if used == 0 {
			t.Fatalf("no used_memory in INFO memory: %q", info)
		}
		if err := rdb.ConfigSet(ctx, "maxmemory", fmt.Sprint(used+4<<20)).Err(); err != nil {
			t.Fatal(err)
		}
		defer rdb.ConfigSet(ctx, "maxmemory", "0")
		// Fill with ever smaller values until even a tiny write is refused.
		full := false
		n := 0
		for _, size := range []int{64 << 10, 4 << 10, 256, 16} {
			filler := strings.Repeat("f", size)
			full = false
			for i := 0; i < 2000 && !full; i++ {
				n++
				err := rdb.Set(ctx, fmt.Sprintf("attack:filler:%d", n), filler, 0).Err()
				full = err != nil && strings.HasPrefix(err.Error(), "OOM")
			}
		}
		if !full {
			t.Fatal("Redis never reached maxmemory")
		}
		// Keep it full whatever Redis frees meanwhile (expiring keys): the limit goes below
		// what it holds, so every write is refused and nothing is evicted.
		if err := rdb.ConfigSet(ctx, "maxmemory", fmt.Sprint(used/2)).Err(); err != nil {
			t.Fatal(err)
		}

		if r := a.call("GET", "/api/v1/embed/session", apitest.Bearer(revokedToken), nil); r.status != 401 {
			t.Fatalf("revoked token with Redis full: want 401, got %s", r)
		}
		if r := a.call("GET", "/api/v1/embed/session", apitest.Bearer(live), nil); r.status != 200 {
			t.Fatalf("a live token with Redis full: want 200 (reads still work), got %s", r)
		}
		r := embedMint(a, key, dep, map[string]any{"externalId": "full-new"})
		if r.status != 503 || r.message() == "" {
			t.Fatalf("mint with Redis full: want a 503 error body, got %s", r)
		}
	})
}

// An embed token must not keep working after embedding is turned off or the plan
// changes: within a second of the change its next request is refused.
func TestEmbedTokensEndWithEmbedding(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	key, dep := acme.APIKeys["admin"], acme.Deployments[0].ID
	client, err := mongo.Connect(options.Client().ApplyURI(s.Mongo.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	accounts := client.Database("identity").Collection("accounts")
	set := func(field string, value any) {
		t.Helper()
		if _, err := accounts.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: acme.ID}},
			bson.D{{Key: "$set", Value: bson.D{{Key: field, Value: value}, {Key: "updatedAt", Value: time.Now().UTC()}}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, field   string
		off, restored any
	}{
		{"embedding-turned-off", "embeddingEnabled", false, true},
		{"plan-downgraded-to-free", "plan", "free", acme.Plan},
	} {
		t.Run(c.name, func(t *testing.T) {
			var minted reply
			apitest.Eventually(t, 5*time.Second, "a mint works (the previous case's restore is seen)", func() (bool, string) {
				minted = embedMint(a, key, dep, map[string]any{"externalId": "ends-" + c.name})
				return minted.status == 200, minted.String()
			})
			token := embedToken(t, a, embedSessionID(t, minted))
			if r := a.call("GET", "/api/v1/embed/session", apitest.Bearer(token), nil); r.status != 200 {
				t.Fatalf("before: %s", r)
			}
			set(c.field, c.off)
			defer set(c.field, c.restored)
			start := time.Now()
			apitest.Eventually(t, 5*time.Second, "the embed token is refused", func() (bool, string) {
				r := a.call("GET", "/api/v1/embed/session", apitest.Bearer(token), nil)
				return r.status == 401, r.String()
			})
			// The gateway's change poller runs every 200 ms here (1 s in production); allow a
			// loaded machine some slack over that.
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("the token worked for %s after the change, want about a poll interval", d)
			}
			if r := a.call("POST", fmt.Sprintf("/api/v1/deployments/%d/token", dep), apitest.Bearer(token), nil); r.status != 401 {
				t.Errorf("data-API token with embedding off: want 401, got %s", r)
			}
		})
	}
}
