package workspace

import (
	"context"
	"errors"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// PromotionService copies a workbook, and the reports its dashboards name, into another
// deployment of the caller's account (docs/promotion.md): a preview that hashes both
// sides and says what would change, the promotion that applies it only while the
// source still hashes as previewed, and the source workbook's promotion history.
type PromotionService interface {
	PreviewPromotion(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, in PromotionInput) (PromotionPreview, error)
	Promote(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, in PromotionInput) (PromotionResult, error)
	Promotions(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, first int, after string) (httpx.Page[PromotionView], error)
}

// PromotionInput is the body of a preview or a promotion.
type PromotionInput struct {
	TargetDeploymentID int64
	TargetFolderID     int64  // where a first promotion creates the workbook (0: the root)
	SourceHash         string // a promotion's: what its preview answered
}

// The actions of a promotion's items, and its results.
const (
	ActionCreate       = "create"
	ActionUpdate       = "update"
	ActionUnchanged    = "unchanged"
	PromotionCreated   = "created"
	PromotionUpdated   = "updated"
	PromotionUnchanged = "unchanged"
)

// PromotionChange is what a promotion does (or would do) to one item of the target.
type PromotionChange struct {
	Type     ItemType `json:"type"`
	SourceID int64    `json:"sourceId"`
	TargetID *int64   `json:"targetId"` // nil: not created yet
	Name     string   `json:"name"`
	Action   string   `json:"action"`
}

// PromotionPreview is what a promotion of the workbook would change in the target.
type PromotionPreview struct {
	SourceHash         string            `json:"sourceHash"`
	TargetHash         *string           `json:"targetHash"` // nil: no target workbook yet
	TargetDeploymentID int64             `json:"targetDeploymentId"`
	Workbook           PromotionChange   `json:"workbook"`
	Reports            []PromotionChange `json:"reports"`
	Publish            bool              `json:"publish"`
	SkippedReportIDs   []int64           `json:"skippedReportIds"`
}

// PromotionResult is a promotion's answer: what it did and the target workbook.
type PromotionResult struct {
	Promotion PromotionView `json:"promotion"`
	Workbook  Workbook      `json:"workbook"`
}

// PromotionView is one promotion of a workbook's history.
type PromotionView struct {
	ID                 int64                `json:"id"`
	DeploymentID       int64                `json:"deploymentId"`
	WorkbookID         int64                `json:"workbookId"`
	TargetDeploymentID int64                `json:"targetDeploymentId"`
	TargetFolderID     *int64               `json:"targetFolderId"`
	TargetWorkbookID   int64                `json:"targetWorkbookId"`
	CreatedBy          int64                `json:"createdBy"`
	CreatedAt          string               `json:"createdAt"`
	SourceHash         string               `json:"sourceHash"`
	TargetHash         *string              `json:"targetHash"`
	Result             string               `json:"result"`
	Published          bool                 `json:"published"`
	Reports            []PromotedReportView `json:"reports"`
}

// PromotedReportView is one report of a promotion.
type PromotedReportView struct {
	SourceID int64  `json:"sourceId"`
	TargetID int64  `json:"targetId"`
	Action   string `json:"action"`
}

func viewOf(pr *Promotion) PromotionView {
	v := PromotionView{ID: pr.ID, DeploymentID: pr.DeploymentID, WorkbookID: pr.WorkbookID, TargetDeploymentID: pr.TargetDeploymentID,
		TargetFolderID: optionalID(pr.TargetFolderID), TargetWorkbookID: pr.TargetWorkbookID, CreatedBy: pr.By, CreatedAt: formatTime(pr.At),
		SourceHash: pr.SourceHash, Result: pr.Result, Published: pr.Published, Reports: []PromotedReportView{}}
	if pr.TargetHash != "" {
		h := pr.TargetHash
		v.TargetHash = &h
	}
	for _, r := range pr.Reports {
		v.Reports = append(v.Reports, PromotedReportView(r))
	}
	return v
}

// promotionCaller refuses every credential but a user's bearer token: never an embed
// token, whatever user it carries.
func promotionCaller(p *identity.Principal) error {
	if p == nil || p.User == nil || p.Credential != identity.CredentialBearer {
		return errs.Forbiddenf("the workspace needs a user's bearer token")
	}
	return nil
}

// checkTarget decides whether the caller may write into deployment target: a deployment
// of the caller's account (the identity store's answer, over NATS: another account's
// and an unknown one are the same 404), within the token's scope (403 key_out_of_scope,
// as the gateway answers for a deployment in the path), and a role that creates items.
// The target's folders are checked by the workspace's own rules, as for a create there.
func (s *service) checkTarget(ctx context.Context, p *identity.Principal, deploymentID, target int64) error {
	if target == deploymentID {
		return errs.Invalidf("targetDeploymentId must be another deployment than the workbook's (%d)", deploymentID)
	}
	if s.deployments == nil {
		return errs.Unavailablef("the target deployment cannot be checked: the identity store is not reachable from workspace-svc; retry shortly")
	}
	d, err := s.deployments.Deployment(ctx, target)
	if errors.Is(err, ErrNoSuchDeployment) || (err == nil && d.AccountID != p.Account.ID) {
		return errs.New(errs.NotFound, "deployment %d not found", target)
	}
	if err != nil {
		return err
	}
	if !p.InScope(target) {
		return errs.New(errs.Forbidden, "this token is scoped to other deployments than %d", target).WithCode(errs.CodeKeyOutOfScope)
	}
	if !p.HasRole(identity.RoleAIBIUser) {
		return errs.Forbiddenf("promoting a workbook needs the ai_bi_user role or higher")
	}
	return nil
}

// promotionPlan is a preview, with what the promotion needs to apply it.
type promotionPlan struct {
	preview PromotionPreview
	src     *promotionContent
	rt      *request // the target deployment's request
	link    *PromotionLink
	target  *Item   // the target workbook (nil: none yet), in full
	tReport []*Item // per source report (src.reports order): its target report (nil: none yet)
	folder  int64   // the target workbook's folder
}

// readReports reads the reports among ids that the caller can view in r's deployment
// (heads first, then their meta and calculated fields), by id.
func (s *service) readReports(ctx context.Context, r *request, ids []int64, need Level) (map[int64]*Item, error) {
	out := map[int64]*Item{}
	if len(ids) == 0 {
		return out, nil
	}
	heads, err := s.store.Items(ctx, r.deploymentID, ids, 0)
	if err != nil {
		return nil, err
	}
	var parents, allowed []int64
	for _, d := range heads {
		parents = append(parents, d.Parent)
	}
	if err := r.need(ctx, parents...); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if d := heads[id]; d != nil && d.Type == TypeReport && r.tree.itemLevel(r.p, d.CreatedBy, d.Parent) >= need {
			allowed = append(allowed, id)
		}
	}
	for len(allowed) > 0 {
		n := min(len(allowed), maxSnapshotBatch)
		docs, err := s.store.Items(ctx, r.deploymentID, allowed[:n], PartMeta|PartCalculatedFields)
		if err != nil {
			return nil, err
		}
		for _, id := range allowed[:n] {
			if d := docs[id]; d != nil && d.Type == TypeReport && s.stillViewable(ctx, r, heads[id], d) {
				out[id] = d
			}
		}
		allowed = allowed[n:]
	}
	return out, nil
}

