package workspace_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// export answers the bundle of dep (folder 0: all of it) as p sees it.
func (f *fixture) export(p *identity.Principal, dep, folder int64) []byte {
	f.t.Helper()
	var buf bytes.Buffer
	if _, err := f.svc.Export(f.ctx, p, dep, folder, &buf); err != nil {
		f.t.Fatalf("export of deployment %d folder %d: %v", dep, folder, err)
	}
	return buf.Bytes()
}

// importBody is an import request body for bundle.
func importBody(bundle []byte, dryRun bool, folder int64) string {
	fo := "null"
	if folder != 0 {
		fo = fmt.Sprint(folder)
	}
	return fmt.Sprintf(`{"bundle":%s,"dryRun":%v,"folderId":%s}`, bundle, dryRun, fo)
}

func (f *fixture) importInto(p *identity.Principal, dep int64, body string) workspace.ImportResult {
	f.t.Helper()
	res, err := f.svc.Import(f.ctx, p, dep, workspace.ImportInput{Body: strings.NewReader(body)})
	if err != nil {
		f.t.Fatalf("import into %d: %v", dep, err)
	}
	return res
}

// bundleContent is a bundle without its source (the ids of where it came from).
func bundleContent(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("bundle is not JSON: %v\n%.500s", err, b)
	}
	delete(m, "source")
	return m
}

func actions(res workspace.ImportResult) map[string]int { return res.Counts() }

// liveItems counts the live items of dep.
func (f *fixture) liveItems(dep int64) int {
	f.t.Helper()
	n := 0
	for _, typ := range []workspace.ItemType{workspace.TypeFolder, workspace.TypeReport, workspace.TypeWorkbook} {
		got, err := f.store.Search(f.ctx, dep, workspace.SearchQuery{Type: typ, Limit: 1 << 30})
		if err != nil {
			f.t.Fatal(err)
		}
		n += len(got)
	}
	return n
}

// stamps are every live item of dep by id: when and by whom it was last written.
func (f *fixture) stamps(dep int64) map[int64]string {
	f.t.Helper()
	out := map[int64]string{}
	for _, typ := range []workspace.ItemType{workspace.TypeFolder, workspace.TypeReport, workspace.TypeWorkbook} {
		got, err := f.store.Search(f.ctx, dep, workspace.SearchQuery{Type: typ, Limit: 1 << 30})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, d := range got {
			out[d.ID] = fmt.Sprint(d.UpdatedAt.UnixNano(), "/", d.Version, "/", d.Key)
		}
	}
	return out
}

