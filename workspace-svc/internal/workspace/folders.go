package workspace

import (
	"context"
	"errors"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// CreateFolder creates a folder at the root or in a parent the caller can edit.
//
// What it costs does not depend on what the deployment holds: the item limit is one
// atomic update of the deployment's counter (takeSlot), taken once access is decided,
// and a folder created without a position is placed without reading its siblings: its
// position is the tree version its creation commits as. Every structural change of a
// deployment (a folder created or moved) takes the next version, so a folder created
// later without a position lists after every folder created earlier without one,
// wherever each was created or moved since; a position the client gives is kept as
// given. (A folder positioned by the highest sibling plus one, before, sits below any
// such version: each folder created took a version.)
func (s *service) CreateFolder(ctx context.Context, p *identity.Principal, deploymentID int64, in CreateFolderInput) (Folder, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return Folder{}, err
	}
	name, err := validName("name", in.Name)
	if err != nil {
		return Folder{}, err
	}
	if in.Key != "" {
		if err := ValidKey(in.Key); err != nil {
			return Folder{}, err
		}
	}
	if !p.HasRole(identity.RoleAIBIUser) {
		return Folder{}, errs.Forbiddenf("creating a folder needs the ai_bi_user role or higher")
	}
	if err := s.keyFree(ctx, deploymentID, TypeFolder, in.Key); err != nil {
		return Folder{}, err
	}
	id, err := s.store.NextID(ctx)
	if err != nil {
		return Folder{}, err
	}
	now := s.now()
	leased, slotted := false, false
	defer func() {
		if leased {
			s.release(ctx, deploymentID, in.ParentID)
		}
	}()
	var doc *Item
	err = r.commit(ctx, func(ctx context.Context) error { return r.need(ctx, in.ParentID) }, func(t *tree) (*TreeOp, error) {
		if in.ParentID != 0 {
			if t.folders[in.ParentID] == nil {
				return nil, notFound(TypeFolder, in.ParentID)
			}
			if t.folderLevel(p, in.ParentID) < LevelEdit {
				return nil, errs.Forbiddenf("you need edit access to folder %d to create a folder in it", in.ParentID)
			}
			if lvl := t.level(in.ParentID) + 1; lvl > MaxDepth {
				return nil, errs.Invalidf("folder %d is at level %d: a folder in it would be at level %d, and folders nest at most %d levels deep", in.ParentID, lvl-1, lvl, MaxDepth).WithCode(errs.CodeDepthLimit)
			}
			if !leased {
				ok, err := s.store.LeaseFolder(ctx, deploymentID, in.ParentID, now, now.Add(leaseTTL))
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, notFound(TypeFolder, in.ParentID)
				}
				leased = true
			}
		}
		if !slotted {
			if err := s.takeSlot(ctx, deploymentID); err != nil {
				return nil, err
			}
			slotted = true
		}
		pos := float64(r.v + 1) // the version this op commits as
		if in.Position != nil {
			pos = *in.Position
		}
		anc, depth := t.ancestorsOf(in.ParentID)
		doc = &Item{ID: id, DeploymentID: deploymentID, Type: TypeFolder, Name: name, Position: pos, Parent: in.ParentID,
			CreatedBy: p.User.ID, UpdatedBy: p.User.ID, CreatedAt: now, UpdatedAt: now, Anc: anc, Depth: depth, Key: in.Key, Version: 1}
		return &TreeOp{Kind: OpCreate, Folder: id, To: in.ParentID, By: p.User.ID, At: now, Created: doc}, nil
	})
	if err != nil {
		// The slot goes back when nothing was stored: the op was never recorded, or it
		// was and is void (its id was another item's, or its key a live folder's). An op
		// that was or may have been recorded (its compare-and-set failed without an
		// answer) keeps it: whoever finishes the op stores the folder.
		taken, keyHeld := errors.Is(err, ErrIDTaken), errors.Is(err, ErrKeyTaken)
		if slotted && (!r.committing || taken || keyHeld) {
			s.returnSlot(ctx, deploymentID)
		}
		if taken {
			return Folder{}, idTaken(TypeFolder, id)
		}
		if keyHeld {
			return Folder{}, keyTaken(TypeFolder, in.Key)
		}
		return Folder{}, err
	}
	r.created = id
	return s.renderFolder(ctx, r, doc)
}

