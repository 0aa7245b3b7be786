package workspace

import (
	"context"
	"errors"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// CreateItem creates a workbook or report at the root or in a folder the caller can edit.
func (s *service) CreateItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, in CreateItemInput) (Workbook, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return Workbook{}, err
	}
	name, err := validName("name", in.Name)
	if err != nil {
		return Workbook{}, err
	}
	if err := in.DashboardDraft.Validate("dashboardDraft"); err != nil {
		return Workbook{}, err
	}
	if in.Key != "" {
		if err := ValidKey(in.Key); err != nil {
			return Workbook{}, err
		}
	}
	if !p.HasRole(identity.RoleAIBIUser) {
		return Workbook{}, errs.Forbiddenf("creating a %s needs the ai_bi_user role or higher", typ.lower())
	}
	if err := s.checkSizes(in.Meta, in.CalculatedFields, in.DashboardDraft); err != nil {
		return Workbook{}, err
	}
	if err := r.need(ctx, in.FolderID); err != nil {
		return Workbook{}, err
	}
	if in.FolderID != 0 {
		if r.tree.folders[in.FolderID] == nil {
			return Workbook{}, notFound(TypeFolder, in.FolderID)
		}
		if r.tree.folderLevel(p, in.FolderID) < LevelEdit {
			return Workbook{}, errs.Forbiddenf("you need edit access to folder %d to create a %s in it", in.FolderID, typ.lower())
		}
		now := s.now()
		ok, err := s.store.LeaseFolder(ctx, deploymentID, in.FolderID, now, now.Add(leaseTTL))
		if err != nil {
			return Workbook{}, err
		}
		if !ok {
			return Workbook{}, notFound(TypeFolder, in.FolderID)
		}
		defer s.release(ctx, deploymentID, in.FolderID)
	}
	if err := s.keyFree(ctx, deploymentID, typ, in.Key); err != nil {
		return Workbook{}, err
	}
	// The item limit, once access is decided: one update of the deployment's counter.
	if err := s.takeSlot(ctx, deploymentID); err != nil {
		return Workbook{}, err
	}
	id, err := s.store.NextID(ctx)
	if err != nil {
		s.returnSlot(ctx, deploymentID)
		return Workbook{}, err
	}
	now := s.now()
	d := &Item{ID: id, DeploymentID: deploymentID, Type: typ, Name: name, Parent: in.FolderID, CreatedBy: p.User.ID, UpdatedBy: p.User.ID,
		CreatedAt: now, UpdatedAt: now, Meta: in.Meta, CalculatedFields: in.CalculatedFields, Draft: in.DashboardDraft,
		Key: in.Key, Version: 1}
	if err := s.store.InsertItem(ctx, d); err != nil {
		// Another item's id, or its key another live item's: nothing was stored. Any
		// other failure may have stored it (a write the database did not confirm): the
		// slot stays taken.
		if errors.Is(err, ErrIDTaken) {
			s.returnSlot(ctx, deploymentID)
			return Workbook{}, idTaken(typ, id)
		}
		if errors.Is(err, ErrKeyTaken) {
			s.returnSlot(ctx, deploymentID)
			return Workbook{}, keyTaken(typ, in.Key)
		}
		return Workbook{}, err
	}
	r.created = id
	out, err := s.render(ctx, r, []*Item{d})
	if err != nil {
		return Workbook{}, err
	}
	return out[0], nil
}

// itemForAccess reads the head of a workbook or report (none of its content) and checks
// the caller's level on it; withParts reads the content once access is decided.
func (s *service) itemForAccess(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64, need Level, verb string) (*request, *Item, error) {
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return nil, nil, err
	}
	docs, err := s.store.Items(ctx, deploymentID, []int64{id}, 0)
	if err != nil {
		return nil, nil, err
	}
	d := docs[id]
	if d == nil || d.Type != typ {
		return nil, nil, notFound(typ, id)
	}
	if err := r.need(ctx, d.Parent); err != nil {
		return nil, nil, err
	}
	if r.tree.itemLevel(p, d.CreatedBy, d.Parent) < need {
		return nil, nil, errs.Forbiddenf("you need %s access to %s %d to %s", need, typ.lower(), id, verb)
	}
	return r, d, nil
}

// withParts reads the parts of an item whose head passed itemForAccess. An item that
// moved in between is checked again where it is now.
func (s *service) withParts(ctx context.Context, r *request, head *Item, parts Parts, need Level, verb string) (*Item, error) {
	docs, err := s.store.Items(ctx, r.deploymentID, []int64{head.ID}, parts)
	if err != nil {
		return nil, err
	}
	d := docs[head.ID]
	if d == nil || d.Type != head.Type {
		return nil, notFound(head.Type, head.ID)
	}
	if d.Parent != head.Parent {
		if err := r.need(ctx, d.Parent); err != nil {
			return nil, err
		}
		if r.tree.itemLevel(r.p, d.CreatedBy, d.Parent) < need {
			return nil, errs.Forbiddenf("you need %s access to %s %d to %s", need, d.Type.lower(), d.ID, verb)
		}
	}
	return d, nil
}

// GetItem returns a workbook or report the caller can view.
func (s *service) GetItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64) (Workbook, error) {
	r, d, err := s.itemForAccess(ctx, p, deploymentID, typ, id, LevelView, "view it")
	if err != nil {
		return Workbook{}, err
	}
	if d, err = s.withParts(ctx, r, d, AllParts, LevelView, "view it"); err != nil {
		return Workbook{}, err
	}
	out, err := s.render(ctx, r, []*Item{d})
	if err != nil {
		return Workbook{}, err
	}
	return out[0], nil
}

