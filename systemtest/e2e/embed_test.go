package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/embed-svc/revocation"
)

type exchanged struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
	RefreshAt time.Time `json:"refreshAt"`
}

type sessionInfo struct {
	User struct {
		Kind        string  `json:"kind"`
		ID          int64   `json:"id"`
		ExternalID  *string `json:"externalId"`
		Username    *string `json:"username"`
		Email       *string `json:"email"`
		DisplayName *string `json:"displayName"`
		Picture     *string `json:"picture"`
	} `json:"user"`
	DeploymentID    int64  `json:"deploymentId"`
	BranchName      string `json:"branchName"`
	Production      bool   `json:"production"`
	EmbedTenantName string `json:"embedTenantName"`
	CreatorMode     bool   `json:"creatorMode"`
	Groups          []string
	UserAttributes  []struct {
		Name  string `json:"name"`
		Value any    `json:"value"`
	} `json:"userAttributes"`
	Settings map[string]any `json:"settings"`
}

func (s sessionInfo) attributes() map[string]any {
	m := map[string]any{}
	for _, a := range s.UserAttributes {
		m[a.Name] = a.Value
	}
	return m
}

const (
	generateSession = "/api/v1/embed/generate-session"
	exchangePath    = "/api/v1/embed/session/exchange"
	revokePath      = "/api/v1/embed/session/revoke"
	sessionPath     = "/api/v1/embed/session"
)

// mint calls generate-session with acme's admin account key.
func (p *platform) mint(t *testing.T, body map[string]any) response {
	t.Helper()
	return p.call(t, "POST", generateSession, apiKey(p.acme.APIKeys["admin"]), body)
}

func (p *platform) mintID(t *testing.T, body map[string]any) string {
	t.Helper()
	var r struct{ SessionID string }
	p.mint(t, body).want(t, 200).decode(t, &r)
	if r.SessionID == "" {
		t.Fatal("empty sessionId")
	}
	return r.SessionID
}

func (p *platform) exchange(t *testing.T, sessionID string) exchanged {
	t.Helper()
	var e exchanged
	p.call(t, "POST", exchangePath, "", map[string]any{"sessionId": sessionID}).want(t, 200).decode(t, &e)
	return e
}

func (p *platform) info(t *testing.T, token string) sessionInfo {
	t.Helper()
	var s sessionInfo
	p.call(t, "GET", sessionPath, "Bearer "+token, nil).want(t, 200).decode(t, &s)
	return s
}

// sessionOf mints with body, exchanges the id and describes the session.
func (p *platform) sessionOf(t *testing.T, body map[string]any) sessionInfo {
	t.Helper()
	return p.info(t, p.exchange(t, p.mintID(t, body)).Token)
}

