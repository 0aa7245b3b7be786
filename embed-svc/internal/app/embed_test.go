package app_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/app"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/keys"
	"github.com/analyticsco/platform/embed-svc/revocation"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/redisx"
)

func TestEmbedService(t *testing.T) {
	e := newEnv(t)
	acme, globex := e.acme(), e.globex()
	dep := acme.Deployments[0].ID
	adminKey := apiKey(acme.APIKeys["admin"])

	// Account-wide catalog for acme, as `make seed` creates it.
	for _, g := range []string{"sales", "marketing"} {
		if r := e.do(t, "POST", "/api/v1/groups", adminKey, map[string]any{"name": g}); r.Status != 200 {
			t.Fatalf("create group %s = %d %s", g, r.Status, r.Body)
		}
	}
	for name, typ := range map[string]string{"region": "string", "quota": "number", "regions": "string_array"} {
		if r := e.do(t, "POST", "/api/v1/user-attributes", adminKey, map[string]any{"name": name, "type": typ}); r.Status != 200 {
			t.Fatalf("create attribute %s = %d %s", name, r.Status, r.Body)
		}
	}

	t.Run("sequential", func(t *testing.T) {
		t.Run("generate-session-round-trips-known-user", func(t *testing.T) {
			ext := uid("bench")
			body := map[string]any{"deploymentId": dep, "externalId": ext}
			e.mint(t, body) // provisions the user
			e.mongoCmd.Reset()
			e.redisCmd.rt.Store(0)
			e.mint(t, body)
			mongoPlain, redisPlain := e.mongoCmd.Total(), e.redisCmd.rt.Load()
			e.mongoCmd.Reset()
			e.redisCmd.rt.Store(0)
			e.mint(t, map[string]any{"deploymentId": dep, "externalId": ext, "groups": []string{"sales"},
				"userAttributes": []map[string]any{{"name": "region", "value": "eu"}}})
			mongoRLS, redisRLS := e.mongoCmd.Total(), e.redisCmd.rt.Load()
			t.Logf("mint, known external user: %d MongoDB and %d Redis round trips; with groups and attributes: %d MongoDB (%v), %d Redis",
				mongoPlain, redisPlain, mongoRLS, e.mongoCmd.ByName(), redisRLS)
			// MongoDB: the account settings, the user (read first: its stored values are
			// bounded in total), its update, the session record, the user again (a delete
			// that began meanwhile wins); the definitions with groups and attributes. Redis
			// (round trips): the live-session count with the reservation, then the session.
			if mongoPlain > 5 || mongoRLS > 6 || redisPlain > 2 || redisRLS > 2 {
				t.Fatalf("round trips over budget: mongo %d/%d (max 5/6), redis %d/%d (max 2)", mongoPlain, mongoRLS, redisPlain, redisRLS)
			}
		})

		t.Run("generate-session-writes-its-definitions-in-one-batch", func(t *testing.T) {
			// 100 definitions whose descriptions alternate: every mint changes all of them (an
			// update command of 100 statements on existing documents, which FerretDB alone,
			// the local stack's MongoDB, never answers).
			tn := tname("batch")
			body := func(desc string) map[string]any {
				var defs []any
				for i := range 100 {
					defs = append(defs, map[string]any{"name": fmt.Sprintf("b%d", i), "type": "string", "description": desc})
				}
				return map[string]any{"deploymentId": dep, "externalId": uid("batch"), "creatorMode": true, "embedTenantName": tn, "userAttributeDefinitions": defs}
			}
			e.mongoCmd.Reset()
			e.mint(t, body("a"))
			created := e.mongoCmd.ByName()
			for _, desc := range []string{"b", "a"} {
				e.mongoCmd.Reset()
				e.mint(t, body(desc))
				changed := e.mongoCmd.ByName()
				t.Logf("mint creating 100 definitions: %v; changing them: %v", created, changed)
				// One update command for the 100 definitions; the mint's other round trips
				// (settings, user, record, the audit outbox) come on top.
				if changed["update"] != 1 || e.mongoCmd.Total() > 12 {
					t.Fatalf("changing 100 definitions took %d update commands (%d in all), want 1 batch: %v", changed["update"], e.mongoCmd.Total(), changed)
				}
			}
			// The definitions' batch, the new user, the session record.
			if created["insert"] > 3 || created["update"] > 1 {
				t.Fatalf("creating 100 definitions: %v, want one insert batch (and the user's and the session record's inserts)", created)
			}
		})

		t.Run("branch-selection", func(t *testing.T) {
			tests := []struct {
				name, branch string
				want         int
				prod         bool
			}{
				{"generate-session-200-production-by-name", "main", 200, true},
				{"generate-session-200-production-keyword", "production", 200, true},
				{"generate-session-200-served-branch", "feature-x", 200, false},
				{"generate-session-400-branch-not-served", "stale-y", 400, false},
				{"generate-session-404-not-a-branch", "nope", 404, false},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					body := map[string]any{"deploymentId": dep, "externalId": uid("br"), "branchName": tc.branch}
					r := e.do(t, "POST", "/api/v1/embed/generate-session", adminKey, body)
					if r.Status != tc.want {
						t.Fatalf("status %d, want %d: %s", r.Status, tc.want, r.Body)
					}
					if tc.want != 200 {
						return
					}
					var out struct{ SessionID string }
					r.json(t, &out)
					tok := e.exchange(t, out.SessionID)
					c, err := parseToken(e.jwksURL(), tok.Token, "platform-embed")
					if err != nil {
						t.Fatal(err)
					}
					wantBr := tc.branch
					if tc.prod {
						wantBr = "main"
					}
					if c.Br != wantBr {
						t.Fatalf("br = %q, want %q", c.Br, wantBr)
					}
				})
			}
			t.Run("generate-session-503-resolver-unreachable", func(t *testing.T) {
				if err := e.branches.Load().Close(); err != nil {
					t.Fatal(err)
				}
				if err := e.nc.Flush(); err != nil {
					t.Fatal(err)
				}
				defer func() { e.branches.Store(branchResponder(t, e.nc)) }()
				r := e.do(t, "POST", "/api/v1/embed/generate-session", adminKey, map[string]any{"deploymentId": dep, "externalId": uid("br"), "branchName": "feature-z"})
				if r.Status != 503 {
					t.Fatalf("status %d, want 503: %s", r.Status, r.Body)
				}
			})
		})

		t.Run("settings-layering-with-account-settings", func(t *testing.T) {
			off, de, tz := false, "de-DE", "Europe/Berlin"
			if err := e.app.Store.SetAccountSettings(context.Background(), globex.ID, embed.AccountSettings{AllowAI: &off, Locale: &de, Timezone: &tz}); err != nil {
				t.Fatal(err)
			}
			gkey := apiKey(globex.APIKeys["admin"])
			gdep := globex.Deployments[0].ID
			mintInfo := func(settings map[string]any) (sessionInfo, string) {
				body := map[string]any{"deploymentId": gdep, "externalId": uid("set")}
				if settings != nil {
					body["settings"] = settings
				}
				tok := e.exchange(t, e.mintAs(t, gkey, body))
				r := e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil)
				if r.Status != 200 {
					t.Fatalf("session = %d %s", r.Status, r.Body)
				}
				var info sessionInfo
				r.json(t, &info)
				return info, tok.Token
			}
			inherited, tok := mintInfo(nil)
			if inherited.Settings["allowAi"] != false || inherited.Settings["showDashboardChat"] != false || inherited.Settings["allowChatWorkspaceAuthoring"] != true ||
				inherited.Settings["locale"] != "de-DE" || inherited.Settings["timezone"] != "Europe/Berlin" || inherited.Settings["showWorkbookShare"] != true {
				t.Fatalf("inherited settings = %v", inherited.Settings)
			}
			if r := e.do(t, "POST", "/api/v1/embed/session/ai-credentials", bearer(tok), nil); r.Status != 403 {
				t.Fatalf("ai-credentials with inherited allowAi false = %d %s", r.Status, r.Body)
			}
			pinned, tok := mintInfo(map[string]any{"allowAi": true, "showWorkbookShare": false, "locale": "klingon-xx", "timezone": "+02:00"})
			if pinned.Settings["allowAi"] != true || pinned.Settings["showWorkbookShare"] != false || pinned.Settings["locale"] != "de-DE" || pinned.Settings["timezone"] != "Europe/Berlin" {
				t.Fatalf("pinned settings = %v", pinned.Settings)
			}
			if r := e.do(t, "POST", "/api/v1/embed/session/ai-credentials", bearer(tok), nil); r.Status != 200 {
				t.Fatalf("ai-credentials with pinned allowAi = %d %s", r.Status, r.Body)
			}
			c, err := parseToken(e.jwksURL(), tok, "platform-embed")
			if err != nil {
				t.Fatal(err)
			}
			if c.Set["allowAi"] != true || c.Set["showWorkbookShare"] != false {
				t.Fatalf("signed switches = %v", c.Set)
			}
		})
		t.Run("generate-session-dry-run", func(t *testing.T) { testDryRun(t, e) })
		t.Run("session-control", func(t *testing.T) { testSessionControl(t, e) })
		t.Run("session-control-round-trips", func(t *testing.T) { testSessionControlRoundTrips(t, e) })
		t.Run("tenant-users", func(t *testing.T) { testTenantUsers(t, e) })
		t.Run("group-members", func(t *testing.T) { testGroupMembers(t, e) })
		t.Run("viewer-lookup", func(t *testing.T) { testViewerLookup(t, e) })
		t.Run("generate-session-resources", func(t *testing.T) { testResources(t, e) })
		t.Run("delete-wins-over-concurrent-mints", func(t *testing.T) { testDeleteWinsOverMints(t, e) })
		// GET/PUT /api/v1/embed/settings: the account-wide layer, by the account's admins,
		// with the layering above applied to the next sessions.
		t.Run("account-settings-api", func(t *testing.T) {
			// The layer the operator command sets, as the subtest before leaves it: set here
			// too, so this subtest passes alone.
			off, de, tz := false, "de-DE", "Europe/Berlin"
			if err := e.app.Store.SetAccountSettings(context.Background(), globex.ID, embed.AccountSettings{AllowAI: &off, Locale: &de, Timezone: &tz}); err != nil {
				t.Fatal(err)
			}
			gadmin := bearer(globex.Users["admin"].Bearer)
			get := func(auth string) map[string]any {
				t.Helper()
				r := e.do(t, "GET", "/api/v1/embed/settings", auth, nil)
				if r.Status != 200 {
					t.Fatalf("GET settings = %d %s", r.Status, r.Body)
				}
				var v map[string]any
				r.json(t, &v)
				return v
			}
			if v := get(apiKey(globex.APIKeys["admin"])); v["allowAi"] != false || v["locale"] != "de-DE" || v["timezone"] != "Europe/Berlin" ||
				v["showDashboardChat"] != nil || len(v) != 6 {
				t.Fatalf("globex settings = %v", v)
			}
			r := e.do(t, "PUT", "/api/v1/embed/settings", gadmin, map[string]any{"allowAi": true, "locale": "fr-fr", "timezone": "America/New_York", "showAiWidgets": false})
			if r.Status != 200 {
				t.Fatalf("PUT = %d %s", r.Status, r.Body)
			}
			want := map[string]any{"allowAi": true, "locale": "fr-FR", "timezone": "America/New_York", "showAiWidgets": false,
				"showDashboardChat": nil, "showWorkbookChat": nil}
			if v := get(gadmin); !reflect.DeepEqual(v, want) {
				t.Fatalf("after PUT = %v, want %v", v, want)
			}
			for name, body := range map[string]any{
				"locale": map[string]any{"locale": "klingon-xx"}, "timezone": map[string]any{"timezone": "+02:00"},
				"unknown field": map[string]any{"bogus": 1}, "wrong type": map[string]any{"allowAi": "yes"},
			} {
				if r := e.do(t, "PUT", "/api/v1/embed/settings", gadmin, body); r.Status != 400 {
					t.Errorf("PUT with a bad %s = %d %s", name, r.Status, r.Body)
				}
			}
			if v := get(gadmin); !reflect.DeepEqual(v, want) {
				t.Fatalf("a refused PUT changed the settings: %v", v)
			}
			// The next session inherits the new layer.
			tok := e.exchange(t, e.mintAs(t, apiKey(globex.APIKeys["admin"]), map[string]any{"deploymentId": globex.Deployments[0].ID, "externalId": uid("set")}))
			r = e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil)
			var info sessionInfo
			r.json(t, &info)
			if info.Settings["allowAi"] != true || info.Settings["locale"] != "fr-FR" || info.Settings["timezone"] != "America/New_York" || info.Settings["showAiWidgets"] != false {
				t.Fatalf("inherited settings = %v", info.Settings)
			}
			// Another account sees its own layer; non-admins and embed tokens are refused.
			if v := get(apiKey(acme.APIKeys["admin"])); v["allowAi"] != nil || v["locale"] != nil {
				t.Fatalf("acme sees %v", v)
			}
			if r := e.do(t, "GET", "/api/v1/embed/settings", bearer(globex.Users["aiBiUser"].Bearer), nil); r.Status != 403 {
				t.Fatalf("ai_bi_user GET = %d", r.Status)
			}
			if r := e.do(t, "PUT", "/api/v1/embed/settings", bearer(tok.Token), map[string]any{"allowAi": false}); r.Status != 401 && r.Status != 403 {
				t.Fatalf("embed token PUT = %d", r.Status)
			}
			// An empty body resets every key to the built-in default.
			if r := e.do(t, "PUT", "/api/v1/embed/settings", gadmin, map[string]any{}); r.Status != 200 {
				t.Fatalf("reset = %d %s", r.Status, r.Body)
			}
			if v := get(gadmin); v["allowAi"] != nil || v["locale"] != nil {
				t.Fatalf("after reset = %v", v)
			}
		})
	})

	t.Run("parallel", func(t *testing.T) {
		t.Run("generate-session-rejections", func(t *testing.T) { testRejections(t, e) })
		t.Run("generate-session-external-user-flow", func(t *testing.T) { t.Parallel(); testExternalFlow(t, e) })
		t.Run("memberships-and-values", func(t *testing.T) { t.Parallel(); testMemberships(t, e) })
		t.Run("creator-mode-definitions", func(t *testing.T) { t.Parallel(); testCreatorMode(t, e) })
		t.Run("exchange", func(t *testing.T) { t.Parallel(); testExchange(t, e) })
		t.Run("revoke", func(t *testing.T) { t.Parallel(); testRevoke(t, e) })
		t.Run("internal-user", func(t *testing.T) { t.Parallel(); testInternalUser(t, e) })
		t.Run("data-token-and-ai", func(t *testing.T) { t.Parallel(); testDataToken(t, e) })
		t.Run("catalogs", func(t *testing.T) { t.Parallel(); testCatalogs(t, e) })
		t.Run("session-in-redis-is-bounded", func(t *testing.T) { t.Parallel(); testSessionInRedisIsBounded(t, e) })
		t.Run("service-requires-gateway-identity", func(t *testing.T) {
			t.Parallel()
			r := direct(t, e.svcURL, "POST", "/api/v1/embed/generate-session", map[string]any{"deploymentId": dep, "externalId": "x"})
			if r.Status != 401 {
				t.Fatalf("direct call without identity = %d", r.Status)
			}
		})
	})

	t.Run("metrics", func(t *testing.T) {
		if r := direct(t, e.svcURL, "GET", "/metrics", nil); r.Status != 401 || strings.Contains(string(r.Body), "embed_svc") {
			t.Fatalf("public /metrics = %d, want 401 like any path without an identity (metrics are on the internal listener)", r.Status)
		}
		counters := func() map[string]float64 {
			out := map[string]float64{}
			for _, line := range strings.Split(string(direct(t, e.internalURL, "GET", "/metrics", nil).Body), "\n") {
				if name, value, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "embed_svc_session") {
					out[name], _ = strconv.ParseFloat(value, 64)
				}
			}
			return out
		}
		before := counters()
		// What this subtest does itself is counted, whatever ran before it.
		id := e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("metrics")})
		e.exchange(t, id)
		if r := e.do(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": id}); r.Status != 401 {
			t.Fatalf("second exchange = %d", r.Status)
		}
		if r := e.do(t, "POST", "/api/v1/embed/session/revoke", adminKey, map[string]any{"sessionId": id}); r.Status != 204 {
			t.Fatalf("revoke = %d", r.Status)
		}
		after := counters()
		for _, name := range []string{`embed_svc_sessions_minted_total{user="external"}`, "embed_svc_sessions_revoked_total",
			`embed_svc_session_exchanges_total{outcome="ok"}`, `embed_svc_session_exchanges_total{outcome="rejected"}`} {
			if _, ok := after[name]; !ok {
				t.Fatalf("metrics lack %s: %v", name, after)
			}
			if after[name] < before[name]+1 {
				t.Errorf("%s went from %v to %v, want at least one more", name, before[name], after[name])
			}
		}
	})

	// It moves the clock a little (exchange two minutes after the mint).
	t.Run("data-path-claims", func(t *testing.T) { testDataPathClaims(t, e) })
	t.Run("emergency-signing-key-revocation", func(t *testing.T) { testRevokeSigningKey(t, e) })
	// Last: it moves the clock.
	t.Run("key-rotation-without-downtime", func(t *testing.T) { testKeyRotation(t, e) })
}

