package wireproxy_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/wireproxy"
)

// connectTo is a client of the MongoDB server at host (a proxy or FerretDB itself).
func connectTo(t *testing.T, host string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + host + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// findAll is every document coll.Find answers, in its order.
func findAll(t *testing.T, coll *mongo.Collection, filter bson.D, o *options.FindOptionsBuilder) []bson.D {
	t.Helper()
	cur, err := coll.Find(context.Background(), filter, o)
	if err != nil {
		t.Fatalf("find %v: %v", filter, err)
	}
	var out []bson.D
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatalf("find %v: %v", filter, err)
	}
	return out
}

func ext(docs []bson.D) string {
	var parts []string
	for _, d := range docs {
		b, _ := bson.MarshalExtJSON(d, true, false)
		parts = append(parts, string(b))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// sortedByID is docs by _id ascending, for comparing answers of finds without sort (their
// order is the server's).
func sortedByID(docs []bson.D) []bson.D {
	out := slices.Clone(docs)
	key := func(d bson.D) string {
		b, _ := bson.MarshalExtJSON(bson.D{{Key: "_id", Value: lookup(d, "_id")}}, true, false)
		return string(b)
	}
	slices.SortFunc(out, func(a, b bson.D) int { return strings.Compare(key(a), key(b)) })
	return out
}

// TestProxySplitsAFindOfSeveralIDsIntoOneFindPerID: a find whose filter has a top-level
// _id: {$in: [...]} answers through the proxy exactly what FerretDB answers to it directly
// (sorted on _id either way, with a limit, with projections, with ids repeated, as an int32
// and an int64 of one number, missing or filtered out by the rest of the filter, of
// several types), and the proxy's stats count it once, split into one find per distinct
// id. A find with a sort on another field or a skip is forwarded whole, and answers the
// same too.
func TestProxySplitsAFindOfSeveralIDsIntoOneFindPerID(t *testing.T) {
	ctx := context.Background()
	m := devstack.MongoForTest(t)
	u, err := url.Parse(m.UpstreamURI)
	if err != nil {
		t.Fatal(err)
	}
	p := startBatchingProxy(t, u.Host, wireproxy.Options{Mode: wireproxy.Collections, EscapeNUL: true})
	name := devstack.UniqueName(t, "db")
	direct, proxied := connectTo(t, u.Host).Database(name), connectTo(t, p.Addr().String()).Database(name)
	var docs []any
	for i := int64(1); i <= 30; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "dep", Value: 1 + i%2}, {Key: "name", Value: fmt.Sprintf("n%02d", 30-i)},
			{Key: "tags", Value: bson.A{"a", fmt.Sprint(i)}}})
	}
	oid := bson.NewObjectID()
	docs = append(docs, bson.D{{Key: "_id", Value: "x"}, {Key: "dep", Value: int64(1)}, {Key: "name", Value: "s"}},
		bson.D{{Key: "_id", Value: oid}, {Key: "dep", Value: int64(1)}, {Key: "name", Value: "o"}})
	if _, err := direct.Collection("items").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Collection("items").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "dep", Value: 1}, {Key: "tags", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	in := func(vs ...any) bson.D { return bson.D{{Key: "$in", Value: bson.A(vs)}} }
	for _, c := range []struct {
		name   string
		filter bson.D
		opts   func() *options.FindOptionsBuilder
		sorted bool // the answer's order is the find's
		parts  int  // finds upstream: 0 for a find forwarded whole
	}{
		{"ids of one deployment, no sort", bson.D{{Key: "_id", Value: in(int64(7), int64(3), int64(9), int64(4), int64(99))}, {Key: "dep", Value: int64(2)}},
			options.Find, false, 5},
		{"sorted on _id, with a limit", bson.D{{Key: "_id", Value: in(int64(12), int64(2), int64(8), int64(5))}},
			func() *options.FindOptionsBuilder {
				return options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(2)
			}, true, 4},
		{"sorted on _id descending, projected, in batches of the ids", bson.D{{Key: "_id", Value: in(int64(12), int64(2), int64(8), int64(5))}, {Key: "tags", Value: "a"}},
			func() *options.FindOptionsBuilder {
				return options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(3).SetProjection(bson.D{{Key: "name", Value: 1}}).SetBatchSize(4)
			}, true, 4},
		{"an exclusion projection", bson.D{{Key: "_id", Value: in(int64(1), int64(2))}},
			func() *options.FindOptionsBuilder {
				return options.Find().SetProjection(bson.D{{Key: "tags", Value: 0}})
			}, false, 2},
		{"an id repeated, and as int32 and int64", bson.D{{Key: "_id", Value: in(int64(3), int32(3), int64(3), int64(6))}},
			func() *options.FindOptionsBuilder { return options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}) }, true, 2},
		{"ids of several types, sorted", bson.D{{Key: "_id", Value: in(oid, "x", int64(10), int32(1))}, {Key: "dep", Value: int64(1)}},
			func() *options.FindOptionsBuilder { return options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}) }, true, 4},
		{"an indexed array field, a document matching two values once", bson.D{{Key: "dep", Value: int64(1)}, {Key: "tags", Value: in("3", "5", "a", "zz")}},
			func() *options.FindOptionsBuilder {
				return options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetBatchSize(1000)
			}, true, 4},
		{"an indexed field with a limit, sorted on _id", bson.D{{Key: "tags", Value: in("a", "7")}},
			func() *options.FindOptionsBuilder {
				return options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(4)
			}, true, 2},
		{"an indexed field whose matches overflow the batch is forwarded whole after the parts", bson.D{{Key: "tags", Value: in("a", "7")}},
			func() *options.FindOptionsBuilder { return options.Find().SetBatchSize(5) }, false, 3},
		{"an unindexed field is forwarded whole", bson.D{{Key: "name", Value: in("n01", "n02", "n03")}}, options.Find, false, 0},
		{"an indexed field with a limit and no sort is forwarded whole", bson.D{{Key: "tags", Value: in("a", "7")}},
			func() *options.FindOptionsBuilder { return options.Find().SetLimit(4) }, false, 0},
		{"a sort on another field is forwarded whole", bson.D{{Key: "_id", Value: in(int64(1), int64(2), int64(3))}},
			func() *options.FindOptionsBuilder { return options.Find().SetSort(bson.D{{Key: "name", Value: 1}}) }, true, 0},
		{"a skip is forwarded whole", bson.D{{Key: "_id", Value: in(int64(1), int64(2), int64(3))}},
			func() *options.FindOptionsBuilder {
				return options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetSkip(1)
			}, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := p.Stats()["find items"]
			want, got := findAll(t, direct.Collection("items"), c.filter, c.opts()), findAll(t, proxied.Collection("items"), c.filter, c.opts())
			if !c.sorted {
				want, got = sortedByID(want), sortedByID(got)
			}
			if ext(got) != ext(want) {
				t.Errorf("through the proxy %s, want FerretDB's own answer %s", ext(got), ext(want))
			}
			if len(want) < 2 {
				t.Errorf("the case finds %d documents: it shows little", len(want))
			}
			after := p.Stats()["find items"]
			split, parts := after.Split-before.Split, after.Parts-before.Parts
			if after.Count-before.Count != 1 || parts != int64(c.parts) || (split == 1) != (c.parts > 0) {
				t.Errorf("stats counted %d finds, %d split into %d parts; want 1 find, split into %d (0: forwarded whole)",
					after.Count-before.Count, split, parts, c.parts)
			}
		})
	}
}

