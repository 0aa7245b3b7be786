package e2e_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/analyticsco/platform/systemtest/stacktest"
)

// item is the Workbook shape (every moved or listed item) and the Folder shape.
type item struct {
	ID         int64       `json:"id"`
	Type       string      `json:"type"`
	Name       string      `json:"name"`
	FolderID   *float64    `json:"folderId"`
	ParentID   *int64      `json:"parentId"`
	FolderPath []pathEntry `json:"folderPath"`
}

type pathEntry struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

type ref struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`
}

type bulkResult struct {
	Moved  []map[string]any `json:"moved"`
	Failed []failure        `json:"failed"`
}

type failure struct {
	Type  string `json:"type"`
	ID    int64  `json:"id"`
	Error struct {
		Status  int    `json:"status"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (p *platform) ws(dep int64, rest string) string {
	return fmt.Sprintf("/api/v1/deployments/%d%s", dep, rest)
}

func (p *platform) createFolder(t *testing.T, u stacktest.User, name string, parent int64) item {
	t.Helper()
	body := map[string]any{"name": name}
	if parent != 0 {
		body["parentId"] = parent
	}
	var f item
	p.call(t, "POST", p.ws(p.dep1, "/folders"), bearer(u), body).want(t, 200).decode(t, &f)
	return f
}

func (p *platform) createWorkbook(t *testing.T, u stacktest.User, name string, folder int64) item {
	t.Helper()
	body := map[string]any{"name": name}
	if folder != 0 {
		body["folderId"] = folder
	}
	var w item
	p.call(t, "POST", p.ws(p.dep1, "/workbooks"), bearer(u), body).want(t, 200).decode(t, &w)
	return w
}

func (p *platform) bulkMove(t *testing.T, u stacktest.User, dest any, refs ...ref) bulkResult {
	t.Helper()
	var r bulkResult
	p.call(t, "POST", p.ws(p.dep1, "/workspace/bulk-move"), bearer(u), map[string]any{"items": refs, "folderId": dest}).want(t, 200).decode(t, &r)
	return r
}

func (p *platform) move(t *testing.T, u stacktest.User, dest any, r ref) response {
	t.Helper()
	return p.call(t, "POST", p.ws(p.dep1, "/workspace/move"), bearer(u), map[string]any{"type": r.Type, "id": r.ID, "folderId": dest})
}