func testRejections(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	tenant := tname("rej")
	ext := func() string { return uid("rej") }
	tests := []struct {
		name    string
		auth    string
		body    any
		status  int
		message string // substring; "" skips
	}{
		{"generate-session-400-neither-id", key, map[string]any{"deploymentId": dep}, 400, "exactly one of externalId and internalId"},
		{"generate-session-400-both-ids", key, map[string]any{"deploymentId": dep, "externalId": "a", "internalId": "b"}, 400, "exactly one"},
		{"generate-session-400-internal-with-groups", key, map[string]any{"deploymentId": dep, "internalId": "acme-admin", "groups": []string{}}, 400, "groups is not allowed with internalId"},
		{"generate-session-400-internal-with-attributes", key, map[string]any{"deploymentId": dep, "internalId": "acme-admin", "userAttributes": []any{}}, 400, "userAttributes is not allowed"},
		{"generate-session-400-internal-with-group-definitions", key, map[string]any{"deploymentId": dep, "internalId": "acme-admin", "groupDefinitions": []any{}}, 400, "groupDefinitions is not allowed"},
		{"generate-session-400-internal-with-attribute-definitions", key, map[string]any{"deploymentId": dep, "internalId": "acme-admin", "userAttributeDefinitions": []any{}}, 400, "userAttributeDefinitions is not allowed"},
		{"generate-session-400-internal-with-security-context", key, map[string]any{"deploymentId": dep, "internalId": "acme-admin", "securityContext": map[string]any{}}, 400, "securityContext is not allowed"},
		{"generate-session-400-internal-with-profile", key, map[string]any{"deploymentId": dep, "internalId": "acme-admin", "userProfile": map[string]any{}}, 400, "userProfile is not allowed"},
		{"generate-session-400-email-without-external", key, map[string]any{"deploymentId": dep, "internalId": "acme-admin", "email": "a@b.c"}, 400, "email is only allowed with externalId"},
		{"generate-session-400-definitions-without-creator-mode", key, map[string]any{"deploymentId": dep, "externalId": ext(), "embedTenantName": tenant, "groupDefinitions": []any{map[string]any{"name": "g"}}}, 400, "require creatorMode"},
		{"generate-session-400-definitions-without-tenant", key, map[string]any{"deploymentId": dep, "externalId": ext(), "creatorMode": true, "userAttributeDefinitions": []any{map[string]any{"name": "a", "type": "string"}}}, 400, "require embedTenantName"},
		{"generate-session-400-duplicate-groups", key, map[string]any{"deploymentId": dep, "externalId": ext(), "groups": []string{"sales", "sales"}}, 400, "duplicate name"},
		{"generate-session-400-duplicate-attributes", key, map[string]any{"deploymentId": dep, "externalId": ext(), "userAttributes": []any{map[string]any{"name": "region", "value": "a"}, map[string]any{"name": "region", "value": "b"}}}, 400, "duplicate name"},
		{"generate-session-400-duplicate-group-definitions", key, map[string]any{"deploymentId": dep, "externalId": ext(), "creatorMode": true, "embedTenantName": tenant, "groupDefinitions": []any{map[string]any{"name": "g"}, map[string]any{"name": "g"}}}, 400, "duplicate name"},
		{"generate-session-400-duplicate-attribute-definitions", key, map[string]any{"deploymentId": dep, "externalId": ext(), "creatorMode": true, "embedTenantName": tenant, "userAttributeDefinitions": []any{map[string]any{"name": "a", "type": "string"}, map[string]any{"name": "a", "type": "number"}}}, 400, "duplicate name"},
		{"generate-session-400-tenant-too-short", key, map[string]any{"deploymentId": dep, "externalId": ext(), "embedTenantName": "abcd"}, 400, "embedTenantName"},
		{"generate-session-400-tenant-uppercase", key, map[string]any{"deploymentId": dep, "externalId": ext(), "embedTenantName": "Acme-partners"}, 400, "embedTenantName"},
		{"generate-session-400-tenant-ends-with-dash", key, map[string]any{"deploymentId": dep, "externalId": ext(), "embedTenantName": "acme-"}, 400, "embedTenantName"},
		{"generate-session-400-tenant-too-long", key, map[string]any{"deploymentId": dep, "externalId": ext(), "embedTenantName": "a" + strings.Repeat("b", 36)}, 400, "embedTenantName"},
		{"generate-session-400-picture-not-http", key, map[string]any{"deploymentId": dep, "externalId": ext(), "userProfile": map[string]any{"picture": "ftp://x/y.png"}}, 400, "userProfile.picture"},
		{"generate-session-400-picture-relative", key, map[string]any{"deploymentId": dep, "externalId": ext(), "userProfile": map[string]any{"picture": "/a.png"}}, 400, "userProfile.picture"},
		{"generate-session-400-value-type-mismatch", key, map[string]any{"deploymentId": dep, "externalId": ext(), "userAttributes": []any{map[string]any{"name": "quota", "value": "ten"}}}, 400, "does not match"},
		{"generate-session-400-settings-chrome-key", key, map[string]any{"deploymentId": dep, "externalId": ext(), "settings": map[string]any{"showHeader": false}}, 400, `unknown field "showHeader"`},
		{"generate-session-400-settings-non-boolean", key, map[string]any{"deploymentId": dep, "externalId": ext(), "settings": map[string]any{"allowAi": "no"}}, 400, "allowAi"},
		{"generate-session-400-unknown-attribute", key, map[string]any{"deploymentId": dep, "externalId": ext(), "userAttributes": []any{map[string]any{"name": "nope", "value": "x"}}}, 400, "User attributes not found"},
		{"generate-session-400-unknown-groups", key, map[string]any{"deploymentId": dep, "externalId": ext(), "groups": []string{"sales", "ghosts", "phantoms"}}, 400, "Groups with names ghosts, phantoms not found"},
		{"generate-session-400-unknown-field", key, map[string]any{"deploymentId": dep, "externalId": ext(), "colour": "red"}, 400, `unknown field "colour"`},
		{"generate-session-400-missing-deployment", key, map[string]any{"externalId": ext()}, 400, "deploymentId is required"},
		{"generate-session-400-empty-external-id", key, map[string]any{"deploymentId": dep, "externalId": "   "}, 400, "externalId"},
		{"generate-session-400-malformed-json", key, `{"deploymentId": `, 400, "malformed JSON"},
		{"generate-session-403-creator-mode-without-flag", apiKey(e.globex().APIKeys["admin"]), map[string]any{"deploymentId": e.globex().Deployments[0].ID, "externalId": ext(), "creatorMode": true}, 403, "useCreatorMode"},
		{"generate-session-403-personal-key", apiKey(acme.APIKeys["personal"]), map[string]any{"deploymentId": dep, "externalId": ext()}, 403, "personal"},
		{"generate-session-403-key-scoped-elsewhere", apiKey(acme.APIKeys["adminScoped"]), map[string]any{"deploymentId": acme.Deployments[1].ID, "externalId": ext()}, 403, "scoped"},
		{"generate-session-403-free-plan", apiKey(e.gw.Seed.Accounts["initech"].APIKeys["admin"]), map[string]any{"deploymentId": e.gw.Seed.Accounts["initech"].Deployments[0].ID, "externalId": ext()}, 403, "plan"},
		{"generate-session-404-other-accounts-deployment", key, map[string]any{"deploymentId": e.globex().Deployments[0].ID, "externalId": ext()}, 404, "not found"},
		{"generate-session-404-unknown-internal-user", key, map[string]any{"deploymentId": dep, "internalId": "globex-admin"}, 404, "globex-admin"},
		{"generate-session-401-no-key", "", map[string]any{"deploymentId": dep, "externalId": ext()}, 401, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.do(t, "POST", "/api/v1/embed/generate-session", tc.auth, tc.body)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if msg := r.message(t); tc.message != "" && !strings.Contains(msg, tc.message) {
				t.Fatalf("message %q lacks %q", msg, tc.message)
			}
		})
	}
	t.Run("generate-session-409-cannot-change-type-writes-nothing", func(t *testing.T) {
		t.Parallel()
		tn := tname("typ")
		e.mint(t, map[string]any{"deploymentId": dep, "externalId": ext(), "creatorMode": true, "embedTenantName": tn,
			"userAttributeDefinitions": []any{map[string]any{"name": "level", "type": "number"}}})
		r := e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": ext(), "creatorMode": true, "embedTenantName": tn,
			"groupDefinitions":         []any{map[string]any{"name": "new-group"}},
			"userAttributeDefinitions": []any{map[string]any{"name": "other", "type": "string"}, map[string]any{"name": "level", "type": "string"}}})
		if r.Status != 409 || r.message(t) != "cannot change type" {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
		var groups, attrs struct{ Items []map[string]any }
		e.do(t, "GET", "/api/v1/embed-tenants/"+tn+"/groups", key, nil).json(t, &groups)
		e.do(t, "GET", "/api/v1/embed-tenants/"+tn+"/user-attributes", key, nil).json(t, &attrs)
		if len(groups.Items) != 0 || len(attrs.Items) != 1 || attrs.Items[0]["type"] != "number" {
			t.Fatalf("the rejected request wrote: groups %v attributes %v", groups.Items, attrs.Items)
		}
	})
	t.Run("generate-session-400-validation-failure-writes-nothing", func(t *testing.T) {
		t.Parallel()
		tn := tname("val")
		id := ext()
		r := e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": id, "creatorMode": true, "embedTenantName": tn,
			"groupDefinitions": []any{map[string]any{"name": "g1"}}, "groups": []string{"g1", "g2"}})
		if r.Status != 400 || r.message(t) != "Groups with names g2 not found" {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
		if r := e.do(t, "GET", "/api/v1/embed-tenants/"+tn+"/groups", key, nil); r.Status != 404 {
			t.Fatalf("tenant of a rejected request exists: %d %s", r.Status, r.Body)
		}
	})
}