// UpdateItem renames a workbook or report, or replaces its meta, calculated fields or
// dashboard draft; it needs edit on the item.
func (s *service) UpdateItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64, in UpdateItemInput) (Workbook, error) {
	u := ItemUpdate{Meta: in.Meta, CalculatedFields: in.CalculatedFields, Draft: in.DashboardDraft}
	if in.Name != nil {
		n, err := validName("name", *in.Name)
		if err != nil {
			return Workbook{}, err
		}
		u.Name = &n
	}
	if in.DashboardDraft != nil {
		if typ != TypeWorkbook {
			return Workbook{}, errs.Invalidf("only workbooks have a dashboardDraft")
		}
		if err := in.DashboardDraft.Validate("dashboardDraft"); err != nil {
			return Workbook{}, err
		}
	}
	if err := s.checkSizes(in.Meta, in.CalculatedFields, in.DashboardDraft); err != nil {
		return Workbook{}, err
	}
	if in.Key != nil {
		if err := ValidKey(*in.Key); err != nil {
			return Workbook{}, err
		}
	}
	if in.Name == nil && in.Meta == nil && in.CalculatedFields == nil && in.DashboardDraft == nil && in.Key == nil {
		return Workbook{}, errs.Invalidf("nothing to update: send name, meta, calculatedFields, dashboardDraft or key")
	}
	r, d, err := s.itemForAccess(ctx, p, deploymentID, typ, id, LevelEdit, "change it")
	if err != nil {
		return Workbook{}, err
	}
	if err := checkVersion(d, in.ExpectedVersion); err != nil {
		return Workbook{}, err
	}
	if u.Key, err = keyChange(d, in.Key); err != nil {
		return Workbook{}, err
	}
	pre := ItemPrecondition{Parent: &d.Parent, Version: in.ExpectedVersion}
	if u.Name == nil && u.Meta == nil && u.CalculatedFields == nil && u.Draft == nil && u.Key == nil {
		// only the key it has: nothing changes
		full, err := s.withParts(ctx, r, d, AllParts, LevelEdit, "change it")
		if err != nil {
			return Workbook{}, err
		}
		out, err := s.render(ctx, r, []*Item{full})
		if err != nil {
			return Workbook{}, err
		}
		return out[0], nil
	}
	u.UpdatedAt, u.UpdatedBy = s.now(), p.User.ID
	nd, err := s.store.UpdateItem(ctx, deploymentID, id, typ, pre, u)
	if errors.Is(err, ErrKeyTaken) {
		return Workbook{}, keyTaken(typ, *u.Key)
	}
	if err != nil {
		return Workbook{}, err
	}
	if nd == nil {
		return Workbook{}, s.updateRefused(ctx, deploymentID, typ, id, in.ExpectedVersion)
	}
	out, err := s.render(ctx, r, []*Item{nd})
	if err != nil {
		return Workbook{}, err
	}
	return out[0], nil
}

// DeleteItem deletes a workbook or report the caller manages (its creator, or manage on
// its folder). It leaves a tombstone and gives the item's slot back; later publishes no
// longer snapshot a deleted report, and every user's favorite of it is dropped.
func (s *service) DeleteItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64) error {
	_, d, err := s.itemForAccess(ctx, p, deploymentID, typ, id, LevelManage, "delete it")
	if err != nil {
		return err
	}
	deleted, err := s.store.DeleteItem(ctx, deploymentID, id, typ, ItemPrecondition{Parent: &d.Parent}, p.User.ID, s.now())
	if err != nil {
		return err
	}
	if !deleted {
		return errs.Conflictf("%s %d was moved or deleted during the delete; retry", typ.lower(), id)
	}
	s.returnSlot(ctx, deploymentID) // only a live item matches: exactly one delete gives its slot back
	return s.store.RemoveItemFavorites(ctx, deploymentID, id)
}

// SetFavorite marks (on) or unmarks an item the caller can view as one of their
// favorites. Both are idempotent.
func (s *service) SetFavorite(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, on bool) error {
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return err
	}
	if !on {
		return s.store.RemoveFavorite(ctx, deploymentID, p.User.ID, ref.ID)
	}
	docs, err := s.store.Items(ctx, deploymentID, []int64{ref.ID}, 0)
	if err != nil {
		return err
	}
	d := docs[ref.ID]
	if d == nil || d.Type != ref.Type {
		return notFound(ref.Type, ref.ID)
	}
	r.addDocs(d)
	chain := d.Parent
	if d.Type == TypeFolder {
		chain = d.ID
	}
	if err := r.need(ctx, chain); err != nil {
		return err
	}
	if !r.visible(d) {
		return errs.Forbiddenf("you need view access to %s %d to make it a favorite", ref.Type.lower(), ref.ID)
	}
	have, err := s.store.FavoriteIDs(ctx, deploymentID, p.User.ID, s.limits.Favorites)
	if err != nil {
		return err
	}
	if len(have) >= s.limits.Favorites && !containsID(have, ref.ID) {
		return errs.New(errs.Invalid, "you already have %d favorites in deployment %d, the limit; remove one first", s.limits.Favorites, deploymentID).WithCode(errs.CodeFavoritesLimit)
	}
	return s.store.AddFavorite(ctx, deploymentID, p.User.ID, ref, s.now())
}
