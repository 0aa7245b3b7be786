package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/wireproxy"
)

// bulkDeadline bounds a bulk write of 500 statements: generous (a few seconds are
// usual, under the race detector on a loaded machine), only so that one that never ends
// fails the test instead of hanging it.
const bulkDeadline = 2 * time.Minute

// outcome is what the driver reports for a bulk write, and the collection after it.
type outcome struct {
	Inserted, Matched, Modified, Deleted, Upserted int64
	UpsertedIDs                                    map[int64]any
	Errors                                         []string // index:code
	Docs                                           []bson.M
}

func (o outcome) String() string {
	return fmt.Sprintf("inserted %d matched %d modified %d deleted %d upserted %d (%v), errors %v, %d documents",
		o.Inserted, o.Matched, o.Modified, o.Deleted, o.Upserted, o.UpsertedIDs, o.Errors, len(o.Docs))
}

// bulkWrite runs models as one bulk write on coll and reports the outcome.
func bulkWrite(t *testing.T, coll *mongo.Collection, models []mongo.WriteModel, ordered bool) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bulkDeadline)
	defer cancel()
	res, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(ordered))
	var bwe mongo.BulkWriteException
	if err != nil && !errors.As(err, &bwe) {
		t.Fatalf("bulk write of %d: %v", len(models), err)
	}
	o := outcome{Inserted: res.InsertedCount, Matched: res.MatchedCount, Modified: res.ModifiedCount, Deleted: res.DeletedCount,
		Upserted: res.UpsertedCount, UpsertedIDs: map[int64]any{}}
	for i, id := range res.UpsertedIDs {
		o.UpsertedIDs[i] = id
	}
	for _, we := range bwe.WriteErrors {
		o.Errors = append(o.Errors, fmt.Sprintf("%d:%d", we.Index, we.Code))
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err == nil {
		err = cur.All(ctx, &o.Docs)
	}
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	return o
}

// seeded is a new collection with documents {_id: i, k: i} for i < n and a unique index on k.
func seeded(t *testing.T, db *mongo.Database, n int) *mongo.Collection {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bulkDeadline)
	defer cancel()
	coll := db.Collection(devstack.UniqueName(t, "c"))
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		docs := make([]bson.D, n)
		for i := range n {
			docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "k", Value: int32(i)}}
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
	return coll
}

func setW(i int) mongo.WriteModel {
	return mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: int32(i)}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: int32(1)}}}})
}

func upsertK(i, k int) mongo.WriteModel {
	return mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: int32(i)}}).
		SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: int32(k)}, {Key: "w", Value: int32(1)}}}}).SetUpsert(true)
}

func deleteID(i int) mongo.WriteModel {
	return mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: int32(i)}})
}

// badDelete is a delete whose filter the server refuses (an unknown operator): a write
// error of its statement.
func badDelete() mongo.WriteModel {
	return mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "k", Value: bson.D{{Key: "$nosuchoperator", Value: 1}}}})
}

func insertID(id int) mongo.WriteModel {
	return mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: int32(id)}, {Key: "k", Value: int32(id)}})
}

// withW counts the documents that have the field w.
func withW(docs []bson.M) (n int) {
	for _, d := range docs {
		if _, ok := d["w"]; ok {
			n++
		}
	}
	return n
}

func ids(from, to int, except ...int) map[int64]any {
	m := map[int64]any{}
	for i := from; i < to; i++ {
		if !slices.Contains(except, i) {
			m[int64(i)] = int32(i)
		}
	}
	return m
}

