package mongostore_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/workspace-svc/internal/store/storetest"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestStoreContract runs the store contract against MongoDB (FerretDB behind the
// serializing proxy), each case in a database of its own, and holds every query the
// cases sent against the declared indexes (mongoplan).
func TestStoreContract(t *testing.T) {
	database := devstack.CaseDatabases(t, "ws")
	storetest.Run(t, func(t *testing.T) workspace.Store {
		s := mongostore.New(database(t))
		if err := s.EnsureIndexes(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestItemsWrittenBeforeSizesHaveUnknownBytes: an item stored without the sizes of its
// parts (written before they were kept) reads with Bytes -1, also once one part has
// changed, so nobody bounds a read by a size that is not there.
func TestItemsWrittenBeforeSizesHaveUnknownBytes(t *testing.T) {
	ctx := context.Background()
	client, err := mongox.Connect(ctx, devstack.MongoForTest(t).URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(ctx) })
	db := client.Database(devstack.UniqueName(t, "ws"))
	s := mongostore.New(db)
	now := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := db.Collection("items").InsertOne(ctx, bson.D{{Key: "_id", Value: int64(5)}, {Key: "dep", Value: int64(1)}, {Key: "type", Value: "WORKBOOK"},
		{Key: "name", Value: "old"}, {Key: "parent", Value: int64(0)}, {Key: "createdBy", Value: int64(1)}, {Key: "updatedBy", Value: int64(1)},
		{Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now}, {Key: "meta", Value: `{"a":1}`}, {Key: "draft", Value: `{}`}}); err != nil {
		t.Fatal(err)
	}
	heads, err := s.Items(ctx, 1, []int64{5}, 0)
	if err != nil || heads[5] == nil || heads[5].Bytes != -1 {
		t.Fatalf("an item without sizes: %+v %v, want Bytes -1", heads[5], err)
	}
	u, err := s.UpdateItem(ctx, 1, 5, workspace.TypeWorkbook, workspace.ItemPrecondition{}, workspace.ItemUpdate{Meta: []byte(`{"b":2}`), UpdatedAt: now, UpdatedBy: 1})
	if err != nil || u == nil || u.Bytes != -1 {
		t.Fatalf("after one part changed: %+v %v, want Bytes still -1", u, err)
	}
}

// TestAFullBatchIsOneCommand: a listing or search batch that comes back exactly full costs
// one command, not a find and an empty getMore (FerretDB keeps such a cursor open): a
// listing's cost is counted in round trips.
func TestAFullBatchIsOneCommand(t *testing.T) {
	ctx := context.Background()
	counter := &mongox.CommandCounter{}
	client, err := mongox.Connect(ctx, devstack.MongoForTest(t).URI, counter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(ctx) })
	s := mongostore.New(client.Database(devstack.UniqueName(t, "ws")))
	now := time.Now().UTC()
	for i := range 5 {
		if err := s.InsertItem(ctx, &workspace.Item{ID: int64(i + 1), DeploymentID: 1, Type: workspace.TypeWorkbook, Name: "wb", CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		read func() ([]*workspace.Item, error)
	}{
		{"children", func() ([]*workspace.Item, error) {
			return s.Children(ctx, 1, workspace.ChildrenQuery{Limit: 3})
		}},
		{"search", func() ([]*workspace.Item, error) { return s.Search(ctx, 1, workspace.SearchQuery{Limit: 3}) }},
	} {
		counter.Reset()
		got, err := c.read()
		if err != nil || len(got) != 3 || counter.Total() != 1 {
			t.Fatalf("%s: %d items (%v) in %v commands, want 3 in one", c.name, len(got), err, counter.ByName())
		}
	}
}
