package workspace

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// TrashService is the trash: deleted items stay there with their content and grants
// until they are restored or purged (by a caller, or by the retention sweep).
type TrashService interface {
	// ListTrash pages the trashed roots (the items deletes were called on) the caller
	// may see, newest first.
	ListTrash(ctx context.Context, p *identity.Principal, deploymentID int64, first int, after string) (httpx.Page[TrashEntry], error)
	// RestoreTrash brings back each trashed root of refs, a folder with everything
	// trashed with it, to its original folder or, when that is gone, into folder (nil:
	// none given).
	RestoreTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, folder *int64) (TrashResult, error)
	// PurgeTrash removes each trashed root of refs, and what was trashed with it, for good.
	PurgeTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error)
	// DeleteFolderTree sends a folder and its subtree (its folders, workbooks and
	// reports) to the trash as one structural change.
	DeleteFolderTree(ctx context.Context, p *identity.Principal, deploymentID, id int64) error
	// BulkDelete deletes each item of refs as its single delete would (a folder only
	// when empty), one at a time; one failure does not undo the others.
	BulkDelete(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error)
}

// TrashEntry is one trashed root in the trash listing.
type TrashEntry struct {
	Type      ItemType `json:"type"`
	ID        int64    `json:"id"`
	Name      string   `json:"name"`
	Key       *string  `json:"key"`      // the item's key (null: none); a restore takes it back
	FolderID  *int64   `json:"folderId"` // the original folder (null: the root)
	DeletedAt string   `json:"deletedAt"`
	DeletedBy int64    `json:"deletedBy"`
	// TrashedWith, on a folder: how many items (folders, workbooks and reports) were
	// trashed with it, itself not counted.
	TrashedWith *int `json:"trashedWith,omitempty"`
}

// TrashResult is the outcome of a bulk trash operation (restore, purge, bulk delete), in
// request order: the items it applied to (Done) and those it did not (Failed), each with
// the error its single operation would have been answered with.
type TrashResult struct {
	Done   []ItemRef
	Failed []BulkFailure
}

func (res *TrashResult) fail(ref ItemRef, err *errs.Error) {
	res.Failed = append(res.Failed, BulkFailure{Ref: ref, Err: err})
}

// notApplied fails the refs a store failure (cause) left, as BulkMoveResult.notApplied
// does, in the words of verb ("deleted", "restored", "purged").
func (res *TrashResult) notApplied(rest []ItemRef, verb string, cause error) {
	reason := "the workspace store failed"
	if errors.Is(cause, context.DeadlineExceeded) {
		reason = "the item's deadline passed"
	}
	for j, ref := range rest {
		if j == 0 {
			res.fail(ref, notAppliedf("%s %d may not have been %s: %s while working on it; check the trash and retry", ref.Type.lower(), ref.ID, verb, reason))
			continue
		}
		res.fail(ref, notAppliedf("%s %d was not %s: %s; retry it", ref.Type.lower(), ref.ID, verb, reason))
	}
}

// eachRef runs one item's operation per distinct ref, in order, each under its own
// deadline: a refusal fails that item; a store failure fails it and every later one as
// not applied (their outcome is the store's, not theirs).
func eachRef(ctx context.Context, refs []ItemRef, verb string, one func(ctx context.Context, ref ItemRef) error) TrashResult {
	res := TrashResult{Done: []ItemRef{}, Failed: []BulkFailure{}}
	distinct := distinctRefs(refs)
	for i, ref := range distinct {
		ictx, cancel := context.WithTimeout(ctx, writeDeadline)
		err := one(ictx, ref)
		cancel()
		if err == nil {
			res.Done = append(res.Done, ref)
			continue
		}
		if f, ok := errs.As(err); ok {
			res.fail(ref, f)
			continue
		}
		res.notApplied(distinct[i:], verb, err)
		break
	}
	return res
}

// BulkDelete deletes each item as DELETE of that item would.
func (s *service) BulkDelete(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error) {
	if _, err := s.begin(ctx, p, deploymentID); err != nil {
		return TrashResult{}, err
	}
	return eachRef(ctx, refs, "deleted", func(ctx context.Context, ref ItemRef) error {
		if ref.Type == TypeFolder {
			return s.DeleteFolder(ctx, p, deploymentID, ref.ID)
		}
		return s.DeleteItem(ctx, p, deploymentID, ref.Type, ref.ID)
	}), nil
}