// seedDeployment fills dep with about n items: folders two levels deep with grants and
// embed grants, reports, and workbooks whose drafts name reports, some of them published
// (with allowEmbed off on some) and some with embed grants; and grants on the root.
func (f *fixture) seedDeployment(dep int64, n int) {
	f.t.Helper()
	svc, ctx := f.svc, f.ctx
	tenant := embedaccess.Grants{Tenants: []embedaccess.TenantEntry{{EmbedTenantName: "acme-corp", Access: embedaccess.Read}}}
	if _, err := svc.PutEmbedAccess(ctx, admin, dep, workspace.EmbedObject{}, embedaccess.Grants{AllEmbedUsers: embedaccess.None}); err != nil {
		f.t.Fatal(err)
	}
	var folders []int64
	for i := 0; len(folders) < n/40; i++ {
		top, err := svc.CreateFolder(ctx, admin, dep, workspace.CreateFolderInput{Name: fmt.Sprint("team ", i)})
		if err != nil {
			f.t.Fatal(err)
		}
		folders = append(folders, top.ID)
		if _, err := svc.SetPermissions(ctx, admin, dep, top.ID, []workspace.Grant{{UserID: ai.User.ID, Level: "edit"}, {UserID: viewer.User.ID, Level: "view"}}); err != nil {
			f.t.Fatal(err)
		}
		if _, err := svc.PutEmbedAccess(ctx, admin, dep, workspace.EmbedObject{Type: workspace.TypeFolder, ID: top.ID}, tenant); err != nil {
			f.t.Fatal(err)
		}
		for j := 0; j < 3; j++ {
			sub, err := svc.CreateFolder(ctx, admin, dep, workspace.CreateFolderInput{Name: fmt.Sprint("area ", j), ParentID: top.ID})
			if err != nil {
				f.t.Fatal(err)
			}
			folders = append(folders, sub.ID)
		}
	}
	var reports []int64
	for i := 0; f.liveCount(len(folders), len(reports), 0) < n*2/5; i++ {
		meta := json.RawMessage(fmt.Sprintf(`{"sql":"select %d","chart":{"type":"bar","n":%d}}`, i, i))
		r, err := svc.CreateItem(ctx, admin, dep, workspace.TypeReport, workspace.CreateItemInput{Name: fmt.Sprint("report ", i%50), FolderID: folders[i%len(folders)], Meta: meta})
		if err != nil {
			f.t.Fatal(err)
		}
		reports = append(reports, r.ID)
	}
	for i := 0; f.liveCount(len(folders), len(reports), i) < n; i++ {
		folder := folders[(i*7)%len(folders)]
		if i%10 == 0 {
			folder = 0
		}
		w, err := svc.CreateItem(ctx, admin, dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: fmt.Sprint("board ", i%30), FolderID: folder,
			Meta: json.RawMessage(`{"theme":"dark"}`), CalculatedFields: json.RawMessage(fmt.Sprintf(`{"margin":"revenue - cost","i":%d}`, i)),
			DashboardDraft: draftNaming(reports[i%len(reports)], reports[(i*3)%len(reports)])})
		if err != nil {
			f.t.Fatal(err)
		}
		if i%3 == 0 {
			off := i%6 == 0
			if _, err := svc.Publish(ctx, admin, dep, w.ID, &off); err != nil {
				f.t.Fatal(err)
			}
		}
		if i%5 == 0 {
			if _, err := svc.PutEmbedAccess(ctx, admin, dep, workspace.EmbedObject{Type: workspace.TypeWorkbook, ID: w.ID}, tenant); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

func (f *fixture) liveCount(folders, reports, workbooks int) int {
	return folders + reports + workbooks
}

// TestExportImportRoundTrip: a deployment of 2,000 items with folder grants and embed
// grants, exported and imported into an empty deployment, exports the same bundle (the
// source's ids aside); importing the same bundle again is all unchanged and writes
// nothing; so is a second import into the source itself.
func TestExportImportRoundTrip(t *testing.T) {
	f := newFixture(t)
	const src, dst = 7, 8
	f.seedDeployment(src, 2000)
	if n := f.liveItems(src); n != 2000 {
		t.Fatalf("seeded %d items, want 2000", n)
	}
	first := f.export(admin, src, 0)

	res := f.importInto(admin, dst, importBody(first, false, 0))
	if c := actions(res); c[workspace.ImportCreate] != 2000 || c[workspace.ImportConflict] != 0 || c[workspace.ImportUpdate] != 1 {
		t.Fatalf("first import: %v (first conflict %+v)", c, firstConflict(res))
	}
	if n := f.liveItems(dst); n != 2000 {
		t.Fatalf("imported %d items, want 2000", n)
	}
	second := f.export(admin, dst, 0)
	if a, b := bundleContent(t, first), bundleContent(t, second); !reflect.DeepEqual(a, b) {
		t.Fatalf("export -> import -> export differs:\n%.800s\n---\n%.800s", diffLine(first, second), diffLine(second, first))
	}

	before := f.stamps(dst)
	again := f.importInto(admin, dst, importBody(first, false, 0))
	if c := actions(again); c[workspace.ImportUnchanged] != 2001 {
		t.Fatalf("second import: %v, want all 2001 unchanged (first other %+v)", c, firstNot(again, workspace.ImportUnchanged))
	}
	if after := f.stamps(dst); !reflect.DeepEqual(before, after) {
		t.Fatal("an unchanged import wrote items (updatedAt or version moved)")
	}
	// Into the source itself: its items have no keys, so the bundle's generated keys do
	// not match them; the source's keys, once an export was imported, do.
	third := f.export(admin, dst, 0)
	if !bytes.Equal(second[bytes.Index(second, []byte(`"items"`)):], third[bytes.Index(third, []byte(`"items"`)):]) {
		t.Fatal("two exports of the same deployment differ")
	}
}

func firstConflict(res workspace.ImportResult) *workspace.ImportEntry {
	return firstNotIn(res, "", workspace.ImportConflict)
}

func firstNot(res workspace.ImportResult, action string) *workspace.ImportEntry {
	return firstNotIn(res, action, "")
}

func firstNotIn(res workspace.ImportResult, not, is string) *workspace.ImportEntry {
	for i, e := range res.Items {
		if (is != "" && e.Action == is) || (not != "" && e.Action != not) {
			return &res.Items[i]
		}
	}
	return nil
}

// diffLine is the first line of a where it differs from b.
func diffLine(a, b []byte) []byte {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range la {
		if i >= len(lb) || !bytes.Equal(la[i], lb[i]) {
			return la[i]
		}
	}
	return nil
}

// TestImportDryRunAppliesNothing: a dry run answers the plan an import would follow and
// writes nothing; the import then does what the plan said.
func TestImportDryRunAppliesNothing(t *testing.T) {
	f := newFixture(t)
	f.seedDeployment(7, 120)
	b := f.export(admin, 7, 0)
	plan := f.importInto(admin, 9, importBody(b, true, 0))
	if !plan.DryRun || actions(plan)[workspace.ImportCreate] != 120 {
		t.Fatalf("plan %v", actions(plan))
	}
	if n := f.liveItems(9); n != 0 {
		t.Fatalf("a dry run created %d items", n)
	}
	if g, _ := f.store.RootEmbedAccess(f.ctx, 9); !g.Empty() {
		t.Fatalf("a dry run set the root's embed grants: %+v", g)
	}
	done := f.importInto(admin, 9, importBody(b, false, 0))
	for i, e := range done.Items {
		if p := plan.Items[i]; p.Type != e.Type || p.Key != e.Key || p.Action != e.Action {
			t.Fatalf("item %d: planned %+v, done %+v", i, p, e)
		}
	}
	// A change in the bundle plans an update of that item only, and a dry run of it
	// changes nothing.
	changed := bytes.Replace(b, []byte(`"name":"team 0"`), []byte(`"name":"team zero"`), 1)
	before := f.stamps(9)
	plan = f.importInto(admin, 9, importBody(changed, true, 0))
	if c := actions(plan); c[workspace.ImportUpdate] != 1 || c[workspace.ImportUnchanged] != 120 {
		t.Fatalf("plan of one change: %v", c)
	}
	if !reflect.DeepEqual(before, f.stamps(9)) {
		t.Fatal("a dry run of an update wrote")
	}
	res := f.importInto(admin, 9, importBody(changed, false, 0))
	if c := actions(res); c[workspace.ImportUpdate] != 1 {
		t.Fatalf("import of one change: %v", c)
	}
}

// TestImportRefusesBadBundles: a bundle of another format, with a cycle, a dangling
// reference, a duplicate key, a key outside the grammar, an id where a key belongs, or
// over a bound is a 4xx that names the item and why, and nothing is written.
func TestImportRefusesBadBundles(t *testing.T) {
	f := newFixture(t)
	f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{Limits: workspace.Limits{ImportItems: 5, ImportBytes: 8 << 10, MetaBytes: 64}})
	const head = `{"format":"analytics-workspace-bundle/1","source":{"accountId":100,"deploymentId":1,"folderId":null},"items":[`
	folder := func(key, parent string) string {
		p := "null"
		if parent != "" {
			p = `"` + parent + `"`
		}
		return fmt.Sprintf(`{"type":"FOLDER","key":%q,"folderKey":%s,"name":"f","position":1}`, key, p)
	}
	bundle := func(items ...string) string { return head + strings.Join(items, ",") + `]}` }
	good := folder("a", "")
	cases := []struct {
		name, bundle string
		kind         errs.Kind
		code, says   string
	}{
		{"import-400-another-format", `{"format":"analytics-workspace-bundle/2","items":[]}`, errs.Invalid, errs.CodeBundleFormat, `"analytics-workspace-bundle/2" is not supported`},
		{"import-400-format-not-first", `{"items":[],"format":"analytics-workspace-bundle/1"}`, errs.Invalid, errs.CodeBundleFormat, "must begin with its format"},
		{"import-400-cycle", bundle(good, folder("x", "y"), folder("y", "x")), errs.Invalid, errs.CodeFolderCycle, `"x" -> "y" -> "x"`},
		{"import-400-parent-after-child", bundle(folder("c", "p"), folder("p", "")), errs.Invalid, errs.CodeBundleInvalid, `bundle.items[0] (FOLDER "c"): its folder "p" comes later`},
		{"import-400-dangling-parent", bundle(good, folder("b", "nowhere")), errs.Invalid, errs.CodeBundleInvalid, `bundle.items[1] (FOLDER "b"): folderKey "nowhere" names no folder`},
		{"import-400-dangling-item-folder", bundle(good, `{"type":"REPORT","key":"r","folderKey":"gone","name":"r","position":0}`), errs.Invalid, errs.CodeBundleInvalid, `bundle.items[1]: folderKey "gone" names no folder`},
		{"import-400-dangling-report-key", bundle(`{"type":"WORKBOOK","key":"w","folderKey":null,"name":"w","position":0,"dashboardDraft":{"widgets":[{"id":"a","type":"CHART","position":{"x":0,"y":0,"w":1,"h":1},"config":{"reportKey":"missing"}}]}}`),
			errs.Invalid, errs.CodeBundleInvalid, `reportKey "missing" names no report`},
		{"import-400-report-by-id", bundle(`{"type":"WORKBOOK","key":"w","folderKey":null,"name":"w","position":0,"dashboardDraft":{"widgets":[{"id":"a","type":"CHART","position":{"x":0,"y":0,"w":1,"h":1},"config":{"reportId":12}}]}}`),
			errs.Invalid, errs.CodeBundleInvalid, "never by id"},
		{"import-400-duplicate-key", bundle(good, folder("a", "")), errs.Invalid, errs.CodeBundleInvalid, `bundle.items[1] (FOLDER "a"): the key is listed twice`},
		{"import-400-key-grammar", bundle(folder("Not A Key", "")), errs.Invalid, errs.CodeBundleInvalid, `bundle.items[0] (FOLDER "Not A Key"): key`},
		{"import-400-type", bundle(`{"type":"DASHBOARD","key":"d","name":"d"}`), errs.Invalid, errs.CodeBundleInvalid, "bundle.items[0].type must be one of"},
		{"import-400-unknown-field", bundle(`{"type":"FOLDER","key":"d","name":"d","id":3}`), errs.Invalid, "", `bundle.items[0]: unknown field "id"`},
		{"import-400-too-deep", bundle(folder("l1", ""), folder("l2", "l1"), folder("l3", "l2"), folder("l4", "l3"), folder("l5", "l4")), errs.Invalid, "", ""},
		{"import-413-too-many-items", bundle(good, folder("b", ""), folder("c", ""), folder("d", ""), folder("e", ""), folder("f", "")), errs.TooLarge, "", "more than 5 items"},
		{"import-413-meta-over-limit", bundle(`{"type":"REPORT","key":"r","name":"r","meta":{"sql":"` + strings.Repeat("x", 100) + `"}}`), errs.TooLarge, "", "meta is"},
		{"import-413-body-over-limit", bundle(`{"type":"REPORT","key":"r","name":"` + strings.Repeat("x", 9000) + `"}`), errs.TooLarge, "", "larger than the limit of 8192 bytes"},
		{"import-400-truncated", head + good, errs.Invalid, "", "malformed JSON"},
		{"import-400-no-items", `{"format":"analytics-workspace-bundle/1"}`, errs.Invalid, "", "bundle.items is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "import-400-too-deep" {
				// Five levels under a folder at level 4 pass the bundle but not the target.
				parent := int64(0)
				for i := 0; i < 4; i++ {
					parent = f.folder(admin, fmt.Sprint("d", i), parent)
				}
				before := f.liveItems(7)
				_, err := f.svc.Import(f.ctx, admin, 7, workspace.ImportInput{Body: strings.NewReader(fmt.Sprintf(`{"bundle":%s,"folderId":%d}`, c.bundle, parent))})
				wantErr(t, err, errs.Invalid, errs.CodeDepthLimit)
				if f.liveItems(7) != before {
					t.Fatal("a refused import wrote")
				}
				return
			}
			before := f.liveItems(7)
			_, err := f.svc.Import(f.ctx, admin, 7, workspace.ImportInput{Body: strings.NewReader(`{"dryRun":false,"bundle":` + c.bundle + `}`)})
			e := wantErr(t, err, c.kind, c.code)
			if !strings.Contains(e.Message, c.says) {
				t.Fatalf("message %q does not say %q", e.Message, c.says)
			}
			if n := f.liveItems(7); n != before {
				t.Fatalf("a refused import wrote: %d items, %d before", n, before)
			}
		})
	}
}

