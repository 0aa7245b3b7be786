package app_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
)

// An embed tenant's external users can be listed, read and deleted by the account's
// admin; deleting revokes the user's sessions and frees its place under the limit.
func testTenantUsers(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	tenant := tname("usr")
	base := "/api/v1/embed-tenants/" + tenant + "/users"
	exts := []string{"zoe." + uid("u"), "adam." + uid("u"), "zed." + uid("u")}
	var tokens []tokenResp
	for _, ext := range exts {
		tokens = append(tokens, e.exchange(t, e.mint(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant,
			"email": ext + "@example.com", "groups": []string{"sales"}, "userAttributes": []any{map[string]any{"name": "region", "value": "eu"}}})))
	}
	var page struct {
		Items []struct {
			ID             int64  `json:"id"`
			ExternalID     string `json:"externalId"`
			Email          string `json:"email"`
			Groups         []map[string]any
			UserAttributes []map[string]any `json:"userAttributes"`
		} `json:"items"`
		PageInfo struct {
			HasNextPage bool    `json:"hasNextPage"`
			EndCursor   *string `json:"endCursor"`
		} `json:"pageInfo"`
	}
	r := e.do(t, "GET", base+"?first=2", key, nil)
	r.json(t, &page)
	if r.Status != 200 || len(page.Items) != 2 || !page.PageInfo.HasNextPage || page.Items[0].ID >= page.Items[1].ID {
		t.Fatalf("page 1 = %d %s", r.Status, r.Body)
	}
	// A list shows profiles; GET the user for its memberships and values.
	first := page.Items[0]
	if first.Email == "" || first.Groups != nil || first.UserAttributes != nil {
		t.Fatalf("list item %s", r.Body)
	}
	var view struct {
		Groups         []map[string]any
		UserAttributes []map[string]any `json:"userAttributes"`
	}
	e.do(t, "GET", base+"/"+url.PathEscape(first.ExternalID), key, nil).json(t, &view)
	if len(view.Groups) != 1 || view.Groups[0]["name"] != "sales" || view.Groups[0]["scope"] != "account" ||
		len(view.UserAttributes) != 1 || view.UserAttributes[0]["value"] != "eu" {
		t.Fatalf("user view %+v", view)
	}
	r = e.do(t, "GET", base+"?first=2&after="+url.QueryEscape(*page.PageInfo.EndCursor), key, nil)
	r.json(t, &page)
	if len(page.Items) != 1 || page.PageInfo.HasNextPage {
		t.Fatalf("page 2 = %s", r.Body)
	}
	r = e.do(t, "GET", base+"?q=Z", key, nil)
	r.json(t, &page)
	if len(page.Items) != 2 {
		t.Fatalf("q=Z: %s", r.Body)
	}
	// One user; another tenant's or an unknown user is 404.
	one := strings.ToLower(exts[1])
	if r := e.do(t, "GET", base+"/"+url.PathEscape(one), key, nil); r.Status != 200 || !strings.Contains(string(r.Body), one) {
		t.Fatalf("get = %d %s", r.Status, r.Body)
	}
	other := tname("usr")
	e.mint(t, map[string]any{"deploymentId": dep, "externalId": "someone." + uid("u"), "embedTenantName": other})
	if r := e.do(t, "GET", "/api/v1/embed-tenants/"+other+"/users/"+url.PathEscape(one), key, nil); r.Status != 404 {
		t.Fatalf("user through another tenant = %d", r.Status)
	}
	if r := e.do(t, "GET", base+"/nobody", key, nil); r.Status != 404 {
		t.Fatalf("unknown user = %d", r.Status)
	}
	if r := e.do(t, "GET", "/api/v1/embed-tenants/"+tname("none")+"/users", key, nil); r.Status != 404 {
		t.Fatalf("unknown tenant = %d", r.Status)
	}
	if r := e.do(t, "GET", base, bearer(acme.Users["admin"].Bearer), nil); r.Status != 401 && r.Status != 403 {
		t.Fatalf("admin bearer on a tenant route = %d (tenant routes need the account key)", r.Status)
	}
	if r := e.do(t, "GET", base, apiKey(e.globex().APIKeys["admin"]), nil); r.Status != 404 {
		t.Fatalf("another account's admin = %d", r.Status)
	}
	// Delete: the user's token stops working, the user is gone, its place is free.
	ctx := context.Background()
	before, _ := e.app.Store.ExternalUserCount(ctx, acme.ID)
	r = e.do(t, "DELETE", base+"/"+url.PathEscape(one), key, nil)
	var del struct {
		Deleted         bool `json:"deleted"`
		SessionsRevoked int  `json:"sessionsRevoked"`
	}
	r.json(t, &del)
	if r.Status != 200 || !del.Deleted || del.SessionsRevoked != 1 {
		t.Fatalf("delete = %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "GET", "/api/v1/embed/session", bearer(tokens[1].Token), nil); r.Status != 401 {
		t.Fatalf("deleted user's token = %d", r.Status)
	}
	if r := e.do(t, "GET", base+"/"+url.PathEscape(one), key, nil); r.Status != 404 {
		t.Fatalf("deleted user = %d", r.Status)
	}
	if after, _ := e.app.Store.ExternalUserCount(ctx, acme.ID); after != before-1 {
		t.Fatalf("external users %d -> %d, want one place freed", before, after)
	}
	if r := e.do(t, "GET", "/api/v1/embed/session", bearer(tokens[0].Token), nil); r.Status != 200 {
		t.Fatalf("another user's token after the delete = %d", r.Status)
	}
}

// A delete of an external user and mints of the same user at once, on the real stores
// through the gateway, many times over: after the delete answers 200 no session of the
// deleted user works; a mint that raced it is 409 external_user_deleting or made a new
// user after it.
func testDeleteWinsOverMints(t *testing.T, e *env) {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	tenant := tname("race")
	for round := range 15 {
		ext := uid("racer")
		e.mint(t, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant})
		var before struct{ ID int64 }
		e.do(t, "GET", "/api/v1/embed-tenants/"+tenant+"/users/"+ext, key, nil).json(t, &before)
		replies := make([]resp, 5)
		parallel(5, func(i int) {
			if i == 0 {
				replies[i] = e.do(t, "DELETE", "/api/v1/embed-tenants/"+tenant+"/users/"+ext, key, nil)
				return
			}
			replies[i] = e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant})
		})
		if replies[0].Status != 200 {
			t.Fatalf("round %d: delete = %d %s", round, replies[0].Status, replies[0].Body)
		}
		for _, r := range replies[1:] {
			if r.Status == 409 && strings.Contains(string(r.Body), "external_user_deleting") {
				continue
			}
			if r.Status != 200 {
				t.Fatalf("round %d: a mint racing the delete = %d %s", round, r.Status, r.Body)
			}
			var out struct{ SessionID string }
			r.json(t, &out)
			ex := e.do(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": out.SessionID})
			if ex.Status != 200 {
				continue // revoked: the deleted user's
			}
			var tok tokenResp
			ex.json(t, &tok)
			var info sessionInfo
			if r := e.do(t, "GET", "/api/v1/embed/session", bearer(tok.Token), nil); r.Status == 200 {
				r.json(t, &info)
				if info.User.ID == before.ID {
					t.Fatalf("round %d: a session of the deleted user %d works after the delete", round, before.ID)
				}
			}
		}
	}
}
