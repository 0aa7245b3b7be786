package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

var limitRules = []rule{
	{"bulk-move-1-to-100", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		dest := p.createFolder(t, admin, p.unique("dest"), 0)
		w := p.createWorkbook(t, admin, "w", 0)
		refs := func(n int) []ref {
			out := []ref{wb(w)}
			for i := 1; i < n; i++ {
				out = append(out, ref{"REPORT", int64(980000000 + i)})
			}
			return out
		}
		for _, n := range []int{0, 101} {
			items := refs(n)
			if n == 0 {
				items = []ref{}
			}
			p.call(t, "POST", p.ws(p.dep1, "/workspace/bulk-move"), bearer(admin), map[string]any{"items": items, "folderId": dest.ID}).want(t, 400)
		}
		if f := p.workbookFolder(t, w.ID); f != nil {
			t.Fatalf("a rejected batch moved the workbook to %v", *f)
		}
		r := p.bulkMove(t, admin, dest.ID, refs(100)...)
		if len(r.Moved) != 1 || len(r.Failed) != 99 {
			t.Errorf("100 items: moved %d failed %d, want 1 and 99", len(r.Moved), len(r.Failed))
		}
	}},
	{"folder-nesting-on-move", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		chain := []int64{0}
		for level := 1; level <= 7; level++ {
			chain = append(chain, p.createFolder(t, admin, fmt.Sprintf("level-%d", level), chain[level-1]).ID)
		}
		top := p.createFolder(t, admin, p.unique("subtree"), 0)
		p.createFolder(t, admin, "leaf", top.ID)
		// top under level 7 would put leaf at level 9.
		p.move(t, admin, chain[7], fo(top)).want(t, 400).wantCode(t, "depth_limit")
		p.move(t, admin, chain[6], fo(top)).want(t, 200)
		p.move(t, admin, top.ID, fo(top)).want(t, 400).wantCode(t, "folder_cycle")
	}},
	{"embed-tenant-name-5-to-36", func(t *testing.T, p *platform) {
		for _, c := range []struct {
			name string
			want int
		}{
			{"abcd", 400}, {"abcde", 200}, {"a" + strings.Repeat("b", 35), 200}, {"a" + strings.Repeat("b", 36), 400},
			{"Abcde", 400}, {"1abcde", 400}, {"abcde-", 400}, {"ab_cde", 400}, {"ab-c9", 200},
		} {
			t.Run(c.name, func(t *testing.T) {
				p.mint(t, p.external(map[string]any{"embedTenantName": c.name})).want(t, c.want)
			})
		}
	}},
	{"app-entry-255", func(t *testing.T, p *platform) {
		for _, c := range []struct {
			n    int
			want int
		}{{255, 200}, {256, 400}} {
			body := map[string]any{"name": "app", "dashboardDraft": map[string]any{"kind": "APP", "app": map[string]any{"entry": strings.Repeat("e", c.n)}}}
			r := p.call(t, "POST", p.ws(p.dep1, "/workbooks"), bearer(p.acme.Users["admin"]), body).want(t, c.want)
			if c.want == 200 {
				var wbk struct {
					DashboardDraft struct{ App struct{ Entry string } }
				}
				r.decode(t, &wbk)
				if len(wbk.DashboardDraft.App.Entry) != c.n {
					t.Errorf("entry stored with %d characters", len(wbk.DashboardDraft.App.Entry))
				}
			}
		}
	}},
}