// findMsg is a find of coll with filter and the fields extra.
func findMsg(t *testing.T, id int32, filter bson.D, extra ...bson.E) []byte {
	return writeMsg(t, id, 0, append(bson.D{{Key: "find", Value: "items"}, {Key: "filter", Value: filter}}, append(extra, bson.E{Key: "$db", Value: "d"})...), "")
}

// scriptedFinds is a fake upstream's answer to finds: to a find of one _id, its document
// {_id, part: true}, or as fail says (an error, a cursor left open, a document of size
// bytes); to any other find, {whole: true} in one batch. It records the filters it saw.
type scriptedFinds struct {
	mu      sync.Mutex
	filters []bson.D
	bodies  []bson.D
	fail    func(id int64) string // "", "error", "cursor", "big"
}

func (s *scriptedFinds) answer(t *testing.T) func(req []byte) [][]byte {
	return func(req []byte) [][]byte {
		var body bson.D
		if err := bson.Unmarshal(parseMsg(t, req).body, &body); err != nil {
			t.Error(err)
		}
		filter, _ := lookup(body, "filter").(bson.D)
		s.mu.Lock()
		s.filters, s.bodies = append(s.filters, filter), append(s.bodies, body)
		s.mu.Unlock()
		batch := func(cursor int64, docs ...bson.D) [][]byte {
			return [][]byte{reply(t, req, bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: docs}, {Key: "id", Value: cursor}, {Key: "ns", Value: "d.items"}}}, {Key: "ok", Value: 1.0}})}
		}
		id, one := lookup(filter, "_id").(int64)
		if !one {
			return batch(0, bson.D{{Key: "whole", Value: true}})
		}
		doc := bson.D{{Key: "_id", Value: id}, {Key: "part", Value: true}}
		switch s.fail(id) {
		case "error":
			return [][]byte{reply(t, req, bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "part failed"}, {Key: "code", Value: int32(2)}, {Key: "codeName", Value: "BadValue"}})}
		case "cursor":
			return batch(42, doc)
		case "big":
			doc = append(doc, bson.E{Key: "pad", Value: strings.Repeat("p", 9<<20)})
		}
		return batch(0, doc)
	}
}

