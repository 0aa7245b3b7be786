package storetest

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// grantsA and grantsB are two objects' own embed grants, each with every kind of entry.
var (
	grantsA = embedaccess.Grants{AllEmbedUsers: embedaccess.None,
		Tenants: []embedaccess.TenantEntry{{EmbedTenantName: "acme-corp", Access: embedaccess.Read}, {EmbedTenantName: "globex", Access: embedaccess.None}},
		Groups: []embedaccess.GroupEntry{{Scope: embedaccess.ScopeAccount, GroupName: "Sales", Access: embedaccess.Read},
			{Scope: embedaccess.ScopeTenant, EmbedTenantName: "acme-corp", GroupName: "ops team", Access: embedaccess.None}}}
	grantsB = embedaccess.Grants{Tenants: []embedaccess.TenantEntry{{EmbedTenantName: "initech", Access: embedaccess.Read}}}
	grantsC = embedaccess.Grants{AllEmbedUsers: embedaccess.Read}
)

// wantGrants fails unless got are want (empty lists and nil alike).
func wantGrants(t *testing.T, what string, got, want embedaccess.Grants) {
	t.Helper()
	if !reflect.DeepEqual(normalGrants(got), normalGrants(want)) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("%s: embed access\n got %s\nwant %s", what, gj, wj)
	}
}

func normalGrants(g embedaccess.Grants) embedaccess.Grants {
	if len(g.Tenants) == 0 {
		g.Tenants = nil
	}
	if len(g.Groups) == 0 {
		g.Groups = nil
	}
	return g
}

func (f *fixture) setEmbed(id int64, typ workspace.ItemType, g embedaccess.Grants) {
	f.t.Helper()
	ok, err := f.s.SetEmbedAccess(f.ctx, f.deploymentID, id, typ, g, 9, at.Add(time.Hour))
	f.check(err)
	if !ok {
		f.t.Fatalf("set embed access on %s %d refused", typ, id)
	}
}

func (f *fixture) head(id int64) *workspace.Item {
	f.t.Helper()
	got, err := f.s.Items(f.ctx, f.deploymentID, []int64{id}, 0)
	f.check(err)
	if got[id] == nil {
		f.t.Fatalf("item %d not found", id)
	}
	return got[id]
}