var authRules = []rule{
	{"workspace-and-dbt-sync-take-a-bearer-token", func(t *testing.T, p *platform) {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"POST", p.ws(p.dep1, "/folders"), map[string]any{"name": "x"}},
			{"POST", p.ws(p.dep1, "/workspace/bulk-move"), map[string]any{"items": []ref{{"WORKBOOK", 1}}}},
			{"POST", p.ws(p.dep1, "/dbt-sync"), map[string]any{"source": "manifest"}},
		} {
			for _, authz := range []string{"", apiKey(p.acme.APIKeys["admin"]), "Bearer not-a-jwt", "Bearer " + p.s.Token(p.acme.Users["admin"].ID, -time.Minute)} {
				r := p.call(t, c.method, c.path, authz, c.body).want(t, 401)
				if !strings.Contains(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s %s with %.12q: WWW-Authenticate %q", c.method, c.path, authz, r.header.Get("WWW-Authenticate"))
				}
			}
		}
		p.call(t, "POST", p.ws(p.dep1, "/folders"), "Bearer "+p.s.Token(p.acme.Users["admin"].ID, time.Hour), map[string]any{"name": p.unique("fresh")}).want(t, 200)
	}},
	{"embed-endpoints-take-an-api-key", func(t *testing.T, p *platform) {
		for _, path := range []string{generateSession, "/api/v1/embed-tenants/some-tenant/groups"} {
			method, body := "POST", any(p.external(nil))
			if strings.Contains(path, "tenants") {
				method, body = "GET", nil
			}
			for _, authz := range []string{"", bearer(p.acme.Users["admin"]), "Api-Key pk_0000000000000000_" + strings.Repeat("A", 43)} {
				r := p.call(t, method, path, authz, body).want(t, 401)
				if !strings.Contains(r.header.Get("WWW-Authenticate"), "Api-Key") {
					t.Errorf("%s with %.12q: WWW-Authenticate %q", path, authz, r.header.Get("WWW-Authenticate"))
				}
			}
		}
		p.call(t, "POST", revokePath, "", map[string]any{"sessionId": "x"}).want(t, 401)
	}},
	{"another-accounts-deployment-404", func(t *testing.T, p *platform) {
		g := bearer(p.globex.Users["admin"])
		foreign := p.call(t, "POST", p.ws(p.dep1, "/folders"), g, map[string]any{"name": "x"}).want(t, 404)
		missing := p.call(t, "POST", p.ws(999999, "/folders"), g, map[string]any{"name": "x"}).want(t, 404)
		if strings.ReplaceAll(foreign.message(t), fmt.Sprint(p.dep1), "N") != strings.ReplaceAll(missing.message(t), "999999", "N") {
			t.Errorf("another account's deployment must look like a missing one: %q vs %q", foreign.body, missing.body)
		}
		p.call(t, "POST", p.ws(p.dep1, "/dbt-sync"), bearer(p.globex.Users["admin"]), map[string]any{"source": "manifest"}).want(t, 404)
	}},
	{"session-does-not-expose-the-api-key", func(t *testing.T, p *platform) {
		key := p.acme.APIKeys["admin"]
		// pk_<16 hex id>_<43 base64url secret chars>: the secret may itself hold '_'.
		secret := key[len("pk_")+16+1:]
		id := p.mintID(t, p.external(nil))
		e := p.exchange(t, id)
		info := p.call(t, "GET", sessionPath, "Bearer "+e.Token, nil).want(t, 200)
		for what, s := range map[string]string{"session id": id, "token": e.Token, "session": string(info.body), "claims": fmt.Sprint(jwtClaims(t, e.Token))} {
			if strings.Contains(s, secret) || strings.Contains(s, key) {
				t.Errorf("the %s carries the API key", what)
			}
		}
	}},
}

var errorRules = []rule{
	{"error-body-status-and-message", func(t *testing.T, p *platform) {
		for _, r := range []response{
			p.call(t, "POST", p.ws(p.dep1, "/folders"), bearer(p.acme.Users["viewer"]), map[string]any{"name": "x"}),
			p.call(t, "GET", p.ws(p.dep1, "/folders/990000009"), bearer(p.acme.Users["admin"]), nil),
			p.call(t, "POST", generateSession, apiKey(p.acme.APIKeys["personal"]), p.external(nil)),
		} {
			if r.status < 400 || r.message(t) == "" {
				t.Errorf("error body %d %s", r.status, r.body)
			}
		}
	}},
	{"malformed-or-unknown-fields-400", func(t *testing.T, p *platform) {
		admin := bearer(p.acme.Users["admin"])
		for _, c := range []struct {
			path, authz, body, field string
		}{
			{p.ws(p.dep1, "/folders"), admin, `{"name": "x", "colour": "red"}`, "colour"},
			{p.ws(p.dep1, "/folders"), admin, `{"name": 5}`, "name"},
			{p.ws(p.dep1, "/folders"), admin, `{"name": "x"`, ""},
			{p.ws(p.dep1, "/folders"), admin, `{"name": "x"} {}`, ""},
			{p.ws(p.dep1, "/workspace/bulk-move"), admin, `{"items": [{"type": "FILE", "id": 1}]}`, ""},
			{p.ws(p.dep1, "/workspace/bulk-move"), admin, `{"items": [{"type": "FOLDER", "id": 1.5}]}`, ""},
			{generateSession, apiKey(p.acme.APIKeys["admin"]), fmt.Sprintf(`{"deploymentId": %d, "externalId": "x", "extra": 1}`, p.dep1), "extra"},
			{p.ws(p.dep1, "/dbt-sync"), bearer(p.acme.Users["developer"]), `{"source": "manifest", "manifest": {}, "unknown": true}`, "unknown"},
		} {
			r := p.call(t, "POST", c.path, c.authz, c.body).want(t, 400)
			if msg := r.message(t); c.field != "" && !strings.Contains(msg, c.field) {
				t.Errorf("%s %s: message %q does not name %q", c.path, c.body, msg, c.field)
			}
		}
	}},
	{"content-type-415", func(t *testing.T, p *platform) {
		for _, c := range []struct{ path, authz string }{
			{p.ws(p.dep1, "/folders"), bearer(p.acme.Users["admin"])},
			{generateSession, apiKey(p.acme.APIKeys["admin"])},
		} {
			req, _ := http.NewRequest("POST", p.s.Gateway+c.path, strings.NewReader(`{"name":"x"}`))
			req.Header.Set("Content-Type", "text/plain")
			req.Header.Set("Authorization", c.authz)
			p.send(t, req).want(t, 415)
		}
	}},
	{"never-500-for-client-input", func(t *testing.T, p *platform) {
		admin := bearer(p.acme.Users["admin"])
		for _, path := range []string{p.ws(p.dep1, "/folders"), p.ws(p.dep1, "/workspace/bulk-move"), p.ws(p.dep1, "/workspace/move"), p.ws(p.dep1, "/workbooks")} {
			for _, body := range []string{``, `null`, `[]`, `"x"`, `{"items": null}`, `{"name": ""}`, `{"id": -1, "type": "FOLDER"}`,
				`{"folderId": 9223372036854775807, "items": [{"type": "FOLDER", "id": 9223372036854775807}]}`, strings.Repeat("[", 10000)} {
				if r := p.call(t, "POST", path, admin, body); r.status >= 500 {
					t.Errorf("POST %s %.40q: %d %s", path, body, r.status, r.body)
				}
			}
		}
	}},
	{"unknown-route-404-json", func(t *testing.T, p *platform) {
		// Not an operation of the document, so it is checked by hand against the Error shape.
		r := p.api.Do("GET", "/api/v1/no-such-thing", "", nil)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		var e struct {
			Status  int
			Message string
		}
		if r.Status != 404 || json.Unmarshal(r.Body, &e) != nil || e.Status != 404 || e.Message == "" {
			t.Errorf("%d %s", r.Status, r.Body)
		}
	}},
}