// recursiveDeleteLimit refuses a recursive delete of more than the configured items.
func (s *service) recursiveDeleteLimit(id int64, n int) error {
	return errs.New(errs.Invalid, "folder %d holds more than %d items (folders, workbooks and reports, itself included), the most one recursive delete trashes; delete parts of it first",
		id, s.limits.RecursiveDeleteItems).WithCode(errs.CodeRecursiveDeleteLimit)
}

// DeleteFolderTree trashes a folder the caller manages with everything below it, as one
// structural op (OpTrash) recorded in the tree version and then applied. Every folder of
// the subtree is first marked as being deleted (refused while a request holds a lease on
// one to put items in), so nothing lands in the subtree once its contents are read; the
// marks stay on the trashed folders and are lifted when the delete does not happen. The
// subtree is bounded (RecursiveDeleteItems) and read before anything is written.
func (s *service) DeleteFolderTree(ctx context.Context, p *identity.Principal, deploymentID, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	r, _, err := s.folderForRead(ctx, p, deploymentID, id, LevelManage, "delete it")
	if err != nil {
		return err
	}
	now := s.now()
	var marked, trashed []int64
	done := false
	defer func() {
		if !done && len(marked) > 0 {
			cctx, cancel := cleanupContext(ctx)
			defer cancel()
			_ = s.store.EndSubtreeDelete(cctx, deploymentID, marked)
		}
	}()
	prepare := func(ctx context.Context) error {
		if err := r.need(ctx, id); err != nil {
			return err
		}
		sub, err := s.store.SubtreeFolders(ctx, deploymentID, []int64{id})
		if err != nil {
			return err
		}
		folders := []int64{id}
		for _, n := range sub {
			folders = append(folders, n.ID)
		}
		if len(folders) > s.limits.RecursiveDeleteItems {
			return s.recursiveDeleteLimit(id, len(folders))
		}
		var unmarked []int64
		for _, f := range folders {
			if !slices.Contains(marked, f) {
				unmarked = append(unmarked, f)
			}
		}
		ok, err := s.store.BeginSubtreeDelete(ctx, deploymentID, unmarked, now, now.Add(leaseTTL))
		if err != nil {
			return err
		}
		if !ok {
			return errs.Conflictf("folder %d or a folder inside it is receiving items right now; retry the delete shortly", id)
		}
		marked = append(marked, unmarked...)
		refs, err := s.store.SubtreeItems(ctx, deploymentID, folders, s.limits.RecursiveDeleteItems-len(folders))
		if err != nil {
			return err
		}
		if len(folders)+len(refs) > s.limits.RecursiveDeleteItems {
			return s.recursiveDeleteLimit(id, len(folders)+len(refs))
		}
		trashed = folders[1:]
		for _, ref := range refs {
			trashed = append(trashed, ref.ID)
		}
		return nil
	}
	err = r.commit(ctx, prepare, func(t *tree) (*TreeOp, error) {
		if t.folders[id] == nil {
			return nil, notFound(TypeFolder, id)
		}
		return &TreeOp{Kind: OpTrash, Folder: id, IDs: slices.Clone(trashed), N: len(trashed) + 1, By: p.User.ID, At: now}, nil
	})
	if err != nil {
		if r.committing {
			done = true // recorded, or maybe: whoever finishes the op trashes what it names
		}
		return err
	}
	done = true
	// The slots of exactly what this op trashed go back (another request may have
	// applied it first, or an item may have been deleted on its own meanwhile).
	n, err := s.store.CountTrashed(ctx, deploymentID, id, r.v)
	if err != nil {
		return err
	}
	cctx, ccancel := cleanupContext(ctx)
	defer ccancel()
	_ = s.store.ReturnItemSlots(cctx, deploymentID, int64(n))
	return s.store.RemoveFavoritesOf(cctx, deploymentID, append([]int64{id}, trashed...))
}

