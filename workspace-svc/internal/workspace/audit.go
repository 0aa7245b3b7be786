package workspace

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// The actions workspace-svc records in the audit trail: one event per call of a
// state-changing method, refused ones included; a move (single or bulk) is one event
// listing its items. Items' actions name their type: workspace.report.delete.
const (
	ActionFolderPermissions = "workspace.folder.permissions_change"
	ActionFavoriteAdd       = "workspace.favorite.add"
	ActionFavoriteRemove    = "workspace.favorite.remove"
	ActionItemsMove         = "workspace.items.move"
	// A change of the embed access of the deployment's root (its target the deployment);
	// a workbook's or a folder's is ItemAction(type, EmbedAccessVerb).
	ActionRootEmbedAccess = "workspace.deployment.embed_access_change"
	EmbedAccessVerb       = "embed_access_change"
)

// ItemAction is the action verb on an item of type t ("workspace.workbook.create").
func ItemAction(t ItemType, verb string) string { return "workspace." + t.lower() + "." + verb }

// auditingMiddleware records every state-changing call of s in the audit trail (nil
// rec: no decorator).
func auditingMiddleware(rec audit.Recorder) func(Service) Service {
	if rec == nil {
		return nil
	}
	return func(next Service) Service { return &auditing{Service: next, rec: rec} }
}

type auditing struct {
	Service
	rec audit.Recorder
}

func target(t ItemType, id int64) audit.Target {
	if id == 0 {
		return audit.Target{Type: t.lower()}
	}
	return audit.Target{Type: t.lower(), ID: strconv.FormatInt(id, 10)}
}

// folderRef is a folder id as the trail shows it: nil for the root.
func folderRef(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

func (a *auditing) CreateFolder(ctx context.Context, p *identity.Principal, deploymentID int64, in CreateFolderInput) (Folder, error) {
	f, err := a.Service.CreateFolder(ctx, p, deploymentID, in)
	d := map[string]any{"name": in.Name, "parentId": folderRef(in.ParentID)}
	if in.Key != "" {
		d["key"] = in.Key
	}
	audit.Record(ctx, a.rec, p, ItemAction(TypeFolder, "create"), target(TypeFolder, f.ID), err, http.StatusOK, d)
	return f, err
}

func (a *auditing) UpdateFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64, in UpdateFolderInput) (Folder, error) {
	f, err := a.Service.UpdateFolder(ctx, p, deploymentID, id, in)
	d := map[string]any{}
	if in.Name != nil {
		d["name"] = *in.Name
	}
	if in.Position != nil {
		d["position"] = *in.Position
	}
	if in.Key != nil {
		d["key"] = *in.Key
	}
	audit.Record(ctx, a.rec, p, ItemAction(TypeFolder, "update"), target(TypeFolder, id), err, http.StatusOK, d)
	return f, err
}

func (a *auditing) DeleteFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64) error {
	err := a.Service.DeleteFolder(ctx, p, deploymentID, id)
	audit.Record(ctx, a.rec, p, ItemAction(TypeFolder, "delete"), target(TypeFolder, id), err, http.StatusNoContent, nil)
	return err
}

// maxAuditedGrants bounds the grants an event lists (a request may set many more).
const maxAuditedGrants = 20

func (a *auditing) SetPermissions(ctx context.Context, p *identity.Principal, deploymentID, id int64, grants []Grant) ([]Grant, error) {
	out, err := a.Service.SetPermissions(ctx, p, deploymentID, id, grants)
	d := map[string]any{"grants": len(grants)}
	listed := make([]string, 0, min(len(grants), maxAuditedGrants))
	for _, g := range grants[:min(len(grants), maxAuditedGrants)] {
		listed = append(listed, strconv.FormatInt(g.UserID, 10)+":"+g.Level)
	}
	d["userLevels"] = listed
	audit.Record(ctx, a.rec, p, ActionFolderPermissions, target(TypeFolder, id), err, http.StatusOK, d)
	return out, err
}

func (a *auditing) Move(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, dest int64) (MoveResult, error) {
	res, err := a.Service.Move(ctx, p, deploymentID, ref, dest)
	out := audit.OutcomeOf(err, http.StatusOK) // a single move answers with its item's error
	a.recordMove(ctx, p, dest, false, []movedRef{{ref: ref, from: res.From, read: res.Read, out: out}}, out)
	return res, err
}

