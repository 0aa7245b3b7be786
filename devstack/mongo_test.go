package devstack_test

import (
	"context"
	"errors"
	"flag"
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

const (
	goroutines = 16
	perRoutine = 50
)

func connect(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatalf("connect %s: %v", uri, err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// incrementConcurrently runs goroutines × perRoutine findAndModify $inc
// upserts on one document and returns the final counter and how many
// distinct values the calls returned.
func incrementConcurrently(t *testing.T, coll *mongo.Collection) (final int64, distinct int, errs int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu     sync.Mutex
		seen   = map[int64]bool{}
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	for range goroutines {
		wg.Go(func() {
			for range perRoutine {
				var doc struct {
					N int64 `bson:"n"`
				}
				err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "counter"}},
					bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, opts).Decode(&doc)
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				seen[doc.N] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var doc struct {
		N int64 `bson:"n"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "counter"}}).Decode(&doc); err != nil {
		t.Fatalf("read counter: %v", err)
	}
	return doc.N, len(seen), failed.Load()
}

// conditionalUpdateWinners inserts {_id:"x", v:0} and has goroutines race
// {_id:"x", v:0} -> {$set:{v:1}}; it returns how many saw ModifiedCount 1.
func conditionalUpdateWinners(t *testing.T, coll *mongo.Collection) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}, {Key: "v", Value: 0}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var (
		winners atomic.Int64
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for range goroutines {
		wg.Go(func() {
			<-start
			res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "x"}, {Key: "v", Value: 0}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}})
			if err != nil {
				t.Errorf("update: %v", err)
				return
			}
			winners.Add(res.ModifiedCount)
		})
	}
	close(start)
	wg.Wait()
	return winners.Load()
}

func TestMongoProxySerialisesWrites(t *testing.T) {
	t.Parallel()
	// Every mode of the proxy keeps single-document atomicity: All (the default),
	// Collections (writes to one collection one at a time) and Writes.
	for _, mode := range []wireproxy.Mode{wireproxy.All, wireproxy.Collections, wireproxy.Writes} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			m := devstack.MongoForTestSerializing(t, mode)
			db := connect(t, m.URI).Database(devstack.UniqueName(t, "db"))

			t.Run("findAndModify $inc upsert counts every call", func(t *testing.T) {
				final, distinct, errs := incrementConcurrently(t, db.Collection("counters"))
				if errs != 0 {
					t.Errorf("%d findAndModify calls failed", errs)
				}
				if want := int64(goroutines * perRoutine); final != want {
					t.Errorf("counter = %d, want %d", final, want)
				}
				if want := goroutines * perRoutine; distinct != want {
					t.Errorf("distinct returned values = %d, want %d", distinct, want)
				}
			})

			t.Run("conditional update has exactly one winner", func(t *testing.T) {
				for round := range 5 {
					coll := db.Collection(devstack.UniqueName(t, "cas"))
					if got := conditionalUpdateWinners(t, coll); got != 1 {
						t.Errorf("round %d: %d winners, want 1", round, got)
					}
				}
			})
		})
	}
}

// unproxied runs TestMongoWithoutProxy, an experiment rather than a test.
var unproxied = flag.Bool("mongo.unproxied", false, "run TestMongoWithoutProxy: what FerretDB v1 does with no proxy in front")

// TestMongoWithoutProxy records what FerretDB v1 does with no proxy in front, for the
// README's table. The numbers are racy (a run may even come out right), so there is
// nothing to assert: it is an experiment, run on demand with -mongo.unproxied -v. The
// proxy's guarantees are asserted by TestMongoProxySerialisesWrites.
func TestMongoWithoutProxy(t *testing.T) {
	if !*unproxied {
		t.Skip("an experiment, not a test: go test -run TestMongoWithoutProxy -mongo.unproxied -v")
	}
	t.Parallel()
	m := devstack.MongoForTest(t)
	db := connect(t, m.UpstreamURI).Database(devstack.UniqueName(t, "db"))

	final, distinct, errs := incrementConcurrently(t, db.Collection("counters"))
	t.Logf("without proxy: %d×%d findAndModify $inc upsert -> counter %d, %d distinct returned values, %d errors (want %d)",
		goroutines, perRoutine, final, distinct, errs, goroutines*perRoutine)

	var winners []int64
	for range 5 {
		winners = append(winners, conditionalUpdateWinners(t, db.Collection(devstack.UniqueName(t, "cas"))))
	}
	t.Logf("without proxy: %d concurrent conditional updates, winners per round: %v (want 1)", goroutines, winners)
}

func TestMongoStopRestart(t *testing.T) {
	t.Parallel()
	m := devstack.MongoForTest(t)
	uri := m.URI
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := devstack.UniqueName(t, "db")

	c := connect(t, uri)
	if _, err := c.Database(name).Collection("things").InsertOne(ctx, bson.D{{Key: "_id", Value: "kept"}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if err := m.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := m.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	err := c.Ping(pctx, nil)
	pcancel()
	if err == nil {
		t.Fatal("ping succeeded while stopped")
	}

	if err := m.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if m.URI != uri {
		t.Errorf("URI after restart = %s, want %s", m.URI, uri)
	}
	// The same client reconnects to the same URI; the data is on disk.
	var doc bson.M
	err = c.Database(name).Collection("things").FindOne(ctx, bson.D{{Key: "_id", Value: "kept"}}).Decode(&doc)
	if err != nil {
		t.Fatalf("find after restart: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(ctx); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("Restart after Close = %v, want an error", err)
	}
}

// TestMongoKeepsStringsWithNUL: MongoDB strings may hold NUL, which PostgreSQL's jsonb
// refuses; through the proxy they are stored, found by equality, unique and read back as
// written, and so are strings holding the proxy's escape character.
func TestMongoKeepsStringsWithNUL(t *testing.T) {
	t.Parallel()
	m := devstack.MongoForTest(t)
	coll := connect(t, m.URI).Database(devstack.UniqueName(t, "db")).Collection("things")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids := []string{"a\x00b", "a\uE000\uE001b", "a\uE000b", "a\uE000\uE000b", "\x00", "plain"}
	for _, id := range ids {
		doc := bson.D{{Key: "_id", Value: id}, {Key: "v", Value: "v" + id}, {Key: "list", Value: bson.A{id, bson.D{{Key: "in", Value: id}}}}}
		if _, err := coll.InsertOne(ctx, doc); err != nil {
			t.Fatalf("insert %q: %v", id, err)
		}
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "a\x00b"}}); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("a second %q: %v, want a duplicate key error", "a\x00b", err)
	}
	for _, id := range ids {
		var got struct {
			ID   string `bson:"_id"`
			V    string `bson:"v"`
			List bson.A `bson:"list"`
		}
		if err := coll.FindOne(ctx, bson.D{{Key: "v", Value: "v" + id}}).Decode(&got); err != nil {
			t.Errorf("find v=%q: %v", "v"+id, err)
			continue
		}
		inner, _ := got.List[1].(bson.D)
		if got.ID != id || got.List[0] != id || len(inner) != 1 || inner[0].Value != id {
			t.Errorf("read back %q, %q, %v; want %q everywhere", got.ID, got.V, got.List, id)
		}
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != int64(len(ids)) {
		t.Errorf("count = %d, %v; want %d", n, err, len(ids))
	}
}

// TestMongoReadsBesideWritesFailNothing: with reads running beside the writes (the
// proxy's Collections and Writes modes), 4 writers $inc two fields of one document
// together while 12 readers read it (FindOne, whose find FerretDB cancels before it closes
// its rows when it carries maxTimeMS, as the driver sends with every deadline): every
// write and read succeeds and no read sees the fields differ. Before the proxy took
// maxTimeMS out of finds, FerretDB failed a few of the writes ("i/o timeout" at the begin
// of their transaction: 7 of 1,200 in six runs at load average 10).
func TestMongoReadsBesideWritesFailNothing(t *testing.T) {
	t.Parallel()
	for _, mode := range []wireproxy.Mode{wireproxy.Collections, wireproxy.Writes} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			m := devstack.MongoForTestSerializing(t, mode)
			coll := connect(t, m.URI).Database(devstack.UniqueName(t, "db")).Collection("pairs")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}, {Key: "a", Value: int64(0)}, {Key: "b", Value: int64(0)}}); err != nil {
				t.Fatal(err)
			}
			const writers, writes, readers = 4, 50, 12
			var (
				wg, rg      sync.WaitGroup
				reads, torn atomic.Int64
				done        = make(chan struct{})
			)
			for range writers {
				wg.Go(func() {
					for range writes {
						_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "p"}},
							bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: int64(1)}, {Key: "b", Value: int64(1)}}}})
						if err != nil {
							t.Errorf("write: %v", err)
						}
					}
				})
			}
			for range readers {
				rg.Go(func() {
					for {
						select {
						case <-done:
							return
						default:
						}
						var d struct{ A, B int64 }
						if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "p"}}).Decode(&d); err != nil {
							t.Errorf("read: %v", err)
							continue
						}
						reads.Add(1)
						if d.A != d.B {
							torn.Add(1)
						}
					}
				})
			}
			wg.Wait()
			close(done)
			rg.Wait()
			var d struct{ A, B int64 }
			if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "p"}}).Decode(&d); err != nil {
				t.Fatal(err)
			}
			if d.A != writers*writes || d.B != writers*writes {
				t.Errorf("after %d increments: a = %d, b = %d", writers*writes, d.A, d.B)
			}
			if torn.Load() != 0 {
				t.Errorf("%d of %d reads saw a != b", torn.Load(), reads.Load())
			}
		})
	}
}
