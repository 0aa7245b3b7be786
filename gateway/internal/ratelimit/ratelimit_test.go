package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/libs/redisx"
)

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]ratelimit.Limit{"0": {}, "": {}, "600/1m": {N: 600, Window: time.Minute}, "5/1s": {N: 5, Window: time.Second}} {
		got, err := ratelimit.ParseLimit(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v", in, got, err)
		}
	}
	for _, bad := range []string{"x", "10", "10/x", "-1/1m", "10/10ms"} {
		if _, err := ratelimit.ParseLimit(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestLimitHoldsUnderConcurrency: of 50 concurrent requests against 10/1m, exactly 10
// pass, whichever gateway replica counts them, on a single server and on a Redis Cluster
// (the counter script's one key is in one slot).
func TestLimitHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	single := devstack.RedisForTest(t)
	cluster := devstack.RedisClusterForTest(t, devstack.RedisClusterConfig{})
	for _, c := range []struct{ mode, url string }{{redisx.ModeSingle, single.URL}, {redisx.ModeCluster, cluster.URL}} {
		t.Run(c.mode, func(t *testing.T) {
			var replicas []*ratelimit.Limiter
			for range 2 {
				rdb, err := redisx.Open(redisx.RedisConfig{Mode: c.mode, URL: c.url})
				if err != nil {
					t.Fatal(err)
				}
				defer rdb.Close()
				replicas = append(replicas, ratelimit.New(rdb, "t:"))
			}
			limit := ratelimit.Limit{N: 10, Window: time.Minute}
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for i := 0; i < 50; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					d, err := replicas[i%2].Allow(context.Background(), "key-a", limit)
					if err != nil {
						t.Error(err)
					}
					if d.Allowed {
						allowed.Add(1)
					} else if d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
						t.Errorf("retry after %s", d.RetryAfter)
					}
				}(i)
			}
			wg.Wait()
			if allowed.Load() != 10 {
				t.Fatalf("%d allowed, want 10", allowed.Load())
			}
			// Another key has its own budget.
			if d, _ := replicas[0].Allow(context.Background(), "key-b", limit); !d.Allowed || d.Remaining != 9 {
				t.Fatalf("other key: %+v", d)
			}
		})
	}
}