func testExternalFlow(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	raw := "  Alice." + uid("X") + "@Example.COM "
	want := strings.ToLower(strings.TrimSpace(raw))
	info, tok := e.session(t, map[string]any{"deploymentId": dep, "externalId": raw, "email": "alice@example.com",
		"userProfile":     map[string]any{"displayName": "Alice", "picture": "https://cdn.example.com/a.png"},
		"securityContext": map[string]any{"team": 7}, "groups": []string{"marketing", "sales"},
		"userAttributes": []any{map[string]any{"name": "region", "value": "eu"}, map[string]any{"name": "quota", "value": 10}, map[string]any{"name": "regions", "value": []string{"eu", "us"}}}})
	if info.User.Kind != "external" || info.User.ExternalID == nil || *info.User.ExternalID != want || info.User.ID <= 0 {
		t.Fatalf("user = %+v, want external id %q", info.User, want)
	}
	if *info.User.Email != "alice@example.com" || *info.User.DisplayName != "Alice" || *info.User.Picture != "https://cdn.example.com/a.png" {
		t.Fatalf("profile = %+v", info.User)
	}
	if info.EmbedTenant != "acme-default" || info.DeploymentID != dep || info.AccountID != acme.ID || info.BranchName != "main" || !info.Production || info.CreatorMode {
		t.Fatalf("session = %+v", info)
	}
	if fmt.Sprint(info.Groups) != "[marketing sales]" {
		t.Fatalf("groups = %v", info.Groups)
	}
	if a := info.attrs(); a["region"] != `"eu"` || a["quota"] != "10" || a["regions"] != `["eu","us"]` {
		t.Fatalf("attributes = %v", a)
	}
	// The token: EdDSA with kid, verifiable with the published keys, with the contract's claims.
	c, err := parseToken(e.jwksURL(), tok.Token, "platform-embed")
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != want || c.Acc != acme.ID || c.Dep != dep || c.Br != "main" || c.Ten != "acme-default" || c.CM || c.Int || c.UID != 0 || c.ID == "" || len(c.SID) != 64 {
		t.Fatalf("claims = %+v", c)
	}
	if c.SID != info.SessionID {
		t.Fatalf("session info id %q is not the token's sid %q", info.SessionID, c.SID)
	}
	// exp is 24 h after generate-session (testDataPathClaims checks it to the second with
	// a moved clock); iat is the exchange, moments later.
	life := c.ExpiresAt.Sub(c.IssuedAt.Time)
	if life > 24*time.Hour || life < 24*time.Hour-time.Minute || !tok.ExpiresAt.Equal(c.ExpiresAt.Time) || tok.ExpiresAt.Sub(tok.RefreshAt) != time.Hour {
		t.Fatalf("lifetime %v, expiresAt %v, refreshAt %v, iat %v", life, tok.ExpiresAt, tok.RefreshAt, c.IssuedAt)
	}
	if c.Set["allowAi"] != true || c.Set["showGroupByCube"] != true {
		t.Fatalf("set = %v", c.Set)
	}
	// The profile persists; omitting it keeps it, sending it overwrites.
	again, _ := e.session(t, map[string]any{"deploymentId": dep, "externalId": want})
	if *again.User.DisplayName != "Alice" || *again.User.Picture != "https://cdn.example.com/a.png" || again.User.ID != info.User.ID {
		t.Fatalf("profile not preserved: %+v", again.User)
	}
	third, _ := e.session(t, map[string]any{"deploymentId": dep, "externalId": want, "userProfile": map[string]any{"displayName": "Al"}})
	if *third.User.DisplayName != "Al" || *third.User.Picture != "https://cdn.example.com/a.png" {
		t.Fatalf("profile overwrite: %+v", third.User)
	}
	// Another tenant is named explicitly.
	tn := tname("ext")
	other, _ := e.session(t, map[string]any{"deploymentId": dep, "externalId": want, "embedTenantName": tn})
	if other.EmbedTenant != tn {
		t.Fatalf("tenant = %q", other.EmbedTenant)
	}
}

