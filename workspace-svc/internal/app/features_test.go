package app_test

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// names lists the names of a page's items.
func names(t *testing.T, r apitest.Response) []string {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	out := []string{}
	for _, it := range r.Object(t)["items"].([]any) {
		out = append(out, it.(map[string]any)["name"].(string))
	}
	return out
}

// allPages follows a listing's cursors and returns every name, in order.
func (e *env) allPages(t *testing.T, dep int64, bearer, query string) []string {
	t.Helper()
	var out []string
	after := ""
	for pages := 0; pages < 100; pages++ {
		r := e.do(t, "GET", depPath(dep, "/workspace?"+query+after), bearer, nil)
		out = append(out, names(t, r)...)
		pi := r.Object(t)["pageInfo"].(map[string]any)
		if pi["hasNextPage"] != true {
			return out
		}
		after = "&after=" + url.QueryEscape(pi["endCursor"].(string))
	}
	t.Fatal("more than 100 pages")
	return nil
}

func (e *env) favorite(t *testing.T, dep int64, bearer, method, typ string, id int64) apitest.Response {
	t.Helper()
	return e.do(t, method, depPath(dep, fmt.Sprintf("/workspace/favorites/%s/%d", typ, id)), bearer, nil)
}

func isFavorite(t *testing.T, r apitest.Response) any {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	return r.Object(t)["isFavorite"]
}