func (p *platform) external(extra map[string]any) map[string]any {
	body := map[string]any{"deploymentId": p.dep1, "externalId": p.unique("viewer")}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

func with(body map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range body {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

var generateSessionRules = []rule{
	{"account-admin-key-mints", func(t *testing.T, p *platform) {
		s := p.sessionOf(t, p.external(nil))
		if s.User.Kind != "external" || s.DeploymentID != p.dep1 || !s.Production {
			t.Errorf("session %+v", s)
		}
	}},
	{"personal-key-403", func(t *testing.T, p *platform) {
		p.call(t, "POST", generateSession, apiKey(p.acme.APIKeys["personal"]), p.external(nil)).want(t, 403).wantCode(t, "personal_key")
	}},
	{"out-of-scope-key-403", func(t *testing.T, p *platform) {
		scoped := apiKey(p.acme.APIKeys["adminScoped"])
		p.call(t, "POST", generateSession, scoped, p.external(map[string]any{"deploymentId": p.dep2})).want(t, 403).wantCode(t, "key_out_of_scope")
		p.call(t, "POST", generateSession, scoped, p.external(map[string]any{"deploymentId": p.dep1})).want(t, 200)
		p.call(t, "POST", generateSession, apiKey(p.acme.APIKeys["admin"]), p.external(map[string]any{"deploymentId": p.dep2})).want(t, 200)
	}},
	{"deployment-of-another-account-404", func(t *testing.T, p *platform) {
		p.mint(t, p.external(map[string]any{"deploymentId": p.globex.Deployments[0].ID})).want(t, 404)
	}},
	{"plan-premium-or-enterprise", func(t *testing.T, p *platform) {
		for _, c := range []struct {
			account string
			want    int
		}{{"acme", 200}, {"globex", 200}, {"initech", 403}} {
			a := p.s.Seed.Accounts[c.account]
			t.Run(a.Plan, func(t *testing.T) {
				r := p.call(t, "POST", generateSession, apiKey(a.APIKeys["admin"]),
					map[string]any{"deploymentId": a.Deployments[0].ID, "externalId": p.unique("u")}).want(t, c.want)
				if c.want == 403 {
					r.wantCode(t, "plan_not_eligible")
				}
			})
		}
	}},
	{"exactly-one-of-external-and-internal-id", func(t *testing.T, p *platform) {
		p.mint(t, map[string]any{"deploymentId": p.dep1}).want(t, 400)
		p.mint(t, map[string]any{"deploymentId": p.dep1, "externalId": "x", "internalId": p.acme.Users["viewer"].Username}).want(t, 400)
	}},
	{"internal-id-must-exist", func(t *testing.T, p *platform) {
		s := p.sessionOf(t, map[string]any{"deploymentId": p.dep1, "internalId": p.acme.Users["developer"].Username})
		if s.User.Kind != "internal" || s.User.ID != p.acme.Users["developer"].ID {
			t.Errorf("internal session user %+v, want the developer", s.User)
		}
		p.mint(t, map[string]any{"deploymentId": p.dep1, "internalId": "nobody-" + p.unique("x")}).want(t, 404)
		p.mint(t, map[string]any{"deploymentId": p.dep1, "internalId": p.globex.Users["admin"].Username}).want(t, 404)
	}},
	{"internal-id-combinations-rejected", func(t *testing.T, p *platform) {
		internal := map[string]any{"deploymentId": p.dep1, "internalId": p.acme.Users["viewer"].Username}
		for field, value := range map[string]any{
			"groups":                   []string{"sales"},
			"userAttributes":           []map[string]any{{"name": "region", "value": "emea"}},
			"groupDefinitions":         []map[string]any{{"name": "g"}},
			"userAttributeDefinitions": []map[string]any{{"name": "a", "type": "string"}},
			"securityContext":          map[string]any{"k": "v"},
			"userProfile":              map[string]any{"displayName": "x"},
		} {
			t.Run(field, func(t *testing.T) {
				r := p.mint(t, with(internal, field, value, "creatorMode", true, "embedTenantName", "tenant-internal")).want(t, 400)
				if msg := r.message(t); !strings.Contains(msg, field) {
					t.Errorf("message %q does not name %s", msg, field)
				}
			})
		}
	}},
	{"email-only-with-external-id", func(t *testing.T, p *platform) {
		p.mint(t, map[string]any{"deploymentId": p.dep1, "internalId": p.acme.Users["viewer"].Username, "email": "a@b.c"}).want(t, 400)
		s := p.sessionOf(t, p.external(map[string]any{"email": "viewer@partner.example"}))
		if s.User.Email == nil || *s.User.Email != "viewer@partner.example" {
			t.Errorf("email %v", s.User.Email)
		}
	}},
	{"external-id-lowercased-trimmed", func(t *testing.T, p *platform) {
		id := p.unique("mixed")
		first := p.sessionOf(t, map[string]any{"deploymentId": p.dep1, "externalId": "  " + strings.ToUpper(id) + "\t"})
		if first.User.ExternalID == nil || *first.User.ExternalID != id {
			t.Fatalf("externalId %v, want %q", first.User.ExternalID, id)
		}
		again := p.sessionOf(t, map[string]any{"deploymentId": p.dep1, "externalId": id})
		if again.User.ID != first.User.ID {
			t.Errorf("the normalized id names another user: %d vs %d", again.User.ID, first.User.ID)
		}
	}},
	{"duplicate-attribute-name-400", func(t *testing.T, p *platform) {
		p.mint(t, p.external(map[string]any{"userAttributes": []map[string]any{{"name": "region", "value": "a"}, {"name": "region", "value": "b"}}})).want(t, 400)
	}},
	{"unknown-attribute-message", func(t *testing.T, p *platform) {
		r := p.mint(t, p.external(map[string]any{"userAttributes": []map[string]any{{"name": "no-such-attribute", "value": "x"}}})).want(t, 400)
		if msg := r.message(t); msg != "User attributes not found" {
			t.Errorf("message %q, want exactly %q", msg, "User attributes not found")
		}
	}},
	{"unknown-group-message", func(t *testing.T, p *platform) {
		r := p.mint(t, p.external(map[string]any{"groups": []string{"zeta-missing", "sales", "alpha-missing"}})).want(t, 400)
		want := "Groups with names zeta-missing, alpha-missing not found"
		if msg := r.message(t); msg != want {
			t.Errorf("message %q, want %q", msg, want)
		}
	}},
	{"definitions-require-creator-mode-and-tenant", func(t *testing.T, p *platform) {
		defs := []map[string]any{{"name": "g"}}
		p.mint(t, p.external(map[string]any{"groupDefinitions": defs, "embedTenantName": p.unique("tenant")})).want(t, 400)
		p.mint(t, p.external(map[string]any{"groupDefinitions": defs, "creatorMode": true})).want(t, 400)
		p.mint(t, p.external(map[string]any{"userAttributeDefinitions": []map[string]any{{"name": "a", "type": "string"}}, "creatorMode": false, "embedTenantName": p.unique("tenant")})).want(t, 400)
	}},
	{"creator-mode-requires-tenant-flag", func(t *testing.T, p *platform) {
		g := p.globex
		p.call(t, "POST", generateSession, apiKey(g.APIKeys["admin"]),
			map[string]any{"deploymentId": g.Deployments[0].ID, "externalId": p.unique("u"), "creatorMode": true, "embedTenantName": p.unique("tenant")}).want(t, 403).wantCode(t, "creator_mode_disabled")
		s := p.sessionOf(t, p.external(map[string]any{"creatorMode": true, "embedTenantName": p.unique("tenant")}))
		if !s.CreatorMode {
			t.Errorf("acme (useCreatorMode) did not get a creator-mode session")
		}
	}},
	{"definitions-upsert-into-tenant-scope-only", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		body := p.external(map[string]any{"creatorMode": true, "embedTenantName": tenant,
			"groupDefinitions":         []map[string]any{{"name": "t-group", "description": "first"}},
			"userAttributeDefinitions": []map[string]any{{"name": "t-attr", "type": "string", "displayName": "T"}},
			"groups":                   []string{"t-group"},
			"userAttributes":           []map[string]any{{"name": "t-attr", "value": "v"}}})
		s := p.sessionOf(t, body)
		if !reflect.DeepEqual(s.Groups, []string{"t-group"}) || s.attributes()["t-attr"] != "v" || s.EmbedTenantName != tenant {
			t.Errorf("definitions are validated before groups and values are applied: %+v", s)
		}
		// Idempotent: again, with the description omitted (never cleared) and then changed.
		p.mint(t, with(body, "groupDefinitions", []map[string]any{{"name": "t-group"}})).want(t, 200)
		p.mint(t, with(body, "groupDefinitions", []map[string]any{{"name": "t-group", "description": "second"}})).want(t, 200)
		groups := p.tenantGroups(t, tenant)
		if len(groups) != 1 || groups[0]["name"] != "t-group" || groups[0]["description"] != "second" {
			t.Errorf("tenant groups %v, want one t-group described \"second\"", groups)
		}
		for _, path := range []string{"/api/v1/groups?first=200", "/api/v1/user-attributes?first=200"} {
			r := p.call(t, "GET", path, apiKey(p.acme.APIKeys["admin"]), nil).want(t, 200)
			if strings.Contains(string(r.body), `"t-group"`) || strings.Contains(string(r.body), `"t-attr"`) {
				t.Errorf("tenant definitions leaked into the account-wide catalog %s: %s", path, r.body)
			}
		}
		// Without creator mode, names resolve account-wide: the tenant's group is unknown there.
		r := p.mint(t, p.external(map[string]any{"groups": []string{"t-group"}})).want(t, 400)
		if msg := r.message(t); msg != "Groups with names t-group not found" {
			t.Errorf("message %q", msg)
		}
	}},
	{"cannot-change-type-nothing-upserted", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		base := p.external(map[string]any{"creatorMode": true, "embedTenantName": tenant})
		p.mint(t, with(base, "userAttributeDefinitions", []map[string]any{{"name": "tier", "type": "string"}})).want(t, 200)
		r := p.mint(t, with(base,
			"groupDefinitions", []map[string]any{{"name": "new-group"}},
			"userAttributeDefinitions", []map[string]any{{"name": "new-attr", "type": "number"}, {"name": "tier", "type": "number", "description": "changed"}})).want(t, 409).wantCode(t, "definition_type_conflict")
		if msg := r.message(t); msg != "cannot change type" {
			t.Errorf("message %q, want exactly \"cannot change type\"", msg)
		}
		attrs := p.tenantAttributes(t, tenant)
		if len(attrs) != 1 || attrs[0]["name"] != "tier" || attrs[0]["type"] != "string" || attrs[0]["description"] != nil {
			t.Errorf("attributes after the rejected request %v, want only tier (string, unchanged)", attrs)
		}
		if groups := p.tenantGroups(t, tenant); len(groups) != 0 {
			t.Errorf("groups after the rejected request %v, want none", groups)
		}
	}},
	{"duplicate-definition-names", func(t *testing.T, p *platform) {
		base := p.external(map[string]any{"creatorMode": true, "embedTenantName": p.unique("tenant")})
		p.mint(t, with(base, "groupDefinitions", []map[string]any{{"name": "g"}, {"name": "g"}})).want(t, 400)
		p.mint(t, with(base, "userAttributeDefinitions", []map[string]any{{"name": "a", "type": "string"}, {"name": "a", "type": "string"}})).want(t, 400)
	}},
	{"branch-omitted-or-production-queries-production", func(t *testing.T, p *platform) {
		for _, body := range []map[string]any{p.external(nil), p.external(map[string]any{"branchName": p.acme.Deployments[0].ProductionBranch})} {
			if s := p.sessionOf(t, body); !s.Production || s.BranchName != p.acme.Deployments[0].ProductionBranch {
				t.Errorf("branch %q production %v", s.BranchName, s.Production)
			}
		}
	}},
	{"branch-not-found-404", func(t *testing.T, p *platform) {
		p.mint(t, p.external(map[string]any{"branchName": "no-such-branch-" + p.unique("b")})).want(t, 404).wantCode(t, "branch_not_found")
	}},
	{"branch-not-served-400", func(t *testing.T, p *platform) {
		branch := p.syncedBranch(t)
		p.mint(t, p.external(map[string]any{"branchName": branch})).want(t, 400).wantCode(t, "branch_not_served")
		// Served while someone has it open...
		p.call(t, "POST", p.branch(branch, "/open"), bearer(p.acme.Users["developer"]), nil).want(t, 200)
		if s := p.sessionOf(t, p.external(map[string]any{"branchName": branch})); s.Production || s.BranchName != branch {
			t.Errorf("session on an open branch: %+v", s)
		}
	}},
	{"branch-served-by-staging", func(t *testing.T, p *platform) {
		branch := p.syncedBranch(t)
		p.call(t, "PUT", p.branch(branch, "/staging"), bearer(p.acme.Users["developer"]), map[string]any{"enabled": true}).want(t, 200)
		p.mint(t, p.external(map[string]any{"branchName": branch})).want(t, 200)
		p.call(t, "PUT", p.branch(branch, "/staging"), bearer(p.acme.Users["developer"]), map[string]any{"enabled": false}).want(t, 200)
		p.mint(t, p.external(map[string]any{"branchName": branch})).want(t, 400).wantCode(t, "branch_not_served")
	}},
}

func (p *platform) tenantGroups(t *testing.T, tenant string) []map[string]any {
	return p.tenantList(t, tenant, "groups")
}

func (p *platform) tenantAttributes(t *testing.T, tenant string) []map[string]any {
	return p.tenantList(t, tenant, "user-attributes")
}

func (p *platform) tenantList(t *testing.T, tenant, kind string) []map[string]any {
	t.Helper()
	var page struct{ Items []map[string]any }
	p.call(t, "GET", "/api/v1/embed-tenants/"+tenant+"/"+kind+"?first=200", apiKey(p.acme.APIKeys["admin"]), nil).want(t, 200).decode(t, &page)
	return page.Items
}

var groupRules = []rule{
	{"omitted-keeps-empty-clears-list-replaces", func(t *testing.T, p *platform) {
		body := p.external(nil)
		for _, c := range []struct {
			name   string
			groups any
			want   []string
		}{
			{"a list sets", []string{"sales"}, []string{"sales"}},
			{"omitted keeps", nil, []string{"sales"}},
			{"a list replaces", []string{"marketing"}, []string{"marketing"}},
			{"a longer list replaces", []string{"marketing", "sales"}, []string{"marketing", "sales"}},
			{"empty clears", []string{}, nil},
		} {
			b := body
			if c.groups != nil {
				b = with(body, "groups", c.groups)
			}
			got := sortedStrings(p.sessionOf(t, b).Groups)
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s: groups %v, want %v", c.name, got, c.want)
			}
		}
	}},
	{"creator-mode-resolves-tenant-groups", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		body := p.external(map[string]any{"creatorMode": true, "embedTenantName": tenant})
		p.mint(t, with(body, "groups", []string{"sales"})).want(t, 400) // sales is account-wide only
		p.mint(t, with(body, "groupDefinitions", []map[string]any{{"name": "sales"}})).want(t, 200)
		if s := p.sessionOf(t, with(body, "groups", []string{"sales"})); !reflect.DeepEqual(s.Groups, []string{"sales"}) {
			t.Errorf("tenant-scoped sales: %v", s.Groups)
		}
	}},
}

