package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// SetEmbedAccess replaces the own embed grants of the live folder or workbook id of type
// typ; an empty g clears them. A grant change is not a change of the item's content: its
// updatedAt and updatedBy stay as they are.
func (s *Store) SetEmbedAccess(ctx context.Context, deploymentID, id int64, typ workspace.ItemType, g embedaccess.Grants, by int64, at time.Time) (bool, error) {
	if err := s.begin(ctx, "SetEmbedAccess"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if typ != workspace.TypeFolder && typ != workspace.TypeWorkbook {
		return false, nil
	}
	r := s.meeting(deploymentID, id, typ, workspace.ItemPrecondition{})
	if r == nil {
		return false, nil
	}
	r.item.EmbedAccess = cloneGrants(g)
	r.item.Version++
	return true, nil
}

// RootEmbedAccess returns the grants on the deployment's root (empty when none).
func (s *Store) RootEmbedAccess(ctx context.Context, deploymentID int64) (embedaccess.Grants, error) {
	if err := s.begin(ctx, "RootEmbedAccess"); err != nil {
		return embedaccess.Grants{}, err
	}
	defer s.mu.Unlock()
	return cloneGrants(s.roots[deploymentID]), nil
}

// SetRootEmbedAccess replaces the grants on the deployment's root.
func (s *Store) SetRootEmbedAccess(ctx context.Context, deploymentID int64, g embedaccess.Grants, by int64, at time.Time) error {
	if err := s.begin(ctx, "SetRootEmbedAccess"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if g.Empty() {
		delete(s.roots, deploymentID)
		return nil
	}
	s.roots[deploymentID] = cloneGrants(g)
	return nil
}

// WorkbookByPublicID returns the live workbook of deploymentID whose published dashboard has
// publicID, with the large parts that parts names; nil when there is none.
func (s *Store) WorkbookByPublicID(ctx context.Context, deploymentID int64, publicID string, parts workspace.Parts) (*workspace.Item, error) {
	if err := s.begin(ctx, "WorkbookByPublicID"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if publicID == "" {
		return nil, nil
	}
	for _, id := range s.sortedIDs() {
		r := s.live(deploymentID, id)
		if r != nil && r.item.Type == workspace.TypeWorkbook && r.item.PublicID == publicID {
			return withParts(&r.item, parts), nil
		}
	}
	return nil, nil
}

// EmbeddableWorkbooks returns heads of at most limit live workbooks of deploymentID, by id after
// afterID, whose dashboard is published with allowEmbed.
func (s *Store) EmbeddableWorkbooks(ctx context.Context, deploymentID, afterID int64, limit int) ([]*workspace.Item, error) {
	if err := s.begin(ctx, "EmbeddableWorkbooks"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.workbookHeads(deploymentID, afterID, limit, func(it *workspace.Item) bool { return it.Embeddable }), nil
}

// WorkbookHeads returns heads of at most limit live workbooks of deploymentID, by id after
// afterID.
func (s *Store) WorkbookHeads(ctx context.Context, deploymentID, afterID int64, limit int) ([]*workspace.Item, error) {
	if err := s.begin(ctx, "WorkbookHeads"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.workbookHeads(deploymentID, afterID, limit, func(*workspace.Item) bool { return true }), nil
}

func (s *Store) workbookHeads(deploymentID, afterID int64, limit int, keep func(*workspace.Item) bool) []*workspace.Item {
	out := []*workspace.Item{}
	for _, id := range s.sortedIDs() {
		if len(out) >= limit {
			break
		}
		r := s.live(deploymentID, id)
		if id <= afterID || r == nil || r.item.Type != workspace.TypeWorkbook || !keep(&r.item) {
			continue
		}
		out = append(out, withParts(&r.item, 0))
	}
	return out
}

// cloneGrants is a deep copy of g, its empty lists nil (as MongoDB reads a list it does
// not store).
func cloneGrants(g embedaccess.Grants) embedaccess.Grants {
	out := embedaccess.Grants{AllEmbedUsers: g.AllEmbedUsers}
	if len(g.Tenants) > 0 {
		out.Tenants = slices.Clone(g.Tenants)
	}
	if len(g.Groups) > 0 {
		out.Groups = slices.Clone(g.Groups)
	}
	return out
}
