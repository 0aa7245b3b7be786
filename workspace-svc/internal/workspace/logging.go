package workspace

import (
	"context"
	"log/slog"

	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// loggingMiddleware logs the workspace's changes of state once they are done, with the
// ids they concern (names and contents are the users' data: not logged). Failures are
// logged by the transport's error encoder, which knows which of them are the caller's.
// (nil logger: no decorator.)
func loggingMiddleware(logger *slog.Logger) func(Service) Service {
	if logger == nil {
		return nil
	}
	return func(next Service) Service { return &logging{Service: next, logger: logger} }
}

type logging struct {
	Service
	logger *slog.Logger
}

func (l *logging) done(ctx context.Context, err error, msg string, args ...any) {
	if err == nil {
		l.logger.InfoContext(ctx, msg, args...)
	}
}

func (l *logging) CreateFolder(ctx context.Context, p *identity.Principal, deploymentID int64, in CreateFolderInput) (Folder, error) {
	f, err := l.Service.CreateFolder(ctx, p, deploymentID, in)
	l.done(ctx, err, "folder created", "deploymentId", deploymentID, "folderId", f.ID, "parentId", in.ParentID)
	return f, err
}

func (l *logging) UpdateFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64, in UpdateFolderInput) (Folder, error) {
	f, err := l.Service.UpdateFolder(ctx, p, deploymentID, id, in)
	l.done(ctx, err, "folder updated", "deploymentId", deploymentID, "folderId", id)
	return f, err
}

func (l *logging) DeleteFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64) error {
	err := l.Service.DeleteFolder(ctx, p, deploymentID, id)
	l.done(ctx, err, "folder deleted", "deploymentId", deploymentID, "folderId", id)
	return err
}

func (l *logging) SetPermissions(ctx context.Context, p *identity.Principal, deploymentID, id int64, grants []Grant) ([]Grant, error) {
	g, err := l.Service.SetPermissions(ctx, p, deploymentID, id, grants)
	l.done(ctx, err, "folder permissions set", "deploymentId", deploymentID, "folderId", id, "grants", len(g))
	return g, err
}

func (l *logging) Move(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, dest int64) (MoveResult, error) {
	w, err := l.Service.Move(ctx, p, deploymentID, ref, dest)
	l.done(ctx, err, "item moved", "deploymentId", deploymentID, "type", ref.Type, "id", ref.ID, "folderId", dest)
	return w, err
}

func (l *logging) BulkMove(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, dest int64) (BulkMoveResult, error) {
	res, err := l.Service.BulkMove(ctx, p, deploymentID, refs, dest)
	l.done(ctx, err, "items moved", "deploymentId", deploymentID, "folderId", dest, "moved", len(res.Moved), "failed", len(res.Failed))
	return res, err
}

func (l *logging) CreateItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, in CreateItemInput) (Workbook, error) {
	w, err := l.Service.CreateItem(ctx, p, deploymentID, typ, in)
	l.done(ctx, err, "item created", "deploymentId", deploymentID, "type", typ, "id", w.ID, "folderId", in.FolderID)
	return w, err
}

func (l *logging) UpdateItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64, in UpdateItemInput) (Workbook, error) {
	w, err := l.Service.UpdateItem(ctx, p, deploymentID, typ, id, in)
	l.done(ctx, err, "item updated", "deploymentId", deploymentID, "type", typ, "id", id)
	return w, err
}

func (l *logging) DeleteItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64) error {
	err := l.Service.DeleteItem(ctx, p, deploymentID, typ, id)
	l.done(ctx, err, "item deleted", "deploymentId", deploymentID, "type", typ, "id", id)
	return err
}

func (l *logging) Publish(ctx context.Context, p *identity.Principal, deploymentID, id int64, allowEmbed *bool) (Workbook, error) {
	w, err := l.Service.Publish(ctx, p, deploymentID, id, allowEmbed)
	var version int64
	if w.PublishedDashboard != nil {
		version = w.PublishedDashboard.VersionNumber
	}
	l.done(ctx, err, "dashboard published", "deploymentId", deploymentID, "workbookId", id, "versionNumber", version)
	return w, err
}

func (l *logging) Unpublish(ctx context.Context, p *identity.Principal, deploymentID, id int64) (Workbook, error) {
	w, err := l.Service.Unpublish(ctx, p, deploymentID, id)
	l.done(ctx, err, "dashboard unpublished", "deploymentId", deploymentID, "workbookId", id)
	return w, err
}

func (l *logging) SetFavorite(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, on bool) error {
	err := l.Service.SetFavorite(ctx, p, deploymentID, ref, on)
	l.done(ctx, err, "favorite set", "deploymentId", deploymentID, "type", ref.Type, "id", ref.ID, "favorite", on)
	return err
}

func (l *logging) PutEmbedAccess(ctx context.Context, p *identity.Principal, deploymentID int64, obj EmbedObject, g embedaccess.Grants) (EmbedAccessView, error) {
	v, err := l.Service.PutEmbedAccess(ctx, p, deploymentID, obj, g)
	if v.Changed {
		l.done(ctx, err, "embed access set", "deploymentId", deploymentID, "object", embedObjectLabel(obj), "id", obj.ID, "entries", v.Entries())
	}
	return v, err
}