// TestImportPerItemConflicts: items the caller may not create or change are conflicts
// with the error their own request would get (an item whose folder or report was not
// imported too), and the others are applied; folder grants
// of a bundle from another account are dropped, and the answer says so.
func TestImportPerItemConflicts(t *testing.T) {
	f := newFixture(t)
	locked := f.folder(admin, "locked", 0)
	open := f.folder(admin, "open", 0)
	f.grant(open, workspace.Grant{UserID: ai.User.ID, Level: "edit"})
	f.grant(locked, workspace.Grant{UserID: ai.User.ID, Level: "view"})
	const head = `{"format":"analytics-workspace-bundle/1","source":{"accountId":999,"deploymentId":1,"folderId":null},"items":[`
	b := head + `{"type":"FOLDER","key":"mine","folderKey":null,"name":"mine","position":1,"grants":[{"userId":5,"level":"view"}]},` +
		`{"type":"REPORT","key":"r1","folderKey":"mine","name":"r1","position":0},` +
		`{"type":"REPORT","key":"r2","folderKey":null,"name":"r2","position":0},` +
		`{"type":"WORKBOOK","key":"wb","folderKey":null,"name":"wb","position":0,"dashboardDraft":{"widgets":[{"id":"a","type":"CHART","position":{"x":0,"y":0,"w":1,"h":1},"config":{"reportKey":"r1"}}]}}]}`
	res := f.importInto(ai, 7, importBody([]byte(b), false, locked))
	if !res.GrantsDropped {
		t.Fatal("grants of another account's bundle not reported dropped")
	}
	for _, e := range res.Items {
		if e.Action != workspace.ImportConflict {
			t.Fatalf("%+v: want a conflict (no edit access to the destination)", e)
		}
		if e.Key == "mine" {
			wantErr(t, e.Err, errs.Forbidden, "")
		}
		if e.Key == "r1" && !strings.Contains(e.Err.Error(), `folder "mine" was not imported`) {
			t.Fatalf("r1: %v", e.Err)
		}
		if e.Key == "wb" && !strings.Contains(e.Err.Error(), `report "r1" was not imported`) {
			t.Fatalf("wb: %v", e.Err)
		}
	}
	res = f.importInto(ai, 7, importBody([]byte(b), false, open))
	if c := actions(res); c[workspace.ImportCreate] != 4 {
		t.Fatalf("into a folder the caller may edit: %v (%+v)", c, firstConflict(res))
	}
	g, err := f.svc.GetPermissions(f.ctx, admin, 7, res.Items[0].ID)
	if err != nil || len(g) != 0 {
		t.Fatalf("grants of another account applied: %v %v", g, err)
	}
}

