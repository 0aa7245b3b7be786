package storetest

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

func ptr[T any](v T) *T { return &v }

func testItems(t *testing.T, f *fixture) {
	folder := f.folder("f", 0)
	title := "Board"
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", folder, func(it *workspace.Item) {
		it.Meta, it.CalculatedFields = json.RawMessage(`{"a":1}`), json.RawMessage(`{"b":[2]}`)
		it.Draft = &workspace.DashboardConfig{Title: &title, Settings: map[string]any{"x": 1.5}}
	})
	rp := f.item(f.deploymentID, workspace.TypeReport, "rp", 0, nil)
	elsewhere := f.item(f.other, workspace.TypeReport, "elsewhere", 0, nil)
	got, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID, rp.ID, elsewhere.ID, folder, 999_999_999_999}, workspace.AllParts)
	f.check(err)
	if len(got) != 3 || got[elsewhere.ID] != nil {
		t.Fatalf("items among ids: %v, want the workbook, the report and the folder of the deployment", slices.Sorted(maps.Keys(got)))
	}
	f.wantItem(got[wb.ID], wb)
	f.wantItem(got[rp.ID], rp)
	if got[folder].Type != workspace.TypeFolder || got[folder].Depth != 1 {
		t.Fatalf("the folder as an item: %+v", got[folder])
	}
	// What a read hands out is a copy: changing it changes nothing stored.
	got[wb.ID].Draft.Settings["x"] = 9.0
	got[wb.ID].Anc = append(got[wb.ID].Anc, 1)
	again, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID}, workspace.AllParts)
	f.check(err)
	f.wantItem(again[wb.ID], wb)
	if err := f.s.InsertItem(f.ctx, rp); err == nil {
		t.Fatal("inserting an id that is taken succeeded")
	}
	if empty, err := f.s.Items(f.ctx, f.deploymentID, nil, workspace.AllParts); err != nil || len(empty) != 0 {
		t.Fatalf("items among no ids: %v %v", empty, err)
	}
}

// testItemParts: a head read (no parts) returns everything access and moves are decided
// on and none of the large parts, but their size; each part comes only when asked for.
func testItemParts(t *testing.T, f *fixture) {
	title := "Board"
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", 0, func(it *workspace.Item) {
		it.Meta, it.CalculatedFields = json.RawMessage(`{"a":1}`), json.RawMessage(`{"b":2}`)
		it.Draft = &workspace.DashboardConfig{Title: &title}
	})
	dash := &workspace.Dashboard{ID: f.id(), PublicID: "pub", DeploymentID: f.deploymentID, WorkbookID: wb.ID, Status: workspace.StatusPublished,
		Config: workspace.DashboardConfig{Title: &title}, VersionNumber: 1, ReportSnapshots: []workspace.ReportSnapshot{}}
	full, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, workspace.ItemUpdate{Published: dash, UpdatedAt: at, UpdatedBy: 7})
	f.check(err)
	draftJSON, _ := json.Marshal(wb.Draft)
	dashJSON, _ := json.Marshal(dash)
	bytes := len(wb.Meta) + len(wb.CalculatedFields) + len(draftJSON) + len(dashJSON)
	for _, c := range []struct {
		name  string
		parts workspace.Parts
		keep  func(head, full *workspace.Item)
	}{
		{"head", 0, func(_, _ *workspace.Item) {}},
		{"meta", workspace.PartMeta, func(h, w *workspace.Item) { h.Meta = w.Meta }},
		{"calculatedFields", workspace.PartCalculatedFields, func(h, w *workspace.Item) { h.CalculatedFields = w.CalculatedFields }},
		{"draft", workspace.PartDraft, func(h, w *workspace.Item) { h.Draft = w.Draft }},
		{"published", workspace.PartPublished, func(h, w *workspace.Item) { h.Published = w.Published }},
		{"all", workspace.AllParts, func(h, w *workspace.Item) { *h = *w }},
	} {
		got, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID}, c.parts)
		f.check(err)
		want := *full
		want.Meta, want.CalculatedFields, want.Draft, want.Published = nil, nil, nil, nil
		c.keep(&want, full)
		if got[wb.ID] == nil || got[wb.ID].PublishedVersion != 1 || got[wb.ID].PublicID != "pub" || got[wb.ID].DashboardID != dash.ID {
			t.Fatalf("%s: a read without the published version, dashboard id and public id: %+v", c.name, got[wb.ID])
		}
		f.wantItem(got[wb.ID], &want)
		if got[wb.ID].Bytes != bytes {
			t.Fatalf("%s: Bytes %d, want %d (meta, calculated fields, draft and published dashboard as JSON)", c.name, got[wb.ID].Bytes, bytes)
		}
	}
	if full.Bytes != bytes {
		t.Fatalf("an update answers Bytes %d, want %d", full.Bytes, bytes)
	}
	// A part changed: its size changes with it.
	grown := json.RawMessage(`{"a":"` + strings.Repeat("x", 100) + `"}`)
	after, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, workspace.ItemUpdate{Meta: grown, UpdatedAt: at, UpdatedBy: 7})
	f.check(err)
	heads, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID}, 0)
	f.check(err)
	if want := bytes - len(wb.Meta) + len(grown); after.Bytes != want || heads[wb.ID].Bytes != want {
		t.Fatalf("after a new meta: Bytes %d (update) and %d (head), want %d", after.Bytes, heads[wb.ID].Bytes, want)
	}
	folder := f.folder("f", 0)
	got, err := f.s.Items(f.ctx, f.deploymentID, []int64{folder}, 0)
	f.check(err)
	if n := got[folder]; n == nil || n.Depth != 1 || n.Type != workspace.TypeFolder || n.CreatedBy != 7 {
		t.Fatalf("a folder's head: %+v", n)
	}
}

