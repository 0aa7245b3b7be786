package wireproxy_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack/wireproxy"
)

// forwardedBody sends body through a proxy to a fake upstream and returns the body the
// upstream received.
func forwardedBody(t *testing.T, body bson.D) bson.D {
	t.Helper()
	var mu sync.Mutex
	var got bson.D
	f := startFake(t, func(req []byte) [][]byte {
		mu.Lock()
		defer mu.Unlock()
		if err := bson.Unmarshal(parseMsg(t, req).body, &got); err != nil {
			t.Error(err)
		}
		return [][]byte{reply(t, req, bson.D{{Key: "ok", Value: 1.0}})}
	})
	p := startBatchingProxy(t, f.ln.Addr().String(), wireproxy.Options{})
	c, r := dial(t, p)
	roundTrip(t, c, r, writeMsg(t, 1, 0, body, ""))
	mu.Lock()
	defer mu.Unlock()
	return got
}

func TestProxyTakesMaxTimeMSOutOfFindAndAggregateOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		keep bool
	}{{"find", false}, {"aggregate", false}, {"update", true}, {"findAndModify", true}, {"count", true}} {
		got := forwardedBody(t, bson.D{{Key: c.name, Value: "items"}, {Key: "maxTimeMS", Value: int64(9000)}, {Key: "$db", Value: "d"}})
		if has := lookup(got, "maxTimeMS") != nil; has != c.keep {
			t.Errorf("%s forwarded as %v: maxTimeMS kept %v, want %v", c.name, got, has, c.keep)
		}
		if lookup(got, "$db") != "d" || lookup(got, c.name) != "items" {
			t.Errorf("%s forwarded as %v: the other fields changed", c.name, got)
		}
	}
}

func TestProxyWritesAFindsInOfOneScalarAsTheEquality(t *testing.T) {
	filterOf := func(filter bson.D) bson.D {
		got := forwardedBody(t, bson.D{{Key: "find", Value: "items"}, {Key: "filter", Value: filter}, {Key: "limit", Value: int64(5)}, {Key: "$db", Value: "d"}})
		if lookup(got, "limit") != int64(5) || lookup(got, "$db") != "d" {
			t.Errorf("find forwarded as %v: the other fields changed", got)
		}
		f, _ := lookup(got, "filter").(bson.D)
		return f
	}
	in := func(vs ...any) bson.D { return bson.D{{Key: "$in", Value: bson.A(vs)}} }
	oid := bson.NewObjectID()
	for _, c := range []struct {
		name   string
		filter bson.D
		want   bson.D
	}{
		{"an int64 id", bson.D{{Key: "_id", Value: in(int64(7))}, {Key: "dep", Value: int64(3)}}, bson.D{{Key: "_id", Value: int64(7)}, {Key: "dep", Value: int64(3)}}},
		{"a string in an array field", bson.D{{Key: "anc", Value: in("x")}}, bson.D{{Key: "anc", Value: "x"}}},
		{"an object id", bson.D{{Key: "_id", Value: in(oid)}}, bson.D{{Key: "_id", Value: oid}}},
		{"two values stay", bson.D{{Key: "_id", Value: in(int64(1), int64(2))}}, bson.D{{Key: "_id", Value: in(int64(1), int64(2))}}},
		{"a document stays (it would read as operators)", bson.D{{Key: "a", Value: in(bson.D{{Key: "$gt", Value: 1}})}}, bson.D{{Key: "a", Value: in(bson.D{{Key: "$gt", Value: 1}})}}},
		{"a regex stays", bson.D{{Key: "a", Value: in(bson.Regex{Pattern: "^x"})}}, bson.D{{Key: "a", Value: in(bson.Regex{Pattern: "^x"})}}},
		{"$in beside another operator stays", bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{int64(1)}}, {Key: "$ne", Value: int64(2)}}}}, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{int64(1)}}, {Key: "$ne", Value: int64(2)}}}}},
	} {
		if got := filterOf(c.filter); !equalDocs(got, c.want) {
			t.Errorf("%s: forwarded filter %v, want %v", c.name, got, c.want)
		}
	}
}

func TestProxyCollectionsModeRunsWritesToOneCollectionOneAtATime(t *testing.T) {
	var mu sync.Mutex
	inFlight, maxInFlight := map[string]int{}, map[string]int{}
	var total, maxTotal atomic.Int32
	f := startFake(t, func(req []byte) [][]byte {
		var body bson.D
		if err := bson.Unmarshal(parseMsg(t, req).body, &body); err != nil {
			t.Error(err)
		}
		coll, _ := body[0].Value.(string)
		mu.Lock()
		inFlight[coll]++
		maxInFlight[coll] = max(maxInFlight[coll], inFlight[coll])
		mu.Unlock()
		n := total.Add(1)
		for m := maxTotal.Load(); n > m && !maxTotal.CompareAndSwap(m, n); m = maxTotal.Load() {
		}
		for range 200 {
			runtime.Gosched()
		}
		total.Add(-1)
		mu.Lock()
		inFlight[coll]--
		mu.Unlock()
		return [][]byte{reply(t, req, bson.D{{Key: "ok", Value: 1.0}})}
	})
	p := startBatchingProxy(t, f.ln.Addr().String(), wireproxy.Options{Mode: wireproxy.Collections})
	var wg sync.WaitGroup
	// Two connections per collection and command, four collections.
	for g := range 16 {
		coll := []string{"a", "b", "c", "d"}[g%4]
		name := []string{"update", "findAndModify", "insert", "delete"}[g/4]
		c, r := dial(t, p)
		wg.Go(func() {
			for i := range 30 {
				roundTrip(t, c, r, writeMsg(t, int32(g*1000+i), 0, bson.D{{Key: name, Value: coll}, {Key: "$db", Value: "d"}}, ""))
			}
		})
	}
	wg.Wait()
	for coll, n := range maxInFlight {
		if n != 1 {
			t.Errorf("collection %s: %d writes upstream at once, want 1", coll, n)
		}
	}
	if maxTotal.Load() < 2 {
		t.Errorf("at most %d writes upstream at once over four collections, want writes to different collections side by side", maxTotal.Load())
	}
}

func TestProxyCountsWaitAndRunPerCommand(t *testing.T) {
	f := startFake(t, func(req []byte) [][]byte { return [][]byte{reply(t, req, bson.D{{Key: "ok", Value: 1.0}})} })
	p := startBatchingProxy(t, f.ln.Addr().String(), wireproxy.Options{})
	c, r := dial(t, p)
	for i := range 3 {
		roundTrip(t, c, r, writeMsg(t, int32(i), 0, bson.D{{Key: "find", Value: "items"}, {Key: "$db", Value: "d"}}, ""))
	}
	roundTrip(t, c, r, writeMsg(t, 9, 0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, ""))
	st := p.Stats()
	if st["find items"].Count != 3 || st["ping"].Count != 1 {
		t.Errorf("stats %v: want 3 under \"find items\" and 1 under \"ping\"", st)
	}
	got := roundTrip(t, c, r, writeMsg(t, 10, 0, bson.D{{Key: wireproxy.StatsCommand, Value: 1}, {Key: "$db", Value: "admin"}}, ""))
	cmds, _ := lookup(got, "commands").(bson.D)
	find, _ := lookup(cmds, "find items").(bson.D)
	if lookup(find, "count") != int64(3) {
		t.Errorf("%s answered %v: want find items counted 3 times", wireproxy.StatsCommand, got)
	}
	if fwd, _ := p.Counts(); fwd != 4 {
		t.Errorf("%d commands forwarded, want 4 (the stats command is the proxy's own)", fwd)
	}
}
