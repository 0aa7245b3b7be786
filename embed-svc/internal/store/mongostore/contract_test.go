package mongostore_test

import (
	"context"
	"testing"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/embed-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/embed-svc/internal/store/storetest"
)

// TestStoreContract runs the catalog, user and session-record contracts against MongoDB
// (FerretDB behind the serializing proxy), each case in a database of its own with the
// indexes made, and holds every query the cases sent against those indexes (mongoplan).
func TestStoreContract(t *testing.T) {
	database := devstack.CaseDatabases(t, "embed")
	storetest.RunDurable(t, func(t *testing.T) storetest.Durable {
		s := mongostore.New(database(t))
		if err := s.EnsureIndexes(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}