// trashedRoot reads the trashed root ref (404 when it is not in the trash; 409 when it
// went there with a folder, whose restore or purge it follows).
func (s *service) trashedRoot(ctx context.Context, deploymentID int64, ref ItemRef) (*Item, error) {
	got, err := s.store.TrashedItems(ctx, deploymentID, []int64{ref.ID})
	if err != nil {
		return nil, err
	}
	d := got[ref.ID]
	if d == nil || d.Type != ref.Type {
		return nil, errs.New(errs.NotFound, "%s %d is not in the trash", ref.Type.lower(), ref.ID)
	}
	if d.Trash.Root != d.ID {
		return nil, errs.New(errs.Conflict, "%s %d was trashed with folder %d: restore or purge that folder", ref.Type.lower(), ref.ID, d.Trash.Root).WithCode(errs.CodeTrashedWithFolder)
	}
	return d, nil
}

// trashLevel is the caller's level on a trashed root d whose original folder's chain the
// tree holds (as far as it is live): as on the item where it was, its own grants included
// for a folder; the one who trashed it keeps edit (an ai_bi_user or above), so they can
// undo their delete.
func trashLevel(t *tree, p *identity.Principal, d *Item) Level {
	var l Level
	if d.Type == TypeFolder {
		l = t.childFolderLevel(p, d)
	} else {
		l = t.itemLevel(p, d.CreatedBy, d.Parent)
	}
	if d.Parent != 0 && t.folders[d.Parent] == nil && l < LevelManage && !p.HasRole(identity.RoleAdmin) && d.CreatedBy != p.User.ID {
		l = LevelNone // the original folder is gone: its grants give nothing
	}
	if d.Trash != nil && d.Trash.By == p.User.ID && p.HasRole(identity.RoleAIBIUser) && l < LevelEdit {
		l = LevelEdit
	}
	return l
}

// trashCursor is the key of the last entry of a trash page.
type trashCursor struct {
	At time.Time `json:"t"`
	ID int64     `json:"i"`
}

// ListTrash pages the trashed roots the caller may see: what they could view where the
// item was (its original folder's grants, its creator, admins everything) or what they
// trashed themselves. A page examines at most ListScan roots, as a listing does.
func (s *service) ListTrash(ctx context.Context, p *identity.Principal, deploymentID int64, first int, after string) (httpx.Page[TrashEntry], error) {
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return httpx.Page[TrashEntry]{}, err
	}
	var from *TrashKey
	if after != "" {
		c, err := httpx.DecodeCursor[trashCursor](after)
		if err != nil {
			return httpx.Page[TrashEntry]{}, err
		}
		from = &TrashKey{At: c.At, ID: c.ID}
	}
	var out []TrashEntry
	var last *Item
	examined, more := 0, false
	for len(out) < first && examined < s.limits.ListScan {
		limit := min(first-len(out)+1, s.limits.ListScan-examined)
		if len(out) < examined {
			limit = min(max(limit, 100), s.limits.ListScan-examined) // some were not visible: read more at once
		}
		batch, err := s.store.TrashRoots(ctx, deploymentID, from, limit)
		if err != nil {
			return httpx.Page[TrashEntry]{}, err
		}
		var parents []int64
		for _, d := range batch {
			parents = append(parents, d.Parent)
		}
		if err := r.need(ctx, parents...); err != nil {
			return httpx.Page[TrashEntry]{}, err
		}
		for _, d := range batch {
			if len(out) == first {
				more = true
				break
			}
			examined++
			last = d
			if trashLevel(r.tree, p, d) >= LevelView {
				out = append(out, trashEntry(d))
			}
		}
		if more || len(batch) < limit {
			break
		}
		from = &TrashKey{At: last.Trash.At, ID: last.ID}
		if examined >= s.limits.ListScan {
			more = true
		}
	}
	if last == nil {
		return httpx.PageEndingAt[TrashEntry, trashCursor](out, false, nil), nil
	}
	end := trashCursor{At: last.Trash.At, ID: last.ID}
	return httpx.PageEndingAt(out, more, &end), nil
}

func trashEntry(d *Item) TrashEntry {
	e := TrashEntry{Type: d.Type, ID: d.ID, Name: d.Name, Key: renderKey(d), FolderID: optionalID(d.Parent), DeletedAt: formatTime(d.Trash.At), DeletedBy: d.Trash.By}
	if d.Type == TypeFolder {
		n := max(d.Trash.Items-1, 0)
		e.TrashedWith = &n
	}
	return e
}

