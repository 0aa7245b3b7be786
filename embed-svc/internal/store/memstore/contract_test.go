package memstore_test

import (
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/store/memstore"
	"github.com/analyticsco/platform/embed-svc/internal/store/storetest"
)

// TestStoreContract: the in-memory fakes keep the contracts the MongoDB and Redis
// adapters keep.
func TestStoreContract(t *testing.T) {
	storetest.RunDurable(t, func(*testing.T) storetest.Durable { return memstore.New() })
	storetest.RunSessions(t, func(*testing.T) embed.SessionStore { return memstore.NewSessions(nil) })
}
