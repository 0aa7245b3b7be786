package wireproxy_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/wireproxy"
)

// interleaveDB is a database of a fresh FerretDB behind a proxy in Interleave mode.
func interleaveDB(t *testing.T) *mongo.Database {
	t.Helper()
	m := devstack.MongoForTestSerializing(t, wireproxy.Interleave)
	c, err := mongo.Connect(options.Client().ApplyURI(m.URI).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatalf("connect %s: %v", m.URI, err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c.Database(devstack.UniqueName(t, "db"))
}

// seed inserts documents {_id: 1..n, s: "old"}.
func seed(t *testing.T, coll *mongo.Collection, n int) {
	t.Helper()
	var docs []any
	for i := 1; i <= n; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int64(i)}, {Key: "s", Value: "old"}, {Key: "u", Value: int64(i)}})
	}
	if _, err := coll.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, coll *mongo.Collection, filter bson.D) int64 {
	t.Helper()
	n, err := coll.CountDocuments(context.Background(), filter)
	if err != nil {
		t.Fatalf("count %v: %v", filter, err)
	}
	return n
}

func TestParseModeReadsEveryModesString(t *testing.T) {
	for _, m := range []wireproxy.Mode{wireproxy.All, wireproxy.Writes, wireproxy.Collections, wireproxy.Interleave} {
		got, err := wireproxy.ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	if _, err := wireproxy.ParseMode("interleaved"); err == nil {
		t.Error(`ParseMode("interleaved") = nil error, want one`)
	}
}

// TestInterleaveShowsAHalfAppliedUpdateMany: while an UpdateMany of 10 documents is
// between its documents, another client reads the collection and sees exactly the
// documents updated so far, and writes to the collection go through (MongoDB's
// visibility: atomic per document only); the UpdateMany then counts all 10.
func TestInterleaveShowsAHalfAppliedUpdateMany(t *testing.T) {
	db := interleaveDB(t)
	coll := db.Collection("half")
	seed(t, coll, 10)
	other := db.Collection("other")
	var mu sync.Mutex
	seen := map[int]int64{}
	defer wireproxy.SetBeforeDocument(func(c string, stmt, k int) {
		if c != "half" {
			return
		}
		n, err := coll.CountDocuments(context.Background(), bson.D{{Key: "s", Value: "new"}})
		if err != nil {
			t.Errorf("read beside the update: %v", err)
		}
		mu.Lock()
		seen[k] = n
		mu.Unlock()
		if _, err := other.InsertOne(context.Background(), bson.D{{Key: "k", Value: k}}); err != nil {
			t.Errorf("insert beside the update: %v", err)
		}
	})()
	res, err := coll.UpdateMany(context.Background(), bson.D{{Key: "s", Value: "old"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: "new"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.MatchedCount != 10 || res.ModifiedCount != 10 {
		t.Errorf("UpdateMany matched %d, modified %d; want 10, 10", res.MatchedCount, res.ModifiedCount)
	}
	mu.Lock()
	defer mu.Unlock()
	for k := range 10 {
		if seen[k] != int64(k) {
			t.Errorf("before document %d a reader saw %d documents updated, want %d (all seen: %v)", k, seen[k], k, seen)
		}
	}
	if n := count(t, other, bson.D{}); n != 10 {
		t.Errorf("%d writes ran between the documents, want 10", n)
	}
	if n := count(t, coll, bson.D{{Key: "s", Value: "new"}}); n != 10 {
		t.Errorf("%d documents updated in the end, want 10", n)
	}
}

// TestInterleaveRechecksTheFilterPerDocument: a document that another client changes
// after the UpdateMany (DeleteMany) found it, so that it no longer matches the filter, is
// neither updated (deleted) nor counted.
func TestInterleaveRechecksTheFilterPerDocument(t *testing.T) {
	db := interleaveDB(t)
	ctx := context.Background()
	for _, op := range []string{"update", "delete"} {
		t.Run(op, func(t *testing.T) {
			coll := db.Collection("recheck_" + op)
			seed(t, coll, 5)
			defer wireproxy.SetBeforeDocument(func(c string, stmt, k int) {
				if c != coll.Name() || k != 0 {
					return
				}
				// Document 3 was among the matches; now it no longer matches.
				if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int64(3)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: "other"}}}}); err != nil {
					t.Errorf("change document 3: %v", err)
				}
			})()
			filter := bson.D{{Key: "s", Value: "old"}}
			var n int64
			if op == "update" {
				res, err := coll.UpdateMany(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: "new"}}}})
				if err != nil {
					t.Fatal(err)
				}
				if res.MatchedCount != res.ModifiedCount {
					t.Errorf("matched %d, modified %d", res.MatchedCount, res.ModifiedCount)
				}
				n = res.ModifiedCount
			} else {
				res, err := coll.DeleteMany(ctx, filter)
				if err != nil {
					t.Fatal(err)
				}
				n = res.DeletedCount
			}
			if n != 4 {
				t.Errorf("%s counted %d documents, want 4", op, n)
			}
			var d struct{ S string }
			if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: int64(3)}}).Decode(&d); err != nil || d.S != "other" {
				t.Errorf("document 3 after the %s: %+v, %v; want it left as the other client set it", op, d, err)
			}
			if got := count(t, coll, bson.D{}); op == "delete" && got != 1 {
				t.Errorf("%d documents left after the delete, want 1", got)
			}
			if got := count(t, coll, bson.D{{Key: "s", Value: "new"}}); op == "update" && got != 4 {
				t.Errorf("%d documents updated, want 4", got)
			}
		})
	}
}