// testEmbedAccess: a folder's and a workbook's own grants are set, read with every head
// (Items, Folders, SubtreeFolders, the whole item an update answers) and cleared, and a
// grant change is no change of the item's content (updatedAt and updatedBy stay); the
// root's are kept per deployment.
func testEmbedAccess(t *testing.T, f *fixture) {
	top := f.folder("top", 0)
	folder := f.folder("f", top)
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", folder, nil)
	f.setEmbed(folder, workspace.TypeFolder, grantsA)
	f.setEmbed(wb.ID, workspace.TypeWorkbook, grantsB)

	wantGrants(t, "folder head", f.head(folder).EmbedAccess, grantsA)
	wantGrants(t, "workbook head", f.head(wb.ID).EmbedAccess, grantsB)
	wantGrants(t, "folder node", f.node(f.deploymentID, folder).EmbedAccess, grantsA)
	wantGrants(t, "top folder node", f.node(f.deploymentID, top).EmbedAccess, embedaccess.Grants{})
	sub, err := f.s.SubtreeFolders(f.ctx, f.deploymentID, []int64{top})
	f.check(err)
	if len(sub) != 1 || sub[0].ID != folder {
		t.Fatalf("subtree of top: %v, want %d", nodeIDs(sub), folder)
	}
	wantGrants(t, "subtree folder node", sub[0].EmbedAccess, grantsA)
	full, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID}, workspace.AllParts)
	f.check(err)
	wantGrants(t, "workbook in full", full[wb.ID].EmbedAccess, grantsB)
	// The item is otherwise as it was: a grant change bumps no updatedAt.
	want := *wb
	want.EmbedAccess = grantsB
	f.wantItem(full[wb.ID], &want)
	if h := f.head(folder); !h.UpdatedAt.Equal(at) || h.UpdatedBy != 7 {
		t.Fatalf("folder after a grant change: updated by %d at %v, want 7 at %v", h.UpdatedBy, h.UpdatedAt, at)
	}
	// An update of the item answers it with its grants, and keeps them.
	renamed, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{},
		workspace.ItemUpdate{Name: ptr("renamed"), UpdatedAt: at, UpdatedBy: 7})
	f.check(err)
	wantGrants(t, "updated workbook", renamed.EmbedAccess, grantsB)
	// What a read hands out is a copy.
	h := f.head(folder)
	h.EmbedAccess.Tenants[0].Access = embedaccess.None
	wantGrants(t, "folder head after changing a copy", f.head(folder).EmbedAccess, grantsA)
	// Replaced, then cleared.
	f.setEmbed(folder, workspace.TypeFolder, grantsC)
	wantGrants(t, "folder replaced", f.node(f.deploymentID, folder).EmbedAccess, grantsC)
	f.setEmbed(folder, workspace.TypeFolder, embedaccess.Grants{Tenants: []embedaccess.TenantEntry{}})
	wantGrants(t, "folder cleared", f.node(f.deploymentID, folder).EmbedAccess, embedaccess.Grants{})
	wantGrants(t, "workbook kept", f.head(wb.ID).EmbedAccess, grantsB)
	f.setEmbed(wb.ID, workspace.TypeWorkbook, embedaccess.Grants{})
	if g := f.head(wb.ID).EmbedAccess; !g.Empty() {
		t.Fatalf("workbook cleared: %+v", g)
	}

	// The root.
	root, err := f.s.RootEmbedAccess(f.ctx, f.deploymentID)
	f.check(err)
	wantGrants(t, "a root never set", root, embedaccess.Grants{})
	f.check(f.s.SetRootEmbedAccess(f.ctx, f.deploymentID, grantsA, 9, at))
	root, err = f.s.RootEmbedAccess(f.ctx, f.deploymentID)
	f.check(err)
	wantGrants(t, "root", root, grantsA)
	other, err := f.s.RootEmbedAccess(f.ctx, f.other)
	f.check(err)
	wantGrants(t, "another deployment's root", other, embedaccess.Grants{})
	f.check(f.s.SetRootEmbedAccess(f.ctx, f.deploymentID, grantsB, 9, at))
	root, err = f.s.RootEmbedAccess(f.ctx, f.deploymentID)
	f.check(err)
	wantGrants(t, "root replaced", root, grantsB)
	f.check(f.s.SetRootEmbedAccess(f.ctx, f.deploymentID, embedaccess.Grants{}, 9, at))
	root, err = f.s.RootEmbedAccess(f.ctx, f.deploymentID)
	f.check(err)
	wantGrants(t, "root cleared", root, embedaccess.Grants{})
	f.check(f.s.SetRootEmbedAccess(f.ctx, f.deploymentID, grantsC, 9, at))
	root, err = f.s.RootEmbedAccess(f.ctx, f.deploymentID)
	f.check(err)
	wantGrants(t, "root set again", root, grantsC)
}

// testEmbedAccessRefused: grants are set only on a live folder or workbook of the
// deployment, of the type named; anything else is false and changes nothing.
func testEmbedAccessRefused(t *testing.T, f *fixture) {
	folder := f.folder("f", 0)
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", folder, nil)
	rp := f.item(f.deploymentID, workspace.TypeReport, "rp", folder, nil)
	gone := f.item(f.deploymentID, workspace.TypeWorkbook, "gone", folder, nil)
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, gone.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	goneFolder := f.folder("gone", 0)
	if _, err := f.s.EndFolderDelete(f.ctx, f.deploymentID, goneFolder, true, 7, at); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name             string
		deploymentID, id int64
		typ              workspace.ItemType
	}{
		{"a-workbook-named-as-a-folder", f.deploymentID, wb.ID, workspace.TypeFolder},
		{"a-folder-named-as-a-workbook", f.deploymentID, folder, workspace.TypeWorkbook},
		{"a-report", f.deploymentID, rp.ID, workspace.TypeReport},
		{"a-deleted-workbook", f.deploymentID, gone.ID, workspace.TypeWorkbook},
		{"a-deleted-folder", f.deploymentID, goneFolder, workspace.TypeFolder},
		{"another-deployment", f.other, wb.ID, workspace.TypeWorkbook},
		{"missing", f.deploymentID, 999_999_999_999, workspace.TypeWorkbook},
	} {
		if ok, err := f.s.SetEmbedAccess(f.ctx, c.deploymentID, c.id, c.typ, grantsA, 9, at); err != nil || ok {
			t.Fatalf("%s: %v %v, want refused", c.name, ok, err)
		}
	}
	got, err := f.s.Items(f.ctx, f.deploymentID, []int64{folder, wb.ID, rp.ID}, 0)
	f.check(err)
	for id, it := range got {
		if !it.EmbedAccess.Empty() {
			t.Fatalf("item %d got grants from a refused set: %+v", id, it.EmbedAccess)
		}
	}
}

