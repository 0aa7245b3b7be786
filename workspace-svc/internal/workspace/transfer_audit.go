package workspace

import (
	"context"
	"io"
	"net/http"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
)

// The actions of export and import: one event per request, its target the folder (no
// id: the whole deployment), its details the counts. An export is recorded although it
// changes nothing: it reads the deployment's content and grants wholesale.
const (
	ActionExport = "workspace.deployment.export"
	ActionImport = "workspace.deployment.import"
)

// maxAuditedConflicts bounds the conflicting items an import's event lists.
const maxAuditedConflicts = 20

func (a *auditing) Export(ctx context.Context, p *identity.Principal, deploymentID, folder int64, w io.Writer) (ExportSummary, error) {
	sum, err := a.Service.Export(ctx, p, deploymentID, folder, w)
	d := map[string]any{"folderId": folderRef(folder), "folders": sum.Folders, "reports": sum.Reports, "workbooks": sum.Workbooks,
		"rootEmbedAccess": sum.RootEmbedAccess, "bytes": sum.Bytes}
	audit.Record(ctx, a.rec, p, ActionExport, target(TypeFolder, folder), err, http.StatusOK, d)
	return sum, err
}

func (a *auditing) Import(ctx context.Context, p *identity.Principal, deploymentID int64, in ImportInput) (ImportResult, error) {
	res, err := a.Service.Import(ctx, p, deploymentID, in)
	d := map[string]any{"folderId": folderRef(res.Folder), "dryRun": res.DryRun, "grantsDropped": res.GrantsDropped, "items": len(res.Items)}
	for action, n := range res.Counts() {
		d[action] = n
	}
	conflicts := []map[string]any{}
	for _, e := range res.Items {
		if e.Err != nil && len(conflicts) < maxAuditedConflicts {
			out := audit.OutcomeOf(e.Err, http.StatusOK)
			conflicts = append(conflicts, map[string]any{"type": string(e.Type), "key": e.Key, "status": out.Status, "code": out.Code})
		}
	}
	d["conflicts"] = conflicts
	audit.Record(ctx, a.rec, p, ActionImport, target(TypeFolder, res.Folder), err, http.StatusOK, d)
	return res, err
}

func (l *logging) Export(ctx context.Context, p *identity.Principal, deploymentID, folder int64, w io.Writer) (ExportSummary, error) {
	sum, err := l.Service.Export(ctx, p, deploymentID, folder, w)
	if err != nil && sum.Bytes > 0 {
		// Past its first byte an export's failure reaches no error encoder: logged here.
		l.logger.WarnContext(ctx, "workspace export broken off", "deploymentId", deploymentID, "folderId", folder, "bytes", sum.Bytes, "error", err.Error())
	}
	l.done(ctx, err, "workspace exported", "deploymentId", deploymentID, "folderId", folder, "folders", sum.Folders, "reports", sum.Reports,
		"workbooks", sum.Workbooks, "bytes", sum.Bytes)
	return sum, err
}

func (l *logging) Import(ctx context.Context, p *identity.Principal, deploymentID int64, in ImportInput) (ImportResult, error) {
	res, err := l.Service.Import(ctx, p, deploymentID, in)
	c := res.Counts()
	l.done(ctx, err, "workspace imported", "deploymentId", deploymentID, "folderId", res.Folder, "dryRun", res.DryRun,
		"created", c[ImportCreate], "updated", c[ImportUpdate], "unchanged", c[ImportUnchanged], "conflicts", c[ImportConflict],
		"grantsDropped", res.GrantsDropped)
	return res, err
}
