package memstore_test

import (
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/store/memstore"
	"github.com/analyticsco/platform/dbtsync-svc/internal/store/storetest"
)

// TestStoreContract: the in-memory fake keeps the contract the MongoDB adapter keeps.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) storetest.Store { return memstore.New() })
}
