package app_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack/apitest"
)

func TestBulkMove(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin := e.bearer("acme", "admin")
	ai := e.bearer("acme", "aiBiUser")
	bulk := func(t *testing.T, bearer string, dest any, items ...map[string]any) apitest.Response {
		t.Helper()
		return e.do(t, "POST", depPath(dep, "/workspace/bulk-move"), bearer, map[string]any{"items": items, "folderId": dest})
	}
	decode := func(t *testing.T, r apitest.Response) (moved []map[string]any, failed []map[string]any) {
		t.Helper()
		var body struct {
			Moved  []map[string]any `json:"moved"`
			Failed []map[string]any `json:"failed"`
		}
		if r.Status != 200 {
			t.Fatalf("bulk move: %d %s", r.Status, r.Body)
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || body.Moved == nil || body.Failed == nil {
			t.Fatalf("bulk move body %s: moved and failed must both be arrays (%v)", r.Body, err)
		}
		return body.Moved, body.Failed
	}

	t.Run("bulk-move/rule-1-duplicates-collapsed", func(t *testing.T) {
		dest := e.mkFolder(t, dep, admin, "r1-dest", 0)
		wb := e.mkItem(t, dep, admin, "workbooks", "r1-wb", 0)
		moved, failed := decode(t, bulk(t, admin, dest, ref("WORKBOOK", wb), ref("WORKBOOK", wb), ref("REPORT", 999999999), ref("REPORT", 999999999)))
		if len(moved) != 1 || len(failed) != 1 {
			t.Fatalf("want exactly one entry per distinct item (1 moved, 1 failed), got %d moved, %d failed", len(moved), len(failed))
		}
	})

	t.Run("bulk-move/rule-2-200-with-failures", func(t *testing.T) {
		_, failed := decode(t, bulk(t, admin, nil, ref("WORKBOOK", 888888888)))
		if len(failed) != 1 || failed[0]["error"].(map[string]any)["status"].(float64) != 404 {
			t.Fatalf("want one 404 failure in a 200, got %v", failed)
		}
	})

	t.Run("bulk-move/rule-3-order-and-earlier-moves-kept", func(t *testing.T) {
		a := e.mkFolder(t, dep, admin, "r3-a", 0)
		b := e.mkFolder(t, dep, admin, "r3-b", a)
		wb := e.mkItem(t, dep, admin, "workbooks", "r3-wb", 0)
		// Move wb into b, then a into b (a cycle: fails), then the report: order is kept.
		rp := e.mkItem(t, dep, admin, "reports", "r3-rp", 0)
		moved, failed := decode(t, bulk(t, admin, b, ref("WORKBOOK", wb), ref("FOLDER", a), ref("REPORT", rp)))
		if len(moved) != 2 || moved[0]["id"].(float64) != float64(wb) || moved[1]["id"].(float64) != float64(rp) {
			t.Fatalf("moved in request order: want [%d %d], got %v", wb, rp, moved)
		}
		if len(failed) != 1 || failed[0]["id"].(float64) != float64(a) {
			t.Fatalf("want folder %d failed, got %v", a, failed)
		}
		got := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), admin, nil).Object(t)
		if got["folderId"] != float64(b) {
			t.Fatalf("earlier move must stay applied: workbook folderId %v, want %d", got["folderId"], b)
		}
	})

	t.Run("bulk-move/rule-4-empty-failed-means-all-applied", func(t *testing.T) {
		dest := e.mkFolder(t, dep, admin, "r4-dest", 0)
		f := e.mkFolder(t, dep, admin, "r4-f", 0)
		wb := e.mkItem(t, dep, admin, "workbooks", "r4-wb", 0)
		rp := e.mkItem(t, dep, admin, "reports", "r4-rp", 0)
		moved, failed := decode(t, bulk(t, admin, dest, ref("FOLDER", f), ref("WORKBOOK", wb), ref("REPORT", rp)))
		if len(failed) != 0 || len(moved) != 3 {
			t.Fatalf("want all 3 moved, got moved %d failed %v", len(moved), failed)
		}
		list := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workspace?folderId=%d", dest)), admin, nil).Object(t)
		if n := len(list["items"].([]any)); n != 3 {
			t.Fatalf("destination lists %d items, want 3", n)
		}
	})

	t.Run("bulk-move/rule-5-access-per-item", func(t *testing.T) {
		dest := e.mkFolder(t, dep, ai, "r5-dest", 0)
		own := e.mkItem(t, dep, ai, "workbooks", "r5-own", 0)
		private := e.mkFolder(t, dep, admin, "r5-private", 0)
		theirs := e.mkItem(t, dep, admin, "workbooks", "r5-theirs", private)
		moved, failed := decode(t, bulk(t, ai, dest, ref("WORKBOOK", own), ref("WORKBOOK", theirs)))
		if len(moved) != 1 || moved[0]["id"].(float64) != float64(own) {
			t.Fatalf("want only the own workbook moved, got %v", moved)
		}
		if len(failed) != 1 || failed[0]["error"].(map[string]any)["status"].(float64) != 403 {
			t.Fatalf("want a 403 for the workbook in the private folder, got %v", failed)
		}
	})

	t.Run("bulk-move/rule-6-moved-entry-equals-single-move", func(t *testing.T) {
		d1 := e.mkFolder(t, dep, admin, "r6-d1", 0)
		d2 := e.mkFolder(t, dep, admin, "r6-d2", 0)
		for _, kind := range []struct{ path, typ string }{{"workbooks", "WORKBOOK"}, {"reports", "REPORT"}, {"folders", "FOLDER"}} {
			var id int64
			if kind.typ == "FOLDER" {
				id = e.mkFolder(t, dep, admin, "r6-x", 0)
			} else {
				id = e.mkItem(t, dep, admin, kind.path, "r6-x", 0)
			}
			moved, _ := decode(t, bulk(t, admin, d1, ref(kind.typ, id)))
			single := e.do(t, "POST", depPath(dep, "/workspace/move"), admin, map[string]any{"type": kind.typ, "id": id, "folderId": d2})
			if single.Status != 200 {
				t.Fatalf("single move: %d %s", single.Status, single.Body)
			}
			s := single.Object(t)
			b := moved[0]
			for _, k := range []string{"updatedAt", "folderId", "folderPath", "version"} { // what differs between the two moves
				delete(s, k)
				delete(b, k)
			}
			if !reflect.DeepEqual(s, b) {
				t.Fatalf("%s: bulk entry %v differs from single move %v", kind.typ, b, s)
			}
			for _, k := range []string{"id", "deploymentId", "name", "type", "meta", "calculatedFields", "createdAt", "createdBy", "userId", "user", "slug", "isFavorite", "dashboardDraft", "dashboardPublished", "publishedDashboard"} {
				if _, ok := s[k]; !ok {
					t.Fatalf("%s: field %s missing from %v", kind.typ, k, s)
				}
			}
		}
	})

	t.Run("bulk-move/rule-7-failures-match-single-move", func(t *testing.T) {
		outer := e.mkFolder(t, dep, admin, "r7-outer", 0)
		inner := e.mkFolder(t, dep, admin, "r7-inner", outer)
		private := e.mkFolder(t, dep, admin, "r7-private", 0)
		theirs := e.mkItem(t, dep, admin, "reports", "r7-theirs", private)
		globexWB := e.mkItem(t, e.dep("globex", 0), e.bearer("globex", "admin"), "workbooks", "r7-globex", 0)
		cases := []struct {
			name   string
			bearer string
			dest   int64
			item   map[string]any
			status int
		}{
			{"rule-7-400-cycle", admin, inner, ref("FOLDER", outer), 400},
			{"rule-7-403-no-access", ai, 0, ref("REPORT", theirs), 403},
			{"rule-7-404-missing", admin, 0, ref("WORKBOOK", 777777777), 404},
			{"rule-7-404-other-account", admin, 0, ref("WORKBOOK", globexWB), 404},
			{"rule-7-404-wrong-type", admin, 0, ref("REPORT", outer), 404},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var dest any
				if c.dest != 0 {
					dest = c.dest
				}
				_, failed := decode(t, bulk(t, c.bearer, dest, c.item))
				single := e.do(t, "POST", depPath(dep, "/workspace/move"), c.bearer, map[string]any{"type": c.item["type"], "id": c.item["id"], "folderId": dest})
				st, msg := errorBody(t, single)
				if single.Status != c.status || st != c.status {
					t.Fatalf("single move: want %d, got %d %s", c.status, single.Status, single.Body)
				}
				code, _ := single.Object(t)["code"].(string)
				if code == "" {
					t.Fatalf("single move error without a code: %s", single.Body)
				}
				want := map[string]any{"type": c.item["type"], "id": float64(c.item["id"].(int64)), "error": map[string]any{"status": float64(c.status), "code": code, "message": msg}}
				if len(failed) != 1 || !reflect.DeepEqual(failed[0], want) {
					t.Fatalf("bulk failure %v, want %v", failed, want)
				}
			})
		}
	})

	t.Run("bulk-move-depth-limit", func(t *testing.T) {
		var chain []int64
		parent := int64(0)
		for i := 1; i <= 7; i++ {
			parent = e.mkFolder(t, dep, admin, fmt.Sprintf("depth-%d", i), parent)
			chain = append(chain, parent)
		}
		sub := e.mkFolder(t, dep, admin, "sub", 0)
		e.mkFolder(t, dep, admin, "sub-child", sub)
		// chain[6] is at level 7: sub would be at 8 and its child at 9.
		_, failed := decode(t, bulk(t, admin, chain[6], ref("FOLDER", sub)))
		if len(failed) != 1 || failed[0]["error"].(map[string]any)["status"].(float64) != 400 ||
			!strings.Contains(failed[0]["error"].(map[string]any)["message"].(string), "8 levels") {
			t.Fatalf("want a 400 naming the 8-level limit, got %v", failed)
		}
		moved, failed := decode(t, bulk(t, admin, chain[5], ref("FOLDER", sub)))
		if len(failed) != 0 || len(moved) != 1 {
			t.Fatalf("level 7+8 fits: got %v", failed)
		}
		path := moved[0]["folderPath"].([]any)
		if len(path) != 6 || path[0].(map[string]any)["id"].(float64) != float64(chain[0]) {
			t.Fatalf("folderPath from the root down, want 6 entries starting at %d, got %v", chain[0], path)
		}
	})
}