// testEmbedAccessFollowsMoves: a folder's grants stay on it when it moves, and the
// ancestors of a folder below it (FolderNode.Anc, kept by the tree ops) name its new
// ancestors at once, so reading them (Folders) gives the grants now above it.
func testEmbedAccessFollowsMoves(t *testing.T, f *fixture) {
	// a/b/c and d, with grants on a, b and d; then b (with c) moves under d.
	a := f.folder("a", 0)
	b := f.folder("b", a)
	c := f.folder("c", b)
	d := f.folder("d", 0)
	f.setEmbed(a, workspace.TypeFolder, grantsA)
	f.setEmbed(b, workspace.TypeFolder, grantsB)
	f.setEmbed(d, workspace.TypeFolder, grantsC)
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpMove, Folder: b, To: d, By: 8, At: at, Anc: []int64{d}, Depth: 2,
		Pull: []int64{a}, Push: []int64{d}, Delta: 0})
	above, err := f.s.Folders(f.ctx, f.deploymentID, f.node(f.deploymentID, c).Anc)
	f.check(err)
	if want := sorted(b, d); !slices.Equal(nodeIDs(above), want) {
		t.Fatalf("folders above c after the move: %v, want %v", nodeIDs(above), want)
	}
	for _, n := range above {
		want := map[int64]embedaccess.Grants{b: grantsB, d: grantsC}[n.ID]
		wantGrants(t, "a folder above c", n.EmbedAccess, want)
	}
	wantGrants(t, "the moved folder", f.node(f.deploymentID, b).EmbedAccess, grantsB)
}