func testUpdateItem(t *testing.T, f *fixture) {
	folder := f.folder("f", 0)
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", folder, nil)
	later := at.Add(time.Hour)
	u := workspace.ItemUpdate{Name: ptr("renamed"), Meta: json.RawMessage(`{"m":true}`), CalculatedFields: json.RawMessage(`{}`),
		Draft: &workspace.DashboardConfig{Kind: ptr("CLASSIC")}, UpdatedAt: later, UpdatedBy: 8}
	// Each precondition and identity that does not hold: no change, nil.
	for _, c := range []struct {
		name             string
		deploymentID, id int64
		typ              workspace.ItemType
		pre              workspace.ItemPrecondition
	}{
		{"other-parent", f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{Parent: ptr(int64(0))}},
		{"published", f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{PublishedVersion: ptr(int64(1))}},
		{"wrong-type", f.deploymentID, wb.ID, workspace.TypeReport, workspace.ItemPrecondition{}},
		{"other-deployment", f.other, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}},
		{"missing", f.deploymentID, 999_999_999_999, workspace.TypeWorkbook, workspace.ItemPrecondition{}},
	} {
		got, err := f.s.UpdateItem(f.ctx, c.deploymentID, c.id, c.typ, c.pre, u)
		if err != nil || got != nil {
			t.Fatalf("%s: %+v %v, want no item", c.name, got, err)
		}
	}
	got, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook,
		workspace.ItemPrecondition{Parent: &folder, PublishedVersion: ptr(int64(0))}, u)
	f.check(err)
	want := *wb
	want.Name, want.Meta, want.CalculatedFields, want.Draft, want.UpdatedAt, want.UpdatedBy = "renamed", u.Meta, u.CalculatedFields, u.Draft, later, 8
	f.wantItem(got, &want)
	// Publishing sets the dashboard with its version, id and public id; the next publish
	// requires that version.
	dash := &workspace.Dashboard{ID: 41, PublicID: "pub", DeploymentID: f.deploymentID, WorkbookID: wb.ID, Status: workspace.StatusPublished,
		VersionNumber: 1, VersionID: 42, ReportSnapshots: []workspace.ReportSnapshot{}}
	got, err = f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{PublishedVersion: ptr(int64(0))},
		workspace.ItemUpdate{Published: dash, UpdatedAt: later, UpdatedBy: 9})
	f.check(err)
	want.Published, want.PublishedVersion, want.DashboardID, want.PublicID, want.UpdatedBy = dash, 1, 41, "pub", 9
	f.wantItem(got, &want)
	if got, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{PublishedVersion: ptr(int64(0))},
		workspace.ItemUpdate{Published: dash, UpdatedAt: later, UpdatedBy: 9}); err != nil || got != nil {
		t.Fatalf("a publish over a stale version: %+v %v, want no item", got, err)
	}
	// Grants, on a folder; then no grants.
	g := []workspace.Grant{{UserID: 5, Level: "edit"}, {UserID: 3, Level: "view"}}
	fo, err := f.s.UpdateItem(f.ctx, f.deploymentID, folder, workspace.TypeFolder, workspace.ItemPrecondition{},
		workspace.ItemUpdate{Grants: &g, Position: ptr(2.5), UpdatedAt: later, UpdatedBy: 8})
	f.check(err)
	if !slices.Equal(fo.Grants, g) || fo.Position != 2.5 {
		t.Fatalf("folder after setting grants: %+v", fo)
	}
	if n := f.node(f.deploymentID, folder); !slices.Equal(n.Grants, g) {
		t.Fatalf("folder node grants %v, want %v", n.Grants, g)
	}
	fo, err = f.s.UpdateItem(f.ctx, f.deploymentID, folder, workspace.TypeFolder, workspace.ItemPrecondition{},
		workspace.ItemUpdate{Grants: &[]workspace.Grant{}, UpdatedAt: later, UpdatedBy: 8})
	f.check(err)
	if len(fo.Grants) != 0 {
		t.Fatalf("grants after clearing: %v", fo.Grants)
	}
	// A delete leaves a tombstone: no longer found, not updatable again.
	for _, c := range []struct {
		name         string
		deploymentID int64
		typ          workspace.ItemType
		pre          workspace.ItemPrecondition
	}{
		{"other-parent", f.deploymentID, workspace.TypeWorkbook, workspace.ItemPrecondition{Parent: ptr(int64(0))}},
		{"wrong-type", f.deploymentID, workspace.TypeReport, workspace.ItemPrecondition{}},
		{"other-deployment", f.other, workspace.TypeWorkbook, workspace.ItemPrecondition{}},
	} {
		if ok, err := f.s.DeleteItem(f.ctx, c.deploymentID, wb.ID, c.typ, c.pre, 8, later); err != nil || ok {
			t.Fatalf("delete, %s: %v %v, want no item", c.name, ok, err)
		}
	}
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{Parent: &folder}, 8, later); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 8, later); err != nil || ok {
		t.Fatalf("delete of a tombstone: %v %v, want no item (exactly one delete gives the slot back)", ok, err)
	}
	if left, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID}, workspace.AllParts); err != nil || len(left) != 0 {
		t.Fatalf("a deleted item is found: %v %v", left, err)
	}
	if got, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{},
		workspace.ItemUpdate{Name: ptr("x"), UpdatedAt: later}); err != nil || got != nil {
		t.Fatalf("update of a deleted item: %+v %v", got, err)
	}
}