func (p *platform) workbookFolder(t *testing.T, id int64) *float64 {
	t.Helper()
	var w item
	p.call(t, "GET", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", id)), bearer(p.acme.Users["admin"]), nil).want(t, 200).decode(t, &w)
	return w.FolderID
}

func wb(i item) ref { return ref{"WORKBOOK", i.ID} }
func fo(i item) ref { return ref{"FOLDER", i.ID} }

func movedIDs(r bulkResult) []int64 {
	var ids []int64
	for _, m := range r.Moved {
		ids = append(ids, int64(m["id"].(float64)))
	}
	return ids
}

var bulkMoveRules = []rule{
	{"rule-1-duplicates-collapsed", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		dest := p.createFolder(t, admin, p.unique("dest"), 0)
		a, b := p.createWorkbook(t, admin, "a", 0), p.createWorkbook(t, admin, "b", 0)
		missing := ref{"REPORT", 990000001}
		r := p.bulkMove(t, admin, dest.ID, wb(a), wb(a), wb(b), wb(a), missing, missing)
		if got := movedIDs(r); !reflect.DeepEqual(got, []int64{a.ID, b.ID}) {
			t.Errorf("moved %v, want exactly one entry each for %d and %d", got, a.ID, b.ID)
		}
		if len(r.Failed) != 1 || r.Failed[0].ID != missing.ID {
			t.Errorf("failed %+v, want one entry for the repeated missing report", r.Failed)
		}
	}},
	{"rule-2-200-when-items-fail", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		r := p.bulkMove(t, admin, nil, ref{"WORKBOOK", 990000002}, ref{"FOLDER", 990000003})
		if len(r.Moved) != 0 || len(r.Failed) != 2 {
			t.Fatalf("every item failing is still 200 with each failure listed; got %+v", r)
		}
	}},
	{"rule-3-in-order-no-rollback", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		parent := p.createFolder(t, admin, p.unique("parent"), 0)
		child := p.createFolder(t, admin, "child", parent.ID)
		first, last := p.createWorkbook(t, admin, "first", 0), p.createWorkbook(t, admin, "last", 0)
		// parent into its own child fails between two moves that succeed.
		r := p.bulkMove(t, admin, child.ID, wb(first), fo(parent), wb(last))
		if got := movedIDs(r); !reflect.DeepEqual(got, []int64{first.ID, last.ID}) {
			t.Errorf("moved %v, want [first last] in request order", got)
		}
		if len(r.Failed) != 1 || r.Failed[0].ID != parent.ID || r.Failed[0].Error.Status != 400 {
			t.Errorf("failed %+v, want the folder-into-descendant move as 400", r.Failed)
		}
		for _, w := range []item{first, last} {
			if f := p.workbookFolder(t, w.ID); f == nil || int64(*f) != child.ID {
				t.Errorf("workbook %d is in folder %v after the batch, want %d (earlier moves are not rolled back)", w.ID, f, child.ID)
			}
		}
	}},
	{"rule-4-empty-failed-means-all-applied", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		dest := p.createFolder(t, admin, p.unique("dest"), 0)
		sub := p.createFolder(t, admin, "sub", 0)
		w := p.createWorkbook(t, admin, "w", 0)
		res := p.call(t, "POST", p.ws(p.dep1, "/workspace/bulk-move"), bearer(admin),
			map[string]any{"items": []ref{wb(w), fo(sub)}, "folderId": dest.ID}).want(t, 200)
		if !strings.Contains(string(res.body), `"failed":[]`) {
			t.Errorf("failed must be an empty array, not absent or null: %s", res.body)
		}
		if f := p.workbookFolder(t, w.ID); f == nil || int64(*f) != dest.ID {
			t.Errorf("workbook in %v, want %d", f, dest.ID)
		}
		var got item
		p.call(t, "GET", p.ws(p.dep1, fmt.Sprintf("/folders/%d", sub.ID)), bearer(admin), nil).want(t, 200).decode(t, &got)
		if got.ParentID == nil || *got.ParentID != dest.ID {
			t.Errorf("folder parent %v, want %d", got.ParentID, dest.ID)
		}
	}},
	{"rule-5-access-checked-per-item", func(t *testing.T, p *platform) {
		admin, ai := p.acme.Users["admin"], p.acme.Users["aiBiUser"]
		private := p.createFolder(t, admin, p.unique("private"), 0)
		theirs := p.createWorkbook(t, admin, "theirs", private.ID)
		own := p.createWorkbook(t, ai, "own", 0)
		dest := p.createFolder(t, ai, p.unique("ai-dest"), 0)
		r := p.bulkMove(t, ai, dest.ID, wb(theirs), wb(own))
		if got := movedIDs(r); !reflect.DeepEqual(got, []int64{own.ID}) {
			t.Errorf("moved %v, want only the caller's own workbook", got)
		}
		if len(r.Failed) != 1 || r.Failed[0].ID != theirs.ID || r.Failed[0].Error.Status != 403 {
			t.Errorf("failed %+v, want the admin's private workbook as 403", r.Failed)
		}
		if f := p.workbookFolder(t, theirs.ID); f == nil || int64(*f) != private.ID {
			t.Errorf("the refused workbook moved to %v", f)
		}
	}},
	{"rule-6-moved-entry-equals-single-move", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		dest := p.createFolder(t, admin, p.unique("dest"), 0)
		w := p.createWorkbook(t, admin, "w", 0)
		single := p.move(t, admin, dest.ID, wb(w)).want(t, 200).obj(t)
		// A move to where the item already is is a successful no-op: the bulk entry for it
		// must be the single move's representation of the same item.
		r := p.bulkMove(t, admin, dest.ID, wb(w))
		if len(r.Moved) != 1 {
			t.Fatalf("moved %+v", r)
		}
		if !reflect.DeepEqual(r.Moved[0], single) {
			t.Errorf("bulk entry differs from the single move's body:\n bulk   %v\n single %v", r.Moved[0], single)
		}
		f := p.createFolder(t, admin, p.unique("f"), 0)
		singleFolder := p.move(t, admin, dest.ID, fo(f)).want(t, 200).obj(t)
		r = p.bulkMove(t, admin, dest.ID, fo(f))
		if len(r.Moved) != 1 || !reflect.DeepEqual(r.Moved[0], singleFolder) {
			t.Errorf("bulk entry of a folder differs from the single move's body:\n bulk   %v\n single %v", r.Moved, singleFolder)
		}
	}},
	{"rule-7-failure-entry-shape", func(t *testing.T, p *platform) {
		admin, ai := p.acme.Users["admin"], p.acme.Users["aiBiUser"]
		parent := p.createFolder(t, admin, p.unique("parent"), 0)
		child := p.createFolder(t, admin, "child", parent.ID)
		private := p.createWorkbook(t, admin, "private", parent.ID)
		otherDep := p.createInDeployment(t, admin, p.dep2)
		for _, c := range []struct {
			name   string
			who    stacktest.User
			dest   int64
			item   ref
			status int
		}{
			{"item missing is 404", admin, 0, ref{"WORKBOOK", 990000004}, 404},
			{"item of another deployment is 404", admin, 0, ref{"WORKBOOK", otherDep}, 404},
			{"caller without access is 403", ai, 0, wb(private), 403},
			{"folder into its own descendant is 400", admin, child.ID, fo(parent), 400}, // code folder_cycle
		} {
			t.Run(c.name, func(t *testing.T) {
				var dest any
				if c.dest != 0 {
					dest = c.dest
				}
				single := p.move(t, c.who, dest, c.item).want(t, c.status)
				r := p.bulkMove(t, c.who, dest, c.item)
				if len(r.Failed) != 1 {
					t.Fatalf("failed %+v", r)
				}
				f := r.Failed[0]
				var singleCode struct {
					Code string `json:"code"`
				}
				single.decode(t, &singleCode)
				if f.Error.Code == "" || f.Error.Code != singleCode.Code {
					t.Errorf("failure entry code %q, want the single move's %q", f.Error.Code, singleCode.Code)
				}
				if f.Type != c.item.Type || f.ID != c.item.ID || f.Error.Status != c.status || f.Error.Message != single.message(t) {
					t.Errorf("failure entry %+v, want type %s id %d and the single move's error %d %q", f, c.item.Type, c.item.ID, c.status, single.message(t))
				}
			})
		}
	}},
}