var userAttributeRules = []rule{
	{"null-clears", func(t *testing.T, p *platform) {
		body := p.external(nil)
		s := p.sessionOf(t, with(body, "userAttributes", []map[string]any{{"name": "region", "value": "emea"}, {"name": "quota", "value": 5}}))
		if a := s.attributes(); a["region"] != "emea" || a["quota"] != float64(5) {
			t.Fatalf("attributes %v", a)
		}
		s = p.sessionOf(t, with(body, "userAttributes", []map[string]any{{"name": "region", "value": nil}}))
		if a := s.attributes(); a["region"] != nil || a["quota"] != float64(5) {
			t.Errorf("after region: null, attributes %v; want region cleared and quota kept", a)
		}
	}},
	{"later-calls-overwrite-supplied-names", func(t *testing.T, p *platform) {
		body := p.external(nil)
		p.sessionOf(t, with(body, "userAttributes", []map[string]any{{"name": "region", "value": "emea"}, {"name": "quota", "value": 5}}))
		s := p.sessionOf(t, with(body, "userAttributes", []map[string]any{{"name": "quota", "value": 7}}))
		if a := s.attributes(); a["region"] != "emea" || a["quota"] != float64(7) {
			t.Errorf("attributes %v, want region kept and quota overwritten", a)
		}
		if a := p.sessionOf(t, body).attributes(); a["quota"] != float64(7) {
			t.Errorf("omitting userAttributes changed the values: %v", a)
		}
	}},
	{"value-type-must-match-definition", func(t *testing.T, p *platform) {
		for _, v := range []any{5, []string{"a"}, true, map[string]any{"x": 1}} {
			p.mint(t, p.external(map[string]any{"userAttributes": []map[string]any{{"name": "region", "value": v}}})).want(t, 400)
		}
		p.mint(t, p.external(map[string]any{"userAttributes": []map[string]any{{"name": "quota", "value": 2.5}}})).want(t, 200)
	}},
}

