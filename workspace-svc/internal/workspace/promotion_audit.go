package workspace

import (
	"context"
	"net/http"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
)

// The actions of promotions and duplicates. A promotion is recorded in both
// deployments: in the source's trail on the source workbook, and in the target's on
// the target workbook (refused ones in the source's only: nothing was written in the
// target).
var (
	ActionWorkbookPromote   = ItemAction(TypeWorkbook, "promote")
	ActionWorkbookDuplicate = ItemAction(TypeWorkbook, "duplicate")
	ActionFolderDuplicate   = ItemAction(TypeFolder, "duplicate")
)

func (a *auditing) Promote(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, in PromotionInput) (PromotionResult, error) {
	res, err := a.Service.Promote(ctx, p, deploymentID, workbook, in)
	d := map[string]any{"sourceDeploymentId": deploymentID, "sourceWorkbookId": workbook, "targetDeploymentId": in.TargetDeploymentID,
		"targetFolderId": folderRef(in.TargetFolderID), "sourceHash": in.SourceHash}
	if err == nil {
		pr := res.Promotion
		d["targetWorkbookId"], d["result"], d["published"], d["reports"], d["promotionId"] = pr.TargetWorkbookID, pr.Result, pr.Published, len(pr.Reports), pr.ID
		d["targetFolderId"] = pr.TargetFolderID
	}
	audit.Record(ctx, a.rec, p, ActionWorkbookPromote, target(TypeWorkbook, workbook), err, http.StatusOK, withSide(d, "source"))
	if err == nil {
		ev := audit.New(p, ActionWorkbookPromote, target(TypeWorkbook, res.Promotion.TargetWorkbookID))
		ev.DeploymentID = in.TargetDeploymentID
		ev.Outcome, ev.Details = audit.Succeeded(http.StatusOK), withSide(d, "target")
		a.rec.Record(ctx, ev)
	}
	return res, err
}

// withSide is a copy of d saying which side of a promotion the event is recorded on.
func withSide(d map[string]any, side string) map[string]any {
	out := make(map[string]any, len(d)+1)
	for k, v := range d {
		out[k] = v
	}
	out["side"] = side
	return out
}

func (a *auditing) DuplicateWorkbook(ctx context.Context, p *identity.Principal, deploymentID, id int64, in DuplicateInput) (WorkbookDuplicate, error) {
	res, err := a.Service.DuplicateWorkbook(ctx, p, deploymentID, id, in)
	d := map[string]any{"sourceId": id, "deep": in.Deep}
	if in.FolderSet {
		d["folderId"] = folderRef(in.FolderID)
	}
	if err == nil {
		d["copyId"], d["created"] = res.Workbook.ID, res.Created
	}
	audit.Record(ctx, a.rec, p, ActionWorkbookDuplicate, target(TypeWorkbook, id), err, http.StatusOK, d)
	return res, err
}

func (a *auditing) DuplicateFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64, in DuplicateInput) (FolderDuplicate, error) {
	res, err := a.Service.DuplicateFolder(ctx, p, deploymentID, id, in)
	d := map[string]any{"sourceId": id}
	if in.FolderSet {
		d["folderId"] = folderRef(in.FolderID)
	}
	if err == nil {
		d["copyId"], d["created"] = res.Folder.ID, res.Created
	}
	audit.Record(ctx, a.rec, p, ActionFolderDuplicate, target(TypeFolder, id), err, http.StatusOK, d)
	return res, err
}

func (l *logging) Promote(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, in PromotionInput) (PromotionResult, error) {
	res, err := l.Service.Promote(ctx, p, deploymentID, workbook, in)
	l.done(ctx, err, "workbook promoted", "deploymentId", deploymentID, "workbookId", workbook, "targetDeploymentId", in.TargetDeploymentID,
		"targetWorkbookId", res.Promotion.TargetWorkbookID, "result", res.Promotion.Result)
	return res, err
}

func (l *logging) DuplicateWorkbook(ctx context.Context, p *identity.Principal, deploymentID, id int64, in DuplicateInput) (WorkbookDuplicate, error) {
	res, err := l.Service.DuplicateWorkbook(ctx, p, deploymentID, id, in)
	l.done(ctx, err, "workbook duplicated", "deploymentId", deploymentID, "workbookId", id, "copyId", res.Workbook.ID, "reports", res.Created.Reports)
	return res, err
}

func (l *logging) DuplicateFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64, in DuplicateInput) (FolderDuplicate, error) {
	res, err := l.Service.DuplicateFolder(ctx, p, deploymentID, id, in)
	l.done(ctx, err, "folder duplicated", "deploymentId", deploymentID, "folderId", id, "copyId", res.Folder.ID,
		"folders", res.Created.Folders, "workbooks", res.Created.Workbooks, "reports", res.Created.Reports)
	return res, err
}