func TestFavorites(t *testing.T) {
	e := newEnvWithLimits(t, 1, workspace.Limits{Favorites: 3})
	dep := e.dep("acme", 0)
	admin, ai, dev := e.bearer("acme", "admin"), e.bearer("acme", "aiBiUser"), e.bearer("acme", "developer")
	folder := e.mkFolder(t, dep, admin, "shared", 0)
	e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", folder)), admin,
		map[string]any{"grants": []any{map[string]any{"userId": e.user("acme", "aiBiUser").ID, "level": "edit"}}})
	wb := e.mkItem(t, dep, admin, "workbooks", "fav board", folder)
	rp := e.mkItem(t, dep, admin, "reports", "plain report", folder)

	t.Run("favorite-is-per-user-on-every-rendering", func(t *testing.T) {
		if r := e.favorite(t, dep, ai, "PUT", "workbook", wb); r.Status != 204 {
			t.Fatalf("PUT favorite: %d %s", r.Status, r.Body)
		}
		if r := e.favorite(t, dep, ai, "PUT", "WORKBOOK", wb); r.Status != 204 {
			t.Fatalf("PUT favorite again (idempotent): %d %s", r.Status, r.Body)
		}
		if got := isFavorite(t, e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), ai, nil)); got != true {
			t.Fatalf("GET by the user who favorited: isFavorite %v", got)
		}
		if got := isFavorite(t, e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), admin, nil)); got != false {
			t.Fatalf("GET by another user: isFavorite %v", got)
		}
		list := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workspace?folderId=%d", folder)), ai, nil).Object(t)["items"].([]any)
		for _, it := range list {
			m := it.(map[string]any)
			if want := m["id"] == float64(wb); m["isFavorite"] != want {
				t.Fatalf("listing: item %v isFavorite %v, want %v", m["id"], m["isFavorite"], want)
			}
		}
		r := e.do(t, "GET", depPath(dep, "/workspace?favorites=true"), ai, nil)
		items := r.Object(t)["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["id"] != float64(wb) || items[0].(map[string]any)["isFavorite"] != true {
			t.Fatalf("favorites=true: %s", r.Body)
		}
		if path := items[0].(map[string]any)["folderPath"].([]any); len(path) != 1 || path[0].(map[string]any)["id"] != float64(folder) {
			t.Fatalf("favorite's folderPath: %v", path)
		}
		if got := names(t, e.do(t, "GET", depPath(dep, "/workspace?favorites=true"), admin, nil)); len(got) != 0 {
			t.Fatalf("another user's favorites=true: %v", got)
		}
		// A folder too: its own representation says so.
		if r := e.favorite(t, dep, ai, "PUT", "folder", folder); r.Status != 204 {
			t.Fatalf("PUT folder favorite: %d %s", r.Status, r.Body)
		}
		if got := isFavorite(t, e.do(t, "GET", depPath(dep, fmt.Sprintf("/folders/%d", folder)), ai, nil)); got != true {
			t.Fatalf("GET folder: isFavorite %v", got)
		}
		if r := e.favorite(t, dep, ai, "DELETE", "folder", folder); r.Status != 204 {
			t.Fatalf("DELETE folder favorite: %d %s", r.Status, r.Body)
		}
		// A move renders the item with the mover's favorite too.
		r = e.do(t, "POST", depPath(dep, "/workspace/move"), ai, map[string]any{"type": "WORKBOOK", "id": wb, "folderId": folder})
		if got := isFavorite(t, r); got != true {
			t.Fatalf("move answer: isFavorite %v", got)
		}
	})

	t.Run("unfavorite", func(t *testing.T) {
		if r := e.favorite(t, dep, ai, "DELETE", "workbook", wb); r.Status != 204 {
			t.Fatalf("DELETE favorite: %d %s", r.Status, r.Body)
		}
		if r := e.favorite(t, dep, ai, "DELETE", "workbook", wb); r.Status != 204 {
			t.Fatalf("DELETE favorite again (idempotent): %d %s", r.Status, r.Body)
		}
		if got := isFavorite(t, e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), ai, nil)); got != false {
			t.Fatalf("after DELETE: isFavorite %v", got)
		}
		if got := names(t, e.do(t, "GET", depPath(dep, "/workspace?favorites=true"), ai, nil)); len(got) != 0 {
			t.Fatalf("favorites after DELETE: %v", got)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		private := e.mkFolder(t, dep, dev, "dev private", 0)
		hidden := e.mkItem(t, dep, dev, "reports", "hidden", private)
		for _, c := range []struct {
			name, typ string
			id        int64
			bearer    string
			status    int
			msg       string
		}{
			{"cannot-view", "report", hidden, ai, 403, "view access"},
			{"missing", "report", 987654321, ai, 404, "not found"},
			{"wrong-type", "workbook", rp, ai, 404, "not found"},
			{"bad-type", "dashboard", rp, ai, 400, "type"},
			{"other-deployment", "workbook", e.mkItem(t, e.dep("acme", 1), admin, "workbooks", "elsewhere", 0), ai, 404, "not found"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.favorite(t, dep, c.bearer, "PUT", c.typ, c.id)
				if st, msg := errorBody(t, r); r.Status != c.status || st != c.status || !strings.Contains(msg, c.msg) {
					t.Fatalf("want %d naming %q, got %d %s", c.status, c.msg, r.Status, r.Body)
				}
			})
		}
	})

	t.Run("limit-per-user", func(t *testing.T) {
		var ids []int64
		for i := 0; i < 4; i++ {
			ids = append(ids, e.mkItem(t, dep, admin, "workbooks", fmt.Sprintf("limit %d", i), 0))
		}
		for _, id := range ids[:3] {
			if r := e.favorite(t, dep, admin, "PUT", "workbook", id); r.Status != 204 {
				t.Fatalf("favorite %d: %d %s", id, r.Status, r.Body)
			}
		}
		r := e.favorite(t, dep, admin, "PUT", "workbook", ids[3])
		if _, msg := errorBody(t, r); r.Status != 400 || !strings.Contains(msg, "you already have 3 favorites") || strings.Contains(msg, "WORKSPACE_") || r.Object(t)["code"] != "favorites_limit" {
			t.Fatalf("fourth favorite: want 400 naming the limit, got %d %s", r.Status, r.Body)
		}
		if r := e.favorite(t, dep, admin, "PUT", "workbook", ids[0]); r.Status != 204 {
			t.Fatalf("an existing favorite at the limit stays settable: %d %s", r.Status, r.Body)
		}
		// A deleted item leaves the favorites, and frees its place.
		if r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/workbooks/%d", ids[0])), admin, nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if got := names(t, e.do(t, "GET", depPath(dep, "/workspace?favorites=true"), admin, nil)); !reflect.DeepEqual(got, []string{"limit 1", "limit 2"}) {
			t.Fatalf("favorites after deleting one: %v", got)
		}
		if r := e.favorite(t, dep, admin, "PUT", "workbook", ids[3]); r.Status != 204 {
			t.Fatalf("favorite after a place was freed: %d %s", r.Status, r.Body)
		}
	})
}