var routeRules = []rule{
	{"every-operation-reachable-through-the-gateway", func(t *testing.T, p *platform) {
		values := map[string]string{"deploymentId": fmt.Sprint(p.dep1), "folderId": "990000010", "workbookId": "990000011", "reportId": "990000012",
			"syncJobId": "sj-none", "branchName": "main", "path": "model/cubes/none.yml", "embedTenantName": "tenant-none", "id": "none"}
		var names []string
		for path, item := range p.doc.Paths.Map() {
			for method, op := range item.Operations() {
				concrete := path
				for k, v := range values {
					concrete = strings.ReplaceAll(concrete, "{"+k+"}", v)
				}
				var body any
				if op.RequestBody != nil {
					body = map[string]any{}
				}
				r := p.call(t, method, concrete, "", body)
				public := op.Security != nil && len(*op.Security) == 0
				switch {
				case !public && r.status != 401:
					t.Errorf("%s %s (%s) without credentials: %d, want 401 (the gateway must route and challenge it)", method, concrete, op.OperationID, r.status)
				case public && (r.status == 404 || r.status == 405):
					t.Errorf("%s %s (%s): %d %s", method, concrete, op.OperationID, r.status, r.body)
				}
				names = append(names, op.OperationID)
			}
		}
		sort.Strings(names)
		if len(names) < 40 {
			t.Errorf("only %d operations checked", len(names))
		}
	}},
	{"openapi-json-is-the-document", func(t *testing.T, p *platform) {
		r := p.call(t, "GET", "/api/v1/openapi.json", "", nil).want(t, 200)
		var served struct {
			Info  struct{ Version string }
			Paths map[string]any
		}
		r.decode(t, &served)
		if served.Info.Version != p.doc.Info.Version || len(served.Paths) != p.doc.Paths.Len() {
			t.Errorf("served version %q with %d paths; openapi.yaml has %q with %d", served.Info.Version, len(served.Paths), p.doc.Info.Version, p.doc.Paths.Len())
		}
	}},
	{"jwks-publishes-the-signing-key", func(t *testing.T, p *platform) {
		var set struct{ Keys []struct{ Kid string } }
		p.call(t, "GET", "/api/v1/embed/.well-known/jwks.json", "", nil).want(t, 200).decode(t, &set)
		e := p.exchange(t, p.mintID(t, p.external(nil)))
		kid := jwtHeader(t, e.Token)["kid"]
		found := false
		for _, k := range set.Keys {
			found = found || k.Kid == kid
		}
		if !found {
			t.Errorf("the token's kid %v is not in the JWKS %+v", kid, set)
		}
	}},
}

func jwtHeader(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.SplitN(token, ".", 2)
	return jwtClaims(t, "x."+parts[0]+".x")
}
