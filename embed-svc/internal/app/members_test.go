package app_test

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	embedclient "github.com/analyticsco/platform/embed-svc/client"
	auditsvc "github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/libs/natsx"
)

// groupID creates a group of the account's catalog (path "/api/v1/groups") or finds a
// tenant's by name, and returns its id.
func (e *env) groupID(t *testing.T, auth, listPath, name string) string {
	t.Helper()
	var page struct {
		Items []struct{ ID, Name string } `json:"items"`
	}
	r := e.do(t, "GET", listPath+"?first=100", auth, nil)
	r.json(t, &page)
	for _, g := range page.Items {
		if g.Name == name {
			return g.ID
		}
	}
	t.Fatalf("no group %q in %s: %s", name, listPath, r.Body)
	return ""
}

type memberPage struct {
	Items []struct {
		ID         int64   `json:"id"`
		ExternalID string  `json:"externalId"`
		Email      *string `json:"email"`
		Groups     any     `json:"groups"`
	} `json:"items"`
	PageInfo struct {
		HasNextPage bool    `json:"hasNextPage"`
		EndCursor   *string `json:"endCursor"`
	} `json:"pageInfo"`
}

// members lists every member's external id through the gateway, two at a time.
func (e *env) members(t *testing.T, auth, base string) []string {
	t.Helper()
	var out []string
	after := ""
	for range 50 {
		r := e.do(t, "GET", base+"?first=2"+after, auth, nil)
		if r.Status != 200 {
			t.Fatalf("GET %s = %d %s", base, r.Status, r.Body)
		}
		var page memberPage
		r.json(t, &page)
		for _, it := range page.Items {
			if it.Groups != nil || it.ExternalID == "" {
				t.Fatalf("a member entry is not the user summary: %s", r.Body)
			}
			out = append(out, it.ExternalID)
		}
		if !page.PageInfo.HasNextPage {
			return out
		}
		after = "&after=" + url.QueryEscape(*page.PageInfo.EndCursor)
	}
	t.Fatal("the member list does not end")
	return nil
}

