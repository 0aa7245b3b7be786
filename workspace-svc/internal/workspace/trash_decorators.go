package workspace

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// The trash's audit actions: one event per call listing its items, as a move's; a
// recursive folder delete is ItemAction(TypeFolder, "delete") with recursive true, and a
// root the retention sweep purged is ItemAction(type, "purge") by the system.
const (
	ActionItemsDelete  = "workspace.items.delete"
	ActionItemsRestore = "workspace.items.restore"
	ActionItemsPurge   = "workspace.items.purge"
)

// trashEvent records one event of a bulk trash call: its items in request order, each
// with its own outcome, as many as fit (recordMove's rule), and the counts.
func (a *auditing) trashEvent(ctx context.Context, p *identity.Principal, action string, tgt audit.Target, refs []ItemRef, res TrashResult, err error, details map[string]any) {
	failed := make(map[ItemRef]*errs.Error, len(res.Failed))
	for _, f := range res.Failed {
		failed[f.Ref] = f.Err
	}
	distinct := distinctRefs(refs)
	items := make([]map[string]any, 0, len(distinct))
	size, done, listing := 2, 0, true
	for _, ref := range distinct {
		it := map[string]any{"type": string(ref.Type), "id": ref.ID}
		out := audit.Succeeded(http.StatusOK)
		switch {
		case err != nil:
			out = audit.OutcomeOf(err, http.StatusOK)
		case failed[ref] != nil:
			out = audit.OutcomeOf(failed[ref], http.StatusOK)
		default:
			done++
		}
		it["status"] = out.Status
		if out.Code != "" {
			it["code"] = out.Code
		}
		if b, _ := json.Marshal(it); listing && size+len(b)+1 <= maxAuditedMoveBytes {
			size += len(b) + 1
			items = append(items, it)
		} else {
			listing = false
		}
	}
	ev := audit.New(p, action, tgt)
	if details == nil {
		details = map[string]any{}
	}
	details["items"], details["done"], details["failed"] = items, done, len(distinct)-done
	if len(items) < len(distinct) {
		details["unlisted"] = len(distinct) - len(items)
	}
	ev.Details, ev.Outcome = details, audit.OutcomeOf(err, http.StatusOK)
	a.rec.Record(ctx, ev)
}

func deploymentTarget(deploymentID int64) audit.Target {
	return audit.Target{Type: "deployment", ID: strconv.FormatInt(deploymentID, 10)}
}

func (a *auditing) BulkDelete(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error) {
	res, err := a.Service.BulkDelete(ctx, p, deploymentID, refs)
	a.trashEvent(ctx, p, ActionItemsDelete, deploymentTarget(deploymentID), refs, res, err, nil)
	return res, err
}

func (a *auditing) RestoreTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, folder *int64) (TrashResult, error) {
	res, err := a.Service.RestoreTrash(ctx, p, deploymentID, refs, folder)
	d := map[string]any{"folderId": nil}
	if folder != nil {
		d["folderId"] = *folder
	}
	a.trashEvent(ctx, p, ActionItemsRestore, deploymentTarget(deploymentID), refs, res, err, d)
	return res, err
}

func (a *auditing) PurgeTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error) {
	res, err := a.Service.PurgeTrash(ctx, p, deploymentID, refs)
	a.trashEvent(ctx, p, ActionItemsPurge, deploymentTarget(deploymentID), refs, res, err, nil)
	return res, err
}

func (a *auditing) DeleteFolderTree(ctx context.Context, p *identity.Principal, deploymentID, id int64) error {
	err := a.Service.DeleteFolderTree(ctx, p, deploymentID, id)
	audit.Record(ctx, a.rec, p, ItemAction(TypeFolder, "delete"), target(TypeFolder, id), err, http.StatusNoContent, map[string]any{"recursive": true})
	return err
}

func (l *logging) BulkDelete(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error) {
	res, err := l.Service.BulkDelete(ctx, p, deploymentID, refs)
	l.done(ctx, err, "items deleted", "deploymentId", deploymentID, "deleted", len(res.Done), "failed", len(res.Failed))
	return res, err
}

func (l *logging) RestoreTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, folder *int64) (TrashResult, error) {
	res, err := l.Service.RestoreTrash(ctx, p, deploymentID, refs, folder)
	l.done(ctx, err, "items restored", "deploymentId", deploymentID, "restored", len(res.Done), "failed", len(res.Failed))
	return res, err
}

func (l *logging) PurgeTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error) {
	res, err := l.Service.PurgeTrash(ctx, p, deploymentID, refs)
	l.done(ctx, err, "items purged", "deploymentId", deploymentID, "purged", len(res.Done), "failed", len(res.Failed))
	return res, err
}

func (l *logging) DeleteFolderTree(ctx context.Context, p *identity.Principal, deploymentID, id int64) error {
	err := l.Service.DeleteFolderTree(ctx, p, deploymentID, id)
	l.done(ctx, err, "folder deleted with its subtree", "deploymentId", deploymentID, "folderId", id)
	return err
}

// TrashMetrics count the trash's operations per item.
type TrashMetrics struct {
	// Items counts the items of deletes, restores and purges by operation (delete,
	// restore, purge, expire: the retention sweep), item type and outcome (moveOutcome's,
	// done for success).
	Items *prometheus.CounterVec
}

func newTrashMetrics() *TrashMetrics {
	return &TrashMetrics{Items: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workspace_svc_trash_items_total",
		Help: "Items of bulk deletes, recursive folder deletes, restores and purges, by operation (delete, restore, purge, expire), item type and outcome (done, not_found, forbidden, invalid, busy, not_applied, other).",
	}, []string{"operation", "type", "outcome"})}
}

func (i *instrumenting) countTrash(op string, res TrashResult, err error) {
	if err != nil {
		return
	}
	for _, ref := range res.Done {
		i.m.Trash.Items.WithLabelValues(op, string(ref.Type), "done").Inc()
	}
	for _, f := range res.Failed {
		i.m.Trash.Items.WithLabelValues(op, string(f.Ref.Type), moveOutcome(f.Err)).Inc()
	}
}

func (i *instrumenting) BulkDelete(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error) {
	res, err := i.Service.BulkDelete(ctx, p, deploymentID, refs)
	i.countTrash("delete", res, err)
	return res, err
}

func (i *instrumenting) RestoreTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, folder *int64) (TrashResult, error) {
	res, err := i.Service.RestoreTrash(ctx, p, deploymentID, refs, folder)
	i.countTrash("restore", res, err)
	return res, err
}

func (i *instrumenting) PurgeTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error) {
	res, err := i.Service.PurgeTrash(ctx, p, deploymentID, refs)
	i.countTrash("purge", res, err)
	return res, err
}

func (i *instrumenting) DeleteFolderTree(ctx context.Context, p *identity.Principal, deploymentID, id int64) error {
	err := i.Service.DeleteFolderTree(ctx, p, deploymentID, id)
	outcome := "done"
	if err != nil {
		outcome = moveOutcome(err)
	}
	i.m.Trash.Items.WithLabelValues("delete", string(TypeFolder), outcome).Inc()
	return err
}