func testMoveItem(t *testing.T, f *fixture) {
	a, b := f.folder("a", 0), f.folder("b", 0)
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", a, nil)
	later := at.Add(time.Minute)
	if ok, err := f.s.MoveItem(f.ctx, f.deploymentID, wb.ID, 0, b, 8, later); err != nil || ok {
		t.Fatalf("a move from where the item is not: %v %v, want refused", ok, err)
	}
	if ok, err := f.s.MoveItem(f.ctx, f.other, wb.ID, a, b, 8, later); err != nil || ok {
		t.Fatalf("a move in another deployment: %v %v, want refused", ok, err)
	}
	if ok, err := f.s.MoveItem(f.ctx, f.deploymentID, wb.ID, a, b, 8, later); err != nil || !ok {
		t.Fatalf("move: %v %v", ok, err)
	}
	got, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID}, workspace.AllParts)
	f.check(err)
	want := *wb
	want.Parent, want.UpdatedAt, want.UpdatedBy = b, later, 8
	f.wantItem(got[wb.ID], &want)
}

func testContents(t *testing.T, f *fixture) {
	parent := f.folder("p", 0)
	f.folder("c", parent)
	f.item(f.deploymentID, workspace.TypeWorkbook, "wb", parent, nil)
	f.item(f.other, workspace.TypeWorkbook, "elsewhere", 0, nil)
	empty := f.folder("empty", 0)
	gone := f.folder("gone", 0)
	rp := f.item(f.deploymentID, workspace.TypeReport, "deleted", gone, nil)
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, rp.ID, workspace.TypeReport, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	for _, c := range []struct {
		folder int64
		want   bool
	}{{parent, true}, {empty, false}, {gone, false}, {0, true}} {
		if got, err := f.s.HasChildren(f.ctx, f.deploymentID, c.folder); err != nil || got != c.want {
			t.Fatalf("folder %d has children: %v %v, want %v (tombstones do not count)", c.folder, got, err, c.want)
		}
	}
	if got, err := f.s.HasChildren(f.ctx, f.other, parent); err != nil || got {
		t.Fatalf("children of a folder seen from another deployment: %v %v", got, err)
	}
}