func testMemberships(t *testing.T, e *env) {
	dep := e.acme().Deployments[0].ID
	id := uid("mem")
	base := func(extra map[string]any) sessionInfo {
		body := map[string]any{"deploymentId": dep, "externalId": id}
		for k, v := range extra {
			body[k] = v
		}
		info, _ := e.session(t, body)
		return info
	}
	steps := []struct {
		name       string
		body       map[string]any
		wantGroups string
		wantAttrs  string
	}{
		{"list-sets", map[string]any{"groups": []string{"sales"}, "userAttributes": []any{map[string]any{"name": "region", "value": "eu"}, map[string]any{"name": "quota", "value": 5}}}, "[sales]", `map[quota:5 region:"eu"]`},
		{"omitted-keeps", nil, "[sales]", `map[quota:5 region:"eu"]`},
		{"list-replaces-and-supplied-values-overwrite", map[string]any{"groups": []string{"marketing"}, "userAttributes": []any{map[string]any{"name": "region", "value": "us"}}}, "[marketing]", `map[quota:5 region:"us"]`},
		{"empty-clears-and-null-clears", map[string]any{"groups": []string{}, "userAttributes": []any{map[string]any{"name": "quota", "value": nil}}}, "[]", `map[region:"us"]`},
	}
	for _, s := range steps {
		info := base(s.body)
		if fmt.Sprint(info.Groups) != s.wantGroups || fmt.Sprint(info.attrs()) != s.wantAttrs {
			t.Fatalf("%s: groups %v attrs %v, want %s %s", s.name, info.Groups, info.attrs(), s.wantGroups, s.wantAttrs)
		}
	}
}