func TestSearch(t *testing.T) {
	e := newEnvWithLimits(t, 1, workspace.Limits{SearchScan: 5})
	dep := e.dep("acme", 0)
	admin, ai, dev := e.bearer("acme", "admin"), e.bearer("acme", "aiBiUser"), e.bearer("acme", "developer")
	a := e.mkFolder(t, dep, ai, "Area", 0)
	b := e.mkFolder(t, dep, ai, "Branch", a)
	e.mkItem(t, dep, ai, "reports", "Revenue by region", b)
	e.mkItem(t, dep, admin, "workbooks", "revenue board", a)
	e.mkItem(t, dep, ai, "workbooks", "Costs", 0)
	e.mkFolder(t, dep, ai, "REVENUE folder", a)
	private := e.mkFolder(t, dep, dev, "dev only", 0)
	for i := 0; i < 12; i++ { // matches the caller cannot see: more than a page's scan limit
		e.mkItem(t, dep, dev, "reports", fmt.Sprintf("revenue secret %02d", i), private)
	}
	e.mkItem(t, dep, ai, "reports", "revenue zeta", 0)

	t.Run("q-across-the-visible-tree-with-folder-paths", func(t *testing.T) {
		got := e.allPages(t, dep, ai, "q=REVenue&first=2")
		want := []string{"REVENUE folder", "Revenue by region", "revenue board", "revenue zeta"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("q=REVenue: %v, want %v (by name, case-insensitive, only what the caller can view)", got, want)
		}
		r := e.do(t, "GET", depPath(dep, "/workspace?q=by+region"), ai, nil)
		item := r.Object(t)["items"].([]any)[0].(map[string]any)
		path := item["folderPath"].([]any)
		if len(path) != 2 || path[0].(map[string]any)["name"] != "Area" || path[1].(map[string]any)["name"] != "Branch" {
			t.Fatalf("hit's folderPath: %v", path)
		}
		if _, ok := item["meta"]; ok {
			t.Fatalf("a search hit is a summary, without meta: %v", item)
		}
		// The admin sees the private ones too.
		if got := e.allPages(t, dep, admin, "q=revenue+secret&first=5"); len(got) != 12 {
			t.Fatalf("admin's search: %d hits, want 12", len(got))
		}
	})

	t.Run("scan-limit-ends-a-page-early-and-the-cursor-goes-on", func(t *testing.T) {
		r := e.do(t, "GET", depPath(dep, "/workspace?q=revenue&sort=-name&first=10"), ai, nil)
		body := r.Object(t)
		if body["pageInfo"].(map[string]any)["hasNextPage"] != true || len(body["items"].([]any)) >= 4 {
			t.Fatalf("with 12 hidden matches and a scan limit of 5, the first page ends early: %s", r.Body)
		}
		got := e.allPages(t, dep, ai, "q=revenue&sort=-name&first=10")
		if want := []string{"revenue zeta", "revenue board", "Revenue by region", "REVENUE folder"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("sort=-name over every page: %v, want %v", got, want)
		}
	})

	t.Run("filters", func(t *testing.T) {
		if got := e.allPages(t, dep, ai, "q=revenue&type=REPORT"); !reflect.DeepEqual(got, []string{"Revenue by region", "revenue zeta"}) {
			t.Fatalf("type=REPORT: %v", got)
		}
		if got := e.allPages(t, dep, ai, "q=revenue&createdBy=me"); !reflect.DeepEqual(got, []string{"REVENUE folder", "Revenue by region", "revenue zeta"}) {
			t.Fatalf("createdBy=me: %v", got)
		}
		if got := e.allPages(t, dep, ai, fmt.Sprintf("folderId=%d&type=WORKBOOK", a)); !reflect.DeepEqual(got, []string{"revenue board"}) {
			t.Fatalf("folderId with type: %v", got)
		}
		if got := e.allPages(t, dep, ai, "q=(.*"); len(got) != 0 {
			t.Fatalf("q is literal text, not a pattern: %v", got)
		}
	})

	t.Run("sort-by-updatedAt", func(t *testing.T) {
		wb := e.mkItem(t, dep, ai, "workbooks", "sorted one", 0)
		e.mkItem(t, dep, ai, "workbooks", "sorted two", 0)
		if r := e.do(t, "PATCH", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), ai, map[string]any{"name": "sorted one!"}); r.Status != 200 {
			t.Fatalf("rename: %d %s", r.Status, r.Body)
		}
		got := e.allPages(t, dep, ai, "q=sorted&sort=-updatedAt&first=1")
		if !reflect.DeepEqual(got, []string{"sorted one!", "sorted two"}) {
			t.Fatalf("sort=-updatedAt: %v", got)
		}
		if got := e.allPages(t, dep, ai, "q=sorted&sort=updatedAt&first=1"); !reflect.DeepEqual(got, []string{"sorted two", "sorted one!"}) {
			t.Fatalf("sort=updatedAt: %v", got)
		}
	})

	t.Run("400s", func(t *testing.T) {
		first := e.do(t, "GET", depPath(dep, "/workspace?q=revenue&first=1"), ai, nil).Object(t)["pageInfo"].(map[string]any)["endCursor"].(string)
		for _, q := range []string{"sort=size", "type=DASHBOARD", "createdBy=42", "favorites=yes", "q=" + strings.Repeat("x", 256),
			"q=revenue&sort=-updatedAt&after=" + url.QueryEscape(first), "q=revenue&after=nope"} {
			r := e.do(t, "GET", depPath(dep, "/workspace?"+q), ai, nil)
			if st, msg := errorBody(t, r); r.Status != 400 || st != 400 || msg == "" {
				t.Fatalf("%s: want 400, got %d %s", q, r.Status, r.Body)
			}
		}
	})
}

