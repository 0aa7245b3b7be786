// Package contract_test holds one suite per store port of embed-svc, each run against the
// real adapter (mongostore on FerretDB behind the serializing proxy, redisstore on
// redis-server) and the in-memory fake (memstore), in parallel, so a test of the service
// on the fakes tests what production does. Every case works in an account of its own
// (and the session store's keys are random), so cases share nothing.
package contract_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/store/memstore"
	"github.com/analyticsco/platform/embed-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/embed-svc/internal/store/redisstore"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/redisx"
)

// durable is what mongostore and memstore.Store both are.
type durable interface {
	embed.CatalogStore
	embed.UserStore
	embed.SessionRecordStore
}

// durableStores returns the MongoDB store (on a database of its own, indexes made, every
// query it is sent held against them at the end) and the fake, by name.
func durableStores(t *testing.T) map[string]durable {
	t.Helper()
	m := devstack.MongoForTest(t)
	ctx := context.Background()
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(ctx, m.URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "embed"))
	t.Cleanup(func() { plan.Check(t, db) })
	st := mongostore.New(db)
	if err := st.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	return map[string]durable{"mongo": st, "memory": memstore.New()}
}

// redisClient is a client of a redis-server of the test's own.
func redisClient(t *testing.T) *redis.Client {
	t.Helper()
	r := devstack.RedisForTest(t)
	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// sessionStores returns the Redis store on a redis-server of its own, on a Sentinel group
// (a primary, two replicas, three sentinels) and on a Redis Cluster (three primaries,
// each with a replica), those two waiting for a replica on every exchange and revocation
// as they do in production, and the fake.
func sessionStores(t *testing.T) map[string]embed.SessionStore {
	t.Helper()
	return map[string]embed.SessionStore{
		"redis":          redisstore.New(redisx.NewDurable(redisClient(t), 0, 0)),
		"redis-sentinel": redisstore.New(durableOn(t, redisx.ModeSentinel, devstack.RedisSentinelForTest(t, devstack.RedisSentinelConfig{}).URL)),
		"redis-cluster":  redisstore.New(durableOn(t, redisx.ModeCluster, devstack.RedisClusterForTest(t, devstack.RedisClusterConfig{ReplicasEach: 1}).URL)),
		"memory":         memstore.NewSessions(nil),
	}
}

// durableOn is the production client of the mode on url, with the mode's default
// durability (a replica acknowledges every exchange and revocation).
func durableOn(t *testing.T, mode, url string) *redisx.Durable {
	t.Helper()
	rdb, err := redisx.Open(redisx.RedisConfig{Mode: mode, URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	d, err := redisx.NewDurableFor(rdb, mode, redisx.Durability{Replicas: "auto", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d.Replicas() != 1 {
		t.Fatalf("%s mode waits for %d replicas, want 1", mode, d.Replicas())
	}
	return d
}

// run runs every case against every store, all in parallel.
func run[S any](t *testing.T, stores map[string]S, cases map[string]func(t *testing.T, s S)) {
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for cname, c := range cases {
				t.Run(cname, func(t *testing.T) {
					t.Parallel()
					c(t, s)
				})
			}
		})
	}
}

var accounts atomic.Int64

func init() { accounts.Store(time.Now().UnixNano() % 1_000_000 * 1000) }

// account is a fresh account id: a case's own data.
func account() int64 { return accounts.Add(1) }

// at is a test time at millisecond precision, as the stores keep it.
func at(d time.Duration) time.Time {
	return time.Now().UTC().Truncate(time.Millisecond).Add(d)
}

// together runs fn(i) n times at once and waits.
func together(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

func ptr[T any](v T) *T { return &v }