func updatePosition(f *fixture, id int64, pos float64) error {
	_, err := f.s.UpdateItem(f.ctx, f.deploymentID, id, workspace.TypeFolder, workspace.ItemPrecondition{},
		workspace.ItemUpdate{Position: &pos, UpdatedAt: at, UpdatedBy: 7})
	return err
}

func testChildren(t *testing.T, f *fixture) {
	parent := f.folder("parent", 0)
	var folders, items []int64
	for _, c := range []struct {
		name string
		pos  float64
	}{{"b", 1}, {"a", 1}, {"z", 0}, {"a", 1}} {
		id := f.folder(c.name, parent)
		f.check(updatePosition(f, id, c.pos))
		folders = append(folders, id)
	}
	for _, c := range []struct {
		typ  workspace.ItemType
		name string
		pos  float64
	}{{workspace.TypeReport, "r", 0}, {workspace.TypeWorkbook, "w", 0}, {workspace.TypeWorkbook, "a", 2}} {
		it := f.item(f.deploymentID, c.typ, c.name, parent, func(it *workspace.Item) {
			it.Position, it.Meta = c.pos, json.RawMessage(`{"big":true}`)
			it.Draft = &workspace.DashboardConfig{}
		})
		items = append(items, it.ID)
	}
	f.item(f.other, workspace.TypeWorkbook, "elsewhere", parent, nil)
	// Folders by position, name, id: z(0), then a, a (ids in order), then b.
	wantFolders := []int64{folders[2], min(folders[1], folders[3]), max(folders[1], folders[3]), folders[0]}
	wantItems := []int64{items[0], items[1], items[2]} // r(0), w(0), a(2)
	for _, c := range []struct {
		folders bool
		want    []int64
	}{{true, wantFolders}, {false, wantItems}} {
		var got []int64
		var after *workspace.ListKey
		for page := 0; page < 10; page++ {
			batch, err := f.s.Children(f.ctx, f.deploymentID, workspace.ChildrenQuery{Parent: parent, Folders: c.folders, After: after, Limit: 2})
			f.check(err)
			for _, it := range batch {
				if it.Meta != nil || it.Draft != nil || it.Published != nil {
					t.Fatalf("a listed item carries its large parts: %+v", it)
				}
			}
			got = append(got, ids(batch)...)
			if len(batch) < 2 {
				break
			}
			last := batch[len(batch)-1]
			after = &workspace.ListKey{Position: last.Position, Name: last.Name, ID: last.ID}
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("children (folders %v) in pages of 2: %v, want %v", c.folders, got, c.want)
		}
	}
	if n, err := f.s.Children(f.ctx, f.deploymentID, workspace.ChildrenQuery{Parent: parent, Folders: true, Limit: 100}); err != nil || len(n) != 4 ||
		n[0].Depth != 2 || len(n[0].Anc) != 1 {
		t.Fatalf("listed folders keep their ancestors and depth (access checks need them): %+v %v", n, err)
	}
}