func TestFoldersAndAccess(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin, dev, ai, viewer := e.bearer("acme", "admin"), e.bearer("acme", "developer"), e.bearer("acme", "aiBiUser"), e.bearer("acme", "viewer")

	t.Run("create-folder-200-full-shape", func(t *testing.T) {
		parent := e.mkFolder(t, dep, admin, "parent", 0)
		r := e.do(t, "POST", depPath(dep, "/folders"), admin, map[string]any{"name": "child", "parentId": parent, "position": 3.5})
		f := r.Object(t)
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		u := e.user("acme", "admin")
		for k, want := range map[string]any{"name": "child", "type": "FOLDER", "parentId": float64(parent), "position": 3.5,
			"deploymentId": float64(dep), "createdBy": float64(u.ID), "updatedBy": float64(u.ID)} {
			if f[k] != want {
				t.Fatalf("%s = %v, want %v (%s)", k, f[k], want, r.Body)
			}
		}
		if !reflect.DeepEqual(f["folderPath"], []any{map[string]any{"id": float64(parent), "name": "parent"}}) {
			t.Fatalf("folderPath %v", f["folderPath"])
		}
		if owner := f["user"].(map[string]any); owner["id"] != float64(u.ID) || owner["email"] != u.Email {
			t.Fatalf("user %v, want the creator %d %s", owner, u.ID, u.Email)
		}
		for _, k := range []string{"createdAt", "updatedAt"} {
			if s, _ := f[k].(string); !strings.HasSuffix(s, "Z") || !strings.Contains(s, "T") {
				t.Fatalf("%s %q is not an ISO 8601 date-time", k, f[k])
			}
		}
	})

	t.Run("create-folder-403-viewer", func(t *testing.T) {
		r := e.do(t, "POST", depPath(dep, "/folders"), viewer, map[string]any{"name": "x"})
		if st, _ := errorBody(t, r); r.Status != 403 || st != 403 {
			t.Fatalf("want 403, got %d %s", r.Status, r.Body)
		}
	})

	t.Run("create-folder-403-parent-without-edit-then-200-with-grant", func(t *testing.T) {
		parent := e.mkFolder(t, dep, admin, "granted", 0)
		if r := e.do(t, "POST", depPath(dep, "/folders"), ai, map[string]any{"name": "x", "parentId": parent}); r.Status != 403 {
			t.Fatalf("no access: want 403, got %d %s", r.Status, r.Body)
		}
		g := e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", parent)), admin,
			map[string]any{"grants": []any{map[string]any{"userId": e.user("acme", "aiBiUser").ID, "level": "view"}}})
		if g.Status != 200 {
			t.Fatalf("grant: %d %s", g.Status, g.Body)
		}
		if r := e.do(t, "POST", depPath(dep, "/folders"), ai, map[string]any{"name": "x", "parentId": parent}); r.Status != 403 {
			t.Fatalf("view grant: want 403, got %d %s", r.Status, r.Body)
		}
		e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", parent)), admin,
			map[string]any{"grants": []any{map[string]any{"userId": e.user("acme", "aiBiUser").ID, "level": "edit"}}})
		child := e.mkFolder(t, dep, ai, "x", parent)
		// The grant is inherited by the subtree: ai can create below its own child and below others'.
		e.mkFolder(t, dep, ai, "y", child)
		other := e.mkFolder(t, dep, admin, "admins-child", parent)
		e.mkFolder(t, dep, ai, "z", other)
	})

	t.Run("create-folder-400-depth", func(t *testing.T) {
		parent := int64(0)
		for i := 1; i <= 8; i++ {
			parent = e.mkFolder(t, dep, dev, fmt.Sprintf("level-%d", i), parent)
		}
		r := e.do(t, "POST", depPath(dep, "/folders"), dev, map[string]any{"name": "level-9", "parentId": parent})
		st, msg := errorBody(t, r)
		if r.Status != 400 || st != 400 || !strings.Contains(msg, "8 levels") {
			t.Fatalf("want 400 naming the limit, got %d %s", r.Status, r.Body)
		}
	})

	t.Run("access-viewer-sees-only-granted-folders", func(t *testing.T) {
		f := e.mkFolder(t, dep, admin, "for-viewer", 0)
		if r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/folders/%d", f)), viewer, nil); r.Status != 403 {
			t.Fatalf("want 403, got %d %s", r.Status, r.Body)
		}
		e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", f)), admin,
			map[string]any{"grants": []any{map[string]any{"userId": e.user("acme", "viewer").ID, "level": "manage"}}})
		if r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/folders/%d", f)), viewer, nil); r.Status != 200 {
			t.Fatalf("want 200 with a grant, got %d %s", r.Status, r.Body)
		}
		// A viewer never writes, whatever the grant says.
		wb := e.mkItem(t, dep, admin, "workbooks", "v", f)
		r := e.do(t, "POST", depPath(dep, "/workspace/move"), viewer, map[string]any{"type": "WORKBOOK", "id": wb, "folderId": f})
		if r.Status != 403 {
			t.Fatalf("viewer move: want 403, got %d %s", r.Status, r.Body)
		}
	})

	t.Run("access-creator-manages-and-permissions-need-manage", func(t *testing.T) {
		f := e.mkFolder(t, dep, ai, "mine", 0)
		if r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/folders/%d/permissions", f)), ai, nil); r.Status != 200 {
			t.Fatalf("creator: want 200, got %d %s", r.Status, r.Body)
		}
		if r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/folders/%d/permissions", f)), dev, nil); r.Status != 403 {
			t.Fatalf("developer without grant: want 403, got %d %s", r.Status, r.Body)
		}
		r := e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", f)), ai,
			map[string]any{"grants": []any{map[string]any{"userId": 5, "level": "edit"}, map[string]any{"userId": 5, "level": "view"}}})
		if r.Status != 400 {
			t.Fatalf("duplicate userId: want 400, got %d %s", r.Status, r.Body)
		}
	})

	t.Run("move-403-destination-without-edit", func(t *testing.T) {
		wb := e.mkItem(t, dep, ai, "workbooks", "mine", 0)
		private := e.mkFolder(t, dep, admin, "closed", 0)
		r := e.do(t, "POST", depPath(dep, "/workspace/move"), ai, map[string]any{"type": "WORKBOOK", "id": wb, "folderId": private})
		if r.Status != 403 {
			t.Fatalf("want 403, got %d %s", r.Status, r.Body)
		}
	})

	t.Run("folder-patch-delete-409-then-204", func(t *testing.T) {
		f := e.mkFolder(t, dep, admin, "to-delete", 0)
		wb := e.mkItem(t, dep, admin, "workbooks", "inside", f)
		if r := e.do(t, "PATCH", depPath(dep, fmt.Sprintf("/folders/%d", f)), admin, map[string]any{"name": "renamed"}); r.Status != 200 || r.Object(t)["name"] != "renamed" {
			t.Fatalf("patch: %d %s", r.Status, r.Body)
		}
		if r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/folders/%d", f)), admin, nil); r.Status != 409 {
			t.Fatalf("non-empty: want 409, got %d %s", r.Status, r.Body)
		}
		e.do(t, "POST", depPath(dep, "/workspace/move"), admin, map[string]any{"type": "WORKBOOK", "id": wb})
		if r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/folders/%d", f)), admin, nil); r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("empty: want 204, got %d %s", r.Status, r.Body)
		}
		if r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/folders/%d", f)), admin, nil); r.Status != 404 {
			t.Fatalf("deleted: want 404, got %d", r.Status)
		}
	})

	t.Run("list-children-ordered-and-paginated", func(t *testing.T) {
		f := e.mkFolder(t, dep, admin, "listing", 0)
		e.mkItem(t, dep, admin, "workbooks", "b-wb", f)
		e.mkItem(t, dep, admin, "reports", "a-rp", f)
		e.mkFolder(t, dep, admin, "z-folder", f)
		e.mkFolder(t, dep, admin, "y-folder", f)
		var names []string
		after := ""
		for page := 0; page < 5; page++ {
			r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workspace?folderId=%d&first=1&after=%s", f, after)), admin, nil)
			m := r.Object(t)
			for _, it := range m["items"].([]any) {
				names = append(names, it.(map[string]any)["name"].(string))
			}
			pi := m["pageInfo"].(map[string]any)
			if pi["hasNextPage"] != true {
				break
			}
			after = pi["endCursor"].(string)
		}
		if want := []string{"z-folder", "y-folder", "a-rp", "b-wb"}; !reflect.DeepEqual(names, want) {
			t.Fatalf("order %v, want %v (folders first by position, then items by position and name)", names, want)
		}
	})

	t.Run("publish-draft", func(t *testing.T) {
		rp := e.mkItem(t, dep, admin, "reports", "revenue", 0)
		r := e.do(t, "POST", depPath(dep, "/workbooks"), admin, map[string]any{"name": "board", "meta": map[string]any{"a": 1},
			"dashboardDraft": map[string]any{"kind": "CLASSIC", "title": "Board", "widgets": []any{map[string]any{"id": "w1", "type": "CHART",
				"position": map[string]any{"x": 0, "y": 0, "w": 4, "h": 3}, "config": map[string]any{"reportId": rp}}}}})
		if r.Status != 200 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		wb := int64(r.Object(t)["id"].(float64))
		var first map[string]any
		for v := 1; v <= 2; v++ {
			p := e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/publish", wb)), admin, nil)
			if p.Status != 200 {
				t.Fatalf("publish: %d %s", p.Status, p.Body)
			}
			d := p.Object(t)["publishedDashboard"].(map[string]any)
			if d["status"] != "published" || d["versionNumber"] != float64(v) || len(d["reportSnapshots"].([]any)) != 1 {
				t.Fatalf("publish %d: %v", v, d)
			}
			if first == nil {
				first = d
			} else if d["publicId"] != first["publicId"] || d["id"] != first["id"] || d["versionId"] == first["versionId"] {
				t.Fatalf("publicId and id stable, versionId new: first %v, then %v", first, d)
			}
		}
		plain := e.mkItem(t, dep, admin, "workbooks", "no-draft", 0)
		if p := e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/publish", plain)), admin, nil); p.Status != 409 {
			t.Fatalf("no draft: want 409, got %d %s", p.Status, p.Body)
		}
	})
}

