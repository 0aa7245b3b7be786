package mongostore_test

import (
	"context"
	"testing"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/workspace-svc/internal/store/storetest"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestStoreContract runs the store contract against MongoDB (FerretDB behind the
// serializing proxy), each case in a database of its own.
func TestStoreContract(t *testing.T) {
	client, err := mongox.Connect(context.Background(), devstack.MongoForTest(t).URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	storetest.Run(t, func(t *testing.T) workspace.Store {
		s := mongostore.New(client.Database(devstack.UniqueName(t, "ws")))
		if err := s.EnsureIndexes(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}
