package mongostore_test

import (
	"context"
	"testing"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/libs/idempotency/idemtest"
	idemstore "github.com/analyticsco/platform/libs/idempotency/mongostore"
	"github.com/analyticsco/platform/libs/mongox"
)

// TestIdempotencyStoreContract runs the Idempotency-Key store contract against the
// MongoDB adapter every service uses in its own database, and holds its queries against
// the indexes it declares.
func TestIdempotencyStoreContract(t *testing.T) {
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(context.Background(), devstack.MongoForTest(t).URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "ws"))
	s := idemstore.New(db)
	if err := s.EnsureIndexes(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plan.Check(t, db) })
	idemtest.RunStoreContract(t, s)
}