func TestIsolation(t *testing.T) {
	e := newEnv(t, 1)
	acme0, acme1, globex := e.dep("acme", 0), e.dep("acme", 1), e.dep("globex", 0)
	admin := e.bearer("acme", "admin")
	f := e.mkFolder(t, acme0, admin, "acme-0", 0)
	wb := e.mkItem(t, acme0, admin, "workbooks", "acme-0-wb", f)
	rp := e.mkItem(t, acme0, admin, "reports", "acme-0-rp", f)
	missing := int64(900000000)
	paths := []struct {
		name, method, path string
		body               any
		msg                string
	}{
		{"folder-get", "GET", "/folders/%d", nil, "folder %d not found"},
		{"folder-patch", "PATCH", "/folders/%d", map[string]any{"name": "x"}, "folder %d not found"},
		{"folder-delete", "DELETE", "/folders/%d", nil, "folder %d not found"},
		{"folder-permissions", "GET", "/folders/%d/permissions", nil, "folder %d not found"},
		{"list", "GET", "/workspace?folderId=%d", nil, "folder %d not found"},
		{"create-in-folder", "POST", "/workbooks", "folder", "folder %d not found"},
	}
	for _, who := range []struct {
		name, bearer string
		dep          int64
	}{{"other-deployment", admin, acme1}, {"other-account", e.bearer("globex", "admin"), globex}} {
		for _, p := range paths {
			t.Run(p.name+"-404-"+who.name, func(t *testing.T) {
				for _, id := range []int64{f, missing} {
					body := p.body
					if body == "folder" {
						body = map[string]any{"name": "x", "folderId": id}
					}
					path := p.path
					if strings.Contains(path, "%d") {
						path = fmt.Sprintf(path, id)
					}
					r := e.do(t, p.method, depPath(who.dep, path), who.bearer, body)
					st, msg := errorBody(t, r)
					if r.Status != 404 || st != 404 || msg != fmt.Sprintf(p.msg, id) {
						t.Fatalf("id %d: want 404 %q, got %d %s", id, fmt.Sprintf(p.msg, id), r.Status, r.Body)
					}
				}
			})
		}
		t.Run("get-items-404-"+who.name, func(t *testing.T) {
			for _, c := range []struct {
				path string
				id   int64
				msg  string
			}{{"/workbooks/%d", wb, "workbook %d not found"}, {"/reports/%d", rp, "report %d not found"}, {"/workbooks/%d", missing, "workbook %d not found"}} {
				r := e.do(t, "GET", depPath(who.dep, fmt.Sprintf(c.path, c.id)), who.bearer, nil)
				if _, msg := errorBody(t, r); r.Status != 404 || msg != fmt.Sprintf(c.msg, c.id) {
					t.Fatalf("want 404, got %d %s", r.Status, r.Body)
				}
			}
		})
	}
	t.Run("deployment-of-other-account-404", func(t *testing.T) {
		if r := e.do(t, "GET", depPath(globex, "/workspace"), admin, nil); r.Status != 404 {
			t.Fatalf("want 404, got %d %s", r.Status, r.Body)
		}
	})
	t.Run("no-credentials-401", func(t *testing.T) {
		if r := e.do(t, "GET", depPath(acme0, "/workspace"), "", nil); r.Status != 401 {
			t.Fatalf("want 401, got %d", r.Status)
		}
		if r := apitest.New(e.direct[0]).Call(t, "GET", depPath(acme0, "/workspace"), "", nil); r.Status != 401 {
			t.Fatalf("bypassing the gateway: want 401, got %d", r.Status)
		}
	})
}