// BulkMove records the request's outcome, and each distinct item's as its answer has it.
func (a *auditing) BulkMove(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, dest int64) (BulkMoveResult, error) {
	res, err := a.Service.BulkMove(ctx, p, deploymentID, refs, dest)
	failed := make(map[ItemRef]*errs.Error, len(res.Failed))
	for _, f := range res.Failed {
		failed[f.Ref] = f.Err
	}
	distinct := distinctRefs(refs) // the service's Rule 1: the items its answer has one entry each for
	items := make([]movedRef, 0, len(distinct))
	for _, ref := range distinct {
		it := movedRef{ref: ref, out: audit.Succeeded(http.StatusOK)}
		it.from, it.read = res.From[ref]
		switch {
		case err != nil:
			it.out = audit.OutcomeOf(err, http.StatusOK)
		case failed[ref] != nil:
			it.out = audit.OutcomeOf(failed[ref], http.StatusOK)
		}
		items = append(items, it)
	}
	a.recordMove(ctx, p, dest, true, items, audit.OutcomeOf(err, http.StatusOK))
	return res, err
}

// movedRef is an item of a move as its event lists it: where it was (from, when the
// request read it) and its own outcome.
type movedRef struct {
	ref  ItemRef
	from int64
	read bool
	out  audit.Outcome
}

// maxAuditedMoveBytes bounds the items a move's event lists, as JSON: the rest of its
// details fit beside them in audit.MaxDetailsBytes.
const maxAuditedMoveBytes = audit.MaxDetailsBytes - 512

// recordMove records one event per request, whatever the number of items: its target is
// the destination folder (no id: the root), its outcome what the caller was answered, and
// its details list the distinct items in request order, each with where it was (from)
// and its own outcome (status, and code when it failed), as many as fit in
// maxAuditedMoveBytes; the counts cover them all.
func (a *auditing) recordMove(ctx context.Context, p *identity.Principal, dest int64, bulk bool, refs []movedRef, outcome audit.Outcome) {
	items := make([]map[string]any, 0, len(refs))
	size, moved, listing := 2, 0, true
	for _, r := range refs {
		it := map[string]any{"type": string(r.ref.Type), "id": r.ref.ID}
		if r.read {
			it["from"] = folderRef(r.from)
		}
		if r.out.Result == audit.Success {
			moved++
		}
		it["status"] = r.out.Status
		if r.out.Code != "" {
			it["code"] = r.out.Code
		}
		if b, _ := json.Marshal(it); listing && size+len(b)+1 <= maxAuditedMoveBytes {
			size += len(b) + 1
			items = append(items, it)
		} else {
			listing = false // the list stays a prefix of the request
		}
	}
	ev := audit.New(p, ActionItemsMove, target(TypeFolder, dest))
	ev.Details = map[string]any{"to": folderRef(dest), "bulk": bulk, "items": items, "moved": moved, "failed": len(refs) - moved}
	if len(items) < len(refs) {
		ev.Details["unlisted"] = len(refs) - len(items)
	}
	ev.Outcome = outcome
	a.rec.Record(ctx, ev)
}

func (a *auditing) CreateItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, in CreateItemInput) (Workbook, error) {
	w, err := a.Service.CreateItem(ctx, p, deploymentID, typ, in)
	d := map[string]any{"name": in.Name, "folderId": folderRef(in.FolderID)}
	if in.Key != "" {
		d["key"] = in.Key
	}
	audit.Record(ctx, a.rec, p, ItemAction(typ, "create"), target(typ, w.ID), err, http.StatusOK, d)
	return w, err
}

func (a *auditing) UpdateItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64, in UpdateItemInput) (Workbook, error) {
	w, err := a.Service.UpdateItem(ctx, p, deploymentID, typ, id, in)
	changed := []string{}
	if in.Name != nil {
		changed = append(changed, "name")
	}
	if in.Meta != nil {
		changed = append(changed, "meta")
	}
	if in.CalculatedFields != nil {
		changed = append(changed, "calculatedFields")
	}
	if in.DashboardDraft != nil {
		changed = append(changed, "dashboardDraft")
	}
	if in.Key != nil {
		changed = append(changed, "key")
	}
	d := map[string]any{"changed": changed}
	if in.Name != nil {
		d["name"] = *in.Name
	}
	audit.Record(ctx, a.rec, p, ItemAction(typ, "update"), target(typ, id), err, http.StatusOK, d)
	return w, err
}

func (a *auditing) DeleteItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64) error {
	err := a.Service.DeleteItem(ctx, p, deploymentID, typ, id)
	audit.Record(ctx, a.rec, p, ItemAction(typ, "delete"), target(typ, id), err, http.StatusNoContent, nil)
	return err
}

func (a *auditing) Publish(ctx context.Context, p *identity.Principal, deploymentID, id int64, allowEmbed *bool) (Workbook, error) {
	w, err := a.Service.Publish(ctx, p, deploymentID, id, allowEmbed)
	d := map[string]any{}
	if db := w.PublishedDashboard; db != nil {
		d["versionNumber"], d["allowEmbed"] = db.VersionNumber, db.AllowEmbed
	}
	audit.Record(ctx, a.rec, p, ItemAction(TypeWorkbook, "publish"), target(TypeWorkbook, id), err, http.StatusOK, d)
	return w, err
}

