package wireproxy_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/wireproxy"
)

// TestExamineCountsWhatTheIndexBoundsAdmit: a proxy with Examine counts, per command and
// collection, the documents the bounds of the index MongoDB would choose admit: a filter
// on an index's leading field counts its matches (a range on the next field narrows them,
// a rooted $or sums its branches), a filter that skips the leading field counts the whole
// collection as a scan, and an index created later serves the filter it bounds. Without
// the option a proxy examines nothing until ExamineCommand turns it on.
func TestExamineCountsWhatTheIndexBoundsAdmit(t *testing.T) {
	m := devstack.MongoForTest(t)
	u, err := url.Parse(m.UpstreamURI)
	if err != nil {
		t.Fatal(err)
	}
	p, err := wireproxy.ListenWith("127.0.0.1:0", u.Host, wireproxy.Options{Examine: true, EscapeNUL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + p.Addr().String() + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database("examine")
	coll := db.Collection("things")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	var docs []any
	for i := range 30 { // a: 0, 1, 2 ten times each; b: 0..29
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 3}, {Key: "b", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}

	// step runs f and returns what the proxy examined meanwhile under key.
	step := func(key string, f func() error) wireproxy.Examined {
		t.Helper()
		before := p.Examined()[key]
		if err := f(); err != nil {
			t.Fatal(err)
		}
		after := p.Examined()[key]
		return wireproxy.Examined{Statements: after.Statements - before.Statements, Documents: after.Documents - before.Documents,
			Scans: after.Scans - before.Scans, Unserved: after.Unserved - before.Unserved, Failed: after.Failed - before.Failed}
	}
	find := func(filter bson.D) func() error {
		return func() error {
			cur, err := coll.Find(ctx, filter)
			if err != nil {
				return err
			}
			return cur.All(ctx, &[]bson.M{})
		}
	}
	const finds = "find examine.things"
	for _, c := range []struct {
		name string
		key  string
		do   func() error
		want wireproxy.Examined
	}{
		{"leading field", finds, find(bson.D{{Key: "a", Value: 0}}), wireproxy.Examined{Statements: 1, Documents: 10}},
		{"leading field and a range on the next", finds, find(bson.D{{Key: "a", Value: 0}, {Key: "b", Value: bson.D{{Key: "$gt", Value: 3}}}}),
			wireproxy.Examined{Statements: 1, Documents: 8}},
		{"leading field and a filter only", finds, find(bson.D{{Key: "a", Value: 2}, {Key: "b", Value: bson.D{{Key: "$ne", Value: 5}}}}),
			wireproxy.Examined{Statements: 1, Documents: 10}},
		{"rooted $or", finds, find(bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 2}, {Key: "b", Value: 2}}}}}),
			wireproxy.Examined{Statements: 1, Documents: 10 + 1}},
		{"ids, one repeated and one missing, counted per id", finds, find(bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 2, 3, 99, 3}}}}}),
			wireproxy.Examined{Statements: 1, Documents: 3}},
		{"leading field skipped", finds, find(bson.D{{Key: "b", Value: 5}}), wireproxy.Examined{Statements: 1, Documents: 30, Scans: 1, Unserved: 1}},
		{"update of the leading field's matches", "update examine.things", func() error {
			_, err := coll.UpdateMany(ctx, bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "c", Value: true}}}})
			return err
		}, wireproxy.Examined{Statements: 1, Documents: 10}},
		{"delete that skips the leading field, counted before it ran", "delete examine.things", func() error {
			_, err := coll.DeleteOne(ctx, bson.D{{Key: "b", Value: 7}})
			return err
		}, wireproxy.Examined{Statements: 1, Documents: 30, Scans: 1, Unserved: 1}},
	} {
		if got := step(c.key, c.do); got != c.want {
			t.Errorf("%s: examined %+v, want %+v", c.name, got, c.want)
		}
	}

	// Recording off: nothing is examined until it is on again.
	type examineReply struct {
		Recording bool                        `bson:"recording"`
		Commands  map[string]map[string]int64 `bson:"commands"`
	}
	examined := func(record bool) examineReply {
		var out examineReply
		if err := db.RunCommand(ctx, bson.D{{Key: wireproxy.ExamineCommand, Value: 1}, {Key: "record", Value: record}}).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := examined(false); out.Recording {
		t.Errorf("recording after {record: false}: %+v", out)
	}
	if got := step(finds, find(bson.D{{Key: "b", Value: 5}})); got != (wireproxy.Examined{}) {
		t.Errorf("recording off: examined %+v", got)
	}
	out := examined(true)
	if !out.Recording {
		t.Errorf("not recording after {record: true}: %+v", out)
	}
	if tot, all := out.Commands[finds], p.Examined()[finds]; tot["statements"] != all.Statements || tot["documents"] != all.Documents || tot["scans"] != all.Scans {
		t.Errorf("the reply's %q totals are %v, the proxy's %+v", finds, tot, all)
	}

	// An index built later is listed again: b alone is now bounded.
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "b", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if got, want := step(finds, find(bson.D{{Key: "b", Value: 5}})), (wireproxy.Examined{Statements: 1, Documents: 1}); got != want {
		t.Errorf("after an index on b: examined %+v, want %+v", got, want)
	}
}

// TestExamineIsOffByDefault: a proxy without Options.Examine counts nothing until
// ExamineCommand's {record: true}.
func TestExamineIsOffByDefault(t *testing.T) {
	m := devstack.MongoForTest(t)
	u, err := url.Parse(m.UpstreamURI)
	if err != nil {
		t.Fatal(err)
	}
	p, err := wireproxy.ListenWith("127.0.0.1:0", u.Host, wireproxy.Options{EscapeNUL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + p.Addr().String() + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database("examine")
	if _, err := db.Collection("things").InsertOne(ctx, bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	find := func() {
		if err := db.Collection("things").FindOne(ctx, bson.D{{Key: "a", Value: 1}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	find()
	if got := p.Examined(); len(got) != 0 {
		t.Fatalf("examined without the option: %v", got)
	}
	if err := db.RunCommand(ctx, bson.D{{Key: wireproxy.ExamineCommand, Value: 1}, {Key: "record", Value: true}}).Err(); err != nil {
		t.Fatal(err)
	}
	find()
	if got, want := p.Examined()["find examine.things"], (wireproxy.Examined{Statements: 1, Documents: 1, Scans: 1, Unserved: 1}); got != want {
		t.Fatalf("after {record: true}: examined %+v, want %+v (a on no index: the whole collection)", got, want)
	}
}