func TestValidation(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin := e.bearer("acme", "admin")
	items101 := make([]any, 101)
	for i := range items101 {
		items101[i] = ref("WORKBOOK", int64(i+1))
	}
	cases := []struct {
		name, path string
		body       any
		status     int
		field      string
	}{
		{"bulk-move-400-items-empty", "/workspace/bulk-move", map[string]any{"items": []any{}}, 400, "items"},
		{"bulk-move-400-items-missing", "/workspace/bulk-move", map[string]any{"folderId": nil}, 400, "items"},
		{"bulk-move-400-items-over-100", "/workspace/bulk-move", map[string]any{"items": items101}, 400, "items"},
		{"bulk-move-400-unknown-type", "/workspace/bulk-move", `{"items":[{"type":"DASHBOARD","id":1}]}`, 400, "items[0].type"},
		{"bulk-move-400-non-integer-id", "/workspace/bulk-move", `{"items":[{"type":"WORKBOOK","id":1.5}]}`, 400, "id"},
		{"bulk-move-400-string-id", "/workspace/bulk-move", `{"items":[{"type":"WORKBOOK","id":"7"}]}`, 400, "id"},
		{"bulk-move-400-folder-id-string", "/workspace/bulk-move", `{"items":[{"type":"WORKBOOK","id":1}],"folderId":"3"}`, 400, "folderId"},
		{"bulk-move-400-unknown-field", "/workspace/bulk-move", `{"items":[{"type":"WORKBOOK","id":1}],"dest":3}`, 400, "dest"},
		{"bulk-move-400-malformed", "/workspace/bulk-move", `{"items":[`, 400, "JSON"},
		{"bulk-move-400-trailing", "/workspace/bulk-move", `{"items":[{"type":"WORKBOOK","id":1}]} {}`, 400, "single JSON object"},
		{"move-400-missing-type", "/workspace/move", `{"id":1}`, 400, "type"},
		{"move-400-folder-id-float", "/workspace/move", `{"type":"FOLDER","id":1,"folderId":2.5}`, 400, "folderId"},
		{"create-folder-400-blank-name", "/folders", `{"name":"  "}`, 400, "name"},
		{"create-folder-400-no-name", "/folders", `{}`, 400, "name"},
		{"create-folder-400-parent-string", "/folders", `{"name":"a","parentId":"1"}`, 400, "parentId"},
		{"create-workbook-400-kind", "/workbooks", `{"name":"a","dashboardDraft":{"kind":"GRID"}}`, 400, "dashboardDraft.kind"},
		{"create-workbook-400-widget-type", "/workbooks", `{"name":"a","dashboardDraft":{"widgets":[{"id":"w","type":"PIE","position":{"x":0,"y":0,"w":1,"h":1}}]}}`, 400, "widgets[0].type"},
		{"create-workbook-400-widget-position", "/workbooks", `{"name":"a","dashboardDraft":{"widgets":[{"id":"w","type":"TEXT","position":{"x":0,"y":0,"w":1}}]}}`, 400, "position.h"},
		{"create-workbook-400-entry-too-long", "/workbooks", `{"name":"a","dashboardDraft":{"kind":"APP","app":{"entry":"` + strings.Repeat("x", 256) + `"}}}`, 400, "entry"},
		{"create-report-400-meta-array", "/reports", `{"name":"a","meta":[1]}`, 400, "meta"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(t, "POST", depPath(dep, c.path), admin, c.body)
			st, msg := errorBody(t, r)
			if r.Status != c.status || st != c.status || !strings.Contains(msg, c.field) {
				t.Fatalf("want %d naming %q, got %d %s", c.status, c.field, r.Status, r.Body)
			}
		})
	}
	t.Run("bulk-move-415-content-type", func(t *testing.T) {
		req := `{"items":[{"type":"WORKBOOK","id":1}]}`
		hr, err := e.api.Request("POST", depPath(dep, "/workspace/bulk-move"), authz(admin), req)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Content-Type", "text/plain")
		r := e.api.Send(t, hr)
		if r.Status != 415 {
			t.Fatalf("want 415, got %d %s", r.Status, r.Body)
		}
	})
	t.Run("folders-405-with-allow-and-unknown-path-404", func(t *testing.T) {
		r := e.do(t, "DELETE", depPath(dep, "/folders"), admin, nil)
		if st, msg := errorBody(t, r); r.Status != 405 || st != 405 || r.Header.Get("Allow") != "POST" || !strings.Contains(msg, "allowed: POST") {
			t.Fatalf("want 405 with Allow: POST, got %d %v %s", r.Status, r.Header, r.Body)
		}
		r = e.do(t, "GET", depPath(dep, "/workbooks/1/history"), admin, nil)
		if st, _ := errorBody(t, r); r.Status != 404 || st != 404 {
			t.Fatalf("want a JSON 404, got %d %s", r.Status, r.Body)
		}
	})
	t.Run("list-400-first-out-of-range", func(t *testing.T) {
		for _, q := range []string{"first=0", "first=201", "first=x", "after=%21%21", "folderId=-1"} {
			if r := e.do(t, "GET", depPath(dep, "/workspace?"+q), admin, nil); r.Status != 400 {
				t.Fatalf("%s: want 400, got %d %s", q, r.Status, r.Body)
			}
		}
	})
	t.Run("bulk-move-400-changes-nothing", func(t *testing.T) {
		dest := e.mkFolder(t, dep, admin, "dest", 0)
		wb := e.mkItem(t, dep, admin, "workbooks", "stay", 0)
		r := e.do(t, "POST", depPath(dep, "/workspace/bulk-move"), admin, map[string]any{"items": []any{ref("WORKBOOK", wb), ref("BOARD", 1)}, "folderId": dest})
		if r.Status != 400 {
			t.Fatalf("want 400, got %d", r.Status)
		}
		if got := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), admin, nil).Object(t); got["folderId"] != nil {
			t.Fatalf("a rejected request moved the workbook to %v", got["folderId"])
		}
	})
}
