package mongostore_test

import (
	"context"
	"testing"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/embed-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/embed-svc/internal/store/storetest"
	"github.com/analyticsco/platform/libs/mongox"
)

// TestStoreContract runs the catalog, user and session-record contracts against MongoDB
// (FerretDB behind the serializing proxy), each case in a database of its own with the
// indexes made, and holds every query the cases sent against those indexes (mongoplan).
func TestStoreContract(t *testing.T) {
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(context.Background(), devstack.MongoForTest(t).URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	storetest.RunDurable(t, func(t *testing.T) storetest.Durable {
		db := client.Database(devstack.UniqueName(t, "embed"))
		t.Cleanup(func() { plan.Check(t, db) })
		s := mongostore.New(db)
		if err := s.EnsureIndexes(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}
