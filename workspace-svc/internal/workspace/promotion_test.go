package workspace_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/store/memstore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// deployments is the identity store's answer in tests: deployments 7, 8 and 9 are
// account 100's, 50 is account 200's.
type deployments map[int64]int64

func (d deployments) Deployment(_ context.Context, id int64) (workspace.DeploymentInfo, error) {
	acct, ok := d[id]
	if !ok {
		return workspace.DeploymentInfo{}, workspace.ErrNoSuchDeployment
	}
	return workspace.DeploymentInfo{ID: id, AccountID: acct}, nil
}

func newPromotionFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.store = memstore.New()
	f.svc = workspace.NewService(workspace.Ports{Store: f.store, Deployments: deployments{7: 100, 8: 100, 9: 100, 50: 200}}, workspace.Options{})
	return f
}

// source is a published workbook of deployment 7 naming two reports, with meta.
func (f *fixture) source(p *identity.Principal) (wb int64, reports []int64) {
	f.t.Helper()
	for _, name := range []string{"Revenue", "Churn"} {
		r, err := f.svc.CreateItem(f.ctx, p, f.dep, workspace.TypeReport, workspace.CreateItemInput{Name: name, Meta: json.RawMessage(`{"sql":"select ` + name + `"}`)})
		if err != nil {
			f.t.Fatal(err)
		}
		reports = append(reports, r.ID)
	}
	w, err := f.svc.CreateItem(f.ctx, p, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "Board", Meta: json.RawMessage(`{"a":1}`), DashboardDraft: draftNaming(reports...)})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.svc.Publish(f.ctx, p, f.dep, w.ID, nil); err != nil {
		f.t.Fatal(err)
	}
	return w.ID, reports
}

func (f *fixture) promote(p *identity.Principal, wb, target int64) (workspace.PromotionPreview, workspace.PromotionResult) {
	f.t.Helper()
	pv, err := f.svc.PreviewPromotion(f.ctx, p, f.dep, wb, workspace.PromotionInput{TargetDeploymentID: target})
	if err != nil {
		f.t.Fatalf("preview: %v", err)
	}
	res, err := f.svc.Promote(f.ctx, p, f.dep, wb, workspace.PromotionInput{TargetDeploymentID: target, SourceHash: pv.SourceHash})
	if err != nil {
		f.t.Fatalf("promote: %v", err)
	}
	return pv, res
}

// TestPromotionCopiesAndMapsReports: a first promotion creates the workbook and its
// reports in the target, the widgets' and snapshots' report ids mapped to the target's,
// published there; the target then hashes as the source did.
func TestPromotionCopiesAndMapsReports(t *testing.T) {
	f := newPromotionFixture(t)
	wb, reports := f.source(ai)
	pv, res := f.promote(ai, wb, 8)
	if pv.TargetHash != nil || pv.Workbook.Action != workspace.ActionCreate || len(pv.Reports) != 2 || pv.Reports[0].Action != workspace.ActionCreate || !pv.Publish {
		t.Fatalf("first preview %+v", pv)
	}
	if len(pv.SourceHash) != 64 {
		t.Fatalf("sourceHash %q", pv.SourceHash)
	}
	got := res.Workbook
	if got.DeploymentID != 8 || got.PublishedDashboard == nil || res.Promotion.Result != workspace.PromotionCreated {
		t.Fatalf("promoted %+v", res)
	}
	mapped := map[int64]int64{}
	for _, r := range res.Promotion.Reports {
		mapped[r.SourceID] = r.TargetID
	}
	for i, w := range got.DashboardDraft.Widgets {
		if id := int64(w.Config["reportId"].(float64)); id != mapped[reports[i]] || id == reports[i] {
			t.Fatalf("widget %d names report %d, want the target's %d", i, id, mapped[reports[i]])
		}
	}
	for i, s := range got.PublishedDashboard.ReportSnapshots {
		if s.ReportID != mapped[reports[i]] {
			t.Fatalf("snapshot %d names report %d, want %d", i, s.ReportID, mapped[reports[i]])
		}
		tr, err := f.svc.GetItem(f.ctx, ai, 8, workspace.TypeReport, s.ReportID)
		if err != nil || !strings.Contains(string(tr.Meta), "select") {
			t.Fatalf("target report %d: %+v %v", s.ReportID, tr, err)
		}
	}
	again, err := f.svc.PreviewPromotion(f.ctx, ai, f.dep, wb, workspace.PromotionInput{TargetDeploymentID: 8})
	if err != nil {
		t.Fatal(err)
	}
	if again.TargetHash == nil || *again.TargetHash != again.SourceHash || again.Workbook.Action != workspace.ActionUnchanged || again.Publish ||
		again.Reports[0].Action != workspace.ActionUnchanged {
		t.Fatalf("preview after the promotion %+v, want the target hashing as the source and nothing to change", again)
	}
}

