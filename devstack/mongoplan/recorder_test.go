package mongoplan_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
)

// connect opens a client to the test server whose started commands go to observe.
func connect(t *testing.T, observe func(context.Context, *event.CommandStartedEvent)) *mongo.Client {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(devstack.MongoForTest(t).URI).
		SetMonitor(&event.CommandMonitor{Started: observe}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client
}

// TestCommandsReadsRealEvents: every query-bearing command the driver sends, as the
// command monitor sees it, gives its statements' filters, sorts, hints and projections;
// commands that query nothing give none.
func TestCommandsReadsRealEvents(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var got []string
	client := connect(t, func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range mongoplan.Commands(e) {
			line := fmt.Sprintf("%s %s %s", c.Name, c.Collection, mongoplan.Shape(c.Filter))
			if c.Sort != nil {
				line += " sort " + mongoplan.KeysShape(c.Sort)
			}
			if c.HintName != "" {
				line += " hint " + c.HintName
			}
			if c.Hint != nil {
				line += " hint " + mongoplan.KeysShape(c.Hint)
			}
			if c.Projection != nil {
				line += " projection " + mongoplan.KeysShape(c.Projection)
			}
			if c.Key != "" {
				line += " key " + c.Key
			}
			if c.Limit != 0 {
				line += fmt.Sprintf(" limit %d", c.Limit)
			}
			got = append(got, line)
		}
	})
	db := client.Database(devstack.UniqueName(t, "plan"))
	coll := db.Collection("c")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "dep", Value: 1}})
	must(err)
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "dep", Value: 1}}, Options: options.Index().SetName("dep_1")})
	must(err)
	cur, err := coll.Find(ctx, bson.D{{Key: "dep", Value: 1}, {Key: "x", Value: bson.D{{Key: "$gt", Value: 2}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetHint("dep_1").SetProjection(bson.D{{Key: "dep", Value: 1}}).SetLimit(5))
	must(err)
	must(cur.All(ctx, &[]bson.D{}))
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}})
	must(err)
	_, err = coll.BulkWrite(ctx, []mongo.WriteModel{
		mongo.NewUpdateManyModel().SetFilter(bson.D{{Key: "anc", Value: 3}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: 1}}}}),
		mongo.NewUpdateManyModel().SetFilter(bson.D{{Key: "dep", Value: 1}, {Key: "anc", Value: 3}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: 2}}}}).
			SetHint(bson.D{{Key: "dep", Value: 1}}),
	}, options.BulkWrite().SetOrdered(true))
	must(err)
	_, err = coll.DeleteMany(ctx, bson.D{{Key: "gone", Value: true}})
	must(err)
	must(coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}},
		options.FindOneAndUpdate().SetSort(bson.D{{Key: "dep", Value: 1}})).Err())
	_, err = coll.CountDocuments(ctx, bson.D{{Key: "dep", Value: 1}})
	must(err)
	_, err = coll.EstimatedDocumentCount(ctx)
	must(err)
	must(coll.Distinct(ctx, "dep", bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}}).Err())
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "dep", Value: 1}}}}, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
		{{Key: "$limit", Value: 3}}})
	must(err)
	must(cur.All(ctx, &[]bson.D{}))

	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"find c {dep: ?, x: {$gt: ?}} sort {_id: -1} hint dep_1 projection {dep: 1} limit 5",
		"update c {_id: ?}",
		"update c {anc: ?}",
		"update c {dep: ?, anc: ?} hint {dep: 1}",
		"delete c {gone: ?}",
		"findAndModify c {_id: ?} sort {dep: 1} limit 1",
		"aggregate c {dep: ?}",
		"count c {}",
		"distinct c {_id: {$in: ?}} key dep",
		"aggregate c {dep: ?} sort {_id: 1} limit 3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("commands read:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// tb records a Check's failures instead of failing the test.
type tb struct {
	testing.TB
	errors []string
}