// RestoreTrash restores each root of refs on its own (restoreOne).
func (s *service) RestoreTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, folder *int64) (TrashResult, error) {
	if _, err := s.begin(ctx, p, deploymentID); err != nil {
		return TrashResult{}, err
	}
	if !p.HasRole(identity.RoleAIBIUser) {
		res := TrashResult{Done: []ItemRef{}, Failed: []BulkFailure{}}
		for _, ref := range distinctRefs(refs) {
			res.fail(ref, errs.Forbiddenf("restoring a %s needs the ai_bi_user role or higher", ref.Type.lower()))
		}
		return res, nil
	}
	return eachRef(ctx, refs, "restored", func(ctx context.Context, ref ItemRef) error { return s.restoreOne(ctx, p, deploymentID, ref, folder) }), nil
}

// restoreOne brings back one trashed root: into its original folder when that is live,
// else into folder (the root when 0 is not allowed: folder is nil or a folder id). The
// caller needs edit on the item as it was (or to have trashed it) and edit on where it
// goes. It takes one item slot per item it brings back (a folder's: everything trashed
// with it) before writing, and gives them back when nothing was restored. A workbook or
// report comes back with one conditional update; a folder with an OpRestore, checked
// for depth and cycles against the tree at the version it commits on.
func (s *service) restoreOne(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, folder *int64) error {
	r := &request{s: s, p: p, deploymentID: deploymentID, tree: newTree()}
	if err := r.load(ctx); err != nil {
		return err
	}
	d, err := s.trashedRoot(ctx, deploymentID, ref)
	if err != nil {
		return err
	}
	want := []int64{d.Parent}
	if folder != nil {
		want = append(want, *folder)
	}
	if err := r.need(ctx, want...); err != nil {
		return err
	}
	if trashLevel(r.tree, p, d) < LevelEdit {
		return errs.Forbiddenf("you need edit access to %s %d where it was to restore it", ref.Type.lower(), ref.ID)
	}
	to := d.Parent
	if to != 0 && r.tree.folders[to] == nil {
		if folder == nil {
			return errs.New(errs.Conflict, "the original folder %d of %s %d is gone; send folderId to restore it into another folder", to, ref.Type.lower(), ref.ID).WithCode(errs.CodeOriginalFolderGone)
		}
		to = *folder
	}
	if to != 0 && r.tree.folders[to] == nil {
		return notFound(TypeFolder, to)
	}
	if r.tree.containerLevel(p, to) < LevelEdit {
		return errs.Forbiddenf("you need edit access to folder %d to restore items into it", to)
	}
	n := 1
	if d.Type == TypeFolder {
		if n, err = s.store.CountTrashed(ctx, deploymentID, d.ID, 0); err != nil {
			return err
		}
	}
	ok, err := s.store.TakeItemSlots(ctx, deploymentID, int64(n), s.limits.ItemsPerDeployment)
	if err != nil {
		return err
	}
	if !ok {
		return errs.New(errs.Invalid, "restoring %s %d brings back %d items, and deployment %d would then hold more than %d items (folders, workbooks and reports), the limit; delete some first",
			ref.Type.lower(), ref.ID, n, deploymentID, s.limits.ItemsPerDeployment).WithCode(errs.CodeItemLimit)
	}
	giveBack := true
	defer func() {
		if giveBack {
			cctx, cancel := cleanupContext(ctx)
			defer cancel()
			_ = s.store.ReturnItemSlots(cctx, deploymentID, int64(n))
		}
	}()
	lease := &destLease{s: s, deploymentID: deploymentID, dest: to}
	defer lease.release(ctx)
	if err := lease.take(ctx); err != nil {
		return err
	}
	if lease.gone {
		return notFound(TypeFolder, to)
	}
	if d.Type != TypeFolder {
		ok, err := s.store.RestoreItem(ctx, deploymentID, d.ID, d.Type, to, r.v, p.User.ID, s.now())
		if errors.Is(err, ErrKeyTaken) {
			return keyTaken(d.Type, d.Key)
		}
		if err != nil {
			giveBack = false // it may have been restored
			return err
		}
		if !ok {
			return errs.Conflictf("%s %d was restored or purged during the restore", ref.Type.lower(), ref.ID)
		}
		giveBack = false
		return nil
	}
	var nodes []*FolderNode
	err = r.commit(ctx, func(ctx context.Context) error {
		if err := r.need(ctx, to); err != nil {
			return err
		}
		var err error
		nodes, err = s.store.TrashedFolders(ctx, deploymentID, d.ID)
		return err
	}, func(t *tree) (*TreeOp, error) {
		if to != 0 && t.folders[to] == nil {
			return nil, notFound(TypeFolder, to)
		}
		tt := newTree()
		for _, n := range t.folders {
			tt.add(n)
		}
		root := false
		for _, n := range nodes {
			tt.add(n)
			root = root || n.ID == d.ID
		}
		if !root {
			return nil, errs.Conflictf("folder %d was restored or purged during the restore", d.ID)
		}
		if to != 0 && tt.isSelfOrDescendant(to, d.ID) {
			return nil, errs.Invalidf("cannot restore folder %d into itself or one of its descendants (folder %d)", d.ID, to).WithCode(errs.CodeFolderCycle)
		}
		if deepest := tt.level(to) + tt.height(d.ID); deepest > MaxDepth {
			return nil, errs.Invalidf("restoring folder %d into %s would put a folder at level %d: folders nest at most %d levels deep", d.ID, folderWords(to), deepest, MaxDepth).WithCode(errs.CodeDepthLimit)
		}
		op := tt.moveOp(d.ID, to)
		op.Kind, op.By, op.At = OpRestore, p.User.ID, s.now()
		return op, nil
	})
	if err != nil {
		giveBack = !r.committing
		return err
	}
	giveBack = false
	return nil
}

