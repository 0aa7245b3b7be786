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

func TestHeaderFields(t *testing.T) {
	account := ratelimit.Status{Policy: "account", Limit: ratelimit.Limit{N: 600, Window: time.Minute},
		Decision: ratelimit.Decision{Allowed: true, Remaining: 42, ResetAfter: 17200 * time.Millisecond}}
	gs := ratelimit.Status{Policy: "generate-session", Limit: ratelimit.Limit{N: 10, Window: 90 * time.Second},
		Decision: ratelimit.Decision{Remaining: 0, ResetAfter: 90 * time.Second}}
	for _, c := range []struct {
		name       string
		st         []ratelimit.Status
		wantPolicy string
		wantLimit  string
	}{
		{"one policy", []ratelimit.Status{account}, `"account";q=600;w=60`, `"account";r=42;t=18`},
		{"two policies", []ratelimit.Status{gs, account}, `"generate-session";q=10;w=90, "account";q=600;w=60`,
			`"generate-session";r=0;t=90, "account";r=42;t=18`},
	} {
		if got := ratelimit.PolicyHeader(c.st...); got != c.wantPolicy {
			t.Errorf("%s: RateLimit-Policy %s, want %s", c.name, got, c.wantPolicy)
		}
		if got := ratelimit.Header(c.st...); got != c.wantLimit {
			t.Errorf("%s: RateLimit %s, want %s", c.name, got, c.wantLimit)
		}
	}
	for d, want := range map[time.Duration]int64{0: 0, -time.Second: 0, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2} {
		if got := ratelimit.Seconds(d); got != want {
			t.Errorf("Seconds(%s) = %d, want %d", d, got, want)
		}
	}
}

// A request spends its cost; one that does not fit is refused, spends nothing, and is
// told when it would fit; a cost above the quota never fits. The key expires once the
// budget is whole again (Redis runs noeviction: nothing of the limiter stays forever).
func TestCostsAndExpiry(t *testing.T) {
	t.Parallel()
	red := devstack.RedisForTest(t)
	rdb, err := redisx.Open(redisx.RedisConfig{Mode: redisx.ModeSingle, URL: red.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	prefix := devstack.UniqueName(t, "rl") + ":"
	l := ratelimit.New(rdb, prefix)
	ctx := context.Background()
	limit := ratelimit.Limit{N: 60, Window: time.Minute} // one unit a second
	d, err := l.AllowN(ctx, "k", limit, 50)
	if err != nil || !d.Allowed || d.Remaining != 10 || d.ResetAfter < 49*time.Second || d.ResetAfter > 50*time.Second {
		t.Fatalf("cost 50 of 60: %+v %v, want allowed, 10 left, whole again in 50s", d, err)
	}
	d, err = l.AllowN(ctx, "k", limit, 20)
	if err != nil || d.Allowed || d.RetryAfter < 9*time.Second || d.RetryAfter > 10*time.Second {
		t.Fatalf("cost 20 with 10 left: %+v %v, want refused, retry in about 10s", d, err)
	}
	d, err = l.AllowN(ctx, "k", limit, 10)
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("cost 10 with 10 left (the refused request spent nothing): %+v %v", d, err)
	}
	if d, _ := l.AllowN(ctx, "other", limit, 61); d.Allowed || d.RetryAfter != time.Minute {
		t.Fatalf("a cost above the quota: %+v, want refused, retry after the window", d)
	}
	keys, err := rdb.Keys(ctx, "*"+prefix+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v %v, want the one of k", keys, err)
	}
	ttl, err := rdb.PTTL(ctx, keys[0]).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL of %s: %s %v, want at most the window", keys[0], ttl, err)
	}
}
