package workspace_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

func TestCreateFolderRules(t *testing.T) {
	create := func(f *fixture, p *identity.Principal, name string, parent int64) (workspace.Folder, error) {
		return f.svc.CreateFolder(f.ctx, p, f.dep, workspace.CreateFolderInput{Name: name, ParentID: parent})
	}
	t.Run("create-folder-200-at-the-root-after-its-siblings", func(t *testing.T) {
		f := newFixture(t)
		first := f.folder(ai, "first", 0)
		fo, err := create(f, ai, "  second  ", 0)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := f.svc.GetFolder(f.ctx, ai, f.dep, first)
		if fo.Name != "second" || fo.ParentID != nil || len(fo.FolderPath) != 0 || fo.Position != got.Position+1 ||
			fo.CreatedBy != ai.User.ID || fo.User == nil || fo.User.Email != ai.User.Email || fo.IsFavorite == nil || *fo.IsFavorite {
			t.Fatalf("folder %+v (first at position %v)", fo, got.Position)
		}
	})
	t.Run("create-folder-400-depth-limit", func(t *testing.T) {
		f := newFixture(t)
		parent := int64(0)
		for i := 1; i <= workspace.MaxDepth; i++ {
			parent = f.folder(dev, fmt.Sprintf("level-%d", i), parent)
		}
		_, err := create(f, dev, "level-9", parent)
		if e := wantErr(t, err, errs.Invalid, errs.CodeDepthLimit); !strings.Contains(e.Message, "8 levels") {
			t.Fatalf("message %q", e.Message)
		}
	})
	for _, c := range []struct {
		name string
		p    *identity.Principal
		fo   string
		kind errs.Kind
	}{
		{"create-folder-403-viewer", viewer, "x", errs.Forbidden},
		{"create-folder-400-blank-name", ai, " ", errs.Invalid},
		{"create-folder-400-name-too-long", ai, strings.Repeat("é", workspace.MaxNameLength+1), errs.Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := create(newFixture(t), c.p, c.fo, 0)
			wantErr(t, err, c.kind, "")
		})
	}
	t.Run("create-folder-404-parent-missing-or-elsewhere", func(t *testing.T) {
		f := newFixture(t)
		elsewhere, err := f.svc.CreateFolder(f.ctx, admin, f.dep+1, workspace.CreateFolderInput{Name: "other deployment"})
		if err != nil {
			t.Fatal(err)
		}
		for _, parent := range []int64{999, elsewhere.ID} {
			_, err := create(f, admin, "x", parent)
			if e := wantErr(t, err, errs.NotFound, ""); e.Message != fmt.Sprintf("folder %d not found", parent) {
				t.Fatalf("message %q", e.Message)
			}
		}
	})
	t.Run("create-folder-400-item-limit", func(t *testing.T) {
		f := newFixture(t)
		f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{Limits: workspace.Limits{ItemsPerDeployment: 2}})
		f.folder(ai, "a", 0)
		f.item(ai, workspace.TypeReport, "r", 0)
		_, err := create(f, ai, "c", 0)
		wantErr(t, err, errs.Invalid, errs.CodeItemLimit)
	})
}