func testSearch(t *testing.T, f *fixture) {
	parent := f.folder("Reports", 0)
	base := at
	mk := func(typ workspace.ItemType, name string, folder, by int64, minutes int) int64 {
		return f.item(f.deploymentID, typ, name, folder, func(it *workspace.Item) {
			it.CreatedBy, it.UpdatedAt = by, base.Add(time.Duration(minutes)*time.Minute)
			it.Meta = json.RawMessage(`{"big":true}`)
		}).ID
	}
	rev := mk(workspace.TypeReport, "Revenue (EU)", parent, 7, 3)
	board := mk(workspace.TypeWorkbook, "revenue board", 0, 8, 1)
	costs := mk(workspace.TypeWorkbook, "Costs", 0, 7, 2)
	zeta := mk(workspace.TypeReport, "revenue zeta", 0, 7, 0)
	f.item(f.other, workspace.TypeReport, "revenue elsewhere", 0, nil)
	search := func(q workspace.SearchQuery) []int64 {
		t.Helper()
		var out []int64
		for page := 0; page < 20; page++ {
			q.Limit = 2
			batch, err := f.s.Search(f.ctx, f.deploymentID, q)
			f.check(err)
			for _, it := range batch {
				if it.Meta != nil {
					t.Fatalf("a search hit carries its meta: %+v", it)
				}
			}
			out = append(out, ids(batch)...)
			if len(batch) < 2 {
				return out
			}
			last := batch[len(batch)-1]
			q.After = &workspace.SearchKey{Name: last.Name, UpdatedAt: last.UpdatedAt, ID: last.ID}
		}
		t.Fatal("more than 20 pages")
		return nil
	}
	for _, c := range []struct {
		name string
		q    workspace.SearchQuery
		want []int64
	}{
		{"name-literal-case-insensitive", workspace.SearchQuery{NameContains: "REVENUE"}, []int64{rev, board, zeta}},
		{"name-is-not-a-pattern", workspace.SearchQuery{NameContains: "(eu)"}, []int64{rev}},
		{"name-desc", workspace.SearchQuery{NameContains: "revenue", Desc: true}, []int64{zeta, board, rev}},
		{"updated-at", workspace.SearchQuery{Sort: workspace.ByUpdatedAt}, []int64{parent, zeta, board, costs, rev}},
		{"updated-at-desc", workspace.SearchQuery{Sort: workspace.ByUpdatedAt, Desc: true}, []int64{rev, costs, board, zeta, parent}},
		{"type", workspace.SearchQuery{Type: workspace.TypeReport}, []int64{rev, zeta}},
		{"created-by", workspace.SearchQuery{CreatedBy: 8}, []int64{board}},
		{"parent", workspace.SearchQuery{Parent: &parent}, []int64{rev}},
		{"root", workspace.SearchQuery{Parent: ptr(int64(0)), Type: workspace.TypeWorkbook}, []int64{costs, board}},
		{"ids", workspace.SearchQuery{IDs: []int64{zeta, costs, 999}}, []int64{costs, zeta}},
		{"no-ids", workspace.SearchQuery{IDs: []int64{}}, nil},
	} {
		if got := search(c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func testLeases(t *testing.T, f *fixture) {
	folder := f.folder("f", 0)
	now := at
	if ok, err := f.s.LeaseFolder(f.ctx, f.other, folder, now, now.Add(time.Minute)); err != nil || ok {
		t.Fatalf("lease from another deployment: %v %v", ok, err)
	}
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, folder, now, now.Add(2*time.Minute)); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, folder, now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("a second lease: %v %v", ok, err)
	}
	if ok, err := f.s.BeginFolderDelete(f.ctx, f.deploymentID, folder, now, now.Add(time.Minute)); err != nil || ok {
		t.Fatalf("delete while leased: %v %v, want refused", ok, err)
	}
	f.check(f.s.ReleaseFolder(f.ctx, f.deploymentID, folder))
	if ok, err := f.s.BeginFolderDelete(f.ctx, f.deploymentID, folder, now, now.Add(time.Minute)); err != nil || ok {
		t.Fatalf("delete while one lease of two is held: %v %v, want refused", ok, err)
	}
	// A lease that has lapsed (its holder crashed) no longer holds a delete back.
	if ok, err := f.s.BeginFolderDelete(f.ctx, f.deploymentID, folder, now.Add(3*time.Minute), now.Add(4*time.Minute)); err != nil || !ok {
		t.Fatalf("delete after the lease lapsed: %v %v", ok, err)
	}
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, folder, now.Add(3*time.Minute), now.Add(5*time.Minute)); err != nil || ok {
		t.Fatalf("lease while being deleted: %v %v, want refused", ok, err)
	}
	if deleted, err := f.s.EndFolderDelete(f.ctx, f.deploymentID, folder, false, 7, now); err != nil || deleted { // not empty: the mark is lifted
		t.Fatalf("lifting the delete mark: deleted %v %v", deleted, err)
	}
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, folder, now.Add(3*time.Minute), now.Add(5*time.Minute)); err != nil || !ok {
		t.Fatalf("lease after the delete gave up: %v %v", ok, err)
	}
	f.check(f.s.ReleaseFolder(f.ctx, f.deploymentID, folder))
	f.check(f.s.ReleaseFolder(f.ctx, f.deploymentID, folder))
	if ok, err := f.s.BeginFolderDelete(f.ctx, f.deploymentID, folder, now.Add(3*time.Minute), now.Add(4*time.Minute)); err != nil || !ok {
		t.Fatalf("delete once every lease is given back: %v %v", ok, err)
	}
	// A delete mark that has lapsed (its delete crashed) no longer refuses leases.
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, folder, now.Add(5*time.Minute), now.Add(7*time.Minute)); err != nil || !ok {
		t.Fatalf("lease after the delete mark lapsed: %v %v", ok, err)
	}
	f.check(f.s.ReleaseFolder(f.ctx, f.deploymentID, folder))
	if ok, err := f.s.BeginFolderDelete(f.ctx, f.deploymentID, folder, now.Add(5*time.Minute), now.Add(6*time.Minute)); err != nil || !ok {
		t.Fatalf("begin delete: %v %v", ok, err)
	}
	if deleted, err := f.s.EndFolderDelete(f.ctx, f.deploymentID, folder, true, 8, now.Add(5*time.Minute)); err != nil || !deleted {
		t.Fatalf("tombstoning: deleted %v %v", deleted, err)
	}
	// A second tombstoning of the same folder (a concurrent delete) is not one.
	if deleted, err := f.s.EndFolderDelete(f.ctx, f.deploymentID, folder, true, 8, now.Add(5*time.Minute)); err != nil || deleted {
		t.Fatalf("tombstoning a tombstone: deleted %v %v, want false", deleted, err)
	}
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, folder, now.Add(10*time.Minute), now.Add(11*time.Minute)); err != nil || ok {
		t.Fatalf("lease of a deleted folder: %v %v", ok, err)
	}
	if ok, err := f.s.BeginFolderDelete(f.ctx, f.deploymentID, folder, now.Add(10*time.Minute), now.Add(11*time.Minute)); err != nil || ok {
		t.Fatalf("delete of a deleted folder: %v %v", ok, err)
	}
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", 0, nil)
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, wb.ID, now, now.Add(time.Minute)); err != nil || ok {
		t.Fatalf("lease of a workbook: %v %v", ok, err)
	}
}