// TestMongoBulkWritesOfManyStatementsComplete: bulk writes of 500 statements (FerretDB
// alone never answers an update of 50) complete, with the counts, upserted ids and write
// error indexes MongoDB reports: an ordered one stops at its error, an unordered one goes
// on.
func TestMongoBulkWritesOfManyStatementsComplete(t *testing.T) {
	t.Parallel()
	m := devstack.MongoForTest(t)
	db := connect(t, m.URI).Database(devstack.UniqueName(t, "db"))
	const n, bad = 500, 250
	type want struct {
		inserted, matched, modified, deleted int64
		upserted                             map[int64]any
		errors                               []string
		docs, withW                          int
	}
	cases := []struct {
		name    string
		seed    int
		models  func() []mongo.WriteModel
		ordered want
		unorder want
	}{{
		name: "updates of existing documents, one making a duplicate key",
		seed: n,
		models: func() (ms []mongo.WriteModel) {
			for i := range n {
				if i == bad {
					ms = append(ms, mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: int32(i)}}).
						SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: int32(0)}, {Key: "w", Value: int32(1)}}}}))
					continue
				}
				ms = append(ms, setW(i))
			}
			return ms
		},
		ordered: want{matched: bad, modified: bad, upserted: map[int64]any{}, errors: []string{"250:11000"}, docs: n, withW: bad},
		unorder: want{matched: n - 1, modified: n - 1, upserted: map[int64]any{}, errors: []string{"250:11000"}, docs: n, withW: n - 1},
	}, {
		name: "upserts, half of them inserting, one inserting a duplicate key",
		seed: n / 2,
		models: func() (ms []mongo.WriteModel) {
			for i := range n {
				k := i
				if i == 300 {
					k = 5
				}
				ms = append(ms, upsertK(i, k))
			}
			return ms
		},
		// The server's n counts the upserts too; the driver subtracts them only when it
		// went through all its batches (mongo/bulk_write.go), not when an ordered write
		// stopped at an error.
		ordered: want{matched: 300, modified: n / 2, upserted: ids(n/2, 300), errors: []string{"300:11000"}, docs: 300, withW: 300},
		unorder: want{matched: n / 2, modified: n / 2, upserted: ids(n/2, n, 300), errors: []string{"300:11000"}, docs: n - 1, withW: n - 1},
	}, {
		name: "deletes, one with a filter the server refuses",
		seed: n,
		models: func() (ms []mongo.WriteModel) {
			for i := range n {
				if i == bad {
					ms = append(ms, badDelete())
					continue
				}
				ms = append(ms, deleteID(i))
			}
			return ms
		},
		ordered: want{deleted: bad, upserted: map[int64]any{}, docs: n - bad},
		unorder: want{deleted: n - 1, upserted: map[int64]any{}, docs: 1},
	}, {
		name: "inserts, one with a duplicate _id",
		seed: 1,
		models: func() (ms []mongo.WriteModel) {
			for i := 1; i <= n; i++ {
				if i == 151 {
					ms = append(ms, insertID(0))
					continue
				}
				ms = append(ms, insertID(i))
			}
			return ms
		},
		ordered: want{inserted: 150, upserted: map[int64]any{}, errors: []string{"150:11000"}, docs: 151},
		unorder: want{inserted: n - 1, upserted: map[int64]any{}, errors: []string{"150:11000"}, docs: n},
	}}
	for _, tc := range cases {
		for _, ordered := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s ordered=%v", tc.name, ordered), func(t *testing.T) {
				w := tc.unorder
				if ordered {
					w = tc.ordered
				}
				got := bulkWrite(t, seeded(t, db, tc.seed), tc.models(), ordered)
				if got.Inserted != w.inserted || got.Matched != w.matched || got.Modified != w.modified || got.Deleted != w.deleted ||
					!reflect.DeepEqual(got.UpsertedIDs, w.upserted) || int(got.Upserted) != len(w.upserted) {
					t.Errorf("counts: got %v\nwant inserted %d matched %d modified %d deleted %d upserted %v",
						got, w.inserted, w.matched, w.modified, w.deleted, w.upserted)
				}
				if tc.name == "deletes, one with a filter the server refuses" {
					// The code is the server's (BadValue); what matters is where.
					for i, e := range got.Errors {
						got.Errors[i] = e[:strings.Index(e, ":")]
					}
					w.errors = []string{fmt.Sprint(bad)}
				}
				if !slices.Equal(got.Errors, w.errors) {
					t.Errorf("write errors (index:code) %v, want %v", got.Errors, w.errors)
				}
				if len(got.Docs) != w.docs || withW(got.Docs) != w.withW {
					t.Errorf("afterwards %d documents, %d with w; want %d, %d with w", len(got.Docs), withW(got.Docs), w.docs, w.withW)
				}
			})
		}
	}
}

// upstreamAddr is host:port of a mongodb:// URI.
func upstreamAddr(t *testing.T, uri string) string {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestMongoBatchedWritesAnswerAsOneCommand: for small bulk writes that FerretDB answers
// right as one command, the proxy's reply to the same writes forwarded in batches of
// one or two statements is the same, and so is the collection after.
func TestMongoBatchedWritesAnswerAsOneCommand(t *testing.T) {
	t.Parallel()
	m := devstack.MongoForTest(t)
	proxy := func(batches map[string]int) *mongo.Database {
		p, err := wireproxy.ListenWith("127.0.0.1:0", upstreamAddr(t, m.UpstreamURI), wireproxy.Options{Batches: batches, EscapeNUL: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return connect(t, "mongodb://"+p.Addr().String()+"/").Database("batches")
	}
	whole := proxy(map[string]int{})
	batched := proxy(map[string]int{"update": 1, "insert": 2, "delete": 2})
	cases := []struct {
		name   string
		seed   int
		models []mongo.WriteModel
	}{
		{"inserts with a duplicate _id", 1, []mongo.WriteModel{insertID(1), insertID(2), insertID(3), insertID(0), insertID(4), insertID(5), insertID(6)}},
		{"inserts", 0, []mongo.WriteModel{insertID(1), insertID(2), insertID(3), insertID(4), insertID(5)}},
		{"deletes with a refused filter", 10, []mongo.WriteModel{deleteID(1), deleteID(2), deleteID(3), badDelete(), deleteID(4), deleteID(5), deleteID(99)}},
		{"updates and upserts", 5, []mongo.WriteModel{upsertK(20, 20), upsertK(21, 21), setW(1), setW(2), setW(3), setW(99)}},
	}
	for _, tc := range cases {
		for _, ordered := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s ordered=%v", tc.name, ordered), func(t *testing.T) {
				want := bulkWrite(t, seeded(t, whole, tc.seed), tc.models, ordered)
				got := bulkWrite(t, seeded(t, batched, tc.seed), tc.models, ordered)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("forwarded in batches: %v\nforwarded whole:       %v", got, want)
				}
			})
		}
	}
}