// plan reads the source workbook and its reports, finds the target workbook and
// reports (by the promotion link, else by key), checks the caller's access on both
// sides, and hashes both.
func (s *service) plan(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, in PromotionInput) (*promotionPlan, error) {
	if err := promotionCaller(p); err != nil {
		return nil, err
	}
	if err := s.checkTarget(ctx, p, deploymentID, in.TargetDeploymentID); err != nil {
		return nil, err
	}
	r, head, err := s.itemForAccess(ctx, p, deploymentID, TypeWorkbook, workbook, LevelView, "promote it")
	if err != nil {
		return nil, err
	}
	wb, err := s.withParts(ctx, r, head, AllParts, LevelView, "promote it")
	if err != nil {
		return nil, err
	}
	reports, err := s.readReports(ctx, r, namedReports(wb), LevelView)
	if err != nil {
		return nil, err
	}
	pl := &promotionPlan{src: newPromotionContent(wb, reports)}
	if pl.preview.SourceHash, err = pl.src.hash(); err != nil {
		return nil, err
	}
	target := in.TargetDeploymentID
	rt, err := s.begin(ctx, p, target)
	if err != nil {
		return nil, err
	}
	pl.rt = rt
	if pl.link, err = s.store.PromotionLink(ctx, deploymentID, workbook, target); err != nil {
		return nil, err
	}
	if err := s.findTargets(ctx, pl); err != nil {
		return nil, err
	}
	if pl.target != nil {
		if err := rt.need(ctx, pl.target.Parent); err != nil {
			return nil, err
		}
		if rt.tree.itemLevel(p, pl.target.CreatedBy, pl.target.Parent) < LevelEdit {
			return nil, errs.Forbiddenf("you need edit access to workbook %d of deployment %d, which this workbook was promoted to, to promote it again", pl.target.ID, target)
		}
		pl.folder = pl.target.Parent
	} else {
		pl.folder = in.TargetFolderID
		if err := s.checkCreateIn(ctx, rt, in.TargetFolderID, TypeWorkbook); err != nil {
			return nil, err
		}
	}
	for i, tr := range pl.tReport {
		if tr == nil {
			continue
		}
		if err := rt.need(ctx, tr.Parent); err != nil {
			return nil, err
		}
		if rt.tree.itemLevel(p, tr.CreatedBy, tr.Parent) < LevelEdit {
			return nil, errs.Forbiddenf("you need edit access to report %d of deployment %d, which report %d was promoted to", tr.ID, target, pl.src.reports[i].ID)
		}
	}
	if len(pl.tReport) > 0 && slicesHasNil(pl.tReport) && pl.target != nil {
		// New reports go into the target workbook's folder: the caller must be able to create there.
		if err := s.checkCreateIn(ctx, rt, pl.folder, TypeReport); err != nil {
			return nil, err
		}
	}
	return pl, s.describe(ctx, pl)
}