// TestProxySplitFallsBackToTheWholeFind: when a part fails, leaves a cursor open or the
// merged batch would exceed 16 MiB, the client gets the upstream's answer to its find
// forwarded whole, after the parts, in the same turn; the stats count the original among
// the parts.
func TestProxySplitFallsBackToTheWholeFind(t *testing.T) {
	for _, c := range []struct {
		name  string
		fail  func(id int64) string
		parts int // before the whole find
	}{
		{"a part fails", func(id int64) string { return map[bool]string{true: "error"}[id == 2] }, 2},
		{"a part leaves a cursor open", func(id int64) string { return map[bool]string{true: "cursor"}[id == 1] }, 1},
		{"the merged batch would exceed 16 MiB", func(int64) string { return "big" }, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &scriptedFinds{fail: c.fail}
			f := startFake(t, s.answer(t))
			p := startBatchingProxy(t, f.ln.Addr().String(), wireproxy.Options{})
			conn, r := dial(t, p)
			in := bson.D{{Key: "$in", Value: bson.A{int64(1), int64(2), int64(3)}}}
			got := roundTrip(t, conn, r, findMsg(t, 1, bson.D{{Key: "_id", Value: in}, {Key: "dep", Value: int64(4)}}))
			cursor, _ := lookup(got, "cursor").(bson.D)
			first, _ := lookup(cursor, "firstBatch").(bson.A)
			if len(first) != 1 || lookup(first[0].(bson.D), "whole") != true {
				t.Errorf("answered %v, want the whole find's answer", got)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.filters) != c.parts+1 {
				t.Fatalf("upstream saw %v, want %d parts and then the whole find", s.filters, c.parts)
			}
			if last := s.filters[len(s.filters)-1]; !equalDocs(last, bson.D{{Key: "_id", Value: in}, {Key: "dep", Value: int64(4)}}) {
				t.Errorf("the last find upstream had filter %v, want the client's", last)
			}
			st := p.Stats()["find items"]
			if st.Count != 1 || st.Split != 1 || st.Parts != int64(c.parts+1) {
				t.Errorf("stats %+v: want 1 find, split, %d finds upstream", st, c.parts+1)
			}
			if fwd, _ := p.Counts(); fwd != int64(c.parts+1) {
				t.Errorf("%d commands forwarded, want %d", fwd, c.parts+1)
			}
		})
	}
}