func testCreatorMode(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	tn := tname("cm")
	desc := "Partners"
	body := map[string]any{"deploymentId": dep, "externalId": uid("cm"), "creatorMode": true, "embedTenantName": tn,
		"groupDefinitions":         []any{map[string]any{"name": "partners", "description": desc}},
		"userAttributeDefinitions": []any{map[string]any{"name": "tier", "type": "number_array", "displayName": "Tier"}},
		"groups":                   []string{"partners"}, "userAttributes": []any{map[string]any{"name": "tier", "value": []int{1, 2}}}}
	info, tok := e.session(t, body)
	if !info.CreatorMode || info.EmbedTenant != tn || fmt.Sprint(info.Groups) != "[partners]" || info.attrs()["tier"] != "[1,2]" {
		t.Fatalf("creator session = %+v", info)
	}
	c, _ := parseToken(e.jwksURL(), tok.Token, "platform-embed")
	if !c.CM || c.Ten != tn {
		t.Fatalf("claims cm=%v ten=%q", c.CM, c.Ten)
	}
	// Idempotent: the same definitions again reuse the records; a new description updates it.
	body["externalId"] = uid("cm")
	body["groupDefinitions"] = []any{map[string]any{"name": "partners", "description": "Channel partners"}}
	e.mint(t, body)
	var groups struct {
		Items []struct {
			ID, Name    string
			Description *string
			CreatedAt   string
			UpdatedAt   string
		}
	}
	e.do(t, "GET", "/api/v1/embed-tenants/"+tn+"/groups", key, nil).json(t, &groups)
	if len(groups.Items) != 1 || *groups.Items[0].Description != "Channel partners" || groups.Items[0].CreatedAt == "" {
		t.Fatalf("tenant groups = %+v", groups.Items)
	}
	// Tenant scope only: the account-wide catalog does not have them, and a session without
	// creator mode cannot resolve them.
	var acct struct{ Items []struct{ Name string } }
	e.do(t, "GET", "/api/v1/groups?first=200", key, nil).json(t, &acct)
	for _, g := range acct.Items {
		if g.Name == "partners" {
			t.Fatal("a tenant definition leaked into the account-wide catalog")
		}
	}
	r := e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": uid("cm"), "embedTenantName": tn, "groups": []string{"partners"}})
	if r.Status != 400 || r.message(t) != "Groups with names partners not found" {
		t.Fatalf("non-creator lookup of tenant group = %d %s", r.Status, r.Body)
	}
	// Creator mode resolves against the tenant's scope: an account-wide group is unknown there.
	r = e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": uid("cm"), "creatorMode": true, "embedTenantName": tn, "groups": []string{"sales"}})
	if r.Status != 400 {
		t.Fatalf("creator lookup of account group = %d %s", r.Status, r.Body)
	}
}