// TestInterleaveKeepsTheOrderOfStatements: an ordered bulk write of two UpdateMany, the
// second matching what the first wrote, runs them in order, with a reader between them;
// a write error ends its statement and, ordered, the command, with what ran before kept
// and counted.
func TestInterleaveKeepsTheOrderOfStatements(t *testing.T) {
	db := interleaveDB(t)
	ctx := context.Background()
	coll := db.Collection("ordered")
	seed(t, coll, 4)
	set := func(s string) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: s}}}} }
	res, err := coll.BulkWrite(ctx, []mongo.WriteModel{
		mongo.NewUpdateManyModel().SetFilter(bson.D{{Key: "s", Value: "old"}}).SetUpdate(set("mid")),
		mongo.NewUpdateManyModel().SetFilter(bson.D{{Key: "s", Value: "mid"}}).SetUpdate(set("new")),
	}, options.BulkWrite().SetOrdered(true))
	if err != nil {
		t.Fatal(err)
	}
	if res.MatchedCount != 8 || res.ModifiedCount != 8 {
		t.Errorf("bulk write matched %d, modified %d; want 8, 8", res.MatchedCount, res.ModifiedCount)
	}
	if n := count(t, coll, bson.D{{Key: "s", Value: "new"}}); n != 4 {
		t.Errorf("%d documents went through both statements, want 4", n)
	}

	// A unique index on u: setting u to one value succeeds on the first document only.
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "u", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	res, err = coll.BulkWrite(ctx, []mongo.WriteModel{
		mongo.NewUpdateManyModel().SetFilter(bson.D{}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: int64(99)}}}}),
		mongo.NewUpdateManyModel().SetFilter(bson.D{}).SetUpdate(set("after")),
	}, options.BulkWrite().SetOrdered(true))
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 0 || bwe.WriteErrors[0].Code != 11000 {
		t.Fatalf("bulk write whose first statement meets a duplicate key: %v, want one write error 11000 at index 0", err)
	}
	if res == nil || res.ModifiedCount != 1 {
		t.Errorf("bulk write result %+v, want 1 modified (the first document, before the duplicate)", res)
	}
	if n := count(t, coll, bson.D{{Key: "u", Value: int64(99)}}); n != 1 {
		t.Errorf("%d documents took u 99, want 1", n)
	}
	if n := count(t, coll, bson.D{{Key: "s", Value: "after"}}); n != 0 {
		t.Errorf("%d documents updated by the statement after the error, want 0 (ordered)", n)
	}
}

// TestInterleaveKeepsAnUpsertWhole: an UpdateMany with upsert is not split: matching
// nothing, it inserts one document, as MongoDB does; matching some, it updates them all.
func TestInterleaveKeepsAnUpsertWhole(t *testing.T) {
	db := interleaveDB(t)
	ctx := context.Background()
	coll := db.Collection("upsert")
	var split atomic.Int32
	defer wireproxy.SetBeforeDocument(func(c string, stmt, k int) {
		if c == "upsert" {
			split.Add(1)
		}
	})()
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: "up"}}}}
	res, err := coll.UpdateMany(ctx, bson.D{{Key: "k", Value: "a"}}, update, options.UpdateMany().SetUpsert(true))
	if err != nil {
		t.Fatal(err)
	}
	if res.UpsertedCount != 1 || res.MatchedCount != 0 {
		t.Errorf("upsert matching nothing: %+v, want one document upserted", res)
	}
	seed(t, coll, 3)
	res, err = coll.UpdateMany(ctx, bson.D{{Key: "s", Value: "old"}}, update, options.UpdateMany().SetUpsert(true))
	if err != nil {
		t.Fatal(err)
	}
	if res.MatchedCount != 3 || res.ModifiedCount != 3 || res.UpsertedCount != 0 {
		t.Errorf("upsert matching 3 documents: %+v, want 3 matched and modified", res)
	}
	if n := split.Load(); n != 0 {
		t.Errorf("the proxy split an upsert into %d documents", n)
	}
}