// TestProxySplitSendsOneFindPerDistinctID: the parts of a split find carry the client's
// filter with one _id in place of the $in (the other fields where they were), its
// projection and session, no sort, limit or batchSize, in a single batch; the client gets
// their documents by _id in one batch with its cursor closed.
func TestProxySplitSendsOneFindPerDistinctID(t *testing.T) {
	s := &scriptedFinds{fail: func(int64) string { return "" }}
	f := startFake(t, s.answer(t))
	p := startBatchingProxy(t, f.ln.Addr().String(), wireproxy.Options{})
	conn, r := dial(t, p)
	proj := bson.D{{Key: "name", Value: 1}}
	lsid := bson.D{{Key: "id", Value: "s1"}}
	got := roundTrip(t, conn, r, findMsg(t, 1,
		bson.D{{Key: "dep", Value: int64(4)}, {Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{int64(9), int64(3), int64(9), int64(5)}}}}, {Key: "type", Value: "FOLDER"}},
		bson.E{Key: "projection", Value: proj}, bson.E{Key: "sort", Value: bson.D{{Key: "_id", Value: -1}}}, bson.E{Key: "limit", Value: int64(2)},
		bson.E{Key: "batchSize", Value: int32(1000)}, bson.E{Key: "lsid", Value: lsid}))
	want := bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{
		bson.D{{Key: "_id", Value: int64(9)}, {Key: "part", Value: true}}, bson.D{{Key: "_id", Value: int64(5)}, {Key: "part", Value: true}}}},
		{Key: "id", Value: int64(0)}, {Key: "ns", Value: "d.items"}}}, {Key: "ok", Value: 1.0}}
	if !equalDocs(got, want) {
		t.Errorf("answered %v, want %v", got, want)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for i, b := range s.bodies {
		id, _ := lookup(s.filters[i], "_id").(int64)
		ids = append(ids, id)
		wantBody := bson.D{{Key: "find", Value: "items"}, {Key: "filter", Value: bson.D{{Key: "dep", Value: int64(4)}, {Key: "_id", Value: id}, {Key: "type", Value: "FOLDER"}}},
			{Key: "projection", Value: proj}, {Key: "lsid", Value: lsid}, {Key: "$db", Value: "d"}, {Key: "singleBatch", Value: true}}
		if !equalDocs(b, wantBody) {
			t.Errorf("part %d upstream %v, want %v", i, b, wantBody)
		}
	}
	if !slices.Equal(ids, []int64{9, 3, 5}) {
		t.Errorf("parts for ids %v, want one per distinct id: 9, 3, 5", ids)
	}
}

