package redisha_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/redisx"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// topology is a Redis that can lose its primary: a Sentinel group or a Redis Cluster.
type topology struct {
	env []string // REDIS_MODE and REDIS_URL of every process
	// killPrimary kills a primary and returns a function that starts it again.
	killPrimary func(ctx context.Context) (restart func(ctx context.Context) error)
	failover    func(ctx context.Context) error // waits until a replica has taken over
	healthy     func(ctx context.Context) error // waits until every node is back and in sync
}

func sentinelTopology(t *testing.T) topology {
	rs := devstack.RedisSentinelForTest(t, devstack.RedisSentinelConfig{Replicas: 2, Sentinels: 3, DownAfter: 2 * time.Second})
	return topology{
		env: []string{"REDIS_MODE=" + redisx.ModeSentinel, "REDIS_URL=" + rs.URL},
		killPrimary: func(ctx context.Context) func(context.Context) error {
			p, err := rs.Primary(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p.Kill()
			return func(ctx context.Context) error { return rs.Rejoin(ctx, p) }
		},
		failover: rs.WaitFailover, healthy: rs.WaitHealthy,
	}
}

func clusterTopology(t *testing.T) topology {
	rc := devstack.RedisClusterForTest(t, devstack.RedisClusterConfig{Primaries: 3, ReplicasEach: 1, NodeTimeout: 2 * time.Second})
	return topology{
		env: []string{"REDIS_MODE=" + redisx.ModeCluster, "REDIS_URL=" + rc.URL},
		killPrimary: func(ctx context.Context) func(context.Context) error {
			primaries, err := rc.Primaries(ctx)
			if err != nil || len(primaries) == 0 {
				t.Fatalf("primaries: %v", err)
			}
			primaries[0].Kill()
			return primaries[0].Start
		},
		failover: rc.WaitFailover, healthy: rc.WaitHealthy,
	}
}

// TestASentinelFailoverUnderLoadBringsBackNoRevokedToken: a primary, two replicas and
// three sentinels; the primary is killed under load and started again once a replica
// has taken over.
func TestASentinelFailoverUnderLoadBringsBackNoRevokedToken(t *testing.T) {
	t.Parallel()
	failoverUnderLoad(t, "sentinel", sentinelTopology(t))
}

// TestAClusterFailoverUnderLoadBringsBackNoRevokedToken: three primaries with a replica
// each; one primary is killed under load and started again once its replica has taken
// over.
func TestAClusterFailoverUnderLoadBringsBackNoRevokedToken(t *testing.T) {
	t.Parallel()
	failoverUnderLoad(t, "cluster", clusterTopology(t))
}

// failoverUnderLoad runs the platform (two gateways, two replicas of each service) on
// top, under steady traffic, kills a primary, waits for the failover, starts the old
// primary again, and then checks: no revoked token was ever accepted by either gateway,
// every unrevoked session works, no session id was exchanged twice, and every error
// any client saw was a 503 with Retry-After. It prints the failover's downtime and the
// 503s.
func failoverUnderLoad(t *testing.T, mode string, topo topology) {
	s := stacktest.Start(t, stacktest.Options{Replicas: 2, Gateways: 2, RedisEnv: topo.env,
		// The limiters, the account budgets and the failed-authentication counters run in
		// the same Redis (the route limits fail closed, the budgets open), but never refuse
		// this traffic.
		Env: []string{"RATE_LIMIT_GENERATE_SESSION=1000000/1m", "RATE_LIMIT_EXCHANGE=1000000/1m", "AUTH_FAILURE_LIMIT=1000000/1m",
			"RATE_LIMIT_PLAN_FREE=1000000/1m", "RATE_LIMIT_PLAN_PREMIUM=1000000/1m", "RATE_LIMIT_PLAN_ENTERPRISE=1000000/1m"}})
	acme := s.Seed.Accounts["acme"]
	tr := newTraffic(s.Gateways, acme.APIKeys["admin"], acme.Deployments[0].ID)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	loadCtx, stopLoad := context.WithCancel(ctx)
	waitLoad := tr.run(loadCtx)
	defer func() { stopLoad(); waitLoad() }()

	apitest.Eventually(t, time.Minute, "live and revoked sessions before the failover", func() (bool, string) {
		ex, rev := tr.counts()
		return ex >= 12 && rev >= 4, fmt.Sprintf("%d exchanged, %d revoked", ex, rev)
	})
	killed := time.Now()
	restart := topo.killPrimary(ctx)
	if err := topo.failover(ctx); err != nil {
		t.Fatal(err)
	}
	failedOver := time.Since(killed)
	if err := restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := topo.healthy(ctx); err != nil {
		t.Fatal(err)
	}
	rejoined := time.Since(killed)
	// Traffic goes on with the old primary back, until sessions made and revoked since
	// are among those checked.
	ex0, rev0 := tr.counts()
	apitest.Eventually(t, time.Minute, "sessions exchanged and revoked after the old primary rejoined", func() (bool, string) {
		ex, rev := tr.counts()
		return ex >= ex0+6 && rev >= rev0+2, fmt.Sprintf("%d exchanged, %d revoked", ex-ex0, rev-rev0)
	})
	stopLoad()
	waitLoad()

	tr.mu.Lock()
	downtime := "none"
	if tr.last503.After(killed) {
		downtime = tr.last503.Sub(killed).Round(10 * time.Millisecond).String()
	}
	tr.mu.Unlock()
	fmt.Printf("redis-ha %s: primary killed; a replica took over in %s; the old primary rejoined at %s; "+
		"clients saw 503s until %s after the kill; %s\n",
		mode, failedOver.Round(10*time.Millisecond), rejoined.Round(10*time.Millisecond), downtime, tr.summary())

	checkAfterwards(t, mode, tr)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.violations) > 0 {
		t.Errorf("%d rules broken under the failover:\n%s", len(tr.violations), strings.Join(tr.violations, "\n"))
	}
}

// checkAfterwards: with Redis whole again, every revoked token is refused and every
// other one served by every gateway, and no session id can be exchanged again.
func checkAfterwards(t *testing.T, mode string, tr *traffic) {
	tr.mu.Lock()
	sessions := append([]*session(nil), tr.sessions...)
	tr.mu.Unlock()
	revoked, live := 0, 0
	for _, s := range sessions {
		for g := range tr.gateways {
			if s.token != "" {
				want := 200
				if !s.revokedAt.IsZero() {
					want = 401
				}
				got := retryUnavailable(func() answer { return tr.info(g, s.token) })
				if got.status != want {
					t.Errorf("session %s… (revoked: %v) through gateway %d after the failover: %d, want %d", s.id[:8], !s.revokedAt.IsZero(), g+1, got.status, want)
				}
			}
			// A 200 here is a second exchange (a violation), unless every earlier attempt
			// was a 503.
			retryUnavailable(func() answer { return tr.exchange(g, s) })
		}
		switch {
		case s.token == "":
		case s.revokedAt.IsZero():
			live++
		default:
			revoked++
		}
	}
	t.Logf("redis-ha %s: afterwards checked %d sessions: %d live, %d revoked, each on %d gateways", mode, len(sessions), live, revoked, len(tr.gateways))
}

// retryUnavailable sends until the answer is not a 503, at most 20 times.
func retryUnavailable(send func() answer) answer {
	var a answer
	for range 20 {
		if a = send(); a.status != 503 {
			return a
		}
		time.Sleep(100 * time.Millisecond) // the Retry-After, shortened
	}
	return a
}
