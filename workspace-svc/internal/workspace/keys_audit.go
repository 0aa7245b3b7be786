package workspace

import (
	"context"
	"net/http"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
)

// A PUT by key is recorded as the single operation it amounts to: a create
// (workspace.<type>.create, 201) or an update (workspace.<type>.update); one that found
// the item in the body's state already changed nothing and records nothing. A refused
// one is recorded as an update of the key's item (its id when known).

func (a *auditing) PutItemByKey(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, key string, in PutItemInput) (Workbook, PutOutcome, error) {
	w, outcome, err := a.Service.PutItemByKey(ctx, p, deploymentID, typ, key, in)
	if outcome == PutUnchanged {
		return w, outcome, err
	}
	d := map[string]any{"key": key, "byKey": true, "name": in.Name, "folderId": folderRef(in.FolderID)}
	action, ok := ItemAction(typ, "update"), http.StatusOK
	if outcome == PutCreated {
		action, ok = ItemAction(typ, "create"), http.StatusCreated
	}
	audit.Record(ctx, a.rec, p, action, target(typ, w.ID), err, ok, d)
	return w, outcome, err
}

func (a *auditing) PutFolderByKey(ctx context.Context, p *identity.Principal, deploymentID int64, key string, in PutFolderInput) (Folder, PutOutcome, error) {
	f, outcome, err := a.Service.PutFolderByKey(ctx, p, deploymentID, key, in)
	if outcome == PutUnchanged {
		return f, outcome, err
	}
	d := map[string]any{"key": key, "byKey": true, "name": in.Name, "parentId": folderRef(in.ParentID)}
	if in.Position != nil {
		d["position"] = *in.Position
	}
	action, ok := ItemAction(TypeFolder, "update"), http.StatusOK
	if outcome == PutCreated {
		action, ok = ItemAction(TypeFolder, "create"), http.StatusCreated
	}
	audit.Record(ctx, a.rec, p, action, target(TypeFolder, f.ID), err, ok, d)
	return f, outcome, err
}

func (l *logging) PutItemByKey(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, key string, in PutItemInput) (Workbook, PutOutcome, error) {
	w, outcome, err := l.Service.PutItemByKey(ctx, p, deploymentID, typ, key, in)
	if outcome != PutUnchanged {
		l.done(ctx, err, "item put by key", "deploymentId", deploymentID, "type", typ, "id", w.ID, "outcome", outcome)
	}
	return w, outcome, err
}

func (l *logging) PutFolderByKey(ctx context.Context, p *identity.Principal, deploymentID int64, key string, in PutFolderInput) (Folder, PutOutcome, error) {
	f, outcome, err := l.Service.PutFolderByKey(ctx, p, deploymentID, key, in)
	if outcome != PutUnchanged {
		l.done(ctx, err, "folder put by key", "deploymentId", deploymentID, "folderId", f.ID, "outcome", outcome)
	}
	return f, outcome, err
}
