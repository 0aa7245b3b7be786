package memstore

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// Items returns the live items of the deployment among ids, by id, with the large parts
// that parts names.
func (s *Store) Items(ctx context.Context, deploymentID int64, ids []int64, parts workspace.Parts) (map[int64]*workspace.Item, error) {
	if err := s.begin(ctx, "Items"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make(map[int64]*workspace.Item, len(ids))
	for _, id := range ids {
		if r := s.live(deploymentID, id); r != nil {
			out[id] = withParts(&r.item, parts)
		}
	}
	return out, nil
}

// withParts is a copy of it with only the large parts that parts names (and the Bytes of
// all of them).
func withParts(it *workspace.Item, parts workspace.Parts) *workspace.Item {
	out := clone(it)
	if parts&workspace.PartMeta == 0 {
		out.Meta = nil
	}
	if parts&workspace.PartCalculatedFields == 0 {
		out.CalculatedFields = nil
	}
	if parts&workspace.PartDraft == 0 {
		out.Draft = nil
	}
	if parts&workspace.PartPublished == 0 {
		out.Published = nil
	}
	return out
}

// InsertItem stores a new workbook or report; an id already taken is an error.
func (s *Store) InsertItem(ctx context.Context, it *workspace.Item) error {
	if err := s.begin(ctx, "InsertItem"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.items[it.ID] != nil {
		return fmt.Errorf("insert item %d: %w", it.ID, workspace.ErrIDTaken)
	}
	if s.keyHolder(it.DeploymentID, it.Type, it.Key) != nil {
		return fmt.Errorf("insert item %d: %w", it.ID, workspace.ErrKeyTaken)
	}
	r := &record{item: *clone(it)}
	r.item.Version = max(r.item.Version, 1)
	r.item.PublishedTitle, r.item.Embeddable = workspace.PublishedHead(it.Published)
	s.items[it.ID] = r
	return nil
}

// UpdateItem changes a live item of type typ that meets pre and returns it as changed,
// or nil when there is none.
func (s *Store) UpdateItem(ctx context.Context, deploymentID, id int64, typ workspace.ItemType, pre workspace.ItemPrecondition, u workspace.ItemUpdate) (*workspace.Item, error) {
	if err := s.begin(ctx, "UpdateItem"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.meeting(deploymentID, id, typ, pre)
	if r == nil {
		return nil, nil
	}
	if u.Key != nil {
		if r.item.Key != "" {
			return nil, nil
		}
		if s.keyHolder(deploymentID, typ, *u.Key) != nil {
			return nil, fmt.Errorf("set key of item %d: %w", id, workspace.ErrKeyTaken)
		}
		r.item.Key = *u.Key
	}
	it := &r.item
	if u.Name != nil {
		it.Name = *u.Name
	}
	if u.Position != nil {
		it.Position = *u.Position
	}
	if u.Grants != nil {
		it.Grants = append([]workspace.Grant{}, *u.Grants...)
	}
	if u.Meta != nil {
		it.Meta = slices.Clone(u.Meta)
	}
	if u.CalculatedFields != nil {
		it.CalculatedFields = slices.Clone(u.CalculatedFields)
	}
	if u.Draft != nil {
		it.Draft = viaJSON(u.Draft)
	}
	if u.ClearDraft {
		it.Draft = nil
	}
	if p := u.Published; p != nil {
		it.Published, it.PublishedVersion, it.DashboardID, it.PublicID = viaJSON(p), p.VersionNumber, p.ID, p.PublicID
		it.PublishedTitle, it.Embeddable = workspace.PublishedHead(p)
	}
	it.UpdatedAt, it.UpdatedBy = u.UpdatedAt, u.UpdatedBy
	it.Version++
	return clone(it), nil
}

// meeting is the live item id of type typ meeting pre, or nil.
func (s *Store) meeting(deploymentID, id int64, typ workspace.ItemType, pre workspace.ItemPrecondition) *record {
	r := s.live(deploymentID, id)
	switch {
	case r == nil || r.item.Type != typ:
		return nil
	case pre.Parent != nil && r.item.Parent != *pre.Parent:
		return nil
	case pre.PublishedVersion != nil && r.item.PublishedVersion != *pre.PublishedVersion:
		return nil
	case pre.Version != nil && r.item.Version != *pre.Version:
		return nil
	}
	return r
}

// DeleteItem tombstones a live item of type typ that meets pre; false when there is none.
func (s *Store) DeleteItem(ctx context.Context, deploymentID, id int64, typ workspace.ItemType, pre workspace.ItemPrecondition, by int64, at time.Time) (bool, error) {
	if err := s.begin(ctx, "DeleteItem"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	r := s.meeting(deploymentID, id, typ, pre)
	if r == nil {
		return false, nil
	}
	r.deleted, r.item.UpdatedAt, r.item.UpdatedBy = true, at, by
	r.item.Version++
	r.item.Trash = &workspace.TrashInfo{At: at, By: by, Root: id, Items: 1}
	return true, nil
}

// MoveItem re-parents a live item if it is still in folder from.
func (s *Store) MoveItem(ctx context.Context, deploymentID, id, from, to, by int64, at time.Time) (bool, error) {
	if err := s.begin(ctx, "MoveItem"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	r := s.live(deploymentID, id)
	if r == nil || r.item.Parent != from {
		return false, nil
	}
	r.item.Parent, r.item.UpdatedAt, r.item.UpdatedBy = to, at, by
	r.item.Version++
	return true, nil
}

// HasChildren reports whether anything live is inside folder.
func (s *Store) HasChildren(ctx context.Context, deploymentID, folder int64) (bool, error) {
	if err := s.begin(ctx, "HasChildren"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	for _, r := range s.items {
		if !r.deleted && r.item.DeploymentID == deploymentID && r.item.Parent == folder {
			return true, nil
		}
	}
	return false, nil
}

func listOrder(a, b *workspace.Item) int {
	return cmp.Or(cmp.Compare(a.Position, b.Position), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
}

// Children returns at most q.Limit live children of q.Parent after q.After, by
// position, name and id, projected.
func (s *Store) Children(ctx context.Context, deploymentID int64, q workspace.ChildrenQuery) ([]*workspace.Item, error) {
	if err := s.begin(ctx, "Children"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var after *workspace.Item
	if a := q.After; a != nil {
		after = &workspace.Item{Position: a.Position, Name: a.Name, ID: a.ID}
	}
	var out []*workspace.Item
	for _, r := range s.items {
		it := &r.item
		if r.deleted || it.DeploymentID != deploymentID || it.Parent != q.Parent || (it.Type == workspace.TypeFolder) != q.Folders {
			continue
		}
		if after == nil || listOrder(it, after) > 0 {
			out = append(out, it)
		}
	}
	slices.SortFunc(out, listOrder)
	return projectAll(out[:min(len(out), q.Limit)]), nil
}

func projectAll(its []*workspace.Item) []*workspace.Item {
	out := make([]*workspace.Item, len(its))
	for i, it := range its {
		out[i] = projected(it)
	}
	return out
}

// Search returns at most q.Limit live items matching q after q.After, in q's order,
// projected.
func (s *Store) Search(ctx context.Context, deploymentID int64, q workspace.SearchQuery) ([]*workspace.Item, error) {
	if err := s.begin(ctx, "Search"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	name := regexp.MustCompile("(?i)" + regexp.QuoteMeta(q.NameContains))
	order := func(a, b *workspace.Item) int {
		c := cmp.Compare(a.Name, b.Name)
		if q.Sort == workspace.ByUpdatedAt {
			c = a.UpdatedAt.Compare(b.UpdatedAt)
		}
		c = cmp.Or(c, cmp.Compare(a.ID, b.ID))
		if q.Desc {
			return -c
		}
		return c
	}
	var after *workspace.Item
	if a := q.After; a != nil {
		after = &workspace.Item{Name: a.Name, UpdatedAt: a.UpdatedAt, ID: a.ID}
	}
	var out []*workspace.Item
	for _, r := range s.items {
		it := &r.item
		switch {
		case r.deleted || it.DeploymentID != deploymentID:
		case q.Parent != nil && it.Parent != *q.Parent:
		case q.Type != "" && it.Type != q.Type:
		case q.CreatedBy != 0 && it.CreatedBy != q.CreatedBy:
		case q.IDs != nil && !slices.Contains(q.IDs, it.ID):
		case !name.MatchString(it.Name):
		case after != nil && order(it, after) <= 0:
		default:
			out = append(out, it)
		}
	}
	slices.SortFunc(out, order)
	return projectAll(out[:min(len(out), q.Limit)]), nil
}

// LeaseFolder marks folder as receiving items until `until`, unless it is gone or being
// deleted.
func (s *Store) LeaseFolder(ctx context.Context, deploymentID, folder int64, now, until time.Time) (bool, error) {
	if err := s.begin(ctx, "LeaseFolder"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	r := s.live(deploymentID, folder)
	if r == nil || r.item.Type != workspace.TypeFolder || (!r.deletingUntil.IsZero() && !r.deletingUntil.Before(now)) {
		return false, nil
	}
	r.leaseCount++
	if until.After(r.leaseUntil) {
		r.leaseUntil = until
	}
	return true, nil
}

// ReleaseFolder gives a lease back.
func (s *Store) ReleaseFolder(ctx context.Context, deploymentID, folder int64) error {
	if err := s.begin(ctx, "ReleaseFolder"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if r := s.items[folder]; r != nil && r.item.DeploymentID == deploymentID {
		r.leaseCount--
	}
	return nil
}

// BeginFolderDelete marks folder as being deleted if no lease on it is live.
func (s *Store) BeginFolderDelete(ctx context.Context, deploymentID, folder int64, now, until time.Time) (bool, error) {
	if err := s.begin(ctx, "BeginFolderDelete"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	r := s.live(deploymentID, folder)
	if r == nil || r.item.Type != workspace.TypeFolder {
		return false, nil
	}
	if leased := !r.leaseUntil.IsZero() && r.leaseCount > 0 && !r.leaseUntil.Before(now); leased {
		return false, nil
	}
	r.deletingUntil = until
	return true, nil
}

// EndFolderDelete tombstones the folder (deleted) or lifts the delete mark; true when
// it tombstoned a live folder.
func (s *Store) EndFolderDelete(ctx context.Context, deploymentID, folder int64, deleted bool, by int64, at time.Time) (bool, error) {
	if err := s.begin(ctx, "EndFolderDelete"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	r := s.items[folder]
	if r == nil || r.item.DeploymentID != deploymentID {
		return false, nil
	}
	if !deleted {
		r.deletingUntil = time.Time{}
		return false, nil
	}
	if r.deleted {
		return false, nil
	}
	r.deleted, r.item.UpdatedAt, r.item.UpdatedBy = true, at, by
	r.item.Version++
	r.item.Trash = &workspace.TrashInfo{At: at, By: by, Root: folder, Items: 1}
	return true, nil
}