// release gives a folder lease back, even when the request's context has ended, within
// cleanupTimeout: a lease not given back lapses on its own.
func (s *service) release(ctx context.Context, deploymentID, folder int64) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	_ = s.store.ReleaseFolder(ctx, deploymentID, folder)
}

// folderForRead reads folder id (a folder is all head: it has no large parts) and its
// ancestor chain, and checks the caller's level on it. The document read is the folder's node in the tree too, so the chain
// costs only the ancestors' query; its place (parent, name, position) is the one the
// check saw.
func (s *service) folderForRead(ctx context.Context, p *identity.Principal, deploymentID, id int64, need Level, verb string) (*request, *Item, error) {
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return nil, nil, err
	}
	docs, err := s.store.Items(ctx, deploymentID, []int64{id}, 0)
	if err != nil {
		return nil, nil, err
	}
	d := docs[id]
	if d == nil || d.Type != TypeFolder {
		return nil, nil, notFound(TypeFolder, id)
	}
	r.addDocs(d)
	if err := r.need(ctx, id); err != nil {
		return nil, nil, err
	}
	n := r.tree.folders[id] // as need left it: read again if its chain did not add up
	if n == nil {
		return nil, nil, notFound(TypeFolder, id)
	}
	if r.tree.folderLevel(p, id) < need {
		return nil, nil, errs.Forbiddenf("you need %s access to folder %d to %s", need, id, verb)
	}
	d.Parent, d.Name, d.Position = n.Parent, n.Name, n.Position
	return r, d, nil
}

// GetFolder returns a folder the caller can view.
func (s *service) GetFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64) (Folder, error) {
	r, d, err := s.folderForRead(ctx, p, deploymentID, id, LevelView, "view it")
	if err != nil {
		return Folder{}, err
	}
	return s.renderFolder(ctx, r, d)
}

// UpdateFolder renames or repositions a folder the caller can edit.
func (s *service) UpdateFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64, in UpdateFolderInput) (Folder, error) {
	u := ItemUpdate{Position: in.Position}
	if in.Name != nil {
		n, err := validName("name", *in.Name)
		if err != nil {
			return Folder{}, err
		}
		u.Name = &n
	}
	if in.Key != nil {
		if err := ValidKey(*in.Key); err != nil {
			return Folder{}, err
		}
	}
	if in.Name == nil && in.Position == nil && in.Key == nil {
		return Folder{}, errs.Invalidf("nothing to update: send name, position or key")
	}
	r, cur, err := s.folderForRead(ctx, p, deploymentID, id, LevelEdit, "change it")
	if err != nil {
		return Folder{}, err
	}
	if err := checkVersion(cur, in.ExpectedVersion); err != nil {
		return Folder{}, err
	}
	if u.Key, err = keyChange(cur, in.Key); err != nil {
		return Folder{}, err
	}
	if u.Name == nil && u.Position == nil && u.Key == nil { // only the key it has
		return s.renderFolder(ctx, r, cur)
	}
	pre := ItemPrecondition{Version: in.ExpectedVersion}
	u.UpdatedAt, u.UpdatedBy = s.now(), p.User.ID
	d, err := s.store.UpdateItem(ctx, deploymentID, id, TypeFolder, pre, u)
	if errors.Is(err, ErrKeyTaken) {
		return Folder{}, keyTaken(TypeFolder, *u.Key)
	}
	if err != nil {
		return Folder{}, err
	}
	if d == nil {
		if pre.Version == nil && u.Key == nil {
			return Folder{}, notFound(TypeFolder, id)
		}
		return Folder{}, s.updateRefused(ctx, deploymentID, TypeFolder, id, in.ExpectedVersion)
	}
	if n := r.tree.folders[id]; n != nil {
		n.Name = d.Name
	}
	return s.renderFolder(ctx, r, d)
}

