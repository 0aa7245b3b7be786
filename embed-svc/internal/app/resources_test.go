package app_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// generate-session's resources: format-checked and bounded, not with internalId,
// signed into the token (absent: no claim, no narrowing) and shown by the session.
func testResources(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	ids := []string{"AAAAAAAAAAAAAAAA", "abc-_0123456789Z"}
	mint := func(extra map[string]any) map[string]any {
		b := map[string]any{"deploymentId": dep, "externalId": "res-" + uid("u")}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	t.Run("generate-session-200-resources-signed-into-the-token", func(t *testing.T) {
		for name, c := range map[string]struct {
			resources any
			want      []string // nil: no claim
		}{
			"two dashboards":     {map[string]any{"dashboards": ids}, ids},
			"none opens nothing": {map[string]any{"dashboards": []string{}}, []string{}},
			"absent":             {nil, nil},
		} {
			body := mint(nil)
			if c.resources != nil {
				body["resources"] = c.resources
			}
			_, tok := e.session(t, body)
			claims, err := parseToken(e.jwksURL(), tok.Token, "platform-embed")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.want == nil && claims.Res != nil:
				t.Errorf("%s: token carries res %v", name, claims.Res)
			case c.want != nil && (claims.Res == nil || !slices.Equal(claims.Res.Dashboards, c.want) || claims.Res.Dashboards == nil):
				t.Errorf("%s: token res %+v, want %v", name, claims.Res, c.want)
			}
			r := e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil)
			var shown struct {
				Resources *struct {
					Dashboards []string `json:"dashboards"`
				} `json:"resources"`
			}
			r.json(t, &shown)
			if (c.want == nil) != (shown.Resources == nil) || (c.want != nil && !slices.Equal(shown.Resources.Dashboards, c.want)) {
				t.Errorf("%s: the session shows resources %s", name, r.Body)
			}
		}
	})
	t.Run("generate-session-400-resources", func(t *testing.T) {
		many := make([]string, 51)
		for i := range many {
			many[i] = fmt.Sprintf("dashboard%07d", i)
		}
		for name, c := range map[string]struct {
			body map[string]any
			want string
		}{
			"over 50":         {mint(map[string]any{"resources": map[string]any{"dashboards": many}}), "51 entries, over the limit of 50"},
			"malformed id":    {mint(map[string]any{"resources": map[string]any{"dashboards": []string{ids[0], "short"}}}), `"short" is not a dashboard public id`},
			"duplicate":       {mint(map[string]any{"resources": map[string]any{"dashboards": []string{ids[0], ids[0]}}}), "duplicate \"" + ids[0] + "\""},
			"no dashboards":   {mint(map[string]any{"resources": map[string]any{}}), "resources.dashboards is required"},
			"unknown key":     {mint(map[string]any{"resources": map[string]any{"dashboards": ids, "workbooks": []int{1}}}), "workbooks"},
			"with internalId": {map[string]any{"deploymentId": dep, "internalId": "alice", "resources": map[string]any{"dashboards": ids}}, "resources is not allowed with internalId"},
		} {
			for _, dry := range []bool{false, true} {
				c.body["dryRun"] = dry
				r := e.do(t, "POST", "/api/v1/embed/generate-session", key, c.body)
				if r.Status != 400 || !strings.Contains(r.message(t), c.want) {
					t.Errorf("%s (dry run %v): %d %s, want 400 naming %q", name, dry, r.Status, r.Body, c.want)
				}
			}
		}
	})
	t.Run("generate-session-dry-run-explains-reach", func(t *testing.T) {
		tenant := tname("dre")
		ext := "dre-" + uid("u")
		e.mint(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant, "groups": []string{"sales"}})
		want := strings.ReplaceAll(fmt.Sprintf("%-16.16s", "dash-marketing"), " ", "_")
		r := e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant,
			"groups": []string{"marketing"}, "dryRun": true, "resources": map[string]any{"dashboards": []string{want}}})
		var out struct {
			Effective struct {
				Resources        map[string][]string `json:"resources"`
				GroupMemberships map[string][]string `json:"groupMemberships"`
				Dashboards       []struct {
					PublicID     string         `json:"publicId"`
					AccessSource string         `json:"accessSource"`
					Subject      map[string]any `json:"subject"`
				} `json:"dashboards"`
				Truncated *bool `json:"dashboardsTruncated"`
			} `json:"effective"`
		}
		r.json(t, &out)
		eff := out.Effective
		if r.Status != 200 || !reflect.DeepEqual(eff.Resources, map[string][]string{"dashboards": {want}}) ||
			!reflect.DeepEqual(eff.GroupMemberships, map[string][]string{"account": {"marketing"}, "tenant": {}}) ||
			len(eff.Dashboards) != 1 || eff.Dashboards[0].PublicID != want || eff.Dashboards[0].Subject["groupName"] != "marketing" ||
			eff.Truncated == nil || *eff.Truncated {
			t.Fatalf("dry run = %d %s", r.Status, r.Body)
		}
		req, _ := e.reach.request()
		if req.AccountID != acme.ID || req.DeploymentID != dep || req.EmbedTenantName != tenant || !slices.Equal(req.AccountGroups, []string{"marketing"}) ||
			req.Resources == nil || !slices.Equal(*req.Resources, []string{want}) || req.InternalUserID != 0 {
			raw, _ := json.Marshal(req)
			t.Fatalf("reach asked %s", raw)
		}
		// Without resources: nothing narrowed, every group's dashboard; the user keeps sales.
		r = e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant, "dryRun": true})
		var plain struct{ Effective map[string]json.RawMessage }
		r.json(t, &plain)
		if _, has := plain.Effective["resources"]; has || r.Status != 200 || !strings.Contains(string(r.Body), `"groupMemberships":{"account":["sales"],"tenant":[]}`) {
			t.Fatalf("dry run without resources = %d %s", r.Status, r.Body)
		}
		if req, _ := e.reach.request(); req.Resources != nil {
			t.Fatalf("reach asked with resources %v", *req.Resources)
		}
	})
}