func TestRenameAndDeleteItems(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin, ai, dev, viewer := e.bearer("acme", "admin"), e.bearer("acme", "aiBiUser"), e.bearer("acme", "developer"), e.bearer("acme", "viewer")
	folder := e.mkFolder(t, dep, admin, "team", 0)
	e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", folder)), admin, map[string]any{"grants": []any{
		map[string]any{"userId": e.user("acme", "developer").ID, "level": "edit"},
		map[string]any{"userId": e.user("acme", "aiBiUser").ID, "level": "edit"},
		map[string]any{"userId": e.user("acme", "viewer").ID, "level": "view"}}})
	wb := e.mkItem(t, dep, ai, "workbooks", "draft board", folder)

	t.Run("rename", func(t *testing.T) {
		r := e.do(t, "PATCH", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), dev, map[string]any{"name": "  Final board ", "meta": map[string]any{"k": 1}})
		if r.Status != 200 {
			t.Fatalf("rename with edit on the folder: %d %s", r.Status, r.Body)
		}
		m := r.Object(t)
		if m["name"] != "Final board" || m["createdBy"] != float64(e.user("acme", "aiBiUser").ID) || !strings.HasPrefix(m["slug"].(string), "final-board-") ||
			m["meta"].(map[string]any)["k"] != float64(1) {
			t.Fatalf("renamed: %v", m)
		}
		got := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), ai, nil).Object(t)
		if got["name"] != "Final board" {
			t.Fatalf("GET after rename: %v", got["name"])
		}
	})

	t.Run("rename-refusals", func(t *testing.T) {
		rp := e.mkItem(t, dep, ai, "reports", "r", folder)
		for _, c := range []struct {
			name, bearer, path string
			body               any
			status             int
		}{
			{"viewer", viewer, fmt.Sprintf("/workbooks/%d", wb), map[string]any{"name": "x"}, 403},
			{"nothing", ai, fmt.Sprintf("/workbooks/%d", wb), map[string]any{}, 400},
			{"blank", ai, fmt.Sprintf("/workbooks/%d", wb), map[string]any{"name": " "}, 400},
			{"report-draft", ai, fmt.Sprintf("/reports/%d", rp), map[string]any{"dashboardDraft": map[string]any{}}, 400},
			{"wrong-type", ai, fmt.Sprintf("/reports/%d", wb), map[string]any{"name": "x"}, 404},
			{"other-deployment", admin, fmt.Sprintf("/workbooks/%d", e.mkItem(t, e.dep("acme", 1), admin, "workbooks", "x", 0)), map[string]any{"name": "y"}, 404},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.do(t, "PATCH", depPath(dep, c.path), c.bearer, c.body)
				if st, _ := errorBody(t, r); r.Status != c.status || st != c.status {
					t.Fatalf("want %d, got %d %s", c.status, r.Status, r.Body)
				}
			})
		}
	})

	t.Run("delete-needs-manage", func(t *testing.T) {
		r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), dev, nil)
		if _, msg := errorBody(t, r); r.Status != 403 || !strings.Contains(msg, "manage") {
			t.Fatalf("delete with edit only: want 403 naming manage, got %d %s", r.Status, r.Body)
		}
		if r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), ai, nil); r.Status != 204 {
			t.Fatalf("delete by the creator: %d %s", r.Status, r.Body)
		}
		if r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), ai, nil); r.Status != 404 {
			t.Fatalf("GET after delete: %d", r.Status)
		}
		if r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), ai, nil); r.Status != 404 {
			t.Fatalf("delete again: %d", r.Status)
		}
		if got := names(t, e.do(t, "GET", depPath(dep, fmt.Sprintf("/workspace?folderId=%d", folder)), admin, nil)); reflect.DeepEqual(got, []string{"Final board"}) || strings.Contains(fmt.Sprint(got), "Final board") {
			t.Fatalf("listing after delete: %v", got)
		}
	})

	t.Run("a-deleted-report-leaves-future-publishes", func(t *testing.T) {
		rp := e.mkItem(t, dep, admin, "reports", "kpis", 0)
		r := e.do(t, "POST", depPath(dep, "/workbooks"), admin, map[string]any{"name": "kpi board",
			"dashboardDraft": map[string]any{"kind": "CLASSIC", "widgets": []any{map[string]any{"id": "w1", "type": "CHART",
				"position": map[string]any{"x": 0, "y": 0, "w": 4, "h": 3}, "config": map[string]any{"reportId": rp}}}}})
		board := int64(r.Object(t)["id"].(float64))
		snaps := func() int {
			p := e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/publish", board)), admin, nil)
			if p.Status != 200 {
				t.Fatalf("publish: %d %s", p.Status, p.Body)
			}
			return len(p.Object(t)["publishedDashboard"].(map[string]any)["reportSnapshots"].([]any))
		}
		if n := snaps(); n != 1 {
			t.Fatalf("before the delete: %d snapshots", n)
		}
		if r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/reports/%d", rp)), admin, nil); r.Status != 204 {
			t.Fatalf("delete report: %d %s", r.Status, r.Body)
		}
		if n := snaps(); n != 0 {
			t.Fatalf("after the delete: %d snapshots, want 0", n)
		}
	})
}