func testExchange(t *testing.T, e *env) {
	dep := e.acme().Deployments[0].ID
	id := e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("ex")})
	var ok, unauthorized atomic.Int64
	bodies := make([]string, 50)
	parallel(50, func(i int) {
		r := e.api.Do("POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": id})
		switch r.Status {
		case 200:
			ok.Add(1)
		case 401:
			unauthorized.Add(1)
			bodies[i] = string(r.Body)
		}
	})
	if ok.Load() != 1 || unauthorized.Load() != 49 {
		t.Fatalf("50 concurrent exchanges: %d ok, %d unauthorized", ok.Load(), unauthorized.Load())
	}
	var used string
	for _, b := range bodies {
		if b != "" {
			used = b
		}
	}
	unknown := e.do(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": embed.NewSessionID()})
	if unknown.Status != 401 || string(unknown.Body) != used {
		t.Fatalf("unknown id = %d %s; used id = %s", unknown.Status, unknown.Body, used)
	}
	// Expired: the same answer once the 5-minute TTL has run out.
	expired := e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("ex")})
	ttl, err := e.rdb.TTL(context.Background(), "embed:session:"+embed.PublicSessionHandle(expired)).Result()
	if err != nil || ttl <= 4*time.Minute || ttl > 5*time.Minute {
		t.Fatalf("session id TTL = %v, %v", ttl, err)
	}
	if n, _ := e.rdb.Exists(context.Background(), "embed:session:"+expired).Result(); n != 0 {
		t.Fatal("the raw session id is a Redis key: reading Redis must not yield usable session ids")
	}
	e.rdb.Del(context.Background(), "embed:session:"+embed.PublicSessionHandle(expired))
	if r := e.do(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": expired}); r.Status != 401 || string(r.Body) != used {
		t.Fatalf("expired id = %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{}); r.Status != 400 {
		t.Fatalf("missing sessionId = %d", r.Status)
	}
}

func testRevoke(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	revoke := func(auth, id string) resp {
		return e.do(t, "POST", "/api/v1/embed/session/revoke", auth, map[string]any{"sessionId": id})
	}
	t.Run("revoke-204-before-exchange-makes-id-unusable", func(t *testing.T) {
		id := e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("rv")})
		if r := revoke(key, id); r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("revoke = %d %q", r.Status, r.Body)
		}
		if r := e.do(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": id}); r.Status != 401 {
			t.Fatalf("exchange after revoke = %d", r.Status)
		}
	})
	t.Run("revoke-204-after-exchange-rejects-token-until-its-expiry", func(t *testing.T) {
		id := e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("rv")})
		tok := e.exchange(t, id)
		if r := e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil); r.Status != 200 {
			t.Fatalf("before revoke = %d", r.Status)
		}
		data := e.do(t, "POST", fmt.Sprintf("/api/v1/deployments/%d/token", dep), bearer(tok.Token), nil)
		if data.Status != 200 {
			t.Fatalf("data token = %d %s", data.Status, data.Body)
		}
		// An admin key scoped to one deployment may revoke any session of the account.
		if r := revoke(apiKey(acme.APIKeys["adminScoped"]), id); r.Status != 204 {
			t.Fatalf("revoke = %d %s", r.Status, r.Body)
		}
		if r := e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil); r.Status != 401 {
			t.Fatalf("after revoke = %d", r.Status)
		}
		sid := embed.PublicSessionHandle(id)
		ttl, err := e.rdb.PTTL(context.Background(), revocation.SessionKey(sid)).Result()
		remaining := time.Until(tok.ExpiresAt)
		// The marker outlives the token by a minute's margin, never less. The
		// token's exp counts from the mint truncated to the second, the marker from the
		// exchange: up to a second and the mint-to-exchange time more.
		if err != nil || ttl < remaining || ttl > remaining+time.Minute+2*time.Second {
			t.Fatalf("revocation TTL %v, token remaining %v: want the token's remaining life plus up to a minute (%v)", ttl, remaining, err)
		}
		// Revoking the session leaves the data-API token valid.
		var dt struct{ Token string }
		data.json(t, &dt)
		if _, err := parseToken(e.jwksURL(), dt.Token, "platform-data-api"); err != nil {
			t.Fatalf("data token after revoke: %v", err)
		}
		// Idempotent.
		if r := revoke(key, id); r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("second revoke = %d", r.Status)
		}
	})
	t.Run("revoke-204-unknown-id", func(t *testing.T) {
		if r := revoke(key, "never-issued"); r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("revoke unknown = %d %s", r.Status, r.Body)
		}
	})
	t.Run("revoke-204-other-account-changes-nothing", func(t *testing.T) {
		id := e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("rv")})
		if r := revoke(apiKey(e.globex().APIKeys["admin"]), id); r.Status != 204 {
			t.Fatalf("cross-account revoke = %d", r.Status)
		}
		tok := e.exchange(t, id)
		if r := revoke(apiKey(e.globex().APIKeys["admin"]), id); r.Status != 204 {
			t.Fatalf("cross-account revoke = %d", r.Status)
		}
		if r := e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil); r.Status != 200 {
			t.Fatalf("another account's revoke ended the session: %d", r.Status)
		}
	})
	t.Run("revoke-principals", func(t *testing.T) {
		internalAdmin := e.exchange(t, e.mint(t, map[string]any{"deploymentId": dep, "internalId": acme.Users["admin"].Username}))
		external := e.exchange(t, e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("rv")}))
		tests := []struct {
			name string
			auth string
			want int
		}{
			{"revoke-204-admin-bearer", bearer(acme.Users["admin"].Bearer), 204},
			{"revoke-204-internal-admin-embed-token", bearer(internalAdmin.Token), 204},
			{"revoke-403-external-embed-token", bearer(external.Token), 403},
			{"revoke-403-viewer-bearer", bearer(acme.Users["viewer"].Bearer), 403},
			{"revoke-403-embedding-disabled", apiKey(e.gw.Seed.Accounts["initech"].APIKeys["admin"]), 403},
			{"revoke-401-no-credential", "", 401},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				id := e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("rv")})
				r := revoke(tc.auth, id)
				if r.Status != tc.want {
					t.Fatalf("status %d, want %d: %s", r.Status, tc.want, r.Body)
				}
				used := e.do(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": id}).Status
				if (tc.want == 204) != (used == 401) {
					t.Fatalf("exchange after revoke = %d", used)
				}
			})
		}
	})
}

func testInternalUser(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	dev := acme.Users["developer"]
	info, tok := e.session(t, map[string]any{"deploymentId": dep, "internalId": dev.Username, "settings": map[string]any{"allowChatWorkspaceAuthoring": false}})
	if info.User.Kind != "internal" || info.User.ID != dev.ID || info.User.Username == nil || *info.User.Username != dev.Username || info.User.ExternalID != nil {
		t.Fatalf("user = %+v", info.User)
	}
	if info.Settings["allowChatWorkspaceAuthoring"] != false {
		t.Fatalf("settings = %v", info.Settings)
	}
	c, _ := parseToken(e.jwksURL(), tok.Token, "platform-embed")
	if !c.Int || c.UID != dev.ID || c.Subject != dev.Username {
		t.Fatalf("claims = %+v", c)
	}
}