// testPublishedHead: every write of the published dashboard keeps the head's published
// title (config.title, else the dashboard's title) and whether it is published with
// allowEmbed, which EmbeddableWorkbooks pages by.
func testPublishedHead(t *testing.T, f *fixture) {
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", 0, nil)
	if h := f.head(wb.ID); h.PublishedTitle != nil || h.Embeddable {
		t.Fatalf("a workbook never published: title %v, embeddable %v", h.PublishedTitle, h.Embeddable)
	}
	publish := func(what string, d workspace.Dashboard, wantTitle *string, wantEmbeddable bool) {
		t.Helper()
		d.ID, d.PublicID, d.DeploymentID, d.WorkbookID, d.ReportSnapshots = 41, "pub-"+what, f.deploymentID, wb.ID, []workspace.ReportSnapshot{}
		got, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{},
			workspace.ItemUpdate{Published: &d, UpdatedAt: at, UpdatedBy: 7})
		f.check(err)
		for _, it := range []*workspace.Item{got, f.head(wb.ID)} {
			if !reflect.DeepEqual(it.PublishedTitle, wantTitle) || it.Embeddable != wantEmbeddable {
				t.Fatalf("%s: title %v, embeddable %v; want %v, %v", what, deref(it.PublishedTitle), it.Embeddable, deref(wantTitle), wantEmbeddable)
			}
		}
		page, err := f.s.EmbeddableWorkbooks(f.ctx, f.deploymentID, 0, 10)
		f.check(err)
		if listed := slices.Contains(ids(page), wb.ID); listed != wantEmbeddable {
			t.Fatalf("%s: listed as embeddable %v, want %v", what, listed, wantEmbeddable)
		}
	}
	config, title := "Config title", "Dashboard title"
	publish("config-title", workspace.Dashboard{Status: workspace.StatusPublished, AllowEmbed: true, VersionNumber: 1,
		Config: workspace.DashboardConfig{Title: &config}, Title: &title}, &config, true)
	publish("dashboard-title", workspace.Dashboard{Status: workspace.StatusPublished, AllowEmbed: true, VersionNumber: 2, Title: &title}, &title, true)
	publish("no-embed", workspace.Dashboard{Status: workspace.StatusPublished, AllowEmbed: false, VersionNumber: 3, Title: &title}, &title, false)
	publish("untitled", workspace.Dashboard{Status: workspace.StatusPublished, AllowEmbed: true, VersionNumber: 4}, nil, true)
	publish("archived", workspace.Dashboard{Status: workspace.StatusArchived, AllowEmbed: true, VersionNumber: 4,
		Config: workspace.DashboardConfig{Title: &config}}, &config, false)
	// Listings (Children, Search) carry no more than they did: no grants, no title.
	f.setEmbed(wb.ID, workspace.TypeWorkbook, grantsB)
	listed, err := f.s.Children(f.ctx, f.deploymentID, workspace.ChildrenQuery{Parent: 0, Limit: 10})
	f.check(err)
	found, err := f.s.Search(f.ctx, f.deploymentID, workspace.SearchQuery{Limit: 10})
	f.check(err)
	for _, it := range append(listed, found...) {
		if !it.EmbedAccess.Empty() || it.PublishedTitle != nil || it.Embeddable {
			t.Fatalf("a listed item carries what only a head does: %+v", it)
		}
	}
	// A workbook inserted with a published dashboard (a copy) has its head too.
	cp := f.item(f.deploymentID, workspace.TypeWorkbook, "copy", 0, func(it *workspace.Item) {
		it.Published = &workspace.Dashboard{ID: 43, PublicID: "pub-copy", Status: workspace.StatusPublished, AllowEmbed: true,
			Title: &title, ReportSnapshots: []workspace.ReportSnapshot{}}
		it.PublishedVersion, it.PublicID, it.DashboardID = 1, "pub-copy", 43
	})
	if h := f.head(cp.ID); !reflect.DeepEqual(h.PublishedTitle, &title) || !h.Embeddable {
		t.Fatalf("an inserted published workbook: title %v, embeddable %v", deref(h.PublishedTitle), h.Embeddable)
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// published publishes wb's dashboard as publicID, embeddable or not.
func (f *fixture) published(deploymentID int64, wb *workspace.Item, publicID string, embed bool) {
	f.t.Helper()
	d := &workspace.Dashboard{ID: wb.ID + 1_000_000, PublicID: publicID, DeploymentID: deploymentID, WorkbookID: wb.ID, Status: workspace.StatusPublished,
		AllowEmbed: embed, VersionNumber: 1, ReportSnapshots: []workspace.ReportSnapshot{}, Title: ptr("t " + publicID)}
	got, err := f.s.UpdateItem(f.ctx, deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{},
		workspace.ItemUpdate{Published: d, UpdatedAt: at, UpdatedBy: 7})
	f.check(err)
	if got == nil {
		f.t.Fatalf("publish of %d refused", wb.ID)
	}
}

// testWorkbookByPublicID: the live workbook of the deployment whose dashboard has the
// public id, with the parts asked for; another deployment's public id, a deleted
// workbook's, an unknown or empty one find nothing.
func testWorkbookByPublicID(t *testing.T, f *fixture) {
	folder := f.folder("f", 0)
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", folder, func(it *workspace.Item) { it.Meta = json.RawMessage(`{"a":1}`) })
	f.published(f.deploymentID, wb, "pub-mine", true)
	f.setEmbed(wb.ID, workspace.TypeWorkbook, grantsB)
	theirs := f.item(f.other, workspace.TypeWorkbook, "theirs", 0, nil)
	f.published(f.other, theirs, "pub-theirs", true)
	gone := f.item(f.deploymentID, workspace.TypeWorkbook, "gone", 0, nil)
	f.published(f.deploymentID, gone, "pub-gone", true)
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, gone.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	got, err := f.s.WorkbookByPublicID(f.ctx, f.deploymentID, "pub-mine", workspace.PartPublished)
	f.check(err)
	if got == nil || got.ID != wb.ID || got.Published == nil || got.Published.PublicID != "pub-mine" || got.Meta != nil ||
		got.PublicID != "pub-mine" || got.Parent != folder || !got.Embeddable || got.PublishedTitle == nil || *got.PublishedTitle != "t pub-mine" {
		t.Fatalf("by public id, with the published dashboard: %+v", got)
	}
	wantGrants(t, "by public id", got.EmbedAccess, grantsB)
	head, err := f.s.WorkbookByPublicID(f.ctx, f.deploymentID, "pub-mine", 0)
	f.check(err)
	if head == nil || head.Published != nil || head.Meta != nil || head.PublicID != "pub-mine" || head.Bytes != got.Bytes {
		t.Fatalf("by public id, its head: %+v", head)
	}
	for _, c := range []struct {
		name         string
		deploymentID int64
		publicID     string
	}{
		{"another-deployments-public-id", f.deploymentID, "pub-theirs"},
		{"seen-from-another-deployment", f.other, "pub-mine"},
		{"a-deleted-workbook", f.deploymentID, "pub-gone"},
		{"unknown", f.deploymentID, "pub-nothing"},
		{"empty", f.deploymentID, ""},
	} {
		if got, err := f.s.WorkbookByPublicID(f.ctx, c.deploymentID, c.publicID, workspace.AllParts); err != nil || got != nil {
			t.Fatalf("%s: %+v %v, want none", c.name, got, err)
		}
	}
	if got, err := f.s.WorkbookByPublicID(f.ctx, f.other, "pub-theirs", 0); err != nil || got == nil || got.ID != theirs.ID {
		t.Fatalf("the other deployment's own: %+v %v", got, err)
	}
}

// testWorkbookHeadsPage: WorkbookHeads pages the deployment's live workbooks by id,
// EmbeddableWorkbooks those of them published with allowEmbed; both as heads.
func testWorkbookHeadsPage(t *testing.T, f *fixture) {
	folder := f.folder("f", 0)
	var all, embeddable []int64
	for i := range 7 {
		wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", folder, func(it *workspace.Item) { it.Meta = json.RawMessage(`{"a":1}`) })
		switch i % 3 {
		case 0:
			f.published(f.deploymentID, wb, "pub-"+wb.Name+string(rune('a'+i)), true)
			embeddable = append(embeddable, wb.ID)
		case 1:
			f.published(f.deploymentID, wb, "pub-"+wb.Name+string(rune('a'+i)), false)
		}
		all = append(all, wb.ID)
	}
	f.item(f.deploymentID, workspace.TypeReport, "rp", folder, nil)
	gone := f.item(f.deploymentID, workspace.TypeWorkbook, "gone", 0, nil)
	f.published(f.deploymentID, gone, "pub-gone", true)
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, gone.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	theirs := f.item(f.other, workspace.TypeWorkbook, "theirs", 0, nil)
	f.published(f.other, theirs, "pub-theirs", true)
	f.setEmbed(all[0], workspace.TypeWorkbook, grantsB)

	for _, c := range []struct {
		name string
		page func(after int64, limit int) ([]*workspace.Item, error)
		want []int64
	}{
		{"workbook-heads", func(after int64, limit int) ([]*workspace.Item, error) {
			return f.s.WorkbookHeads(f.ctx, f.deploymentID, after, limit)
		}, all},
		{"embeddable-workbooks", func(after int64, limit int) ([]*workspace.Item, error) {
			return f.s.EmbeddableWorkbooks(f.ctx, f.deploymentID, after, limit)
		}, embeddable},
	} {
		var got []int64
		after := int64(0)
		for range len(c.want) + 2 {
			page, err := c.page(after, 2)
			f.check(err)
			if len(page) > 2 {
				t.Fatalf("%s: a page of %d, limit 2", c.name, len(page))
			}
			for _, it := range page {
				if it.Type != workspace.TypeWorkbook || it.Meta != nil || it.Published != nil || it.DeploymentID != f.deploymentID {
					t.Fatalf("%s: not a head of the deployment's workbook: %+v", c.name, it)
				}
				if it.ID == all[0] {
					wantGrants(t, c.name, it.EmbedAccess, grantsB)
					if it.PublicID == "" || it.PublishedTitle == nil || !it.Embeddable {
						t.Fatalf("%s: a published head without its public id, title or embeddable: %+v", c.name, it)
					}
				}
			}
			got = append(got, ids(page)...)
			if len(page) < 2 {
				break
			}
			after = page[len(page)-1].ID
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("%s: paged %v, want %v", c.name, got, c.want)
		}
		if page, err := c.page(c.want[len(c.want)-1], 10); err != nil || len(page) != 0 {
			t.Fatalf("%s: after the last: %v %v", c.name, ids(page), err)
		}
		if page, err := c.page(c.want[0], 1); err != nil || !slices.Equal(ids(page), c.want[1:2]) {
			t.Fatalf("%s: one after the first: %v %v, want %v", c.name, ids(page), err, c.want[1:2])
		}
	}
}