func TestDashboardLifecycle(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin, ai, viewer := e.bearer("acme", "admin"), e.bearer("acme", "aiBiUser"), e.bearer("acme", "viewer")
	adminID, aiID := float64(e.user("acme", "admin").ID), float64(e.user("acme", "aiBiUser").ID)
	r := e.do(t, "POST", depPath(dep, "/workbooks"), admin, map[string]any{"name": "board",
		"dashboardDraft": map[string]any{"kind": "CLASSIC", "title": "Board", "widgets": []any{}}})
	wb := int64(r.Object(t)["id"].(float64))
	path := func(verb string) string { return depPath(dep, fmt.Sprintf("/workbooks/%d/%s", wb, verb)) }
	dash := func(t *testing.T, r apitest.Response) map[string]any {
		t.Helper()
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		return r.Object(t)["publishedDashboard"].(map[string]any)
	}
	check := func(t *testing.T, d map[string]any, status string, version, createdBy, updatedBy float64, embed bool) {
		t.Helper()
		if d["status"] != status || d["versionNumber"] != version || d["createdBy"] != createdBy || d["updatedBy"] != updatedBy || d["allowEmbed"] != embed {
			t.Fatalf("dashboard %v: want status %s, version %v, createdBy %v, updatedBy %v, allowEmbed %v", d, status, version, createdBy, updatedBy, embed)
		}
	}

	if r := e.do(t, "POST", path("unpublish"), admin, nil); r.Status != 409 {
		t.Fatalf("unpublish before any publish: want 409, got %d %s", r.Status, r.Body)
	}
	check(t, dash(t, e.do(t, "POST", path("publish"), admin, map[string]any{"allowEmbed": false})), "published", 1, adminID, adminID, false)
	// Republished by someone else without a body: the first publisher stays createdBy,
	// allowEmbed stays what it was.
	check(t, dash(t, e.do(t, "POST", path("publish"), ai, nil)), "published", 2, adminID, aiID, false)
	check(t, dash(t, e.do(t, "POST", path("publish"), ai, map[string]any{"allowEmbed": true})), "published", 3, adminID, aiID, true)
	if r := e.do(t, "POST", path("unpublish"), viewer, nil); r.Status != 403 {
		t.Fatalf("viewer unpublish: want 403, got %d %s", r.Status, r.Body)
	}
	check(t, dash(t, e.do(t, "POST", path("unpublish"), ai, nil)), "archived", 3, adminID, aiID, true)
	check(t, dash(t, e.do(t, "POST", path("unpublish"), admin, nil)), "archived", 3, adminID, aiID, true) // no change
	check(t, dash(t, e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), viewer, nil)), "archived", 3, adminID, aiID, true)
	check(t, dash(t, e.do(t, "POST", path("publish"), admin, nil)), "published", 4, adminID, adminID, true)
	if r := e.do(t, "POST", path("publish"), admin, map[string]any{"allowEmbed": "yes"}); r.Status != 400 {
		t.Fatalf("allowEmbed not a boolean: want 400, got %d %s", r.Status, r.Body)
	}
}