var userProfileRules = []rule{
	{"overwrite-and-preserve", func(t *testing.T, p *platform) {
		body := p.external(nil)
		profile := func(s sessionInfo) [2]string {
			var out [2]string
			if s.User.DisplayName != nil {
				out[0] = *s.User.DisplayName
			}
			if s.User.Picture != nil {
				out[1] = *s.User.Picture
			}
			return out
		}
		for _, c := range []struct {
			name    string
			profile map[string]any
			want    [2]string
		}{
			{"set both", map[string]any{"displayName": "Ada", "picture": "https://img.example/ada.png"}, [2]string{"Ada", "https://img.example/ada.png"}},
			{"omitted preserves", nil, [2]string{"Ada", "https://img.example/ada.png"}},
			{"an omitted property preserves", map[string]any{"displayName": "Ada L."}, [2]string{"Ada L.", "https://img.example/ada.png"}},
			{"sending overwrites", map[string]any{"picture": "http://img.example/new.gif"}, [2]string{"Ada L.", "http://img.example/new.gif"}},
		} {
			b := body
			if c.profile != nil {
				b = with(body, "userProfile", c.profile)
			}
			if got := profile(p.sessionOf(t, b)); got != c.want {
				t.Errorf("%s: profile %q, want %q", c.name, got, c.want)
			}
		}
	}},
	{"picture-absolute-http-url", func(t *testing.T, p *platform) {
		for _, pic := range []string{"/relative.png", "ftp://img.example/a.png", "not a url", "https://"} {
			p.mint(t, p.external(map[string]any{"userProfile": map[string]any{"picture": pic}})).want(t, 400)
		}
		// Only the syntax is checked: an address that serves nothing is accepted.
		p.mint(t, p.external(map[string]any{"userProfile": map[string]any{"picture": "https://127.0.0.1:1/missing.svg"}})).want(t, 200)
	}},
}

