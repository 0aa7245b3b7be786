package mongostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/dbtsync-svc/internal/store/storetest"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/mongox"
)

// TestStoreContract runs the store contract against MongoDB (FerretDB), each case in a
// database of its own, and holds every query the cases sent against the declared
// indexes (mongoplan).
func TestStoreContract(t *testing.T) {
	database := devstack.CaseDatabases(t, "store")
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s := mongostore.New(database(t))
		if err := mongox.EnsureIndexes(context.Background(), 10*time.Second, s.EnsureIndexes); err != nil {
			t.Fatal(err)
		}
		return s
	})
}
