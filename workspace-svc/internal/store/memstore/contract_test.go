package memstore_test

import (
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/store/memstore"
	"github.com/analyticsco/platform/workspace-svc/internal/store/storetest"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestStoreContract: the in-memory fake keeps the contract the MongoDB adapter keeps.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) workspace.Store { return memstore.New() })
}
