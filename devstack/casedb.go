package devstack

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/libs/mongox"
)

// CaseDatabases is how a store's contract suite gets MongoDB: it starts a FerretDB for t
// (MongoForTest), connects with a plan recorder, and returns what gives each case a
// database of its own, named after the case with prefix. When the case ends, every query
// it sent is held to the indexes its database declares (mongoplan).
func CaseDatabases(t *testing.T, prefix string) func(t *testing.T) *mongo.Database {
	t.Helper()
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(context.Background(), MongoForTest(t).URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return func(t *testing.T) *mongo.Database {
		db := client.Database(UniqueName(t, prefix))
		t.Cleanup(func() { plan.Check(t, db) })
		return db
	}
}
