package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/store/redisstore"
	"github.com/analyticsco/platform/embed-svc/internal/store/storetest"
	"github.com/analyticsco/platform/libs/redisx"
)

// TestRedisDurableWritesWaitForAReplica: on a Sentinel group and a Redis Cluster, with
// every replica gone, an exchange, a revocation (one session, in bulk, a signing key) is
// unavailable (503 to the client), never answered as done, since a failover now could
// undo it; a mint, which a failover may lose harmlessly, still works. With the replicas
// back, they are answered again, and a bulk revoke reaching primaries that lost their
// scripts loads them.
func TestRedisDurableWritesWaitForAReplica(t *testing.T) {
	t.Parallel()
	sentinel := devstack.RedisSentinelForTest(t, devstack.RedisSentinelConfig{})
	cluster := devstack.RedisClusterForTest(t, devstack.RedisClusterConfig{ReplicasEach: 1})
	for _, c := range []struct {
		mode, url string
		replicas  func(ctx context.Context) []*devstack.Redis
		healthy   func(ctx context.Context) error
	}{
		{redisx.ModeSentinel, sentinel.URL, func(context.Context) []*devstack.Redis { return sentinel.Servers[1:] }, sentinel.WaitHealthy},
		{redisx.ModeCluster, cluster.URL, func(ctx context.Context) []*devstack.Redis {
			primaries, err := cluster.Primaries(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []*devstack.Redis
			for _, n := range cluster.Nodes {
				if !slices.Contains(primaries, n) {
					out = append(out, n)
				}
			}
			return out
		}, cluster.WaitHealthy},
	} {
		t.Run(c.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rdb, err := redisx.Open(redisx.RedisConfig{Mode: c.mode, URL: c.url})
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			s := redisstore.New(redisx.NewDurable(rdb, 1, time.Second))
			acc := storetest.Account()
			pending, pendingSID := storetest.Saved(t, s, acc)
			live, liveSID := storetest.Saved(t, s, acc)
			if _, err := s.ExchangeSession(ctx, live, time.Hour); err != nil {
				t.Fatal(err)
			}
			replicas := c.replicas(ctx)
			for _, r := range replicas {
				r.Kill()
			}

			unavailable := map[string]error{}
			_, unavailable["exchange"] = s.ExchangeSession(ctx, pending, time.Hour)
			_, _, unavailable["revoke"] = s.RevokeSession(ctx, acc, live, liveSID)
			_, unavailable["bulk revoke"] = s.RevokeSIDs(ctx, acc, []string{pendingSID, liveSID, storetest.HexID(32), storetest.HexID(32)})
			unavailable["signing-key revocation"] = s.RevokeSigningKey(ctx, storetest.HexID(8), time.Hour)
			for what, err := range unavailable {
				if !errors.Is(err, embed.ErrUnavailable) || !errors.Is(err, redisx.ErrNotDurable) {
					t.Errorf("%s with no replica: want unavailable (not durable), got %v", what, err)
				}
			}
			if _, _ = storetest.Saved(t, s, acc); t.Failed() {
				return
			}

			for _, r := range replicas {
				if err := r.Start(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.healthy(ctx); err != nil {
				t.Fatal(err)
			}
			id, sid := storetest.Saved(t, s, acc)
			if _, err := s.ExchangeSession(ctx, id, time.Hour); err != nil {
				t.Errorf("exchange with the replicas back: %v", err)
			}
			if _, revoked, err := s.RevokeSession(ctx, acc, id, sid); !revoked || err != nil {
				t.Errorf("revoke with the replicas back: %v %v", revoked, err)
			}
			// A promoted replica has no scripts (the cache is neither kept nor replicated):
			// the bulk revoke loads its script on the primaries that lack it.
			var sids []string
			for range 12 {
				_, sid := storetest.Saved(t, s, acc)
				sids = append(sids, sid)
			}
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := s.RevokeSIDs(ctx, acc, sids); n != len(sids) || err != nil {
				t.Errorf("bulk revoke after the scripts were flushed: %d of %d, %v", n, len(sids), err)
			}
		})
	}
}

// TestRedisARetriedRevokeIsAcknowledgedOnlyOnceTheFirstTrysMarkerIsReplicated: a revoke
// whose replicas did not answer (503) and that is retried through another embed-svc
// replica (another connection) finds nothing left to revoke; it must still not be
// answered until the marker the first try wrote has reached a replica (WAIT covers only
// what its own connection wrote), or a failover could bring the session back.
func TestRedisARetriedRevokeIsAcknowledgedOnlyOnceTheFirstTrysMarkerIsReplicated(t *testing.T) {
	t.Parallel()
	rs := devstack.RedisSentinelForTest(t, devstack.RedisSentinelConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := func() *redisstore.Store {
		rdb, err := redisx.Open(redisx.RedisConfig{Mode: redisx.ModeSentinel, URL: rs.URL})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		return redisstore.New(redisx.NewDurable(rdb, 1, 300*time.Millisecond))
	}
	first, second := store(), store()
	acc := storetest.Account()
	id, sid := storetest.Saved(t, first, acc)
	if _, err := first.ExchangeSession(ctx, id, time.Hour); err != nil {
		t.Fatal(err)
	}
	// The replicas stay connected but answer nothing, as if slow.
	for _, r := range rs.Servers[1:] {
		if err := syscall.Kill(r.Pid(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			for _, r := range rs.Servers[1:] {
				_ = syscall.Kill(r.Pid(), syscall.SIGCONT)
			}
		}
	}
	defer resume()
	if _, _, err := first.RevokeSession(ctx, acc, id, sid); !errors.Is(err, embed.ErrUnavailable) {
		t.Fatalf("revoke with silent replicas: want unavailable, got %v", err)
	}
	if _, _, err := second.RevokeSession(ctx, acc, id, sid); !errors.Is(err, embed.ErrUnavailable) {
		t.Fatalf("the revoke retried through another client while the first try's marker is on the primary alone: want unavailable, got %v", err)
	}
	resume()
	apitest.Eventually(t, 20*time.Second, "the retried revoke is acknowledged once the replicas answer", func() (bool, string) {
		_, _, err := second.RevokeSession(ctx, acc, id, sid)
		return err == nil, fmt.Sprint(err)
	})
}