func testDataToken(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	tok := e.exchange(t, e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("dt")}))
	path := fmt.Sprintf("/api/v1/deployments/%d/token", dep)
	r := e.do(t, "POST", path, bearer(tok.Token), nil)
	if r.Status != 200 {
		t.Fatalf("data token = %d %s", r.Status, r.Body)
	}
	var dt struct {
		Token, TokenID string
		ExpiresAt      time.Time
	}
	r.json(t, &dt)
	c, err := parseToken(e.jwksURL(), dt.Token, "platform-data-api")
	if err != nil || c.ID != dt.TokenID || c.SID != "" || c.Dep != dep || c.ExpiresAt.Sub(c.IssuedAt.Time) != time.Hour || !dt.ExpiresAt.Equal(c.ExpiresAt.Time) {
		t.Fatalf("data token claims %+v (%v)", c, err)
	}
	r2 := e.do(t, "POST", path, bearer(tok.Token), nil)
	var dt2 struct{ TokenID string }
	r2.json(t, &dt2)
	if dt2.TokenID == dt.TokenID {
		t.Fatal("two data tokens share an id")
	}
	tests := []struct {
		name string
		path string
		auth string
		want int
	}{
		{"data-token-404-other-deployment-of-account", fmt.Sprintf("/api/v1/deployments/%d/token", acme.Deployments[1].ID), bearer(tok.Token), 404},
		{"data-token-404-other-accounts-deployment", fmt.Sprintf("/api/v1/deployments/%d/token", e.globex().Deployments[0].ID), bearer(tok.Token), 404},
		{"data-token-401-user-bearer", path, bearer(acme.Users["admin"].Bearer), 401},
		{"ai-credentials-200-default-allowed", "/api/v1/embed/session/ai-credentials", bearer(tok.Token), 200},
		{"ai-credentials-401-no-token", "/api/v1/embed/session/ai-credentials", "", 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if r := e.do(t, "POST", tc.path, tc.auth, nil); r.Status != tc.want {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.want, r.Body)
			}
		})
	}
	noAI := e.exchange(t, e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("dt"), "settings": map[string]any{"allowAi": false, "showDashboardChat": true}}))
	if r := e.do(t, "POST", "/api/v1/embed/session/ai-credentials", bearer(noAI.Token), nil); r.Status != 403 {
		t.Fatalf("ai-credentials with allowAi false = %d %s", r.Status, r.Body)
	}
	var ai struct {
		Token     string
		ExpiresAt time.Time
	}
	e.do(t, "POST", "/api/v1/embed/session/ai-credentials", bearer(tok.Token), nil).json(t, &ai)
	// Verified as the AI service would, with a JWT library the platform does not use.
	if c := verifyIndependently(t, e, ai.Token, "platform-ai"); c["exp"].(float64)-c["iat"].(float64) > 15*60 || c["sid"] == "" || c["ten"] == nil {
		t.Fatalf("ai credentials %v", c)
	}
}

func testCatalogs(t *testing.T, e *env) {
	acme, globex := e.acme(), e.globex()
	key := apiKey(acme.APIKeys["admin"])
	gkey := apiKey(globex.APIKeys["admin"])
	// Account-wide groups: create, conflict, paginate, delete.
	names := []string{uid("pg"), uid("pg"), uid("pg")}
	for _, n := range names {
		if r := e.do(t, "POST", "/api/v1/groups", gkey, map[string]any{"name": n, "description": "d"}); r.Status != 200 {
			t.Fatalf("create = %d %s", r.Status, r.Body)
		}
	}
	if r := e.do(t, "POST", "/api/v1/groups", gkey, map[string]any{"name": names[0]}); r.Status != 409 {
		t.Fatalf("duplicate = %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "POST", "/api/v1/groups", bearer(globex.Users["admin"].Bearer), map[string]any{"name": uid("pg")}); r.Status != 200 {
		t.Fatalf("create with admin bearer = %d %s", r.Status, r.Body)
	}
	type page struct {
		Items []struct {
			ID, Name string
		}
		PageInfo struct {
			HasNextPage bool
			EndCursor   *string
		}
	}
	var all []string
	after := ""
	for i := 0; ; i++ {
		var p page
		r := e.do(t, "GET", "/api/v1/groups?first=1"+after, gkey, nil)
		if r.Status != 200 {
			t.Fatalf("page = %d %s", r.Status, r.Body)
		}
		r.json(t, &p)
		for _, it := range p.Items {
			all = append(all, it.Name)
		}
		if !p.PageInfo.HasNextPage {
			break
		}
		after = "&after=" + *p.PageInfo.EndCursor
		if i > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if len(all) != 4 || all[0] != names[0] || all[2] != names[2] {
		t.Fatalf("paged names = %v", all)
	}
	var pg page
	e.do(t, "GET", "/api/v1/groups", gkey, nil).json(t, &pg)
	for _, tc := range []struct {
		name, path, auth string
		want             int
	}{
		{"groups-400-first-zero", "/api/v1/groups?first=0", gkey, 400},
		{"groups-400-first-201", "/api/v1/groups?first=201", gkey, 400},
		{"groups-400-first-not-a-number", "/api/v1/groups?first=ten", gkey, 400},
		{"groups-400-bad-cursor", "/api/v1/groups?after=not*a*cursor", gkey, 400},
		{"groups-400-forged-cursor", "/api/v1/groups?after=" + httpx.EncodeCursor("xyz"), gkey, 400},
		{"groups-200-first-200", "/api/v1/groups?first=200", gkey, 200},
		{"groups-403-viewer-bearer", "/api/v1/groups", bearer(acme.Users["viewer"].Bearer), 403},
		{"embed-tenant-groups-404-unknown-tenant", "/api/v1/embed-tenants/no-such-tenant/groups", key, 404},
		{"embed-tenant-groups-404-other-accounts-tenant", "/api/v1/embed-tenants/acme-default/groups", gkey, 404},
		{"embed-tenant-groups-403-bearer", "/api/v1/embed-tenants/acme-default/groups", bearer(acme.Users["admin"].Bearer), 401},
		{"embed-tenant-attributes-400-bad-first", "/api/v1/embed-tenants/acme-default/user-attributes?first=-1", key, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := e.do(t, "GET", tc.path, tc.auth, nil); r.Status != tc.want {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.want, r.Body)
			}
		})
	}
	for _, tc := range []struct {
		name string
		body any
	}{
		{"user-attributes-400-missing-type", map[string]any{"name": "x"}},
		{"user-attributes-400-bad-type", map[string]any{"name": "x", "type": "date"}},
		{"user-attributes-400-missing-name", map[string]any{"type": "string"}},
		{"user-attributes-400-unknown-field", map[string]any{"name": "x", "type": "string", "colour": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := e.do(t, "POST", "/api/v1/user-attributes", gkey, tc.body); r.Status != 400 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
		})
	}
	// Deleting a group removes its memberships; deleting an attribute its values.
	g := uid("del")
	var created struct{ ID string }
	e.do(t, "POST", "/api/v1/groups", gkey, map[string]any{"name": g}).json(t, &created)
	a := uid("attr")
	var createdAttr struct{ ID, Type string }
	e.do(t, "POST", "/api/v1/user-attributes", gkey, map[string]any{"name": a, "type": "string"}).json(t, &createdAttr)
	ext := uid("del")
	gdep := globex.Deployments[0].ID
	e.mintAs(t, gkey, map[string]any{"deploymentId": gdep, "externalId": ext, "groups": []string{g}, "userAttributes": []any{map[string]any{"name": a, "value": "v"}}})
	if r := e.do(t, "DELETE", "/api/v1/groups/"+created.ID, key, nil); r.Status != 404 {
		t.Fatalf("cross-account delete = %d", r.Status)
	}
	if r := e.do(t, "DELETE", "/api/v1/groups/"+created.ID, gkey, nil); r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("delete = %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "DELETE", "/api/v1/groups/"+created.ID, gkey, nil); r.Status != 404 {
		t.Fatalf("second delete = %d", r.Status)
	}
	if r := e.do(t, "DELETE", "/api/v1/user-attributes/"+createdAttr.ID, gkey, nil); r.Status != 204 {
		t.Fatalf("delete attribute = %d", r.Status)
	}
	tok := e.exchange(t, e.mintAs(t, gkey, map[string]any{"deploymentId": gdep, "externalId": ext}))
	var info sessionInfo
	e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil).json(t, &info)
	if len(info.Groups) != 0 || len(info.UserAttributes) != 0 {
		t.Fatalf("after deletes: groups %v attributes %v", info.Groups, info.UserAttributes)
	}
	// Embed-tenant definitions: another tenant's id is 404.
	tn1 := tname("cat")
	tn2 := tname("cat")
	dep := acme.Deployments[0].ID
	for _, tn := range []string{tn1, tn2} {
		e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("cat"), "creatorMode": true, "embedTenantName": tn,
			"groupDefinitions": []any{map[string]any{"name": "crew"}}, "groups": []string{"crew"},
			"userAttributeDefinitions": []any{map[string]any{"name": "lvl", "type": "number", "defaultValue": "1"}}})
	}
	var tg struct{ Items []struct{ ID string } }
	e.do(t, "GET", "/api/v1/embed-tenants/"+tn1+"/groups", key, nil).json(t, &tg)
	var ta struct {
		Items []struct {
			ID, Type     string
			DefaultValue *string
		}
	}
	e.do(t, "GET", "/api/v1/embed-tenants/"+tn1+"/user-attributes", key, nil).json(t, &ta)
	if len(tg.Items) != 1 || len(ta.Items) != 1 || ta.Items[0].Type != "number" || *ta.Items[0].DefaultValue != "1" {
		t.Fatalf("tenant catalog: %+v %+v", tg, ta)
	}
	if r := e.do(t, "DELETE", "/api/v1/embed-tenants/"+tn2+"/groups/"+tg.Items[0].ID, key, nil); r.Status != 404 {
		t.Fatalf("delete via other tenant = %d", r.Status)
	}
	if r := e.do(t, "DELETE", "/api/v1/embed-tenants/"+tn1+"/groups/"+tg.Items[0].ID, gkey, nil); r.Status != 404 {
		t.Fatalf("delete by other account = %d", r.Status)
	}
	if r := e.do(t, "DELETE", "/api/v1/embed-tenants/"+tn1+"/user-attributes/"+ta.Items[0].ID, key, nil); r.Status != 204 {
		t.Fatalf("delete tenant attribute = %d", r.Status)
	}
	if r := e.do(t, "DELETE", "/api/v1/embed-tenants/"+tn1+"/groups/"+tg.Items[0].ID, key, nil); r.Status != 204 {
		t.Fatalf("delete tenant group = %d", r.Status)
	}
	if r := e.do(t, "DELETE", "/api/v1/embed-tenants/"+tn1+"/groups/not-an-id", key, nil); r.Status != 404 {
		t.Fatalf("delete bad id = %d", r.Status)
	}
}

