package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/store/redisstore"
	"github.com/analyticsco/platform/embed-svc/internal/store/storetest"
	"github.com/analyticsco/platform/libs/redisx"
)

// TestSessionStoreContract runs the session store's contract against the Redis store on
// a redis-server of its own, on a Sentinel group (a primary, two replicas, three
// sentinels) and on a Redis Cluster (three primaries, each with a replica), those two
// waiting for a replica on every exchange and revocation as they do in production. The
// cases of a topology share its servers; their keys are random.
func TestSessionStoreContract(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) *redisx.Durable
	}{
		{"redis", func(t *testing.T) *redisx.Durable { return redisx.NewDurable(redisClient(t), 0, 0) }},
		{"redis-sentinel", func(t *testing.T) *redisx.Durable {
			return durableOn(t, redisx.ModeSentinel, devstack.RedisSentinelForTest(t, devstack.RedisSentinelConfig{}).URL)
		}},
		{"redis-cluster", func(t *testing.T) *redisx.Durable {
			return durableOn(t, redisx.ModeCluster, devstack.RedisClusterForTest(t, devstack.RedisClusterConfig{ReplicasEach: 1}).URL)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rdb := c.open(t)
			storetest.RunSessions(t, func(*testing.T) embed.SessionStore { return redisstore.New(rdb) })
		})
	}
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