func slicesHasNil(its []*Item) bool {
	for _, it := range its {
		if it == nil {
			return true
		}
	}
	return false
}

// checkCreateIn checks that the caller may create an item of typ in folder of r's
// deployment (0: the root), as a create there checks.
func (s *service) checkCreateIn(ctx context.Context, r *request, folder int64, typ ItemType) error {
	if err := r.need(ctx, folder); err != nil {
		return err
	}
	if folder != 0 && r.tree.folders[folder] == nil {
		return notFound(TypeFolder, folder)
	}
	if folder == 0 && r.tree.containerLevel(r.p, 0) < LevelEdit {
		return errs.Forbiddenf("creating a %s at the workspace root needs the ai_bi_user role or higher", typ.lower())
	}
	if folder != 0 && r.tree.folderLevel(r.p, folder) < LevelEdit {
		return errs.Forbiddenf("you need edit access to folder %d to create a %s in it", folder, typ.lower())
	}
	return nil
}

// findTargets finds the target workbook and each source report's target: the link's,
// while it is live and of its type, else the live item of the target that holds the
// source's key.
func (s *service) findTargets(ctx context.Context, pl *promotionPlan) error {
	deploymentID := pl.rt.deploymentID
	var ids []int64
	if pl.link != nil {
		ids = append(ids, pl.link.Workbook)
		for _, src := range pl.src.reports {
			if t := pl.link.Reports[src.ID]; t != 0 {
				ids = append(ids, t)
			}
		}
	}
	found, err := s.store.Items(ctx, deploymentID, ids, AllParts)
	if err != nil {
		return err
	}
	if pl.link != nil {
		if d := found[pl.link.Workbook]; d != nil && d.Type == TypeWorkbook {
			pl.target = d
		}
	}
	pl.tReport = make([]*Item, len(pl.src.reports))
	for i, src := range pl.src.reports {
		if pl.link != nil {
			if d := found[pl.link.Reports[src.ID]]; d != nil && d.Type == TypeReport {
				pl.tReport[i] = d
			}
		}
	}
	return s.findTargetsByKey(ctx, pl)
}