// Group membership outside a mint: the routes of the account's catalog and a tenant's,
// their limits and 404s, the audit trail, and a mint's groups over what they set.
func testGroupMembers(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	tenant := tname("mem")
	exts := []string{"m1-" + uid("u"), "m2-" + uid("u"), "m3-" + uid("u")}
	for _, ext := range exts {
		e.mint(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant, "email": ext + "@example.com"})
	}
	// A tenant group comes from a creator-mode mint.
	e.mint(t, map[string]any{"deploymentId": dep, "externalId": exts[0], "embedTenantName": tenant, "creatorMode": true,
		"groupDefinitions": []any{map[string]any{"name": "crew"}}})
	gname := uid("members")
	if r := e.do(t, "POST", "/api/v1/groups", key, map[string]any{"name": gname}); r.Status != 200 {
		t.Fatalf("create group = %d %s", r.Status, r.Body)
	}
	sales := e.groupID(t, key, "/api/v1/groups", gname)
	crew := e.groupID(t, key, "/api/v1/embed-tenants/"+tenant+"/groups", "crew")
	acct := "/api/v1/groups/" + sales + "/users"
	tbase := "/api/v1/embed-tenants/" + tenant + "/groups/" + crew + "/users"

	t.Run("post-200-adds-and-counts-members", func(t *testing.T) {
		r := e.do(t, "POST", acct, key, map[string]any{"externalIds": []string{exts[0], strings.ToUpper(exts[1])}})
		var out struct {
			Added          *int `json:"added"`
			AlreadyMembers *int `json:"alreadyMembers"`
		}
		r.json(t, &out)
		if r.Status != 200 || *out.Added != 2 || *out.AlreadyMembers != 0 {
			t.Fatalf("POST = %d %s", r.Status, r.Body)
		}
		r = e.do(t, "POST", acct, key, map[string]any{"externalIds": exts})
		r.json(t, &out)
		if r.Status != 200 || *out.Added != 1 || *out.AlreadyMembers != 2 {
			t.Fatalf("POST again = %d %s, want 1 added, 2 already members", r.Status, r.Body)
		}
		if got := e.members(t, key, acct); !slices.Equal(sorted(got), sorted(lower(exts))) {
			t.Fatalf("members %v, want %v", got, exts)
		}
		// The user's view shows the membership.
		var view struct{ Groups []map[string]any }
		e.do(t, "GET", "/api/v1/embed-tenants/"+tenant+"/users/"+url.PathEscape(strings.ToLower(exts[2])), key, nil).json(t, &view)
		if len(view.Groups) != 1 || view.Groups[0]["name"] != gname || view.Groups[0]["scope"] != "account" {
			t.Fatalf("user view %+v", view)
		}
	})
	t.Run("post-404-names-unknown-users-and-adds-nothing", func(t *testing.T) {
		fresh := "m4-" + uid("u")
		e.mint(t, map[string]any{"deploymentId": dep, "externalId": fresh, "embedTenantName": tenant})
		r := e.do(t, "POST", tbase, key, map[string]any{"externalIds": []string{fresh, "ghost-a", "ghost-b"}})
		if r.Status != 404 || r.message(t) != "external users not found: ghost-a, ghost-b" {
			t.Fatalf("POST with unknown users = %d %s", r.Status, r.Body)
		}
		if got := e.members(t, key, tbase); len(got) != 0 {
			t.Fatalf("a refused POST added %v", got)
		}
		// Another tenant's user is not one of this tenant's.
		other := "m5-" + uid("u")
		e.mint(t, map[string]any{"deploymentId": dep, "externalId": other, "embedTenantName": tname("oth")})
		if r := e.do(t, "POST", tbase, key, map[string]any{"externalIds": []string{other}}); r.Status != 404 || !strings.Contains(r.message(t), other) {
			t.Fatalf("POST of another tenant's user = %d %s", r.Status, r.Body)
		}
	})
	t.Run("post-400-bounds-and-shape", func(t *testing.T) {
		many := make([]string, 101)
		for i := range many {
			many[i] = fmt.Sprintf("u%d", i)
		}
		for name, c := range map[string]struct {
			body any
			want string
		}{
			"over-100":    {map[string]any{"externalIds": many}, "1 to 100"},
			"empty":       {map[string]any{"externalIds": []string{}}, "1 to 100"},
			"missing":     {map[string]any{}, "1 to 100"},
			"blank":       {map[string]any{"externalIds": []string{" "}}, "externalIds[0] must not be empty"},
			"too-long":    {map[string]any{"externalIds": []string{strings.Repeat("x", 256)}}, "at most 255"},
			"duplicate":   {map[string]any{"externalIds": []string{"a", "A"}}, `duplicate "a"`},
			"unknown-key": {map[string]any{"externalIds": []string{"a"}, "extra": 1}, ""},
		} {
			r := e.do(t, "POST", acct, key, c.body)
			if r.Status != 400 || !strings.Contains(r.message(t), c.want) {
				t.Errorf("%s: %d %s, want 400 naming %q", name, r.Status, r.Body, c.want)
			}
		}
	})
	t.Run("404-unknown-group-tenant-or-user", func(t *testing.T) {
		body := map[string]any{"externalIds": []string{exts[0]}}
		for name, path := range map[string]string{
			"unknown id":                        "/api/v1/groups/0123456789abcdef01234567/users",
			"malformed id":                      "/api/v1/groups/nope/users",
			"a tenant's group as the account's": "/api/v1/groups/" + crew + "/users",
			"the account's group as a tenant's": "/api/v1/embed-tenants/" + tenant + "/groups/" + sales + "/users",
			"unknown tenant":                    "/api/v1/embed-tenants/" + tname("none") + "/groups/" + crew + "/users",
		} {
			for _, m := range []string{"GET", "POST"} {
				if r := e.do(t, m, path, key, body); r.Status != 404 {
					t.Errorf("%s %s: %d %s", m, name, r.Status, r.Body)
				}
			}
		}
		if r := e.do(t, "DELETE", acct+"/nobody-"+uid("x"), key, nil); r.Status != 404 || !strings.Contains(r.message(t), "not found") {
			t.Errorf("DELETE of an unknown user = %d %s", r.Status, r.Body)
		}
		// Another account's admin sees none of it.
		if r := e.do(t, "GET", acct, apiKey(e.globex().APIKeys["admin"]), nil); r.Status != 404 {
			t.Errorf("another account's GET = %d %s", r.Status, r.Body)
		}
	})
	t.Run("403-scoped-and-personal-keys", func(t *testing.T) {
		body := map[string]any{"externalIds": []string{exts[0]}}
		for name, c := range map[string]struct{ auth, code string }{
			"scoped":    {apiKey(acme.APIKeys["adminScoped"]), "key_out_of_scope"},
			"personal":  {apiKey(acme.APIKeys["personal"]), "personal_key"},
			"developer": {bearer(acme.Users["developer"].Bearer), ""},
		} {
			for _, m := range []string{"GET", "POST", "DELETE"} {
				path := acct
				if m == "DELETE" {
					path += "/" + url.PathEscape(strings.ToLower(exts[0]))
				}
				r := e.do(t, m, path, c.auth, body)
				if r.Status != 403 || (c.code != "" && r.Error(t).Code != c.code) {
					t.Errorf("%s %s = %d %s, want 403 %s", name, m, r.Status, r.Body, c.code)
				}
			}
		}
		// An admin's bearer token manages the account's catalog, not a tenant's.
		admin := bearer(acme.Users["admin"].Bearer)
		if r := e.do(t, "GET", acct, admin, nil); r.Status != 200 {
			t.Errorf("admin bearer on the account's group = %d %s", r.Status, r.Body)
		}
		if r := e.do(t, "GET", tbase, admin, nil); r.Status != 401 && r.Status != 403 {
			t.Errorf("admin bearer on a tenant's group = %d %s", r.Status, r.Body)
		}
	})
	t.Run("delete-204-member-and-non-member", func(t *testing.T) {
		one := url.PathEscape(strings.ToLower(exts[2]))
		for i := range 2 {
			if r := e.do(t, "DELETE", acct+"/"+one, key, nil); r.Status != 204 {
				t.Fatalf("DELETE #%d = %d %s", i+1, r.Status, r.Body)
			}
		}
		if got := e.members(t, key, acct); slices.Contains(got, strings.ToLower(exts[2])) {
			t.Fatalf("removed member still listed: %v", got)
		}
	})
	t.Run("mint-groups-keep-their-meaning", func(t *testing.T) {
		ext := "m6-" + uid("u")
		e.mint(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant})
		if r := e.do(t, "POST", acct, key, map[string]any{"externalIds": []string{ext}}); r.Status != 200 {
			t.Fatalf("POST = %d %s", r.Status, r.Body)
		}
		// Omitted preserves what the route set.
		info, _ := e.session(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant})
		if !slices.Equal(info.Groups, []string{gname}) {
			t.Fatalf("a mint without groups: %v", info.Groups)
		}
		// A list replaces it.
		info, _ = e.session(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant, "groups": []string{"marketing"}})
		if !slices.Equal(info.Groups, []string{"marketing"}) || slices.Contains(e.members(t, key, acct), strings.ToLower(ext)) {
			t.Fatalf("a mint with a list: %v", info.Groups)
		}
		if r := e.do(t, "POST", acct, key, map[string]any{"externalIds": []string{ext}}); r.Status != 200 {
			t.Fatalf("POST = %d %s", r.Status, r.Body)
		}
		// Empty clears it.
		info, _ = e.session(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant, "groups": []string{}})
		if len(info.Groups) != 0 || slices.Contains(e.members(t, key, acct), strings.ToLower(ext)) {
			t.Fatalf("a mint with empty groups: %v", info.Groups)
		}
	})
	t.Run("tenant-group-members", func(t *testing.T) {
		r := e.do(t, "POST", tbase, key, map[string]any{"externalIds": exts[:2]})
		if r.Status != 200 || !strings.Contains(string(r.Body), `"added":2`) {
			t.Fatalf("POST = %d %s", r.Status, r.Body)
		}
		if got := e.members(t, key, tbase); len(got) != 2 {
			t.Fatalf("tenant members %v", got)
		}
		if r := e.do(t, "DELETE", tbase+"/"+url.PathEscape(strings.ToLower(exts[1])), key, nil); r.Status != 204 {
			t.Fatalf("DELETE = %d %s", r.Status, r.Body)
		}
	})
	t.Run("audit-events-for-every-change", func(t *testing.T) {
		ctx := context.Background()
		deadline := time.Now().Add(10 * time.Second)
		for {
			evs, err := e.app.AuditStore.List(ctx, acme.ID, auditsvc.Filter{TargetType: "group", TargetID: crew}, 100)
			if err != nil {
				t.Fatal(err)
			}
			var add, remove int
			for _, ev := range evs {
				if ev.Target.ID == crew && ev.Action == "embed.group_membership.add" && ev.Details["embedTenant"] == tenant {
					add++
				}
				if ev.Target.ID == crew && ev.Action == "embed.group_membership.remove" {
					remove++
				}
			}
			if add >= 1 && remove >= 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("audit: %d adds, %d removes of %s", add, remove, crew)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// The viewer lookup over NATS: the user's current group names in the account's catalog
// and the tenant's; an unknown user has none; a malformed request is 400.
func testViewerLookup(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	tenant := tname("vwr")
	ext := "v-" + uid("u")
	e.mint(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant, "groups": []string{"sales", "marketing"}})
	e.mint(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant, "creatorMode": true,
		"groupDefinitions": []any{map[string]any{"name": "crew"}}, "groups": []string{"crew"}})
	viewers := embedclient.NewViewers(natsx.NewClient(e.nc, natsx.ClientOptions{}), 2*time.Second)
	ctx := context.Background()
	got, err := viewers.Groups(ctx, embedclient.ViewerRequest{AccountID: acme.ID, EmbedTenantName: tenant, ExternalID: strings.ToLower(ext)})
	if err != nil || !reflect.DeepEqual(got, embedclient.ViewerReply{AccountGroups: []string{"marketing", "sales"}, TenantGroups: []string{"crew"}}) {
		t.Fatalf("viewer groups = %+v %v", got, err)
	}
	// A membership removed through the route is gone on the next lookup.
	sales := e.groupID(t, key, "/api/v1/groups", "sales")
	if r := e.do(t, "DELETE", "/api/v1/groups/"+sales+"/users/"+url.PathEscape(strings.ToLower(ext)), key, nil); r.Status != 204 {
		t.Fatalf("DELETE = %d %s", r.Status, r.Body)
	}
	got, _ = viewers.Groups(ctx, embedclient.ViewerRequest{AccountID: acme.ID, ExternalID: strings.ToLower(ext)})
	if !reflect.DeepEqual(got, embedclient.ViewerReply{AccountGroups: []string{"marketing"}, TenantGroups: []string{}}) {
		t.Fatalf("after the removal, without a tenant: %+v", got)
	}
	for name, req := range map[string]embedclient.ViewerRequest{
		"unknown user":    {AccountID: acme.ID, EmbedTenantName: tenant, ExternalID: "nobody-" + uid("x")},
		"another account": {AccountID: e.globex().ID, EmbedTenantName: tenant, ExternalID: strings.ToLower(ext)},
	} {
		got, err := viewers.Groups(ctx, req)
		if err != nil || len(got.AccountGroups) != 0 || len(got.TenantGroups) != 0 || got.AccountGroups == nil {
			t.Errorf("%s: %+v %v, want empty lists", name, got, err)
		}
	}
	if _, err := viewers.Groups(ctx, embedclient.ViewerRequest{AccountID: acme.ID, EmbedTenantName: "Bad.Tenant", ExternalID: "x"}); err == nil ||
		!strings.Contains(err.Error(), "not an embed tenant name") {
		t.Errorf("a malformed tenant: %v", err)
	}
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

func sorted(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return out
}
