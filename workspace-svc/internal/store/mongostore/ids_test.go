package mongostore_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestAnIDBlockHandedOutTwiceIsNeverASuccess: a failover that rolls the id counter back
// hands a block out again, to another replica. That replica's folder or workbook create
// meets the id stored for another item: it answers 503 (retry), stores nothing, gives its
// item slot back, and drops the block, so the retry gets a fresh id and succeeds.
func TestAnIDBlockHandedOutTwiceIsNeverASuccess(t *testing.T) {
	ctx := context.Background()
	client, err := mongox.Connect(ctx, devstack.MongoForTest(t).URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(ctx) })
	db := client.Database(devstack.UniqueName(t, "ws"))
	replica := func() workspace.Service {
		s := mongostore.New(db)
		if err := s.EnsureIndexes(ctx); err != nil {
			t.Fatal(err)
		}
		return workspace.NewService(workspace.Ports{Store: s}, workspace.Options{})
	}
	const dep = 7
	admin := &identity.Principal{Credential: identity.CredentialBearer, Account: identity.Account{ID: 100},
		User: &identity.User{ID: 1, Email: "admin@example.com", Role: identity.RoleAdmin}, Deployment: &identity.Deployment{ID: dep}}
	rollBack := func() { // the counter as it was before the last block was reserved
		if _, err := db.Collection("counters").UpdateOne(ctx, bson.D{{Key: "_id", Value: "workspace_items"}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "seq", Value: -int64(mongostore.IDBlock)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	slots := func() int64 {
		var d struct {
			Items int64 `bson:"items"`
		}
		if err := db.Collection("slots").FindOne(ctx, bson.D{{Key: "_id", Value: int64(dep)}}).Decode(&d); err != nil {
			t.Fatal(err)
		}
		return d.Items
	}
	first := replica()
	theirs, err := first.CreateFolder(ctx, admin, dep, workspace.CreateFolderInput{Name: "first replica's"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		create func(workspace.Service) (int64, error)
	}{
		{"folder", func(s workspace.Service) (int64, error) {
			fo, err := s.CreateFolder(ctx, admin, dep, workspace.CreateFolderInput{Name: "second replica's"})
			return fo.ID, err
		}},
		{"workbook", func(s workspace.Service) (int64, error) {
			wb, err := s.CreateItem(ctx, admin, dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "second replica's"})
			return wb.ID, err
		}},
	} {
		rollBack()
		before := slots()
		second := replica()
		if _, err := c.create(second); err == nil {
			t.Fatalf("%s: created with an id already taken", c.name)
		} else if e, ok := errs.As(err); !ok || e.Kind != errs.Unavailable {
			t.Fatalf("%s: %v, want a 503 that says retry", c.name, err)
		}
		if got := slots(); got != before {
			t.Fatalf("%s: %d slots taken after the refused create, want %d", c.name, got, before)
		}
		// The first replica's folder is untouched.
		got, err := first.GetFolder(ctx, admin, dep, theirs.ID)
		if err != nil || got.Name != "first replica's" {
			t.Fatalf("%s: the folder holding the id: %+v %v", c.name, got, err)
		}
		id, err := c.create(second)
		if err != nil || id == theirs.ID {
			t.Fatalf("%s: the retry: id %d %v, want a fresh id", c.name, id, err)
		}
		if got := slots(); got != before+1 {
			t.Fatalf("%s: %d slots taken after the retry, want %d", c.name, got, before+1)
		}
	}
	// Requests after the void creation (the tree's last op) go on.
	if _, err := replica().CreateFolder(ctx, admin, dep, workspace.CreateFolderInput{Name: "after"}); err != nil {
		t.Fatal(err)
	}
}