// describe fills the preview: the target's hash and each item's action.
func (s *service) describe(ctx context.Context, pl *promotionPlan) error {
	pv := &pl.preview
	pv.TargetDeploymentID = pl.rt.deploymentID
	pv.SkippedReportIDs = append([]int64{}, pl.src.skipped...)
	pv.Workbook = PromotionChange{Type: TypeWorkbook, SourceID: pl.src.wb.ID, Name: pl.src.wb.Name, Action: ActionCreate}
	srcPublished := pl.src.canonicalPublished()
	pv.Publish = srcPublished != nil
	if t := pl.target; t != nil {
		treports, err := s.readReports(ctx, pl.rt, namedReports(t), LevelView)
		if err != nil {
			return err
		}
		tc := newPromotionContent(t, treports)
		h, err := tc.hash()
		if err != nil {
			return err
		}
		pv.TargetHash, pv.Workbook.TargetID = &h, &t.ID
		pv.Workbook.Action = ActionUpdate
		if sameCanonical(pl.src.canonicalWorkbook(), tc.canonicalWorkbook()) {
			pv.Workbook.Action = ActionUnchanged
		}
		pv.Publish = srcPublished != nil && !sameCanonical(srcPublished, tc.canonicalPublished())
	}
	pv.Reports = make([]PromotionChange, len(pl.src.reports))
	for i, src := range pl.src.reports {
		c := PromotionChange{Type: TypeReport, SourceID: src.ID, Name: src.Name, Action: ActionCreate}
		if t := pl.tReport[i]; t != nil {
			c.TargetID, c.Action = &t.ID, ActionUpdate
			if sameCanonical(canonicalReport(src), canonicalReport(t)) {
				c.Action = ActionUnchanged
			}
		}
		pv.Reports[i] = c
	}
	return nil
}

// PreviewPromotion answers what promoting the workbook into in.TargetDeploymentID would
// change, and the hashes of both sides; it writes nothing.
func (s *service) PreviewPromotion(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, in PromotionInput) (PromotionPreview, error) {
	pl, err := s.plan(ctx, p, deploymentID, workbook, in)
	if err != nil {
		return PromotionPreview{}, err
	}
	return pl.preview, nil
}