var settingsRules = []rule{
	{"omitted-inherits-defaults", func(t *testing.T, p *platform) {
		s := p.sessionOf(t, p.external(nil))
		for _, k := range []string{"allowAi", "showDashboardChat", "showWorkbookChat", "showAiWidgets", "allowChatWorkspaceAuthoring",
			"showWorkbookShare", "showDashboardSettings", "showMemberNames", "showGroupByCube"} {
			if s.Settings[k] != true {
				t.Errorf("%s = %v, want the built-in default true", k, s.Settings[k])
			}
		}
		if s.Settings["locale"] != nil || s.Settings["timezone"] != nil {
			t.Errorf("locale %v timezone %v, want null (no account setting)", s.Settings["locale"], s.Settings["timezone"])
		}
	}},
	{"booleans-pinned-and-signed", func(t *testing.T, p *platform) {
		settings := map[string]any{"showWorkbookShare": false, "showMemberNames": false, "allowChatWorkspaceAuthoring": false, "showDashboardChat": true}
		e := p.exchange(t, p.mintID(t, p.external(map[string]any{"settings": settings})))
		s := p.info(t, e.Token)
		signed, _ := jwtClaims(t, e.Token)["set"].(map[string]any)
		for k, v := range settings {
			if s.Settings[k] != v {
				t.Errorf("session %s = %v, want %v", k, s.Settings[k], v)
			}
			if signed[k] != v {
				t.Errorf("token claim set.%s = %v, want %v (switches are signed into the token)", k, signed[k], v)
			}
		}
	}},
	{"allow-ai-false-blocks-ai-credentials", func(t *testing.T, p *platform) {
		off := p.exchange(t, p.mintID(t, p.external(map[string]any{"settings": map[string]any{"allowAi": false, "showDashboardChat": true}})))
		p.call(t, "POST", sessionPath+"/ai-credentials", "Bearer "+off.Token, nil).want(t, 403)
		s := p.info(t, off.Token)
		for _, k := range []string{"showDashboardChat", "showWorkbookChat", "showAiWidgets"} {
			if s.Settings[k] != false {
				t.Errorf("allowAi false outranks %s, got %v", k, s.Settings[k])
			}
		}
		on := p.exchange(t, p.mintID(t, p.external(nil)))
		var cred struct {
			Token     string
			ExpiresAt time.Time
		}
		p.call(t, "POST", sessionPath+"/ai-credentials", "Bearer "+on.Token, nil).want(t, 200).decode(t, &cred)
		if cred.Token == "" || !cred.ExpiresAt.After(time.Now()) {
			t.Errorf("AI credentials %+v", cred)
		}
	}},
	{"locale-and-timezone-fall-through", func(t *testing.T, p *platform) {
		for _, c := range []struct {
			locale, timezone string
			wantL, wantTZ    any
		}{
			{"de-DE", "Europe/Berlin", "de-DE", "Europe/Berlin"},
			{"xx-YY", "+02:00", nil, nil},
			{"klingon", "Mars/Olympus", nil, nil},
		} {
			s := p.sessionOf(t, p.external(map[string]any{"settings": map[string]any{"locale": c.locale, "timezone": c.timezone}}))
			if s.Settings["locale"] != c.wantL || s.Settings["timezone"] != c.wantTZ {
				t.Errorf("locale %q timezone %q resolved to %v / %v, want %v / %v", c.locale, c.timezone, s.Settings["locale"], s.Settings["timezone"], c.wantL, c.wantTZ)
			}
		}
	}},
	{"placement-chrome-and-unknown-keys-rejected", func(t *testing.T, p *platform) {
		for _, settings := range []map[string]any{{"hideHeader": true}, {"showChartExport": false}, {"allowAi": "yes"}} {
			p.mint(t, p.external(map[string]any{"settings": settings})).want(t, 400)
		}
	}},
}