func folderWords(id int64) string {
	if id == 0 {
		return "the workspace root"
	}
	return "folder " + strconv.FormatInt(id, 10)
}

// PurgeTrash purges each root of refs on its own (purgeOne).
func (s *service) PurgeTrash(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef) (TrashResult, error) {
	if _, err := s.begin(ctx, p, deploymentID); err != nil {
		return TrashResult{}, err
	}
	return eachRef(ctx, refs, "purged", func(ctx context.Context, ref ItemRef) error {
		r := &request{s: s, p: p, deploymentID: deploymentID, tree: newTree()}
		d, err := s.trashedRoot(ctx, deploymentID, ref)
		if err != nil {
			return err
		}
		if err := r.need(ctx, d.Parent); err != nil {
			return err
		}
		if trashLevel(r.tree, p, d) < LevelEdit {
			return errs.Forbiddenf("you need edit access to %s %d where it was to purge it", ref.Type.lower(), ref.ID)
		}
		return s.purgeRoot(ctx, deploymentID, d)
	}), nil
}

// createSettle is how long after a folder's creation a late application of that
// creation may still arrive (its request's writes end within writeDeadline): a purged
// folder younger than that stays as a bare tombstone, which such an application meets
// as its own and leaves alone.
const createSettle = 2 * writeDeadline

// purgeRoot removes the trashed root d and what was trashed with it: a workbook or
// report with one conditional delete, a folder's set with an OpPurge (serialized with
// restores by the tree version). Purging takes no item slot and gives none back: a
// trashed item holds none.
func (s *service) purgeRoot(ctx context.Context, deploymentID int64, d *Item) error {
	if d.Type != TypeFolder {
		ok, err := s.store.PurgeItem(ctx, deploymentID, d.ID, d.Type)
		if err != nil {
			return err
		}
		if !ok {
			return errs.New(errs.NotFound, "%s %d is not in the trash", d.Type.lower(), d.ID)
		}
		return nil
	}
	r := &request{s: s, deploymentID: deploymentID, tree: newTree()}
	gone := false
	return r.commit(ctx, func(ctx context.Context) error {
		got, err := s.store.TrashedItems(ctx, deploymentID, []int64{d.ID})
		gone = err == nil && (got[d.ID] == nil || got[d.ID].Trash.Root != d.ID)
		return err
	}, func(*tree) (*TreeOp, error) {
		if gone {
			return nil, errs.New(errs.NotFound, "folder %d is not in the trash", d.ID)
		}
		return &TreeOp{Kind: OpPurge, Folder: d.ID, At: s.now().Add(-createSettle)}, nil
	})
}