// Promote applies a preview while the source still hashes to in.SourceHash (409
// source_changed otherwise): reports first (created where none is linked, else
// updated), then the workbook with its widgets' and snapshots' report ids mapped to the
// target's, published in the target when the source is published. The target keeps its
// id (so its slug), its key and its dashboard's publicId across promotions.
func (s *service) Promote(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, in PromotionInput) (PromotionResult, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	pl, err := s.plan(ctx, p, deploymentID, workbook, in)
	if err != nil {
		return PromotionResult{}, err
	}
	if pl.preview.SourceHash != in.SourceHash {
		return PromotionResult{}, errs.New(errs.Conflict, "workbook %d changed since its preview: it hashes to %s now, not %s; preview it again", workbook, pl.preview.SourceHash, in.SourceHash).WithCode(errs.CodeSourceChanged)
	}
	target := pl.rt.deploymentID
	// The link names the target workbook before anything is written, so a promotion
	// that fails part-way, or runs beside another, finds the same target next time.
	want := int64(0)
	if pl.target != nil {
		want = pl.target.ID
	} else if want, err = s.store.NextID(ctx); err != nil {
		return PromotionResult{}, err
	}
	if pl.link == nil || pl.link.Workbook != want {
		was := int64(0)
		if pl.link != nil {
			was = pl.link.Workbook
		}
		link, err := s.store.LinkPromotionWorkbook(ctx, deploymentID, workbook, target, was, want)
		if err != nil {
			return PromotionResult{}, err
		}
		if link.Workbook != want {
			return PromotionResult{}, errs.Conflictf("workbook %d is being promoted into deployment %d by another request; retry", workbook, target)
		}
		pl.link = link
	}
	rec := &Promotion{DeploymentID: deploymentID, WorkbookID: workbook, TargetDeploymentID: target, TargetFolderID: pl.folder, By: p.User.ID,
		SourceHash: pl.preview.SourceHash, Result: PromotionUnchanged}
	if pl.preview.TargetHash != nil {
		rec.TargetHash = *pl.preview.TargetHash
	}
	// The reports first, so the workbook never names a report that is not there yet.
	mapped := map[int64]int64{}
	for i, src := range pl.src.reports {
		c := pl.preview.Reports[i]
		tid, err := s.promoteReport(ctx, pl, src, pl.tReport[i])
		if err != nil {
			return PromotionResult{}, err
		}
		mapped[src.ID] = tid
		rec.Reports = append(rec.Reports, PromotedReport{SourceID: src.ID, TargetID: tid, Action: c.Action})
		if c.Action != ActionUnchanged {
			rec.Result = PromotionUpdated
		}
	}
	out, err := s.promoteWorkbook(ctx, pl, mapped)
	if err != nil {
		return PromotionResult{}, err
	}
	switch {
	case pl.target == nil:
		rec.Result = PromotionCreated
	case pl.preview.Workbook.Action != ActionUnchanged || pl.preview.Publish:
		rec.Result = PromotionUpdated
	}
	rec.TargetWorkbookID, rec.Published, rec.TargetFolderID = out.ID, pl.preview.Publish, out.Parent
	if rec.ID, err = s.store.NextID(ctx); err != nil {
		return PromotionResult{}, err
	}
	rec.At = s.now()
	if err := s.store.AddPromotion(ctx, rec); err != nil {
		return PromotionResult{}, err
	}
	rendered, err := s.render(ctx, pl.rt, []*Item{out})
	if err != nil {
		return PromotionResult{}, err
	}
	return PromotionResult{Promotion: viewOf(rec), Workbook: rendered[0]}, nil
}

// Promotions lists the workbook's promotions, newest first; it needs view on the workbook.
func (s *service) Promotions(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, first int, after string) (httpx.Page[PromotionView], error) {
	if err := promotionCaller(p); err != nil {
		return httpx.Page[PromotionView]{}, err
	}
	from, err := httpx.AfterCursor[PromotionKey](after)
	if err != nil {
		return httpx.Page[PromotionView]{}, err
	}
	if _, _, err := s.itemForAccess(ctx, p, deploymentID, TypeWorkbook, workbook, LevelView, "see its promotions"); err != nil {
		return httpx.Page[PromotionView]{}, err
	}
	got, err := s.store.Promotions(ctx, deploymentID, workbook, from, first+1)
	if err != nil {
		return httpx.Page[PromotionView]{}, err
	}
	more := len(got) > first
	if more {
		got = got[:first]
	}
	views := make([]PromotionView, len(got))
	for i, pr := range got {
		views[i] = viewOf(pr)
	}
	var end *PromotionKey
	if n := len(got); n > 0 {
		end = &PromotionKey{At: got[n-1].At, ID: got[n-1].ID}
	}
	return httpx.PageEndingAt(views, more, end), nil
}
