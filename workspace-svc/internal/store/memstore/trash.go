package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// trashed returns the trashed item id of deployment deploymentID, or nil.
func (s *Store) trashed(deploymentID, id int64) *record {
	r := s.items[id]
	if r == nil || !r.deleted || r.item.Trash == nil || r.item.DeploymentID != deploymentID {
		return nil
	}
	return r
}

// TrashedItems returns the trashed items among ids: heads with their TrashInfo.
func (s *Store) TrashedItems(ctx context.Context, deploymentID int64, ids []int64) (map[int64]*workspace.Item, error) {
	if err := s.begin(ctx, "TrashedItems"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make(map[int64]*workspace.Item, len(ids))
	for _, id := range ids {
		if r := s.trashed(deploymentID, id); r != nil {
			out[id] = withParts(&r.item, 0)
		}
	}
	return out, nil
}

// TrashRoots returns a page of the deployment's trashed roots, newest first.
func (s *Store) TrashRoots(ctx context.Context, deploymentID int64, after *workspace.TrashKey, limit int) ([]*workspace.Item, error) {
	if err := s.begin(ctx, "TrashRoots"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var roots []*record
	for _, r := range s.items {
		if t := r.item.Trash; r.deleted && t != nil && r.item.DeploymentID == deploymentID && t.Root == r.item.ID {
			if after == nil || t.At.Before(after.At) || (t.At.Equal(after.At) && r.item.ID < after.ID) {
				roots = append(roots, r)
			}
		}
	}
	slices.SortFunc(roots, func(a, b *record) int {
		if c := b.item.Trash.At.Compare(a.item.Trash.At); c != 0 {
			return c
		}
		return int(b.item.ID - a.item.ID)
	})
	out := []*workspace.Item{}
	for _, r := range roots[:min(len(roots), limit)] {
		out = append(out, projected(&r.item))
	}
	return out, nil
}

// TrashedFolders returns the folders trashed with root.
func (s *Store) TrashedFolders(ctx context.Context, deploymentID, root int64) ([]*workspace.FolderNode, error) {
	if err := s.begin(ctx, "TrashedFolders"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*workspace.FolderNode
	for _, id := range s.sortedIDs() {
		if r := s.trashed(deploymentID, id); r != nil && r.item.Trash.Root == root && r.item.Type == workspace.TypeFolder {
			out = append(out, node(&r.item))
		}
	}
	return out, nil
}

// CountTrashed counts the items trashed with root (with treeV > 0: by that op).
func (s *Store) CountTrashed(ctx context.Context, deploymentID, root, treeV int64) (int, error) {
	if err := s.begin(ctx, "CountTrashed"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.items {
		if r.deleted && r.item.Trash != nil && r.item.DeploymentID == deploymentID && r.item.Trash.Root == root && (treeV == 0 || r.treeV == treeV) {
			n++
		}
	}
	return n, nil
}

// SubtreeItems returns the live workbooks and reports inside folders, at most max+1.
func (s *Store) SubtreeItems(ctx context.Context, deploymentID int64, folders []int64, max int) ([]workspace.ItemRef, error) {
	if err := s.begin(ctx, "SubtreeItems"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []workspace.ItemRef{}
	for _, id := range s.sortedIDs() {
		r := s.live(deploymentID, id)
		if r != nil && r.item.Type != workspace.TypeFolder && slices.Contains(folders, r.item.Parent) && len(out) <= max {
			out = append(out, workspace.ItemRef{Type: r.item.Type, ID: id})
		}
	}
	return out, nil
}

// BeginSubtreeDelete marks every folder of ids as being deleted, or none.
func (s *Store) BeginSubtreeDelete(ctx context.Context, deploymentID int64, ids []int64, now, until time.Time) (bool, error) {
	if err := s.begin(ctx, "BeginSubtreeDelete"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	for _, id := range ids {
		r := s.live(deploymentID, id)
		if r == nil || r.item.Type != workspace.TypeFolder || (r.leaseCount > 0 && !r.leaseUntil.IsZero() && !r.leaseUntil.Before(now)) {
			return false, nil
		}
	}
	for _, id := range ids {
		s.items[id].deletingUntil = until
	}
	return true, nil
}

// EndSubtreeDelete lifts the delete marks of ids.
func (s *Store) EndSubtreeDelete(ctx context.Context, deploymentID int64, ids []int64) error {
	if err := s.begin(ctx, "EndSubtreeDelete"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, id := range ids {
		if r := s.items[id]; r != nil && r.item.DeploymentID == deploymentID {
			r.deletingUntil = time.Time{}
		}
	}
	return nil
}

// rootRecord is the trashed root id of type typ of deploymentID, or nil.
func (s *Store) rootRecord(deploymentID, id int64, typ workspace.ItemType) *record {
	r := s.trashed(deploymentID, id)
	if r == nil || r.item.Type != typ || r.item.Trash.Root != id {
		return nil
	}
	return r
}

// RestoreItem brings back a workbook or report trashed as a root.
func (s *Store) RestoreItem(ctx context.Context, deploymentID, id int64, typ workspace.ItemType, parent, treeV, by int64, at time.Time) (bool, error) {
	if err := s.begin(ctx, "RestoreItem"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	r := s.rootRecord(deploymentID, id, typ)
	if r == nil || typ == workspace.TypeFolder {
		return false, nil
	}
	if s.keyHolder(deploymentID, typ, r.item.Key) != nil {
		return false, workspace.ErrKeyTaken
	}
	r.deleted, r.item.Trash, r.item.Parent, r.treeV = false, nil, parent, max(r.treeV, treeV)
	r.item.UpdatedAt, r.item.UpdatedBy = at, by
	r.item.Version++
	return true, nil
}

// PurgeItem removes a workbook or report trashed as a root.
func (s *Store) PurgeItem(ctx context.Context, deploymentID, id int64, typ workspace.ItemType) (bool, error) {
	if err := s.begin(ctx, "PurgeItem"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if s.rootRecord(deploymentID, id, typ) == nil || typ == workspace.TypeFolder {
		return false, nil
	}
	s.dropVersions(deploymentID, id)
	delete(s.items, id)
	return true, nil
}

// ExpiredTrashRoots returns the roots of any deployment trashed before `before`.
func (s *Store) ExpiredTrashRoots(ctx context.Context, before time.Time, limit int) ([]workspace.TrashRoot, error) {
	if err := s.begin(ctx, "ExpiredTrashRoots"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var roots []*record
	for _, r := range s.items {
		if t := r.item.Trash; r.deleted && t != nil && t.Root == r.item.ID && t.At.Before(before) {
			roots = append(roots, r)
		}
	}
	slices.SortFunc(roots, func(a, b *record) int {
		if c := a.item.Trash.At.Compare(b.item.Trash.At); c != 0 {
			return c
		}
		return int(a.item.ID - b.item.ID)
	})
	out := []workspace.TrashRoot{}
	for _, r := range roots[:min(len(roots), limit)] {
		out = append(out, workspace.TrashRoot{DeploymentID: r.item.DeploymentID, ID: r.item.ID, Type: r.item.Type})
	}
	return out, nil
}

// TakeItemSlots takes n slots at once, or none.
func (s *Store) TakeItemSlots(ctx context.Context, deploymentID, n, limit int64) (bool, error) {
	if err := s.begin(ctx, "TakeItemSlots"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	have, ok := s.slots[deploymentID]
	if !ok {
		for _, r := range s.items {
			if !r.deleted && r.item.DeploymentID == deploymentID {
				have++
			}
		}
	}
	if have+n > limit {
		s.slots[deploymentID] = have
		return false, nil
	}
	s.slots[deploymentID] = have + n
	return true, nil
}

// ReturnItemSlots gives n slots back, never below none taken.
func (s *Store) ReturnItemSlots(ctx context.Context, deploymentID, n int64) error {
	if err := s.begin(ctx, "ReturnItemSlots"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if have, ok := s.slots[deploymentID]; ok {
		s.slots[deploymentID] = max(0, have-n)
	}
	return nil
}

// RemoveFavoritesOf forgets every user's favorites of ids.
func (s *Store) RemoveFavoritesOf(ctx context.Context, deploymentID int64, ids []int64) error {
	if err := s.begin(ctx, "RemoveFavoritesOf"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for k, f := range s.favorites {
		if f.deploymentID == deploymentID && slices.Contains(ids, f.item) {
			delete(s.favorites, k)
		}
	}
	return nil
}

// applyTrashOp applies a trash, restore or purge op recorded as version v, fenced by
// each document's treeV as mongostore's statements are.
func (s *Store) applyTrashOp(deploymentID, v int64, op *workspace.TreeOp) {
	switch op.Kind {
	case workspace.OpTrash:
		for _, id := range append([]int64{op.Folder}, op.IDs...) {
			r := s.items[id]
			if r == nil || r.deleted || r.item.DeploymentID != deploymentID || r.treeV >= v {
				continue
			}
			t := &workspace.TrashInfo{At: op.At, By: op.By, Root: op.Folder}
			if id == op.Folder {
				t.Items = op.N
			}
			r.deleted, r.treeV, r.item.Trash, r.heldInTrash = true, v, t, r.item.Key != ""
			r.item.UpdatedAt, r.item.UpdatedBy = op.At, op.By
			r.item.Version++
		}
	case workspace.OpRestore:
		for _, id := range s.sortedIDs() {
			r := s.items[id]
			if r.item.DeploymentID != deploymentID || !r.deleted || r.item.Trash == nil || r.item.Trash.Root != op.Folder || r.treeV >= v {
				continue
			}
			switch {
			case id == op.Folder:
				r.item.Parent, r.item.Anc, r.item.Depth = op.To, slices.Clone(op.Anc), op.Depth
				r.item.UpdatedAt, r.item.UpdatedBy = op.At, op.By
			case r.item.Type == workspace.TypeFolder && slices.Contains(r.item.Anc, op.Folder):
				anc := slices.DeleteFunc(slices.Clone(r.item.Anc), func(a int64) bool { return slices.Contains(op.Pull, a) })
				for _, a := range op.Push {
					if !slices.Contains(anc, a) {
						anc = append(anc, a)
					}
				}
				r.item.Anc, r.item.Depth = anc, r.item.Depth+op.Delta
			}
			r.deleted, r.treeV, r.item.Trash, r.deletingUntil, r.heldInTrash = false, v, nil, time.Time{}, false
			r.item.Version++
		}
	case workspace.OpPurge:
		for _, id := range s.sortedIDs() {
			r := s.items[id]
			if r.item.DeploymentID != deploymentID || !r.deleted || r.item.Trash == nil || r.item.Trash.Root != op.Folder || r.treeV >= v {
				continue
			}
			if r.item.Type == workspace.TypeFolder && r.item.CreatedAt.After(op.At) {
				r.item.Trash, r.treeV, r.heldInTrash = nil, v, false // a bare tombstone, out of the trash
				continue
			}
			s.dropVersions(deploymentID, id)
			delete(s.items, id)
		}
	}
}

// dropVersions removes the kept dashboard versions of workbook wb (none for another item).
func (s *Store) dropVersions(deploymentID, wb int64) {
	for vid, r := range s.versions {
		if r.v.DeploymentID == deploymentID && r.v.WorkbookID == wb {
			delete(s.versions, vid)
		}
	}
}