func testKeyRotation(t *testing.T, e *env) {
	dep := e.acme().Deployments[0].ID
	ctx := context.Background()
	before, err := fetchJWKS(e.jwksURL())
	if err != nil || len(before) != 1 {
		t.Fatalf("jwks before rotation: %v %v", before, err)
	}
	var oldKid string
	for k := range before {
		oldKid = k
	}
	newKid, err := e.app.Keyring.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	published, _ := fetchJWKS(e.jwksURL())
	if _, ok := published[newKid]; !ok || len(published) != 2 {
		t.Fatalf("new key not published before it signs: %v", published)
	}
	kidOf := func() string {
		tok := e.exchange(t, e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("rot")}))
		c, err := parseToken(e.jwksURL(), tok.Token, "platform-embed")
		if err != nil {
			t.Fatal(err)
		}
		_ = c
		parts := strings.Split(tok.Token, ".")
		var hdr struct{ Kid string }
		_ = jsonUnmarshalB64(parts[0], &hdr)
		return hdr.Kid
	}
	oldToken := e.exchange(t, e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("rot")}))
	if k := kidOf(); k != oldKid {
		t.Fatalf("signing with %s during the publish delay, want the old key %s", k, oldKid)
	}
	e.clock.Advance(11 * time.Minute)
	if k := kidOf(); k != newKid {
		t.Fatalf("signing with %s after the publish delay, want %s", k, newKid)
	}
	// Tokens signed by the old key keep verifying while they can be live.
	if _, err := parseToken(e.jwksURL(), oldToken.Token, "platform-embed"); err != nil {
		t.Fatalf("old token after rotation: %v", err)
	}
	if r := e.do(t, "GET", "/api/v1/embed/session", bearer(oldToken.Token), nil); r.Status != 200 {
		t.Fatalf("old token through the gateway after rotation = %d %s", r.Status, r.Body)
	}
	e.clock.Advance(25 * time.Hour)
	after, _ := fetchJWKS(e.jwksURL())
	if _, ok := after[oldKid]; ok || len(after) != 1 {
		t.Fatalf("retired key still published a token lifetime later: %v", after)
	}
}

// A compromised signing key is withdrawn at once: its tokens, cached by the
// gateway or not, are refused on their next request; it leaves the JWKS; a replacement
// signs the next sessions without the publish delay.
func testRevokeSigningKey(t *testing.T, e *env) {
	dep := e.acme().Deployments[0].ID
	ctx := context.Background()
	kidOf := func(token string) string {
		var hdr struct{ Kid string }
		_ = jsonUnmarshalB64(strings.Split(token, ".")[0], &hdr)
		return hdr.Kid
	}
	tok := e.exchange(t, e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("revkey")}))
	if r := e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil); r.Status != 200 { // now cached by the gateway
		t.Fatalf("before: %d %s", r.Status, r.Body)
	}
	compromised := kidOf(tok.Token)
	if _, err := app.RevokeSigningKey(ctx, e.app.Keyring, redisx.NewDurable(e.rdb, 0, 0), "not-a-key-id"); !errors.Is(err, keys.ErrUnknownKey) {
		t.Fatalf("unknown kid: %v", err)
	}
	replacement, err := app.RevokeSigningKey(ctx, e.app.Keyring, redisx.NewDurable(e.rdb, 0, 0), compromised)
	if err != nil || replacement == "" || replacement == compromised {
		t.Fatalf("revoke-key: %q %v", replacement, err)
	}
	if r := e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil); r.Status != 401 {
		t.Fatalf("token of the revoked key = %d %s, want 401", r.Status, r.Body)
	}
	published, _ := fetchJWKS(e.jwksURL())
	if _, ok := published[compromised]; ok {
		t.Fatalf("revoked key still published: %v", published)
	}
	if _, ok := published[replacement]; !ok {
		t.Fatalf("replacement not published: %v", published)
	}
	next := e.exchange(t, e.mint(t, map[string]any{"deploymentId": dep, "externalId": uid("revkey")}))
	if k := kidOf(next.Token); k != replacement {
		t.Fatalf("new session signed by %s, want the replacement %s at once", k, replacement)
	}
	// A gateway learns the replacement on its next unknown-kid JWKS fetch, at most its
	// minimum refetch interval (10 s) after the last one.
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := e.do(t, "GET", "/api/v1/embed/session", bearer(next.Token), nil)
		if r.Status == 200 {
			break
		}
		if r.Status != 401 || time.Now().After(deadline) {
			t.Fatalf("token of the replacement = %d %s", r.Status, r.Body)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if ttl := e.rdb.TTL(ctx, revocation.SigningKeyKey(compromised)).Val(); ttl < embed.TokenLifetime {
		t.Fatalf("revoked-key marker lives %s, less than a token lifetime", ttl)
	}
}
