package mongostore

import (
	"context"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

var errBuilding = errs.Unavailablef("embed access storage is being built")

// SetEmbedAccess implements workspace.EmbedAccessStore.
func (s *Store) SetEmbedAccess(ctx context.Context, dep, id int64, typ workspace.ItemType, g embedaccess.Grants, by int64, at time.Time) (bool, error) {
	return false, errBuilding
}

// RootEmbedAccess implements workspace.EmbedAccessStore.
func (s *Store) RootEmbedAccess(ctx context.Context, dep int64) (embedaccess.Grants, error) {
	return embedaccess.Grants{}, errBuilding
}

// SetRootEmbedAccess implements workspace.EmbedAccessStore.
func (s *Store) SetRootEmbedAccess(ctx context.Context, dep int64, g embedaccess.Grants, by int64, at time.Time) error {
	return errBuilding
}

// WorkbookByPublicID implements workspace.EmbedAccessStore.
func (s *Store) WorkbookByPublicID(ctx context.Context, dep int64, publicID string, parts workspace.Parts) (*workspace.Item, error) {
	return nil, errBuilding
}

// EmbeddableWorkbooks implements workspace.EmbedAccessStore.
func (s *Store) EmbeddableWorkbooks(ctx context.Context, dep, afterID int64, limit int) ([]*workspace.Item, error) {
	return nil, errBuilding
}

// WorkbookHeads implements workspace.EmbedAccessStore.
func (s *Store) WorkbookHeads(ctx context.Context, dep, afterID int64, limit int) ([]*workspace.Item, error) {
	return nil, errBuilding
}