// TestMoveKeepsItemsVisibleToTheirCreator: moving someone's workbook or report into a
// folder its creator cannot view needs manage on the item.
func TestMoveKeepsItemsVisibleToTheirCreator(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin, ai, dev := e.bearer("acme", "admin"), e.bearer("acme", "aiBiUser"), e.bearer("acme", "developer")
	private := e.mkFolder(t, dep, dev, "dev private", 0)
	wb := e.mkItem(t, dep, ai, "workbooks", "ai's board", 0)
	rp := e.mkItem(t, dep, ai, "reports", "ai's report", 0)

	r := e.do(t, "POST", depPath(dep, "/workspace/move"), dev, map[string]any{"type": "WORKBOOK", "id": wb, "folderId": private})
	if _, msg := errorBody(t, r); r.Status != 403 || !strings.Contains(msg, "hide it from its creator") || !strings.Contains(msg, "manage") {
		t.Fatalf("move into a folder the creator cannot view: want 403 saying so, got %d %s", r.Status, r.Body)
	}
	b := e.do(t, "POST", depPath(dep, "/workspace/bulk-move"), dev, map[string]any{"items": []any{ref("REPORT", rp)}, "folderId": private}).Object(t)
	failed := b["failed"].([]any)
	if len(failed) != 1 || failed[0].(map[string]any)["error"].(map[string]any)["status"] != float64(403) {
		t.Fatalf("bulk move: want the report failed with 403, got %v", b)
	}
	if got := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), ai, nil).Object(t)["folderId"]; got != nil {
		t.Fatalf("the refused move changed nothing: folderId %v", got)
	}
	// With a grant the creator can view the folder: the same move is allowed.
	e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", private)), dev,
		map[string]any{"grants": []any{map[string]any{"userId": e.user("acme", "aiBiUser").ID, "level": "view"}}})
	if r := e.do(t, "POST", depPath(dep, "/workspace/move"), dev, map[string]any{"type": "REPORT", "id": rp, "folderId": private}); r.Status != 200 {
		t.Fatalf("move into a folder the creator can view: %d %s", r.Status, r.Body)
	}
	// Manage on the item (an admin) may move it anywhere; the creator may move their own.
	e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", private)), dev, map[string]any{"grants": []any{}})
	if r := e.do(t, "POST", depPath(dep, "/workspace/move"), admin, map[string]any{"type": "WORKBOOK", "id": wb, "folderId": private}); r.Status != 200 {
		t.Fatalf("admin move: %d %s", r.Status, r.Body)
	}
	other := e.mkFolder(t, dep, dev, "dev other", 0)
	own := e.mkItem(t, dep, dev, "workbooks", "dev's own", 0)
	if r := e.do(t, "POST", depPath(dep, "/workspace/move"), dev, map[string]any{"type": "WORKBOOK", "id": own, "folderId": other}); r.Status != 200 {
		t.Fatalf("creator's own move: %d %s", r.Status, r.Body)
	}
}