// TestProxyForwardsWholeTheFindsItCannotSplit: a find whose answer the merge could not give
// as MongoDB would (or whose $in is no list of ids) reaches the upstream as the client sent it.
func TestProxyForwardsWholeTheFindsItCannotSplit(t *testing.T) {
	ids := bson.A{int64(1), int64(2), int64(3)}
	in := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}
	many := bson.A{}
	for i := range 102 {
		many = append(many, int64(i))
	}
	for _, c := range []struct {
		name   string
		filter bson.D
		extra  []bson.E
		max    int
	}{
		{"a skip", in, []bson.E{{Key: "skip", Value: int64(1)}}, 0},
		{"a hint", in, []bson.E{{Key: "hint", Value: "dep_1"}}, 0},
		{"a collation", in, []bson.E{{Key: "collation", Value: bson.D{{Key: "locale", Value: "en"}}}}, 0},
		{"a let", in, []bson.E{{Key: "let", Value: bson.D{{Key: "x", Value: 1}}}}, 0},
		{"a sort on another field", in, []bson.E{{Key: "sort", Value: bson.D{{Key: "name", Value: 1}}}}, 0},
		{"a sort on _id and another field", in, []bson.E{{Key: "sort", Value: bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: 1}}}}, 0},
		{"a batchSize below the ids", in, []bson.E{{Key: "batchSize", Value: int32(2)}}, 0},
		{"a singleBatch of the default batch below the ids", bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: many}}}}, []bson.E{{Key: "singleBatch", Value: true}}, 1000},
		{"a limit below the ids without sort", in, []bson.E{{Key: "limit", Value: int64(2)}}, 0},
		{"a projection without _id", in, []bson.E{{Key: "projection", Value: bson.D{{Key: "_id", Value: 0}}}}, 0},
		{"a projection computing _id", in, []bson.E{{Key: "projection", Value: bson.D{{Key: "_id", Value: "$name"}}}}, 0},
		{"a transaction", in, []bson.E{{Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}}, 0},
		{"more ids than MaxSplitIDs", in, nil, 2},
		{"splitting turned off", in, nil, -1},
		{"a regex among the ids", bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{int64(1), bson.Regex{Pattern: "^x"}}}}}}, nil, 0},
		{"a document among the ids", bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{int64(1), bson.D{{Key: "a", Value: 1}}}}}}}, nil, 0},
		{"$in beside another operator", bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}, {Key: "$ne", Value: int64(2)}}}}, nil, 0},
		{"_id twice", append(slices.Clone(in), bson.E{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}), nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &scriptedFinds{fail: func(int64) string { return "" }}
			f := startFake(t, s.answer(t))
			p := startBatchingProxy(t, f.ln.Addr().String(), wireproxy.Options{MaxSplitIDs: c.max})
			conn, r := dial(t, p)
			sent := findMsg(t, 1, c.filter, c.extra...)
			roundTrip(t, conn, r, sent)
			s.mu.Lock()
			defer s.mu.Unlock()
			var want bson.D
			if err := bson.Unmarshal(parseMsg(t, sent).body, &want); err != nil {
				t.Fatal(err)
			}
			if len(s.bodies) != 1 || !equalDocs(s.bodies[0], want) {
				t.Errorf("upstream saw %v, want the client's find %v alone", s.bodies, want)
			}
			if st := p.Stats()["find items"]; st.Count != 1 || st.Split != 0 {
				t.Errorf("stats %+v: want 1 find, not split", st)
			}
		})
	}
}

// TestProxySplitsFindsInReplicaSetAndInterleaveModes: a find of several ids through a
// proxy presenting the replica set, and through one in Interleave mode, answers its
// documents, split; an update of several ids in Interleave mode still runs document by
// document and changes them all.
func TestProxySplitsFindsInReplicaSetAndInterleaveModes(t *testing.T) {
	ctx := context.Background()
	rsProxy, _ := replicaSetProxy(t)
	m := devstack.MongoForTest(t)
	u, err := url.Parse(m.UpstreamURI)
	if err != nil {
		t.Fatal(err)
	}
	ilProxy := startBatchingProxy(t, u.Host, wireproxy.Options{Mode: wireproxy.Interleave, EscapeNUL: true})
	for _, c := range []struct {
		name   string
		p      *wireproxy.Proxy
		client *mongo.Client
	}{
		{"replica set", rsProxy, rsClient(t, rsProxy, 10*time.Second, nil)},
		{"interleave", ilProxy, connectTo(t, ilProxy.Addr().String())},
	} {
		t.Run(c.name, func(t *testing.T) {
			coll := c.client.Database(devstack.UniqueName(t, "db")).Collection("items")
			seed(t, coll, 6)
			ids := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{int64(5), int64(2), int64(4)}}}}}
			got := findAll(t, coll, ids, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
			var gotIDs []int64
			for _, d := range got {
				id, _ := lookup(d, "_id").(int64)
				gotIDs = append(gotIDs, id)
			}
			if !slices.Equal(gotIDs, []int64{2, 4, 5}) {
				t.Errorf("found %s, want ids 2, 4 and 5", ext(got))
			}
			if st := c.p.Stats()["find items"]; st.Split != 1 || st.Parts != 3 {
				t.Errorf("stats %+v: want one find split into 3", st)
			}
			res, err := coll.UpdateMany(ctx, ids, bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: "new"}}}})
			if err != nil || res.ModifiedCount != 3 {
				t.Fatalf("update of 3 ids: %+v %v", res, err)
			}
			if n := count(t, coll, bson.D{{Key: "s", Value: "new"}}); n != 3 {
				t.Errorf("%d documents updated, want 3", n)
			}
		})
	}
}