// DeleteFolder deletes an empty folder the caller manages. The folder is marked as being
// deleted (refused while a request holds a lease on it for putting items in), the last
// structural op is finished, and only then is emptiness checked: nothing can land in it
// after the check. The delete that tombstones it gives its item slot back.
func (s *service) DeleteFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	if _, _, err := s.folderForRead(ctx, p, deploymentID, id, LevelManage, "delete it"); err != nil {
		return err
	}
	now := s.now()
	ok, err := s.store.BeginFolderDelete(ctx, deploymentID, id, now, now.Add(leaseTTL))
	if err != nil {
		return err
	}
	if !ok {
		return errs.Conflictf("folder %d is receiving items right now; retry the delete shortly", id)
	}
	r := &request{s: s, p: p, deploymentID: deploymentID}
	if err := r.load(ctx); err != nil {
		s.liftDeleteMark(ctx, deploymentID, id, p.User.ID, now)
		return err
	}
	busy, err := s.store.HasChildren(ctx, deploymentID, id)
	if err != nil || busy {
		s.liftDeleteMark(ctx, deploymentID, id, p.User.ID, now)
		if err != nil {
			return err
		}
		return errs.Conflictf("folder %d is not empty: move or delete its contents first", id).WithCode(errs.CodeFolderNotEmpty)
	}
	deleted, err := s.store.EndFolderDelete(ctx, deploymentID, id, true, p.User.ID, now)
	if err != nil {
		return err
	}
	if deleted { // only the delete that tombstoned it: a concurrent second one gives nothing back
		s.returnSlot(ctx, deploymentID)
	}
	return s.store.RemoveItemFavorites(ctx, deploymentID, id) // a trashed item is nobody's favorite
}

// GetPermissions returns the grants set directly on a folder the caller manages.
func (s *service) GetPermissions(ctx context.Context, p *identity.Principal, deploymentID, id int64) ([]Grant, error) {
	r, _, err := s.folderForRead(ctx, p, deploymentID, id, LevelManage, "see its permissions")
	if err != nil {
		return nil, err
	}
	return sortedGrants(r.tree.folders[id].Grants), nil
}

// SetPermissions replaces the grants of a folder the caller manages.
func (s *service) SetPermissions(ctx context.Context, p *identity.Principal, deploymentID, id int64, grants []Grant) ([]Grant, error) {
	// Bounded: every request that touches the folder or its subtree reads its grants, and
	// a listing reads those of every folder on its page.
	if len(grants) > s.limits.Grants {
		return nil, errs.Invalidf("a folder holds at most %d grants, not %d", s.limits.Grants, len(grants))
	}
	seen := map[int64]bool{}
	for i, g := range grants {
		if g.UserID <= 0 {
			return nil, errs.Invalidf("grants[%d].userId must be a positive integer", i)
		}
		if _, ok := ParseLevel(g.Level); !ok {
			return nil, errs.Invalidf("grants[%d].level must be one of view, edit, manage, not %q", i, g.Level)
		}
		if seen[g.UserID] {
			return nil, errs.Invalidf("grants[%d].userId %d is listed twice", i, g.UserID)
		}
		seen[g.UserID] = true
	}
	if _, _, err := s.folderForRead(ctx, p, deploymentID, id, LevelManage, "change its permissions"); err != nil {
		return nil, err
	}
	if grants == nil {
		grants = []Grant{}
	}
	d, err := s.store.UpdateItem(ctx, deploymentID, id, TypeFolder, ItemPrecondition{}, ItemUpdate{Grants: &grants, UpdatedAt: s.now(), UpdatedBy: p.User.ID})
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, notFound(TypeFolder, id)
	}
	return sortedGrants(d.Grants), nil
}
