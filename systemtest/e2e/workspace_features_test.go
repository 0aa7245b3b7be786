package e2e_test

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// workspaceFeatureRules: what users of Looker, Metabase and Lightdash rely on, through
// the running stack (every answer is validated against openapi.yaml by the harness).
var workspaceFeatureRules = []rule{
	{"favorites", func(t *testing.T, p *platform) {
		admin, ai := p.acme.Users["admin"], p.acme.Users["aiBiUser"]
		f := p.createFolder(t, admin, p.unique("fav"), 0)
		w := p.createWorkbook(t, admin, p.unique("fav board"), f.ID)
		p.call(t, "PUT", p.ws(p.dep1, fmt.Sprintf("/workspace/favorites/workbook/%d", w.ID)), bearer(admin), nil).want(t, 204)
		if got := p.call(t, "GET", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(admin), nil).want(t, 200).obj(t)["isFavorite"]; got != true {
			t.Errorf("isFavorite for the user who favorited: %v", got)
		}
		if got := p.call(t, "GET", p.ws(p.dep1, fmt.Sprintf("/workspace?folderId=%d", f.ID)), bearer(admin), nil).want(t, 200).obj(t)["items"].([]any)[0].(map[string]any)["isFavorite"]; got != true {
			t.Errorf("isFavorite in the listing: %v", got)
		}
		if got := p.call(t, "GET", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(ai), nil); got.status == 200 && got.obj(t)["isFavorite"] != false {
			t.Errorf("isFavorite for another user: %v", got.obj(t)["isFavorite"])
		}
		var page struct {
			Items []item `json:"items"`
		}
		p.call(t, "GET", p.ws(p.dep1, "/workspace?favorites=true&first=200"), bearer(admin), nil).want(t, 200).decode(t, &page)
		found := false
		for _, it := range page.Items {
			found = found || (it.ID == w.ID && len(it.FolderPath) == 1 && it.FolderPath[0].ID == f.ID)
		}
		if !found {
			t.Errorf("favorites=true does not list workbook %d with its folderPath: %+v", w.ID, page.Items)
		}
		p.call(t, "DELETE", p.ws(p.dep1, fmt.Sprintf("/workspace/favorites/workbook/%d", w.ID)), bearer(admin), nil).want(t, 204)
		if got := p.call(t, "GET", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(admin), nil).want(t, 200).obj(t)["isFavorite"]; got != false {
			t.Errorf("isFavorite after DELETE: %v", got)
		}
	}},
	{"search", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		tag := p.unique("needle")
		f := p.createFolder(t, admin, "haystack "+tag, 0)
		p.createWorkbook(t, admin, "b "+tag, f.ID)
		p.createWorkbook(t, admin, "A "+tag, 0)
		var names []string
		after := ""
		for i := 0; i < 10; i++ {
			var page struct {
				Items    []item `json:"items"`
				PageInfo struct {
					HasNextPage bool    `json:"hasNextPage"`
					EndCursor   *string `json:"endCursor"`
				} `json:"pageInfo"`
			}
			p.call(t, "GET", p.ws(p.dep1, "/workspace?first=1&type=WORKBOOK&q="+url.QueryEscape(tag)+after), bearer(admin), nil).want(t, 200).decode(t, &page)
			for _, it := range page.Items {
				names = append(names, it.Name)
				if it.Name == "b "+tag && (len(it.FolderPath) != 1 || it.FolderPath[0].ID != f.ID) {
					t.Errorf("hit %q folderPath %+v", it.Name, it.FolderPath)
				}
			}
			if !page.PageInfo.HasNextPage {
				break
			}
			after = "&after=" + url.QueryEscape(*page.PageInfo.EndCursor)
		}
		if want := []string{"A " + tag, "b " + tag}; !reflect.DeepEqual(names, want) {
			t.Errorf("search pages %v, want %v", names, want)
		}
		p.call(t, "GET", p.ws(p.dep1, "/workspace?sort=size"), bearer(admin), nil).want(t, 400)
	}},
	{"rename-and-delete", func(t *testing.T, p *platform) {
		admin, viewer := p.acme.Users["admin"], p.acme.Users["viewer"]
		w := p.createWorkbook(t, admin, p.unique("to rename"), 0)
		var got item
		p.call(t, "PATCH", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(admin), map[string]any{"name": "renamed"}).want(t, 200).decode(t, &got)
		if got.Name != "renamed" {
			t.Errorf("renamed: %+v", got)
		}
		p.call(t, "PATCH", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(viewer), map[string]any{"name": "x"}).want(t, 403)
		p.call(t, "DELETE", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(admin), nil).want(t, 204)
		p.call(t, "GET", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(admin), nil).want(t, 404)
	}},
	{"publish-unpublish-republish", func(t *testing.T, p *platform) {
		admin, ai := p.acme.Users["admin"], p.acme.Users["aiBiUser"]
		var w item
		p.call(t, "POST", p.ws(p.dep1, "/workbooks"), bearer(admin), map[string]any{"name": p.unique("board"),
			"dashboardDraft": map[string]any{"kind": "CLASSIC", "widgets": []any{}}}).want(t, 200).decode(t, &w)
		path := func(verb string) string { return p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/%s", w.ID, verb)) }
		d := p.call(t, "POST", path("publish"), bearer(admin), map[string]any{"allowEmbed": false}).want(t, 200).obj(t)["publishedDashboard"].(map[string]any)
		if d["allowEmbed"] != false || d["createdBy"] != float64(admin.ID) {
			t.Errorf("first publish: %v", d)
		}
		d = p.call(t, "POST", path("publish"), bearer(ai), nil).want(t, 200).obj(t)["publishedDashboard"].(map[string]any)
		if d["createdBy"] != float64(admin.ID) || d["updatedBy"] != float64(ai.ID) || d["allowEmbed"] != false {
			t.Errorf("republish by another user: %v", d)
		}
		d = p.call(t, "POST", path("unpublish"), bearer(ai), nil).want(t, 200).obj(t)["publishedDashboard"].(map[string]any)
		if d["status"] != "archived" {
			t.Errorf("unpublish: %v", d)
		}
		d = p.call(t, "POST", path("publish"), bearer(admin), nil).want(t, 200).obj(t)["publishedDashboard"].(map[string]any)
		if d["status"] != "published" || d["versionNumber"] != float64(3) {
			t.Errorf("publish after unpublish: %v", d)
		}
	}},
	{"move-keeps-items-visible-to-their-creator", func(t *testing.T, p *platform) {
		ai, dev := p.acme.Users["aiBiUser"], p.acme.Users["developer"]
		private := p.createFolder(t, dev, p.unique("dev private"), 0)
		w := p.createWorkbook(t, ai, p.unique("ai's"), 0)
		r := p.move(t, dev, private.ID, wb(w)).want(t, 403)
		if msg := r.message(t); !containsAll(msg, "hide it from its creator", "manage") {
			t.Errorf("message %q", msg)
		}
	}},
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