var sessionRules = []rule{
	{"single-use-exchange", func(t *testing.T, p *platform) {
		id := p.mintID(t, p.external(nil))
		p.exchange(t, id)
		used := p.call(t, "POST", exchangePath, "", map[string]any{"sessionId": id}).want(t, 401).wantCode(t, "session_id_invalid")
		unknown := p.call(t, "POST", exchangePath, "", map[string]any{"sessionId": "never-issued-" + p.unique("s")}).want(t, 401).wantCode(t, "session_id_invalid")
		if used.message(t) != unknown.message(t) {
			t.Errorf("a used id must look exactly like an unknown one: %q vs %q", used.body, unknown.body)
		}
	}},
	{"exchange-window-5-minutes", func(t *testing.T, p *platform) {
		id := p.mintID(t, p.external(nil))
		// White box: the id lives in Redis with the exchange window as its TTL, so an
		// id older than 5 minutes is gone and answers like an unknown one (checked above).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		opt, err := redis.ParseURL(p.s.Redis.URL)
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		// The id is stored under its SHA-256 (the secret itself is never a Redis key).
		ttl, err := rdb.TTL(ctx, "embed:session:"+sid(id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > 5*time.Minute {
			t.Errorf("TTL of the session id %v, want within (0, 5m]", ttl)
		}
		p.exchange(t, id)
		if n, _ := rdb.Exists(ctx, "embed:session:"+sid(id)).Result(); n != 0 {
			t.Errorf("the session id is still stored after its exchange")
		}
	}},
	{"token-verified-on-every-request", func(t *testing.T, p *platform) {
		e := p.exchange(t, p.mintID(t, p.external(nil)))
		p.info(t, e.Token)
		parts := strings.Split(e.Token, ".")
		p.call(t, "GET", sessionPath, "Bearer "+parts[0]+"."+parts[1]+".AAAA", nil).want(t, 401)
	}},
}

var tokenRules = []rule{
	{"expiry-24h-refresh-23h", func(t *testing.T, p *platform) {
		before := time.Now().Truncate(time.Second)
		e := p.exchange(t, p.mintID(t, p.external(nil)))
		after := time.Now()
		claims := jwtClaims(t, e.Token)
		iat, exp := int64(claims["iat"].(float64)), int64(claims["exp"].(float64))
		// exp is 24 h after generate-session, iat the exchange a moment later (the
		// seconds may tick between the two).
		if d := exp - iat; d > 24*3600 || d < 24*3600-60 {
			t.Errorf("signed expiry %d s after the exchange, want 24 h after minting (the exchange follows within seconds)", d)
		}
		if e.ExpiresAt.Unix() != exp {
			t.Errorf("expiresAt %s differs from the signed exp %d", e.ExpiresAt, exp)
		}
		if e.ExpiresAt.Sub(e.RefreshAt) != time.Hour {
			t.Errorf("refreshAt %s, want 23 h after minting (1 h before expiresAt %s)", e.RefreshAt, e.ExpiresAt)
		}
		if minted := time.Unix(iat, 0); minted.Before(before.Add(-time.Minute)) || minted.After(after.Add(time.Minute)) {
			t.Errorf("iat %s is not the time of minting", minted)
		}
		if claims["aud"] != "platform-embed" && !reflect.DeepEqual(claims["aud"], []any{"platform-embed"}) {
			t.Errorf("aud %v", claims["aud"])
		}
	}},
}

func sid(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return hex.EncodeToString(sum[:])
}

var revokeRules = []rule{
	{"204-no-body", func(t *testing.T, p *platform) {
		r := p.call(t, "POST", revokePath, apiKey(p.acme.APIKeys["admin"]), map[string]any{"sessionId": p.mintID(t, p.external(nil))}).want(t, 204)
		if len(r.body) != 0 {
			t.Errorf("body %q, want none", r.body)
		}
	}},
	{"idempotent-and-unknown-204", func(t *testing.T, p *platform) {
		id := p.mintID(t, p.external(nil))
		e := p.exchange(t, id)
		for _, s := range []string{id, id, "never-issued-" + p.unique("s")} {
			if r := p.call(t, "POST", revokePath, apiKey(p.acme.APIKeys["admin"]), map[string]any{"sessionId": s}).want(t, 204); len(r.body) != 0 {
				t.Errorf("body %q", r.body)
			}
		}
		p.call(t, "GET", sessionPath, "Bearer "+e.Token, nil).want(t, 401)
	}},
	{"before-exchange", func(t *testing.T, p *platform) {
		id := p.mintID(t, p.external(nil))
		p.call(t, "POST", revokePath, apiKey(p.acme.APIKeys["admin"]), map[string]any{"sessionId": id}).want(t, 204)
		p.call(t, "POST", exchangePath, "", map[string]any{"sessionId": id}).want(t, 401)
	}},
	{"after-exchange-token-rejected", func(t *testing.T, p *platform) {
		id := p.mintID(t, p.external(nil))
		e := p.exchange(t, id)
		p.info(t, e.Token)
		p.call(t, "POST", revokePath, apiKey(p.acme.APIKeys["admin"]), map[string]any{"sessionId": id}).want(t, 204)
		// Seen on the very next request: the gateway checks revocation uncached.
		p.call(t, "GET", sessionPath, "Bearer "+e.Token, nil).want(t, 401)
		p.call(t, "POST", p.ws(p.dep1, "/token"), "Bearer "+e.Token, nil).want(t, 401)
	}},
	{"embedding-disabled-403", func(t *testing.T, p *platform) {
		p.call(t, "POST", revokePath, apiKey(p.initech.APIKeys["admin"]), map[string]any{"sessionId": "anything"}).want(t, 403)
		p.call(t, "POST", revokePath, bearer(p.initech.Users["admin"]), map[string]any{"sessionId": "anything"}).want(t, 403)
	}},
	{"scoped-key-any-deployment", func(t *testing.T, p *platform) {
		id := p.mintID(t, p.external(map[string]any{"deploymentId": p.dep2}))
		e := p.exchange(t, id)
		p.call(t, "POST", revokePath, apiKey(p.acme.APIKeys["adminScoped"]), map[string]any{"sessionId": id}).want(t, 204)
		p.call(t, "GET", sessionPath, "Bearer "+e.Token, nil).want(t, 401)
	}},
	{"admin-principals-only", func(t *testing.T, p *platform) {
		for _, c := range []struct {
			name  string
			authz func(t *testing.T) string
			want  int
		}{
			{"admin bearer", func(*testing.T) string { return bearer(p.acme.Users["admin"]) }, 204},
			{"personal key of an admin", func(*testing.T) string { return apiKey(p.acme.APIKeys["personal"]) }, 204},
			{"internal admin's embed token", func(t *testing.T) string {
				return "Bearer " + p.exchange(t, p.mintID(t, map[string]any{"deploymentId": p.dep1, "internalId": p.acme.Users["admin"].Username})).Token
			}, 204},
			{"developer bearer", func(*testing.T) string { return bearer(p.acme.Users["developer"]) }, 403},
			{"external viewer's embed token", func(t *testing.T) string { return "Bearer " + p.exchange(t, p.mintID(t, p.external(nil))).Token }, 403},
		} {
			t.Run(c.name, func(t *testing.T) {
				id := p.mintID(t, p.external(nil))
				e := p.exchange(t, id)
				p.call(t, "POST", revokePath, c.authz(t), map[string]any{"sessionId": id}).want(t, c.want)
				want := 200
				if c.want == 204 {
					want = 401
				}
				p.call(t, "GET", sessionPath, "Bearer "+e.Token, nil).want(t, want)
			})
		}
	}},
	{"other-account-session-untouched", func(t *testing.T, p *platform) {
		id := p.mintID(t, p.external(nil))
		e := p.exchange(t, id)
		p.call(t, "POST", revokePath, apiKey(p.globex.APIKeys["admin"]), map[string]any{"sessionId": id}).want(t, 204)
		p.info(t, e.Token)
	}},
	{"data-api-token-survives", func(t *testing.T, p *platform) {
		id := p.mintID(t, p.external(nil))
		e := p.exchange(t, id)
		var dt struct{ Token, TokenID string }
		p.call(t, "POST", p.ws(p.dep1, "/token"), "Bearer "+e.Token, nil).want(t, 200).decode(t, &dt)
		p.call(t, "POST", revokePath, apiKey(p.acme.APIKeys["admin"]), map[string]any{"sessionId": id}).want(t, 204)
		claims := jwtClaims(t, dt.Token)
		if _, bound := claims["sid"]; bound {
			t.Errorf("the data-API token carries the session id %v, so revoking the session would reach it", claims["sid"])
		}
		if exp := time.Unix(int64(claims["exp"].(float64)), 0); !exp.After(time.Now()) {
			t.Errorf("data-API token expired at %s", exp)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		opt, _ := redis.ParseURL(p.s.Redis.URL)
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		if n, err := rdb.Exists(ctx, revocation.SessionKey(sid(id))).Result(); err != nil || n != 1 {
			t.Fatalf("the session's revocation marker: %d %v", n, err)
		}
		keys, _ := rdb.Keys(ctx, revocation.SessionPrefix+"*").Result()
		for _, k := range keys {
			if strings.Contains(k, dt.TokenID) {
				t.Errorf("the data-API token %s was revoked with the session (%s)", dt.TokenID, k)
			}
		}
	}},
}

var embedTenantAdminRules = []rule{
	{"list-pagination-first-after", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		defs := []map[string]any{{"name": "g1"}, {"name": "g2"}, {"name": "g3"}}
		p.mint(t, p.external(map[string]any{"creatorMode": true, "embedTenantName": tenant, "groupDefinitions": defs})).want(t, 200)
		key := apiKey(p.acme.APIKeys["admin"])
		type page struct {
			Items    []map[string]any
			PageInfo struct {
				HasNextPage bool
				EndCursor   *string
			}
		}
		var first, second page
		p.call(t, "GET", "/api/v1/embed-tenants/"+tenant+"/groups?first=2", key, nil).want(t, 200).decode(t, &first)
		if len(first.Items) != 2 || !first.PageInfo.HasNextPage || first.PageInfo.EndCursor == nil {
			t.Fatalf("first page %+v", first)
		}
		p.call(t, "GET", "/api/v1/embed-tenants/"+tenant+"/groups?first=2&after="+*first.PageInfo.EndCursor, key, nil).want(t, 200).decode(t, &second)
		if len(second.Items) != 1 || second.PageInfo.HasNextPage {
			t.Fatalf("second page %+v", second)
		}
		var names []string
		for _, it := range append(first.Items, second.Items...) {
			names = append(names, it["name"].(string))
		}
		if !reflect.DeepEqual(names, []string{"g1", "g2", "g3"}) {
			t.Errorf("pages %v, want every definition once in a stable order", names)
		}
		for _, q := range []string{"first=0", "first=201", "after=not-a-cursor"} {
			p.call(t, "GET", "/api/v1/embed-tenants/"+tenant+"/groups?"+q, key, nil).want(t, 400)
		}
	}},
	{"delete-204-then-404", func(t *testing.T, p *platform) {
		tenant, other := p.unique("tenant"), p.unique("other")
		for _, tn := range []string{tenant, other} {
			p.mint(t, p.external(map[string]any{"creatorMode": true, "embedTenantName": tn,
				"groupDefinitions": []map[string]any{{"name": "g"}}, "userAttributeDefinitions": []map[string]any{{"name": "a", "type": "string"}}})).want(t, 200)
		}
		key := apiKey(p.acme.APIKeys["admin"])
		for _, kind := range []string{"groups", "user-attributes"} {
			t.Run(kind, func(t *testing.T) {
				id := p.tenantList(t, tenant, kind)[0]["id"].(string)
				otherID := p.tenantList(t, other, kind)[0]["id"].(string)
				p.call(t, "DELETE", "/api/v1/embed-tenants/"+tenant+"/"+kind+"/"+otherID, key, nil).want(t, 404)
				r := p.call(t, "DELETE", "/api/v1/embed-tenants/"+tenant+"/"+kind+"/"+id, key, nil).want(t, 204)
				if len(r.body) != 0 {
					t.Errorf("delete body %q", r.body)
				}
				if left := p.tenantList(t, tenant, kind); len(left) != 0 {
					t.Errorf("still listed after delete: %v", left)
				}
				p.call(t, "DELETE", "/api/v1/embed-tenants/"+tenant+"/"+kind+"/"+id, key, nil).want(t, 404)
				if left := p.tenantList(t, other, kind); len(left) != 1 {
					t.Errorf("the other tenant's definition went too: %v", left)
				}
			})
		}
	}},
	{"unknown-tenant-404", func(t *testing.T, p *platform) {
		p.call(t, "GET", "/api/v1/embed-tenants/"+p.unique("never")+"/groups", apiKey(p.acme.APIKeys["admin"]), nil).want(t, 404)
		// Tenants are per account: globex does not see acme's.
		tenant := p.unique("tenant")
		p.mint(t, p.external(map[string]any{"embedTenantName": tenant})).want(t, 200)
		p.call(t, "GET", "/api/v1/embed-tenants/"+tenant+"/groups", apiKey(p.globex.APIKeys["admin"]), nil).want(t, 404)
	}},
	{"account-key-of-an-admin-only", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		p.mint(t, p.external(map[string]any{"embedTenantName": tenant})).want(t, 200)
		path := "/api/v1/embed-tenants/" + tenant + "/user-attributes"
		p.call(t, "GET", path, apiKey(p.acme.APIKeys["admin"]), nil).want(t, 200)
		p.call(t, "GET", path, apiKey(p.acme.APIKeys["personal"]), nil).want(t, 403)
		p.call(t, "GET", path, bearer(p.acme.Users["admin"]), nil).want(t, 401)
		p.call(t, "GET", path, "", nil).want(t, 401)
	}},
}

var dataTokenRules = []rule{
	{"embed-token-of-the-deployment", func(t *testing.T, p *platform) {
		e := p.exchange(t, p.mintID(t, p.external(nil)))
		var dt struct {
			Token, TokenID string
			ExpiresAt      time.Time
		}
		p.call(t, "POST", p.ws(p.dep1, "/token"), "Bearer "+e.Token, nil).want(t, 200).decode(t, &dt)
		if d := time.Until(dt.ExpiresAt); d <= 55*time.Minute || d > time.Hour {
			t.Errorf("data-API token expires in %s, want 1 h", d)
		}
		if claims := jwtClaims(t, dt.Token); claims["jti"] != dt.TokenID {
			t.Errorf("tokenId %q is not the token's jti %v", dt.TokenID, claims["jti"])
		}
	}},
	{"other-deployment-404", func(t *testing.T, p *platform) {
		e := p.exchange(t, p.mintID(t, p.external(nil)))
		p.call(t, "POST", p.ws(p.dep2, "/token"), "Bearer "+e.Token, nil).want(t, 404)
		p.call(t, "POST", p.ws(p.globex.Deployments[0].ID, "/token"), "Bearer "+e.Token, nil).want(t, 404)
	}},
	{"requires-embed-token", func(t *testing.T, p *platform) {
		p.call(t, "POST", p.ws(p.dep1, "/token"), bearer(p.acme.Users["admin"]), nil).want(t, 401)
		p.call(t, "POST", p.ws(p.dep1, "/token"), apiKey(p.acme.APIKeys["admin"]), nil).want(t, 401)
	}},
}