func (t *tb) Helper() {}
func (t *tb) Errorf(format string, args ...any) {
	t.errors = append(t.errors, fmt.Sprintf(format, args...))
}

// TestRecorderCheck: Check fails each distinct unserved query once, naming the command,
// the collection, the filter's shape, why, and the function that sent it; served ones and
// other databases' pass; an allowance excuses its function's query, and one that excused
// nothing is reported stale.
func TestRecorderCheck(t *testing.T) {
	ctx := context.Background()
	rec := mongoplan.NewRecorder()
	rec.Tests = true // this test's own queries stand for a store's
	client := connect(t, rec.Observe)
	db := client.Database(devstack.UniqueName(t, "plan"))
	other := client.Database(devstack.UniqueName(t, "planother"))
	coll := db.Collection("items")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "dep", Value: 1}, {Key: "anc", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the same shape thrice: reported once
		if _, err := coll.UpdateMany(ctx, bson.D{{Key: "anc", Value: i}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := coll.UpdateMany(ctx, bson.D{{Key: "dep", Value: 1}, {Key: "anc", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if err := readAll(ctx, db.Collection("keys")); err != nil {
		t.Fatal(err)
	}
	if err := readAll(ctx, other.Collection("elsewhere")); err != nil {
		t.Fatal(err)
	}

	got := &tb{TB: t}
	rec.Check(got, db)
	if len(got.errors) != 2 {
		t.Fatalf("%d failures, want the subtree update and the whole-collection read:\n%s", len(got.errors), strings.Join(got.errors, "\n"))
	}
	for _, want := range []string{
		"update items {anc: ?} is served by no index: no index leads with a field the filter bounds (it bounds anc; the indexes lead with _id, dep); sent by mongoplan_test.TestRecorderCheck recorder_test.go:",
		"find keys {} is served by no index: an empty filter: a collection scan; sent by mongoplan_test.readAll recorder_test.go:",
	} {
		if !strings.Contains(strings.Join(got.errors, "\n"), want) {
			t.Errorf("the failures do not say %q:\n%s", want, strings.Join(got.errors, "\n"))
		}
	}

	allowed := mongoplan.Allowance{Func: "mongoplan_test.readAll", Collection: "keys", Reason: "a test's whole read of a tiny collection"}
	stale := mongoplan.Allowance{Func: "mongoplan_test.nothing", Reason: "excuses nothing"}
	got = &tb{TB: t}
	rec.Check(got, db, allowed, stale)
	rec.CheckAllowancesUsed(got, allowed, stale)
	if len(got.errors) != 2 || !strings.Contains(got.errors[0], "update items {anc: ?}") || !strings.Contains(got.errors[1], "excused nothing") ||
		!strings.Contains(got.errors[1], "mongoplan_test.nothing") {
		t.Fatalf("with the allowances: %q, want the subtree update and the stale allowance", got.errors)
	}
	got = &tb{TB: t}
	rec.Check(got, db, mongoplan.Allowance{Func: "readAll"})
	if len(got.errors) == 0 || !strings.Contains(got.errors[0], "needs a function and a reason") {
		t.Fatalf("an allowance without a reason: %q", got.errors)
	}

	// By default a test's own reads of the database are not recorded.
	quiet := mongoplan.NewRecorder()
	if err := readAll(ctx, connect(t, quiet.Observe).Database(db.Name()).Collection("keys")); err != nil {
		t.Fatal(err)
	}
	if cmds := quiet.Commands(); len(cmds) != 0 {
		t.Fatalf("a test's own query recorded: %+v", cmds)
	}
	if !rec.Await("mongoplan_test.readAll", time.Second) || rec.Await("mongoplan_test.nothing", 50*time.Millisecond) {
		t.Fatal("Await does not tell a recorded sender from one never seen")
	}
}

func readAll(ctx context.Context, c *mongo.Collection) error {
	cur, err := c.Find(ctx, bson.D{})
	if err != nil {
		return err
	}
	return cur.All(ctx, &[]bson.D{})
}