// TestExportOnlyWhatTheCallerReads: a viewer's export holds what it may view, without
// grants (it manages nothing); a folder's export holds that subtree only.
func TestExportOnlyWhatTheCallerReads(t *testing.T) {
	f := newFixture(t)
	shared := f.folder(admin, "shared", 0)
	private := f.folder(admin, "private", 0)
	f.grant(shared, workspace.Grant{UserID: viewer.User.ID, Level: "view"})
	f.item(admin, workspace.TypeReport, "visible", shared)
	f.item(admin, workspace.TypeReport, "hidden", private)
	var b struct {
		Items []workspace.BundleItem `json:"items"`
		Root  *embedaccess.Grants    `json:"rootEmbedAccess"`
	}
	if err := json.Unmarshal(f.export(viewer, 7, 0), &b); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range b.Items {
		names = append(names, it.Name)
		if it.Grants != nil || it.EmbedAccess != nil {
			t.Fatalf("a viewer's export holds grants: %+v", it)
		}
	}
	if fmt.Sprint(names) != "[shared visible]" || b.Root != nil {
		t.Fatalf("viewer's export: %v root %v", names, b.Root)
	}
	if err := json.Unmarshal(f.export(admin, 7, private), &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Items) != 2 || b.Items[0].Name != "private" || b.Items[0].FolderKey != nil || b.Items[1].Name != "hidden" {
		t.Fatalf("a folder's export: %+v", b.Items)
	}
	var buf bytes.Buffer
	_, err := f.svc.Export(f.ctx, viewer, 7, private, &buf)
	wantErr(t, err, errs.Forbidden, "")
	if buf.Len() != 0 {
		t.Fatal("a refused export wrote")
	}
}