// TestMongoUpdateOfManyStatementsInTheBodyKeepsNUL: an update command that carries its
// 150 statements in its body (not a document sequence), with strings holding NUL,
// completes and stores them as sent.
func TestMongoUpdateOfManyStatementsInTheBodyKeepsNUL(t *testing.T) {
	t.Parallel()
	m := devstack.MongoForTest(t)
	db := connect(t, m.URI).Database(devstack.UniqueName(t, "db"))
	coll := seeded(t, db, 150)
	ctx, cancel := context.WithTimeout(context.Background(), bulkDeadline)
	defer cancel()
	updates := bson.A{}
	for i := range 150 {
		updates = append(updates, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: int32(i)}}},
			{Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: fmt.Sprintf("a\x00\uE000%d", i)}}}}}})
	}
	var res struct {
		N         int32 `bson:"n"`
		NModified int32 `bson:"nModified"`
	}
	err := db.RunCommand(ctx, bson.D{{Key: "update", Value: coll.Name()}, {Key: "updates", Value: updates}, {Key: "ordered", Value: true}}).Decode(&res)
	if err != nil || res.N != 150 || res.NModified != 150 {
		t.Fatalf("update of 150 statements in the body: %+v, %v; want n and nModified 150", res, err)
	}
	var doc struct {
		S string `bson:"s"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "s", Value: "a\x00\uE000149"}}).Decode(&doc); err != nil || doc.S != "a\x00\uE000149" {
		t.Errorf("find the last statement's string: %q, %v", doc.S, err)
	}
}

// TestMongoBulkUpdatesAndDeleteManysOfExistingDocumentsComplete: through the local
// stack's proxy, a BulkWrite of 300 UpdateOne on existing documents (FerretDB alone waits
// for ever on an update command of 50) and a delete command of 300 statements each
// deleting several documents (DeleteMany) complete with MongoDB's counts.
func TestMongoBulkUpdatesAndDeleteManysOfExistingDocumentsComplete(t *testing.T) {
	t.Parallel()
	m := devstack.MongoForTest(t)
	db := connect(t, m.URI).Database(devstack.UniqueName(t, "db"))
	const statements, perGroup = 300, 3
	coll := db.Collection(devstack.UniqueName(t, "c"))
	ctx, cancel := context.WithTimeout(context.Background(), bulkDeadline)
	defer cancel()
	docs := make([]bson.D, statements*perGroup)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "g", Value: int32(i / perGroup)}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}

	var updates []mongo.WriteModel
	for i := range statements {
		updates = append(updates, setW(i*perGroup))
	}
	res, err := coll.BulkWrite(ctx, updates)
	if err != nil || res.MatchedCount != statements || res.ModifiedCount != statements {
		t.Fatalf("BulkWrite of %d UpdateOne: %+v, %v; want %d matched and modified", statements, res, err, statements)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "w", Value: int32(1)}}); n != statements || err != nil {
		t.Errorf("documents updated: %d, %v; want %d", n, err, statements)
	}

	var deletes []mongo.WriteModel
	for g := range statements - 1 { // the last group stays
		deletes = append(deletes, mongo.NewDeleteManyModel().SetFilter(bson.D{{Key: "g", Value: int32(g)}}))
	}
	res, err = coll.BulkWrite(ctx, deletes, options.BulkWrite().SetOrdered(false))
	if want := int64((statements - 1) * perGroup); err != nil || res.DeletedCount != want {
		t.Fatalf("delete command of %d DeleteMany statements: %+v, %v; want %d deleted", len(deletes), res, err, want)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); n != perGroup || err != nil {
		t.Errorf("documents left: %d, %v; want the last group's %d", n, err, perGroup)
	}
}
