package attack_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// Hostile inputs against embed grants and the viewer's read path, through the gateway:
// a session of another deployment, tenant or account asking for every dashboard it can
// name, every malformed public id, lists past their bounds, grants aimed at another
// deployment's content, and a token whose claims were edited.
func TestEmbedAccessAttacks(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	a := newAPI(s)
	acme, globex := s.Seed.Accounts["acme"], s.Seed.Accounts["globex"]
	admin := apitest.Bearer(acme.Users["admin"].Bearer)
	key := acme.APIKeys["admin"]
	dep1, dep2 := acme.Deployments[0].ID, acme.Deployments[1].ID
	ws := func(dep int64, rest string) string { return fmt.Sprintf("/api/v1/deployments/%d%s", dep, rest) }
	publish := func(t *testing.T, authz string, dep int64, name string) (int64, string) {
		t.Helper()
		w := a.patiently("POST", ws(dep, "/workbooks"), authz, map[string]any{"name": name, "dashboardDraft": map[string]any{"kind": "CLASSIC", "widgets": []any{}}})
		if w.status != 200 {
			t.Fatalf("create workbook: %s", w)
		}
		id := int64(w.body["id"].(float64))
		pub := a.patiently("POST", ws(dep, fmt.Sprintf("/workbooks/%d/publish", id)), authz, map[string]any{"allowEmbed": true})
		if pub.status != 200 {
			t.Fatalf("publish: %s", pub)
		}
		return id, pub.body["publishedDashboard"].(map[string]any)["publicId"].(string)
	}
	grant := func(t *testing.T, authz, path string, g map[string]any) {
		t.Helper()
		if r := a.patiently("PUT", path, authz, g); r.status != 200 {
			t.Fatalf("PUT %s: %s", path, r)
		}
	}
	token := func(t *testing.T, k string, dep int64, body map[string]any) string {
		t.Helper()
		return embedToken(t, a, embedSessionID(t, embedMint(a, k, dep, body)))
	}
	notFound := func(id string) string {
		return fmt.Sprintf(`{"status":404,"code":"not_found","message":"dashboard %s not found"}`, id)
	}

	// Dashboards of tenant-a in deployment 1, and every-viewer dashboards of deployment 2
	// and of globex.
	var tenantA, open2, openGlobex []string
	for i := range 5 {
		id, pid := publish(t, admin, dep1, fmt.Sprintf("tenant-a board %d", i))
		grant(t, admin, ws(dep1, fmt.Sprintf("/workbooks/%d/embed-access", id)), map[string]any{"tenants": []any{map[string]any{"embedTenantName": "tenant-a", "access": "read"}}})
		tenantA = append(tenantA, pid)
	}
	for i := range 3 {
		id, pid := publish(t, admin, dep2, fmt.Sprintf("dep2 board %d", i))
		grant(t, admin, ws(dep2, fmt.Sprintf("/workbooks/%d/embed-access", id)), map[string]any{"allEmbedUsers": "read"})
		open2 = append(open2, pid)
	}
	gadmin := apitest.Bearer(globex.Users["admin"].Bearer)
	gdep := globex.Deployments[0].ID
	grant(t, gadmin, ws(gdep, "/embed-access"), map[string]any{"allEmbedUsers": "read"})
	for i := range 2 {
		_, pid := publish(t, gadmin, gdep, fmt.Sprintf("globex board %d", i))
		openGlobex = append(openGlobex, pid)
	}
	all := slices.Concat(tenantA, open2, openGlobex)

	t.Run("AnotherDeploymentsTenantsOrAccountsTokenSeesNoDashboard", func(t *testing.T) {
		owner := token(t, key, dep1, map[string]any{"externalId": "owner", "embedTenantName": "tenant-a"})
		for _, pid := range tenantA {
			if r := a.call("GET", "/api/v1/embed/dashboards/"+pid, apitest.Bearer(owner), nil); r.status != 200 {
				t.Fatalf("tenant-a's own viewer: %s", r)
			}
		}
		strangers := map[string]struct {
			tok   string
			opens []string
		}{
			"tenant-b of deployment 1":   {token(t, key, dep1, map[string]any{"externalId": "b-user", "embedTenantName": "tenant-b"}), nil},
			"tenant-a of deployment 2":   {token(t, key, dep2, map[string]any{"externalId": "a-user-2", "embedTenantName": "tenant-a"}), open2},
			"tenant-a of globex":         {token(t, globex.APIKeys["admin"], gdep, map[string]any{"externalId": "owner", "embedTenantName": "tenant-a"}), openGlobex},
			"same user, other tenant":    {token(t, key, dep1, map[string]any{"externalId": "owner", "embedTenantName": "tenant-c"}), nil},
			"internal viewer of acme":    {token(t, key, dep1, map[string]any{"internalId": acme.Users["viewer"].Username}), tenantA}, // root workbooks: its own view
			"default tenant (no name)":   {token(t, key, dep1, map[string]any{"externalId": "default-user"}), nil},
			"creator mode in tenant-b":   {token(t, key, dep1, map[string]any{"externalId": "creator-b", "embedTenantName": "tenant-b", "creatorMode": true}), nil},
			"narrowed to tenant-a's ids": {token(t, key, dep1, map[string]any{"externalId": "b-narrow", "embedTenantName": "tenant-b", "resources": map[string]any{"dashboards": tenantA}}), nil},
		}
		for name, st := range strangers {
			t.Run(name, func(t *testing.T) {
				for _, pid := range all {
					r := a.call("GET", "/api/v1/embed/dashboards/"+pid, apitest.Bearer(st.tok), nil)
					want := 404
					if slices.Contains(st.opens, pid) {
						want = 200
					}
					if r.status != want || (want == 404 && strings.TrimSpace(r.raw) != notFound(pid)) {
						t.Errorf("%s: want %d, got %s", pid, want, r)
					}
				}
				l := a.call("GET", "/api/v1/embed/dashboards?first=200", apitest.Bearer(st.tok), nil)
				if l.status != 200 {
					t.Fatalf("listing: %s", l)
				}
				for _, it := range l.body["items"].([]any) {
					pid := it.(map[string]any)["publicId"].(string)
					if slices.Contains(all, pid) && !slices.Contains(st.opens, pid) {
						t.Errorf("listed %s, which it may not open", pid)
					}
				}
			})
		}
	})

	t.Run("EveryMalformedIDIsTheSame404WithoutAStoreRead", func(t *testing.T) {
		tok := apitest.Bearer(token(t, key, dep1, map[string]any{"externalId": "prober", "embedTenantName": "tenant-a"}))
		for _, id := range []string{
			"x", "AAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAA", strings.Repeat("A", 4096), "AAAAAAAAAAAAAAA.", "AAAAAAAAAAAAAAA~",
			"AAAAAAAAAAAAAAA%00", "AAAAAAAAAAAAAA%C3%A9", "%FF%FE%FD%FC%FB%FA%F9%F8%F7%F6%F5%F4%F3%F2%F1%F0", "AAAAAAAAAAAAAAA%20",
			"%2e%2e", "AAAAAAAA%2FAAAAAAA", "AAAAAAAAAAAAAAA%5C", "null", "undefined", "0", "-1", "%24where", "%7B%22%24ne%22%3A1%7D",
			"AAAAAAAA%0D%0AX-Injected%3A%201",
		} {
			before := itemFinds(t, s)
			r := a.call("GET", "/api/v1/embed/dashboards/"+id, tok, nil)
			if r.status != 404 || r.body["code"] != "not_found" || r.header.Get("X-Injected") != "" {
				t.Errorf("%.40s: want 404 not_found, got %s", id, r)
			}
			// A dot segment or a control character in the path: the gateway routes nothing
			// and answers its own 404 (before the token), naming no dashboard. Every other id
			// is the service's one 404, the id as the path carried it.
			gatewayOwn := id == "%2e%2e" || strings.Contains(id, "%00") || strings.Contains(id, "%0D")
			if gatewayOwn && !strings.HasPrefix(r.message(), "no route for ") {
				t.Errorf("%.40s: message %q, want the gateway's own", id, r.message())
			}
			plain, err := url.PathUnescape(id)
			if raw, _ := json.Marshal(plain); json.Unmarshal(raw, &plain) != nil {
				t.Fatal("the id does not survive JSON") // invalid UTF-8 reads back as U+FFFD, as the answer writes it
			}
			if !gatewayOwn && (err != nil || r.message() != "dashboard "+plain+" not found") {
				t.Errorf("%.40s: message %q, want the one 404's", id, r.message())
			}
			if len(r.raw) > 4096+200 {
				t.Errorf("%.40s: a %d-byte answer", id, len(r.raw))
			}
			if after := itemFinds(t, s); after != before {
				t.Errorf("%.40s: %.0f finds on items for a malformed id, want none", id, after-before)
			}
		}
		for _, q := range []string{"first=0", "first=201", "first=-1", "first=1e9", "after=" + strings.Repeat("A", 5000), "after=%00"} {
			if r := a.call("GET", "/api/v1/embed/dashboards?"+q, tok, nil); r.status != 400 {
				t.Errorf("listing ?%.40s: want 400, got %s", q, r)
			}
		}
	})

	t.Run("GrantsOverTheirBoundsOrMalformedAre400AndChangeNothing", func(t *testing.T) {
		id, pid := publish(t, admin, dep1, "bounded")
		path := ws(dep1, fmt.Sprintf("/workbooks/%d/embed-access", id))
		grant(t, admin, path, map[string]any{"tenants": []any{map[string]any{"embedTenantName": "tenant-a", "access": "read"}}})
		before := a.call("GET", path, admin, nil)
		entries := func(n int) []any {
			out := make([]any, n)
			for i := range out {
				out[i] = map[string]any{"embedTenantName": fmt.Sprintf("tenant-%06d", i), "access": "read"}
			}
			return out
		}
		groups := func(n int) []any {
			out := make([]any, n)
			for i := range out {
				out[i] = map[string]any{"scope": "account", "groupName": fmt.Sprintf("g%d", i), "access": "none"}
			}
			return out
		}
		for name, body := range map[string]any{
			"201 tenants":                 map[string]any{"tenants": entries(201)},
			"100 tenants and 101 groups":  map[string]any{"tenants": entries(100), "groups": groups(101)},
			"10,000 tenants":              map[string]any{"tenants": entries(10_000)},
			"a group name of 300 bytes":   map[string]any{"groups": []any{map[string]any{"scope": "account", "groupName": strings.Repeat("g", 300), "access": "read"}}},
			"a group name with a control": map[string]any{"groups": []any{map[string]any{"scope": "account", "groupName": "a\u0000b", "access": "read"}}},
			"a tenant name of 37":         map[string]any{"tenants": []any{map[string]any{"embedTenantName": "a" + strings.Repeat("b", 36), "access": "read"}}},
			"a tenant name with a dollar": map[string]any{"tenants": []any{map[string]any{"embedTenantName": "$where", "access": "read"}}},
			"an operator as access":       map[string]any{"allEmbedUsers": map[string]any{"$ne": "none"}},
			"access as a number":          map[string]any{"allEmbedUsers": 1},
			"tenants not a list":          map[string]any{"tenants": "tenant-a"},
			"an entry not an object":      map[string]any{"tenants": []any{"tenant-a"}},
			"duplicate tenant entries":    map[string]any{"tenants": []any{map[string]any{"embedTenantName": "tenant-a", "access": "read"}, map[string]any{"embedTenantName": "tenant-a", "access": "read"}}},
			"a scope injection":           map[string]any{"groups": []any{map[string]any{"scope": map[string]any{"$gt": ""}, "groupName": "g", "access": "read"}}},
		} {
			r := a.call("PUT", path, admin, body)
			if r.status < 400 || r.status >= 500 || r.body["code"] == nil {
				t.Errorf("%s: want a 4xx with a code, got %s", name, r)
			}
		}
		if r := a.call("PUT", path, admin, map[string]any{"tenants": entries(201)}); r.status != 400 || r.body["code"] != "embed_access_limit" || !strings.Contains(r.message(), "200") {
			t.Errorf("201 entries: want 400 embed_access_limit naming 200, got %s", r)
		}
		if after := a.call("GET", path, admin, nil); after.raw != before.raw {
			t.Errorf("grants after refused PUTs:\n%s\nwere\n%s", after.raw, before.raw)
		}
		viewer := apitest.Bearer(token(t, key, dep1, map[string]any{"externalId": "bound-check", "embedTenantName": "tenant-a"}))
		if r := a.call("GET", "/api/v1/embed/dashboards/"+pid, viewer, nil); r.status != 200 {
			t.Errorf("the dashboard after refused PUTs: %s", r)
		}

		// Membership and narrowing bounds.
		g := a.call("POST", "/api/v1/groups", apitest.APIKey(key), map[string]any{"name": "bounded-group"})
		if g.status != 200 {
			t.Fatalf("group: %s", g)
		}
		users := "/api/v1/groups/" + g.body["id"].(string) + "/users"
		many := make([]string, 101)
		for i := range many {
			many[i] = fmt.Sprintf("user-%d", i)
		}
		for name, body := range map[string]any{
			"101 external ids":      map[string]any{"externalIds": many},
			"none":                  map[string]any{"externalIds": []string{}},
			"an id of 10 KB":        map[string]any{"externalIds": []string{strings.Repeat("u", 10_000)}},
			"ids not strings":       map[string]any{"externalIds": []any{1, 2}},
			"an operator for an id": map[string]any{"externalIds": []any{map[string]any{"$ne": ""}}},
		} {
			if r := a.call("POST", users, apitest.APIKey(key), body); r.status != 400 {
				t.Errorf("members %s: want 400, got %s", name, r)
			}
		}
		if r := a.call("GET", users+"?first=201", apitest.APIKey(key), nil); r.status != 400 {
			t.Errorf("members ?first=201: want 400, got %s", r)
		}
		for name, res := range map[string]any{
			"51 ids":        map[string]any{"dashboards": slices.Repeat([]string{pid}, 51)},
			"an operator":   map[string]any{"dashboards": []any{map[string]any{"$ne": ""}}},
			"a long id":     map[string]any{"dashboards": []string{strings.Repeat("A", 5000)}},
			"duplicate ids": map[string]any{"dashboards": []string{pid, pid}},
		} {
			if r := embedMint(a, key, dep1, map[string]any{"externalId": "narrow", "resources": res}); r.status != 400 {
				t.Errorf("resources %s: want 400, got %s", name, r)
			}
		}
	})

	t.Run("AGrantOnAnotherDeploymentsContentIs404AndChangesNothing", func(t *testing.T) {
		id2, pid2 := publish(t, admin, dep2, "dep2 target")
		grant(t, admin, ws(dep2, fmt.Sprintf("/workbooks/%d/embed-access", id2)), map[string]any{"tenants": []any{map[string]any{"embedTenantName": "tenant-x", "access": "none"}}})
		before := a.call("GET", ws(dep2, fmt.Sprintf("/workbooks/%d/embed-access", id2)), admin, nil)
		open := map[string]any{"allEmbedUsers": "read"}
		for name, c := range map[string]struct{ authz, path string }{
			"through deployment 1's path":         {admin, ws(dep1, fmt.Sprintf("/workbooks/%d/embed-access", id2))},
			"as a folder":                         {admin, ws(dep2, fmt.Sprintf("/folders/%d/embed-access", id2))},
			"globex's admin, globex's deployment": {gadmin, ws(gdep, fmt.Sprintf("/workbooks/%d/embed-access", id2))},
			"globex's admin, acme's deployment":   {gadmin, ws(dep2, fmt.Sprintf("/workbooks/%d/embed-access", id2))},
			"globex's admin, acme's root":         {gadmin, ws(dep2, "/embed-access")},
		} {
			if r := a.call("PUT", c.path, c.authz, open); r.status != 404 && r.status != 403 {
				t.Errorf("%s: want 404 (or 403 for another account's deployment), got %s", name, r)
			}
		}
		if after := a.call("GET", ws(dep2, fmt.Sprintf("/workbooks/%d/embed-access", id2)), admin, nil); after.raw != before.raw {
			t.Errorf("grants changed by the refused PUTs: %s, were %s", after.raw, before.raw)
		}
		x := apitest.Bearer(token(t, key, dep2, map[string]any{"externalId": "x-user", "embedTenantName": "tenant-x"}))
		if r := a.call("GET", "/api/v1/embed/dashboards/"+pid2, x, nil); r.status != 404 {
			t.Errorf("tenant-x opens what its none closes: %s", r)
		}
		if r := a.call("GET", ws(dep1, "/embed-tenants/tenant-a/workbooks"), gadmin, nil); r.status != 404 && r.status != 403 {
			t.Errorf("globex's admin lists acme's tenant: %s", r)
		}
	})

	t.Run("ATokenWithEditedClaimsIs401", func(t *testing.T) {
		tok := token(t, key, dep2, map[string]any{"externalId": "editor", "embedTenantName": "tenant-b"})
		parts := strings.Split(tok, ".")
		raw, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		var claims map[string]any
		if err := json.Unmarshal(raw, &claims); err != nil {
			t.Fatal(err)
		}
		edited := map[string]any{}
		for k, v := range claims {
			edited[k] = v
		}
		edited["dep"], edited["tnt"], edited["tenant"], edited["deploymentId"] = dep1, "tenant-a", "tenant-a", dep1
		delete(edited, "res")
		out, _ := json.Marshal(edited)
		forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(out) + "." + parts[2]
		for _, pid := range tenantA {
			if r := a.call("GET", "/api/v1/embed/dashboards/"+pid, apitest.Bearer(forged), nil); r.status != 401 {
				t.Errorf("%s with edited claims: want 401, got %s", pid, r)
			}
		}
	})
}