func (p *platform) createInDeployment(t *testing.T, u stacktest.User, dep int64) int64 {
	t.Helper()
	var w item
	p.call(t, "POST", p.ws(dep, "/workbooks"), bearer(u), map[string]any{"name": "elsewhere"}).want(t, 200).decode(t, &w)
	return w.ID
}

var createFolderRules = []rule{
	{"requires-ai-bi-user", func(t *testing.T, p *platform) {
		for _, c := range []struct {
			role string
			want int
		}{{"viewer", 403}, {"aiBiUser", 200}, {"developer", 200}, {"admin", 200}} {
			t.Run(c.role, func(t *testing.T) {
				r := p.call(t, "POST", p.ws(p.dep1, "/folders"), bearer(p.acme.Users[c.role]), map[string]any{"name": p.unique(c.role)})
				r.want(t, c.want)
				if c.want == 200 {
					var f item
					r.decode(t, &f)
					if f.Type != "FOLDER" || f.ParentID != nil || len(f.FolderPath) != 0 {
						t.Errorf("a root folder: %s", r.body)
					}
				}
			})
		}
	}},
	{"parent-edit-access", func(t *testing.T, p *platform) {
		admin, ai := p.acme.Users["admin"], p.acme.Users["aiBiUser"]
		parent := p.createFolder(t, admin, p.unique("parent"), 0)
		create := func() response {
			return p.call(t, "POST", p.ws(p.dep1, "/folders"), bearer(ai), map[string]any{"name": "sub", "parentId": parent.ID})
		}
		grant := func(level string) {
			p.call(t, "PUT", p.ws(p.dep1, fmt.Sprintf("/folders/%d/permissions", parent.ID)), bearer(admin),
				map[string]any{"grants": []map[string]any{{"userId": ai.ID, "level": level}}}).want(t, 200)
		}
		create().want(t, 403)
		grant("view")
		create().want(t, 403)
		for _, level := range []string{"edit", "manage"} {
			grant(level)
			var f item
			create().want(t, 200).decode(t, &f)
			if f.ParentID == nil || *f.ParentID != parent.ID || len(f.FolderPath) != 1 || f.FolderPath[0].ID != parent.ID {
				t.Errorf("with %s on the parent: %+v", level, f)
			}
		}
	}},
	{"max-depth-400", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		var parent int64
		for level := 1; level <= 8; level++ {
			parent = p.createFolder(t, admin, fmt.Sprintf("level-%d", level), parent).ID
		}
		r := p.call(t, "POST", p.ws(p.dep1, "/folders"), bearer(admin), map[string]any{"name": "level-9", "parentId": parent}).want(t, 400).wantCode(t, "depth_limit")
		if msg := r.message(t); !strings.Contains(msg, "8") {
			t.Errorf("the message should name the limit: %q", msg)
		}
	}},
	{"unknown-parent-404", func(t *testing.T, p *platform) {
		p.call(t, "POST", p.ws(p.dep1, "/folders"), bearer(p.acme.Users["admin"]), map[string]any{"name": "x", "parentId": 990000005}).want(t, 404)
	}},
	{"position-orders-siblings", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		parent := p.createFolder(t, admin, p.unique("parent"), 0)
		for _, c := range []struct {
			name string
			pos  float64
		}{{"b", 2}, {"a", 3}, {"c", 1}} {
			p.call(t, "POST", p.ws(p.dep1, "/folders"), bearer(admin), map[string]any{"name": c.name, "parentId": parent.ID, "position": c.pos}).want(t, 200)
		}
		var page struct{ Items []item }
		p.call(t, "GET", p.ws(p.dep1, fmt.Sprintf("/workspace?folderId=%d", parent.ID)), bearer(admin), nil).want(t, 200).decode(t, &page)
		var names []string
		for _, it := range page.Items {
			names = append(names, it.Name)
		}
		if !reflect.DeepEqual(names, []string{"c", "b", "a"}) {
			t.Errorf("children %v, want ordered by position [c b a]", names)
		}
	}},
}

func sortedStrings(v []string) []string {
	out := append([]string{}, v...)
	sort.Strings(out)
	return out
}