func (a *auditing) Unpublish(ctx context.Context, p *identity.Principal, deploymentID, id int64) (Workbook, error) {
	w, err := a.Service.Unpublish(ctx, p, deploymentID, id)
	audit.Record(ctx, a.rec, p, ItemAction(TypeWorkbook, "unpublish"), target(TypeWorkbook, id), err, http.StatusOK, nil)
	return w, err
}

func (a *auditing) SetFavorite(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, on bool) error {
	err := a.Service.SetFavorite(ctx, p, deploymentID, ref, on)
	action := ActionFavoriteRemove
	if on {
		action = ActionFavoriteAdd
	}
	audit.Record(ctx, a.rec, p, action, target(ref.Type, ref.ID), err, http.StatusNoContent, nil)
	return err
}

// embedAccessEvent is the action and target of a change of obj's embed access.
func embedAccessEvent(deploymentID int64, obj EmbedObject) (string, audit.Target) {
	if obj.Root() {
		return ActionRootEmbedAccess, audit.Target{Type: "deployment", ID: strconv.FormatInt(deploymentID, 10)}
	}
	return ItemAction(obj.Type, EmbedAccessVerb), target(obj.Type, obj.ID)
}

// maxAuditedEmbedBytes bounds the entries an embed access event lists, as JSON: the rest
// of its details fit beside them in audit.MaxDetailsBytes.
const maxAuditedEmbedBytes = audit.MaxDetailsBytes - 512

// PutEmbedAccess records one event per PUT that changed the grants, and every refused
// one; a PUT of the grants already there changed nothing and records nothing. A change
// lists each entry added, removed or changed (subject, before and after: absent when
// there was no entry), in subject order, as many as fit in maxAuditedEmbedBytes
// ("unlisted" counts the rest); a refusal, how many entries were sent.
func (a *auditing) PutEmbedAccess(ctx context.Context, p *identity.Principal, deploymentID int64, obj EmbedObject, g embedaccess.Grants) (EmbedAccessView, error) {
	v, err := a.Service.PutEmbedAccess(ctx, p, deploymentID, obj, g)
	if err == nil && !v.Changed {
		return v, err
	}
	action, tgt := embedAccessEvent(deploymentID, obj)
	d := map[string]any{"entries": g.Entries()}
	if err == nil {
		d = embedAccessChanges(v.Previous, v.Grants)
	}
	audit.Record(ctx, a.rec, p, action, tgt, err, http.StatusOK, d)
	return v, err
}

// embedSubjects maps each entry of g to its access, by a key naming its subject:
// allEmbedUsers, tenant:<name>, group:account:<group>, group:tenant:<tenant>:<group>.
func embedSubjects(g embedaccess.Grants) map[string]embedaccess.Access {
	m := make(map[string]embedaccess.Access, g.Entries())
	if g.AllEmbedUsers != "" {
		m[embedaccess.SourceAllEmbedUsers] = g.AllEmbedUsers
	}
	for _, e := range g.Tenants {
		m["tenant:"+e.EmbedTenantName] = e.Access
	}
	for _, e := range g.Groups {
		k := "group:" + e.Scope + ":"
		if e.Scope == embedaccess.ScopeTenant {
			k += e.EmbedTenantName + ":"
		}
		m[k+e.GroupName] = e.Access
	}
	return m
}

// embedAccessChanges is the details of a change from before to after.
func embedAccessChanges(before, after embedaccess.Grants) map[string]any {
	was, now := embedSubjects(before), embedSubjects(after)
	keys := make([]string, 0, len(was)+len(now))
	for k := range was {
		keys = append(keys, k)
	}
	for k := range now {
		if _, ok := was[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	changes := []map[string]any{}
	size, changed := 2, 0
	for _, k := range keys {
		if was[k] == now[k] {
			continue
		}
		changed++
		c := map[string]any{"subject": k}
		if x := was[k]; x != "" {
			c["before"] = string(x)
		}
		if x := now[k]; x != "" {
			c["after"] = string(x)
		}
		if b, _ := json.Marshal(c); len(changes) == changed-1 && size+len(b)+1 <= maxAuditedEmbedBytes {
			size += len(b) + 1
			changes = append(changes, c)
		}
	}
	d := map[string]any{"entriesBefore": before.Entries(), "entriesAfter": after.Entries(), "changes": changes}
	if n := changed - len(changes); n > 0 {
		d["unlisted"] = n
	}
	return d
}