func testUsers(t *testing.T, f *fixture) {
	a := workspace.User{ID: f.deploymentID, Account: 3, Email: "a@example.com", FirstName: "Ann", Role: "admin"}
	b := workspace.User{ID: f.deploymentID + 1_000_000_000_000, Account: 3, Email: "b@example.com", Picture: "https://example.com/b.png", Role: "viewer"}
	f.check(f.s.RecordUser(f.ctx, a))
	f.check(f.s.RecordUser(f.ctx, b))
	a.Role, a.FirstName = "viewer", "Anne"
	f.check(f.s.RecordUser(f.ctx, a))
	got, err := f.s.Users(f.ctx, []int64{a.ID, b.ID, 42})
	f.check(err)
	if len(got) != 2 || got[a.ID] != a || got[b.ID] != b {
		t.Fatalf("users: %+v, want %+v and %+v", got, a, b)
	}
	if none, err := f.s.Users(f.ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("users among no ids: %v %v", none, err)
	}
}

func testFavorites(t *testing.T, f *fixture) {
	const ann, bob = 5, 6
	wb := workspace.ItemRef{Type: workspace.TypeWorkbook, ID: 101}
	rp := workspace.ItemRef{Type: workspace.TypeReport, ID: 102}
	fo := workspace.ItemRef{Type: workspace.TypeFolder, ID: 103}
	for _, r := range []workspace.ItemRef{wb, rp, fo, wb} {
		f.check(f.s.AddFavorite(f.ctx, f.deploymentID, ann, r, at))
	}
	f.check(f.s.AddFavorite(f.ctx, f.deploymentID, bob, rp, at))
	f.check(f.s.AddFavorite(f.ctx, f.other, ann, wb, at))
	got, err := f.s.FavoriteIDs(f.ctx, f.deploymentID, ann, 10)
	f.check(err)
	if want := []int64{101, 102, 103}; !slices.Equal(sorted(got...), want) {
		t.Fatalf("ann's favorites: %v, want %v", got, want)
	}
	if got, err := f.s.FavoriteIDs(f.ctx, f.deploymentID, ann, 1); err != nil || len(got) != 2 {
		t.Fatalf("favorites up to 1: %v %v, want 2 (one more than the limit)", got, err)
	}
	if got, err := f.s.FavoriteIDs(f.ctx, f.deploymentID, 99, 10); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("favorites of a user without any: %#v %v, want an empty list", got, err)
	}
	set, err := f.s.FavoriteSet(f.ctx, f.deploymentID, bob, []int64{101, 102, 103})
	f.check(err)
	if len(set) != 1 || !set[102] {
		t.Fatalf("bob's favorite set: %v", set)
	}
	f.check(f.s.RemoveFavorite(f.ctx, f.deploymentID, ann, 101))
	f.check(f.s.RemoveFavorite(f.ctx, f.deploymentID, ann, 101))
	f.check(f.s.RemoveItemFavorites(f.ctx, f.deploymentID, 102))
	if got, err := f.s.FavoriteIDs(f.ctx, f.deploymentID, ann, 10); err != nil || !slices.Equal(got, []int64{103}) {
		t.Fatalf("ann's favorites after the removals: %v %v", got, err)
	}
	if set, err := f.s.FavoriteSet(f.ctx, f.deploymentID, bob, []int64{102}); err != nil || len(set) != 0 {
		t.Fatalf("a deleted item stays bob's favorite: %v %v", set, err)
	}
	if got, err := f.s.FavoriteIDs(f.ctx, f.other, ann, 10); err != nil || !slices.Equal(got, []int64{101}) {
		t.Fatalf("ann's favorites in the other deployment: %v %v", got, err)
	}
}

func testIDs(t *testing.T, f *fixture) {
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 60 {
				id, err := f.s.NextID(f.ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] || id <= 0 {
					t.Errorf("id %d handed out twice (or not positive)", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