// TestPromotionOfAChangedSourceIs409: a source changed after its preview is refused
// (source_changed) and nothing is written in the target.
func TestPromotionOfAChangedSourceIs409(t *testing.T) {
	f := newPromotionFixture(t)
	wb, _ := f.source(ai)
	pv, err := f.svc.PreviewPromotion(f.ctx, ai, f.dep, wb, workspace.PromotionInput{TargetDeploymentID: 8})
	if err != nil {
		t.Fatal(err)
	}
	name := "Board v2"
	if _, err := f.svc.UpdateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, wb, workspace.UpdateItemInput{Name: &name}); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Promote(f.ctx, ai, f.dep, wb, workspace.PromotionInput{TargetDeploymentID: 8, SourceHash: pv.SourceHash})
	wantErr(t, err, errs.Conflict, errs.CodeSourceChanged)
	page, err := f.svc.List(f.ctx, admin, 8, 0, 50, "")
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("target after a refused promotion: %+v %v, want empty", page.Items, err)
	}
}

// TestSecondPromotionKeepsTheTargetsIdsAndPublicID: a second promotion updates the
// same target workbook and reports (ids, so slugs, kept) and republishes under the same
// publicId, so live embeds keep working; the history lists both, newest first.
func TestSecondPromotionKeepsTheTargetsIdsAndPublicID(t *testing.T) {
	f := newPromotionFixture(t)
	wb, reports := f.source(ai)
	_, first := f.promote(ai, wb, 8)
	meta := json.RawMessage(`{"sql":"select 2"}`)
	if _, err := f.svc.UpdateItem(f.ctx, ai, f.dep, workspace.TypeReport, reports[0], workspace.UpdateItemInput{Meta: meta}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Publish(f.ctx, ai, f.dep, wb, nil); err != nil {
		t.Fatal(err)
	}
	pv, second := f.promote(ai, wb, 8)
	if pv.Reports[0].Action != workspace.ActionUpdate || pv.Reports[1].Action != workspace.ActionUnchanged || !pv.Publish {
		t.Fatalf("second preview %+v", pv)
	}
	a, b := first.Workbook, second.Workbook
	if a.ID != b.ID || *a.Slug != *b.Slug || a.PublishedDashboard.PublicID != b.PublishedDashboard.PublicID ||
		b.PublishedDashboard.VersionNumber != a.PublishedDashboard.VersionNumber+1 || second.Promotion.Result != workspace.PromotionUpdated {
		t.Fatalf("second promotion changed the target's identity:\nfirst  %+v\nsecond %+v", a.PublishedDashboard, b.PublishedDashboard)
	}
	if first.Promotion.Reports[0].TargetID != second.Promotion.Reports[0].TargetID {
		t.Fatalf("report target changed: %+v then %+v", first.Promotion.Reports, second.Promotion.Reports)
	}
	hist, err := f.svc.Promotions(f.ctx, ai, f.dep, wb, 1, "")
	if err != nil || len(hist.Items) != 1 || hist.Items[0].ID != second.Promotion.ID || !hist.PageInfo.HasNextPage {
		t.Fatalf("history page 1: %+v %v", hist, err)
	}
	rest, err := f.svc.Promotions(f.ctx, ai, f.dep, wb, 10, *hist.PageInfo.EndCursor)
	if err != nil || len(rest.Items) != 1 || rest.Items[0].ID != first.Promotion.ID || rest.PageInfo.HasNextPage {
		t.Fatalf("history page 2: %+v %v", rest, err)
	}
}

// TestPromotionTargetIsCheckedLikeThePath: another account's deployment and an unknown
// one are the same 404; a token scoped to other deployments is 403 key_out_of_scope; a
// viewer, an embed token and a folder the caller cannot edit are 403; the source's own
// deployment is 400.
func TestPromotionTargetIsCheckedLikeThePath(t *testing.T) {
	f := newPromotionFixture(t)
	wb, _ := f.source(admin)
	private := f.folderIn(admin, 9, "Private")
	scoped := principal(3, identity.RoleAIBIUser)
	scoped.KeyScope = []int64{7}
	embed := principal(1, identity.RoleAdmin)
	embed.Credential = identity.CredentialEmbed
	var msgs []string
	for _, c := range []struct {
		name string
		p    *identity.Principal
		in   workspace.PromotionInput
		kind errs.Kind
		code string
	}{
		{"another-account-404", admin, workspace.PromotionInput{TargetDeploymentID: 50}, errs.NotFound, ""},
		{"unknown-404", admin, workspace.PromotionInput{TargetDeploymentID: 51}, errs.NotFound, ""},
		{"out-of-scope-403", scoped, workspace.PromotionInput{TargetDeploymentID: 8}, errs.Forbidden, errs.CodeKeyOutOfScope},
		{"viewer-403", viewer, workspace.PromotionInput{TargetDeploymentID: 8}, errs.Forbidden, ""},
		{"embed-token-403", embed, workspace.PromotionInput{TargetDeploymentID: 8}, errs.Forbidden, ""},
		{"folder-without-edit-403", ai, workspace.PromotionInput{TargetDeploymentID: 9, TargetFolderID: private}, errs.Forbidden, ""},
		{"same-deployment-400", admin, workspace.PromotionInput{TargetDeploymentID: 7}, errs.Invalid, ""},
	} {
		_, err := f.svc.PreviewPromotion(f.ctx, c.p, f.dep, wb, c.in)
		e := wantErr(t, err, c.kind, c.code)
		if c.kind == errs.NotFound {
			msgs = append(msgs, strings.ReplaceAll(e.Message, "51", "50"))
		}
		c.in.SourceHash = strings.Repeat("0", 64)
		_, err = f.svc.Promote(f.ctx, c.p, f.dep, wb, c.in)
		wantErr(t, err, c.kind, c.code)
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("another account's deployment answers %q, an unknown one %q: they must not differ", msgs[0], msgs[1])
	}
}

func (f *fixture) folderIn(p *identity.Principal, dep int64, name string) int64 {
	f.t.Helper()
	fo, err := f.svc.CreateFolder(f.ctx, p, dep, workspace.CreateFolderInput{Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	return fo.ID
}

// TestPromotionOfAnUnpublishedWorkbookLeavesTheTargetUnpublished: the draft goes over,
// nothing is published.
func TestPromotionOfAnUnpublishedWorkbookLeavesTheTargetUnpublished(t *testing.T) {
	f := newPromotionFixture(t)
	w, err := f.svc.CreateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "Draft only"})
	if err != nil {
		t.Fatal(err)
	}
	folder := f.folderIn(ai, 8, "Landing")
	pv, err := f.svc.PreviewPromotion(f.ctx, ai, f.dep, w.ID, workspace.PromotionInput{TargetDeploymentID: 8, TargetFolderID: folder})
	if err != nil || pv.Publish {
		t.Fatalf("preview %+v %v", pv, err)
	}
	res, err := f.svc.Promote(f.ctx, ai, f.dep, w.ID, workspace.PromotionInput{TargetDeploymentID: 8, TargetFolderID: folder, SourceHash: pv.SourceHash})
	if err != nil || res.Workbook.PublishedDashboard != nil || *res.Workbook.FolderID != folder || res.Promotion.Published {
		t.Fatalf("promoted %+v %v", res, err)
	}
}

// insertKeyed stores a workbook with a key directly (as a by-key create would).
func (f *fixture) insertKeyed(dep int64, p *identity.Principal, name, key string) int64 {
	f.t.Helper()
	id, err := f.store.NextID(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.store.InsertItem(f.ctx, &workspace.Item{ID: id, DeploymentID: dep, Type: workspace.TypeWorkbook, Name: name, Key: key,
		CreatedBy: p.User.ID, UpdatedBy: p.User.ID}); err != nil {
		f.t.Fatal(err)
	}
	return id
}

// TestPromotionFindsTheTargetByKey: a keyed workbook never promoted before lands on the
// target's workbook holding its key, which keeps its id and key; a duplicate of it has
// no key.
func TestPromotionFindsTheTargetByKey(t *testing.T) {
	f := newPromotionFixture(t)
	src := f.insertKeyed(f.dep, ai, "Sales", "sales-board")
	there := f.insertKeyed(8, ai, "Sales (old)", "sales-board")
	pv, res := f.promote(ai, src, 8)
	if pv.Workbook.Action != workspace.ActionUpdate || pv.Workbook.TargetID == nil || *pv.Workbook.TargetID != there || res.Workbook.ID != there || res.Workbook.Name != "Sales" {
		t.Fatalf("promotion of a keyed workbook: preview %+v, result %+v; want workbook %d updated", pv.Workbook, res.Workbook, there)
	}
	got, err := f.store.Items(f.ctx, 8, []int64{there}, 0)
	if err != nil || got[there].Key != "sales-board" {
		t.Fatalf("target after the promotion: %+v %v, want its key kept", got[there], err)
	}
	dup, err := f.svc.DuplicateWorkbook(f.ctx, ai, f.dep, src, workspace.DuplicateInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.store.Items(f.ctx, f.dep, []int64{dup.Workbook.ID}, 0); err != nil || got[dup.Workbook.ID].Key != "" {
		t.Fatalf("duplicate %+v %v, want no key", got[dup.Workbook.ID], err)
	}
}

// TestPromotionIsAKeptVersionInTheTarget: each promotion that publishes in the target
// is one of the target's kept dashboard versions, under the target's one publicId.
func TestPromotionIsAKeptVersionInTheTarget(t *testing.T) {
	f := newPromotionFixture(t)
	wb, reports := f.source(ai)
	_, first := f.promote(ai, wb, 8)
	if _, err := f.svc.UpdateItem(f.ctx, ai, f.dep, workspace.TypeReport, reports[0], workspace.UpdateItemInput{Meta: json.RawMessage(`{"sql":"select 2"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Publish(f.ctx, ai, f.dep, wb, nil); err != nil {
		t.Fatal(err)
	}
	_, second := f.promote(ai, wb, 8)
	target := second.Workbook
	pg, err := f.svc.DashboardVersions(f.ctx, ai, 8, target.ID, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Items) != 2 || pg.Items[0].VersionNumber != target.PublishedDashboard.VersionNumber || pg.Items[1].VersionNumber != first.Workbook.PublishedDashboard.VersionNumber {
		t.Fatalf("the target's kept versions %+v, want the two promoted publishes newest first", pg.Items)
	}
	if first.Workbook.PublishedDashboard.PublicID != target.PublishedDashboard.PublicID {
		t.Fatalf("publicId changed: %s then %s", first.Workbook.PublishedDashboard.PublicID, target.PublishedDashboard.PublicID)
	}
}
