package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// ReadTree returns the deployment's tree version, starting it at 0 on first use.
func (s *Store) ReadTree(ctx context.Context, deploymentID int64) (workspace.TreeVersion, error) {
	if err := s.begin(ctx, "ReadTree"); err != nil {
		return workspace.TreeVersion{}, err
	}
	defer s.mu.Unlock()
	tv := s.trees[deploymentID]
	if tv == nil {
		tv = &workspace.TreeVersion{}
		s.trees[deploymentID] = tv
	}
	return workspace.TreeVersion{V: tv.V, Op: cloneOp(tv.Op)}, nil
}

// CommitTreeOp records op as version v+1 if the tree is still at version v.
func (s *Store) CommitTreeOp(ctx context.Context, deploymentID, v int64, op *workspace.TreeOp) (bool, error) {
	if err := s.begin(ctx, "CommitTreeOp"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	tv := s.trees[deploymentID]
	if tv == nil || tv.V != v {
		return false, nil
	}
	tv.V, tv.Op = v+1, cloneOp(op)
	return true, nil
}

// ApplyTreeOp applies the op recorded as version v, fenced by each folder's treeV.
func (s *Store) ApplyTreeOp(ctx context.Context, deploymentID, v int64, op *workspace.TreeOp) error {
	if err := s.begin(ctx, "ApplyTreeOp"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	switch op.Kind {
	case workspace.OpMove:
		s.applyMove(deploymentID, v, op)
		return nil
	case workspace.OpNone:
		return nil
	case workspace.OpTrash, workspace.OpRestore, workspace.OpPurge:
		s.applyTrashOp(deploymentID, v, op)
		return nil
	case workspace.OpCreate:
		c := op.Created
		r := s.items[c.ID]
		switch {
		case r == nil:
			nr := &record{item: *clone(c), treeV: v}
			nr.item.Version = max(nr.item.Version, 1)
			if s.keyHolder(c.DeploymentID, c.Type, c.Key) != nil {
				// void: stored as a tombstone, so no later application makes it live
				nr.deleted, nr.void = true, true
			}
			s.items[c.ID] = nr
			if nr.void {
				return fmt.Errorf("apply folder creation %d: %w", c.ID, workspace.ErrKeyTaken)
			}
		case r.item.DeploymentID == c.DeploymentID && r.item.Type == workspace.TypeFolder && r.item.CreatedBy == c.CreatedBy &&
			r.item.CreatedAt.Equal(c.CreatedAt) && r.treeV >= v:
			// applied before (a tombstone keeps it all; a rename or a move since may
			// have changed its name, place and position)
			if r.void {
				return fmt.Errorf("apply folder creation %d: %w", c.ID, workspace.ErrKeyTaken)
			}
		default:
			return fmt.Errorf("apply folder creation %d: %w", c.ID, workspace.ErrIDTaken)
		}
		return nil
	}
	return fmt.Errorf("unknown tree op %q", op.Kind)
}

// applyMove writes the folder, then every folder below it, each of deployment deploymentID and
// only if its treeV is older than v (tombstones included), as mongostore's statements by
// id and by ancestor do.
func (s *Store) applyMove(deploymentID, v int64, op *workspace.TreeOp) {
	f := s.items[op.Folder]
	if f != nil && f.item.DeploymentID == deploymentID && f.treeV < v {
		f.item.Parent, f.treeV = op.To, v
		f.item.Anc, f.item.Depth, f.item.UpdatedAt, f.item.UpdatedBy = slices.Clone(op.Anc), op.Depth, op.At, op.By
		f.item.Version++
	}
	for _, id := range s.sortedIDs() {
		r := s.items[id]
		if r.item.DeploymentID != deploymentID || r.treeV >= v || !slices.Contains(r.item.Anc, op.Folder) {
			continue
		}
		anc := slices.DeleteFunc(slices.Clone(r.item.Anc), func(a int64) bool { return slices.Contains(op.Pull, a) })
		for _, a := range op.Push {
			if !slices.Contains(anc, a) {
				anc = append(anc, a)
			}
		}
		r.item.Anc, r.item.Depth, r.treeV = anc, r.item.Depth+op.Delta, v
	}
}

// Folders returns the live folders among ids.
func (s *Store) Folders(ctx context.Context, deploymentID int64, ids []int64) ([]*workspace.FolderNode, error) {
	if err := s.begin(ctx, "Folders"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*workspace.FolderNode
	seen := map[int64]bool{}
	for _, id := range ids {
		if r := s.live(deploymentID, id); r != nil && r.item.Type == workspace.TypeFolder && !seen[id] {
			seen[id] = true
			out = append(out, node(&r.item))
		}
	}
	return out, nil
}

// SubtreeFolders returns every live folder below any of ids.
func (s *Store) SubtreeFolders(ctx context.Context, deploymentID int64, ids []int64) ([]*workspace.FolderNode, error) {
	if err := s.begin(ctx, "SubtreeFolders"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*workspace.FolderNode
	if len(ids) == 0 {
		return out, nil
	}
	for _, id := range s.sortedIDs() {
		r := s.live(deploymentID, id)
		if r != nil && r.item.Type == workspace.TypeFolder && slices.ContainsFunc(r.item.Anc, func(a int64) bool { return slices.Contains(ids, a) }) {
			out = append(out, node(&r.item))
		}
	}
	return out, nil
}