// TestAccessIsInherited: grants and creatorships pass down a folder's subtree, a viewer
// never writes, and a folder nobody granted is private.
func TestAccessIsInherited(t *testing.T) {
	f := newFixture(t)
	parent := f.folder(admin, "team", 0)
	child := f.folder(admin, "child", parent)
	if _, err := f.svc.CreateFolder(f.ctx, ai, f.dep, workspace.CreateFolderInput{Name: "x", ParentID: child}); err == nil {
		t.Fatal("no grant: the folder is private, yet ai created in it")
	}
	f.grant(parent, workspace.Grant{UserID: ai.User.ID, Level: "view"}, workspace.Grant{UserID: viewer.User.ID, Level: "manage"})
	if _, err := f.svc.GetFolder(f.ctx, ai, f.dep, child); err != nil {
		t.Fatalf("view on the parent reaches the child: %v", err)
	}
	_, err := f.svc.CreateFolder(f.ctx, ai, f.dep, workspace.CreateFolderInput{Name: "x", ParentID: child})
	wantErr(t, err, errs.Forbidden, "")
	f.grant(parent, workspace.Grant{UserID: ai.User.ID, Level: "edit"}, workspace.Grant{UserID: viewer.User.ID, Level: "manage"})
	mine := f.folder(ai, "mine", child)
	// The creator manages their folder and its subtree, even what others create in it.
	theirs := f.folder(admin, "theirs", mine)
	if _, err := f.svc.GetPermissions(f.ctx, ai, f.dep, theirs); err != nil {
		t.Fatalf("the creator of an ancestor manages: %v", err)
	}
	if _, err := f.svc.GetPermissions(f.ctx, ai, f.dep, child); err == nil {
		t.Fatal("edit is not manage")
	}
	// A viewer's manage grant is capped at view.
	if _, err := f.svc.GetFolder(f.ctx, viewer, f.dep, child); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.UpdateFolder(f.ctx, viewer, f.dep, child, workspace.UpdateFolderInput{Position: new(float64)})
	wantErr(t, err, errs.Forbidden, "")
	// The listing of the root shows ai only what ai can view.
	f.folder(admin, "admin only", 0)
	page, err := f.svc.List(f.ctx, ai, f.dep, 0, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ID != parent {
		t.Fatalf("ai's root listing: %+v", page.Items)
	}
}

func TestSetPermissionsValidatesEveryGrant(t *testing.T) {
	f := newFixture(t)
	folder := f.folder(ai, "f", 0)
	for _, c := range []struct {
		name   string
		grants []workspace.Grant
		msg    string
	}{
		{"user-id", []workspace.Grant{{UserID: 0, Level: "view"}}, "grants[0].userId must be a positive integer"},
		{"level", []workspace.Grant{{UserID: 5, Level: "own"}}, `grants[0].level must be one of view, edit, manage, not "own"`},
		{"twice", []workspace.Grant{{UserID: 5, Level: "view"}, {UserID: 5, Level: "edit"}}, "grants[1].userId 5 is listed twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.svc.SetPermissions(f.ctx, ai, f.dep, folder, c.grants)
			if e := wantErr(t, err, errs.Invalid, ""); e.Message != c.msg {
				t.Fatalf("message %q, want %q", e.Message, c.msg)
			}
		})
	}
	got, err := f.svc.SetPermissions(f.ctx, ai, f.dep, folder, []workspace.Grant{{UserID: 9, Level: "edit"}, {UserID: 5, Level: "view"}})
	if err != nil || len(got) != 2 || got[0].UserID != 5 {
		t.Fatalf("grants %v (%v), want them by user id", got, err)
	}
	// Grants are read by every request under the folder: a caller cannot store any number.
	many := make([]workspace.Grant, workspace.DefaultLimits.Grants+1)
	for i := range many {
		many[i] = workspace.Grant{UserID: int64(i + 1), Level: "view"}
	}
	_, err = f.svc.SetPermissions(f.ctx, ai, f.dep, folder, many)
	if e := wantErr(t, err, errs.Invalid, ""); e.Message != fmt.Sprintf("a folder holds at most %d grants, not %d", workspace.DefaultLimits.Grants, workspace.DefaultLimits.Grants+1) {
		t.Fatalf("message %q", e.Message)
	}
	if kept, err := f.svc.GetPermissions(f.ctx, ai, f.dep, folder); err != nil || len(kept) != 2 {
		t.Fatalf("a refused change touched the grants: %v (%v)", kept, err)
	}
	if got, err := f.svc.SetPermissions(f.ctx, ai, f.dep, folder, many[:workspace.DefaultLimits.Grants]); err != nil || len(got) != workspace.DefaultLimits.Grants {
		t.Fatalf("%d grants, the limit: %d kept (%v)", workspace.DefaultLimits.Grants, len(got), err)
	}
}

func TestDeleteFolder(t *testing.T) {
	f := newFixture(t)
	folder := f.folder(admin, "f", 0)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", folder)
	err := f.svc.DeleteFolder(f.ctx, admin, f.dep, folder)
	wantErr(t, err, errs.Conflict, errs.CodeFolderNotEmpty)
	if _, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeWorkbook, wb), 0); err != nil {
		t.Fatal(err)
	}
	// A request putting something into the folder holds a lease: the delete waits.
	now := time.Now()
	if ok, err := f.store.LeaseFolder(f.ctx, f.dep, folder, now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	err = f.svc.DeleteFolder(f.ctx, admin, f.dep, folder)
	if e := wantErr(t, err, errs.Conflict, ""); !strings.Contains(e.Message, "receiving items") {
		t.Fatalf("message %q", e.Message)
	}
	if err := f.store.ReleaseFolder(f.ctx, f.dep, folder); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteFolder(f.ctx, admin, f.dep, folder); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.GetFolder(f.ctx, admin, f.dep, folder)
	wantErr(t, err, errs.NotFound, "")
	_, err = f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeReport, workspace.CreateItemInput{Name: "late", FolderID: folder})
	wantErr(t, err, errs.NotFound, "")
}

