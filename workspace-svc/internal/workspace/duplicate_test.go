package workspace_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/store/memstore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestDeepDuplicateRewiresReportIDs: a deep duplicate copies the reports the draft names
// and the copy's widgets name the copies; a shallow one keeps naming the originals. The
// copies are unpublished and named "<name> (copy)" unless a name is given.
func TestDeepDuplicateRewiresReportIDs(t *testing.T) {
	f := newPromotionFixture(t)
	wb, reports := f.source(ai)
	folder := f.folder(ai, "Copies", 0)
	deep, err := f.svc.DuplicateWorkbook(f.ctx, ai, f.dep, wb, workspace.DuplicateInput{Deep: true, FolderSet: true, FolderID: folder})
	if err != nil {
		t.Fatal(err)
	}
	if deep.Workbook.Name != "Board (copy)" || deep.Workbook.PublishedDashboard != nil || *deep.Workbook.FolderID != folder || len(deep.Reports) != 2 ||
		deep.Created != (workspace.DuplicateCounts{Workbooks: 1, Reports: 2}) {
		t.Fatalf("deep duplicate %+v", deep)
	}
	for i, w := range deep.Workbook.DashboardDraft.Widgets {
		id := int64(w.Config["reportId"].(float64))
		if id != deep.Reports[i].ID || id == reports[i] || !strings.Contains(string(deep.Reports[i].Meta), "select") {
			t.Fatalf("widget %d of the deep copy names %d, want the copy %d of %d", i, id, deep.Reports[i].ID, reports[i])
		}
	}
	name := "Shallow"
	shallow, err := f.svc.DuplicateWorkbook(f.ctx, ai, f.dep, wb, workspace.DuplicateInput{Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	if shallow.Workbook.Name != "Shallow" || shallow.Workbook.FolderID != nil || len(shallow.Reports) != 0 {
		t.Fatalf("shallow duplicate %+v", shallow)
	}
	for i, w := range shallow.Workbook.DashboardDraft.Widgets {
		if id := int64(w.Config["reportId"].(float64)); id != reports[i] {
			t.Fatalf("widget %d of the shallow copy names %d, want the original %d", i, id, reports[i])
		}
	}
	_, err = f.svc.DuplicateWorkbook(f.ctx, viewer, f.dep, wb, workspace.DuplicateInput{})
	wantErr(t, err, errs.Forbidden, "")
}

// TestFolderDuplicateCopiesTheSubtreeWithinItsBound: a folder's duplicate copies its
// folders, workbooks and reports (a workbook naming a report copied with it names the
// copy); a subtree over DuplicateItems is 400 duplicate_limit naming the limit, with
// nothing created.
func TestFolderDuplicateCopiesTheSubtreeWithinItsBound(t *testing.T) {
	f := newPromotionFixture(t)
	f.svc = workspace.NewService(workspace.Ports{Store: f.store, Deployments: deployments{}}, workspace.Options{Limits: workspace.Limits{DuplicateItems: 5}})
	top := f.folder(ai, "Top", 0)
	sub := f.folder(ai, "Sub", top)
	rep, err := f.svc.CreateItem(f.ctx, ai, f.dep, workspace.TypeReport, workspace.CreateItemInput{Name: "R", FolderID: top, Meta: json.RawMessage(`{"q":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "W", FolderID: sub, DashboardDraft: draftNaming(rep.ID)}); err != nil {
		t.Fatal(err)
	}
	dup, err := f.svc.DuplicateFolder(f.ctx, ai, f.dep, top, workspace.DuplicateInput{})
	if err != nil {
		t.Fatal(err)
	}
	if dup.Folder.Name != "Top (copy)" || dup.Folder.ParentID != nil || dup.Created != (workspace.DuplicateCounts{Folders: 2, Workbooks: 1, Reports: 1}) {
		t.Fatalf("duplicate %+v", dup)
	}
	subs, err := f.svc.List(f.ctx, ai, f.dep, dup.Folder.ID, 50, "")
	if err != nil || len(subs.Items) != 2 {
		t.Fatalf("copy's children %+v %v", subs.Items, err)
	}
	var subCopy, repCopy int64
	for _, it := range subs.Items {
		switch it.Type {
		case workspace.TypeFolder:
			subCopy = it.ID
		case workspace.TypeReport:
			repCopy = it.ID
		}
	}
	inner, err := f.svc.List(f.ctx, ai, f.dep, subCopy, 50, "")
	if err != nil || len(inner.Items) != 1 {
		t.Fatalf("sub copy's children %+v %v", inner.Items, err)
	}
	w, err := f.svc.GetItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, inner.Items[0].ID)
	if err != nil || int64(w.DashboardDraft.Widgets[0].Config["reportId"].(float64)) != repCopy || repCopy == 0 {
		t.Fatalf("workbook copy %+v %v names %v, want the report copy %d", w.DashboardDraft, err, w.DashboardDraft.Widgets[0].Config, repCopy)
	}
	// Top, Sub, R, W and two more reports: 6 items, over 5.
	for _, n := range []string{"R2", "R3"} {
		if _, err := f.svc.CreateItem(f.ctx, ai, f.dep, workspace.TypeReport, workspace.CreateItemInput{Name: n, FolderID: top}); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := f.svc.List(f.ctx, ai, f.dep, 0, 50, "")
	_, err = f.svc.DuplicateFolder(f.ctx, ai, f.dep, top, workspace.DuplicateInput{})
	if e := wantErr(t, err, errs.Invalid, errs.CodeDuplicateLimit); !strings.Contains(e.Message, "limit of 5 of one duplicate") {
		t.Fatalf("message %q", e.Message)
	}
	after, _ := f.svc.List(f.ctx, ai, f.dep, 0, 50, "")
	if len(after.Items) != len(before.Items) {
		t.Fatalf("a refused duplicate created items: %d at the root, then %d", len(before.Items), len(after.Items))
	}
}

// TestDuplicateTakesAnItemSlotPerCopy: a deployment at its item limit refuses the
// duplicate (item_limit).
func TestDuplicateTakesAnItemSlotPerCopy(t *testing.T) {
	store := memstore.New()
	f := newFixture(t)
	f.store = store
	f.svc = workspace.NewService(workspace.Ports{Store: store}, workspace.Options{Limits: workspace.Limits{ItemsPerDeployment: 2}})
	wb := f.item(ai, workspace.TypeWorkbook, "W", 0)
	if _, err := f.svc.DuplicateWorkbook(f.ctx, ai, f.dep, wb, workspace.DuplicateInput{}); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.DuplicateWorkbook(f.ctx, ai, f.dep, wb, workspace.DuplicateInput{})
	wantErr(t, err, errs.Invalid, errs.CodeItemLimit)
}
