package e2e_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// paginationRules: one pagination contract on every list of every service: first 1 to
// 200 (50 when absent or empty), the same 400 for a bad first or an unreadable cursor.
var paginationRules = []rule{
	{"one-contract-on-every-list", func(t *testing.T, p *platform) {
		tenant := "pages-" + strings.ToLower(strings.NewReplacer(" ", "", "_", "", "-", "").Replace(p.unique("t")))
		p.mint(t, p.external(map[string]any{"embedTenantName": tenant})).want(t, 200)
		admin, key := bearer(p.acme.Users["admin"]), apiKey(p.acme.APIKeys["admin"])
		lists := []struct{ path, authz string }{
			{p.ws(p.dep1, "/workspace"), admin},
			{p.ws(p.dep1, "/dbt-sync"), admin},
			{fmt.Sprintf("/build/api/v1/deployments/%d/branches", p.dep1), admin},
			{fmt.Sprintf("/build/api/v1/deployments/%d/branches/%s/versions", p.dep1, url.PathEscape(p.acme.Deployments[0].ProductionBranch)), admin},
			{"/api/v1/embed/sessions", key},
			{"/api/v1/embed-tenants/" + tenant + "/users", key},
			{"/api/v1/embed-tenants/" + tenant + "/groups", key},
			{"/api/v1/embed-tenants/" + tenant + "/user-attributes", key},
			{"/api/v1/groups", key},
			{"/api/v1/user-attributes", key},
		}
		for _, l := range lists {
			t.Run(l.path, func(t *testing.T) {
				for _, bad := range []string{"0", "201", "abc", "-1", "1.5"} {
					r := p.call(t, "GET", l.path+"?first="+bad, l.authz, nil).want(t, 400).wantCode(t, "invalid_request")
					if msg, want := r.message(t), fmt.Sprintf("first must be an integer from 1 to 200, not %q", bad); msg != want {
						t.Errorf("first=%s: message %q, want %q", bad, msg, want)
					}
				}
				r := p.call(t, "GET", l.path+"?first=1&after=not-a-cursor-"+p.unique("c"), l.authz, nil)
				if r.status != 404 { // a versions list of a branch the deployment never had may 404 first
					r.want(t, 400).wantCode(t, "invalid_request")
					if msg := r.message(t); msg != "after is not a cursor returned by this list" {
						t.Errorf("bad after: message %q", msg)
					}
				}
				for _, q := range []string{"?first=", "?after=", "?first=&after=", "?first=200"} {
					if r := p.call(t, "GET", l.path+q, l.authz, nil); r.status != 200 && r.status != 404 {
						t.Errorf("%s: %d %s, want 200 (an empty first or after is the default)", q, r.status, r.body)
					}
				}
			})
		}
	}},
}