// TestValidationMessagesAreDeterministic: with several fields wrong, the same one is
// named every time.
func TestValidationMessagesAreDeterministic(t *testing.T) {
	one := int64(1)
	cfg := &workspace.DashboardConfig{Widgets: []workspace.DashboardWidget{{ID: new(string), Type: new(string)}}}
	*cfg.Widgets[0].ID, *cfg.Widgets[0].Type = "w", "TEXT"
	cfg.Widgets[0].Position = &workspace.WidgetPosition{X: &one, Y: &one, W: &one, H: &one}
	cfg.Widgets[0].ResponsiveLayouts = &workspace.ResponsiveLayouts{LG: &workspace.WidgetPosition{X: &one}, SM: &workspace.WidgetPosition{}, XXS: &workspace.WidgetPosition{}}
	for range 50 {
		err := cfg.Validate("dashboardDraft")
		if e := wantErr(t, err, errs.Invalid, ""); e.Message != "dashboardDraft.widgets[0].responsiveLayouts.lg.y is required" {
			t.Fatalf("message %q", e.Message)
		}
	}
	for _, c := range []struct {
		in   string
		want workspace.Level
		ok   bool
	}{{"view", workspace.LevelView, true}, {"edit", workspace.LevelEdit, true}, {"manage", workspace.LevelManage, true}, {"", workspace.LevelNone, false}, {"own", workspace.LevelNone, false}} {
		if got, ok := workspace.ParseLevel(c.in); got != c.want || ok != c.ok {
			t.Errorf("ParseLevel(%q) = %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestFolderPathStartsBelowFoldersTheCallerCannotView: a viewer granted a subfolder of a
// private folder sees paths that start at the granted folder, wherever a path is shown
// (the folder, an item, a listing, a search); the private folder's name and id appear in
// none of them, and an admin still sees the whole path from the root.
func TestFolderPathStartsBelowFoldersTheCallerCannotView(t *testing.T) {
	f := newFixture(t)
	private := f.folder(admin, "private-top", 0)
	granted := f.folder(admin, "granted", private)
	inner := f.folder(admin, "inner", granted)
	wb := f.item(admin, workspace.TypeWorkbook, "board", inner)
	f.grant(granted, workspace.Grant{UserID: viewer.User.ID, Level: "view"})
	ids := func(path []workspace.FolderPathEntry) []int64 {
		out := []int64{}
		for _, e := range path {
			out = append(out, e.ID)
		}
		return out
	}
	check := func(what string, got []workspace.FolderPathEntry, want ...int64) {
		t.Helper()
		if fmt.Sprint(ids(got)) != fmt.Sprint(append([]int64{}, want...)) {
			t.Fatalf("%s: folderPath %+v, want the ids %v", what, got, want)
		}
		for _, e := range got {
			if e.ID == private || e.Name == "private-top" {
				t.Fatalf("%s: folderPath names the private folder: %+v", what, got)
			}
		}
	}
	g, err := f.svc.GetFolder(f.ctx, viewer, f.dep, granted)
	if err != nil {
		t.Fatal(err)
	}
	check("the granted folder", g.FolderPath)
	in, err := f.svc.GetFolder(f.ctx, viewer, f.dep, inner)
	if err != nil {
		t.Fatal(err)
	}
	check("a folder inside it", in.FolderPath, granted)
	w, err := f.svc.GetItem(f.ctx, viewer, f.dep, workspace.TypeWorkbook, wb)
	if err != nil {
		t.Fatal(err)
	}
	check("a workbook two levels below it", w.FolderPath, granted, inner)
	page, err := f.svc.List(f.ctx, viewer, f.dep, granted, 10, "")
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("listing: %+v %v", page, err)
	}
	check("a listed child", page.Items[0].FolderPath, granted)
	hits, err := f.svc.Search(f.ctx, viewer, f.dep, workspace.SearchInput{Q: "board", First: 10})
	if err != nil || len(hits.Items) != 1 {
		t.Fatalf("search: %+v %v", hits, err)
	}
	check("a search hit", hits.Items[0].FolderPath, granted, inner)
	full, err := f.svc.GetItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, wb)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(full.FolderPath); fmt.Sprint(got) != fmt.Sprint([]int64{private, granted, inner}) {
		t.Fatalf("the admin's folderPath %v, want the whole path from the root", got)
	}
}
