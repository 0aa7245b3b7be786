package workspace_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/store/memstore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// awayStore is a store whose database cannot be reached, counting what it was asked.
type awayStore struct {
	*memstore.Store
	calls int
}

func (s *awayStore) RecordUser(context.Context, workspace.User) error {
	s.calls++
	return fmt.Errorf("record user: %w", errs.ErrUnavailable)
}

func (s *awayStore) NextID(context.Context) (int64, error) {
	s.calls++
	return 0, fmt.Errorf("allocate ids: %w", errs.ErrUnavailable)
}

// TestAnUnreachableDatabaseAnswersAtItsFirstCommand: the record of a caller is best
// effort, but when the database cannot be reached for it the request answers 503 at once
// instead of waiting out another server selection for its next command (with MongoDB
// away each waits 15 s, and two of them pass the gateway's 30 s).
func TestAnUnreachableDatabaseAnswersAtItsFirstCommand(t *testing.T) {
	store := &awayStore{Store: memstore.New()}
	svc := workspace.NewService(workspace.Ports{Store: store}, workspace.Options{})
	_, err := svc.CreateFolder(context.Background(), admin, 7, workspace.CreateFolderInput{Name: "f"})
	if !errs.IsUnavailable(err) {
		t.Fatalf("create with the database away: %v, want unavailable", err)
	}
	if store.calls != 1 {
		t.Fatalf("the create asked the store %d times, want 1: it answers at the first unreachable command", store.calls)
	}
}
