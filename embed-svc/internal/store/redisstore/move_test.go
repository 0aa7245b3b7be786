package redisstore_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/embed-svc/internal/store/redisstore"
	"github.com/analyticsco/platform/embed-svc/internal/store/storetest"
	"github.com/analyticsco/platform/embed-svc/revocation"
	"github.com/analyticsco/platform/libs/redisx"
)

// TestMovingToAClusterForgetsNoRevocation: sessions and revocations made on one Redis
// server (the names without hash tags every release before Redis Cluster support used),
// copied into a Redis Cluster as deploy/README.md says (`redis-cli --cluster import
// --cluster-copy`): the gateway's check in the cluster still refuses what was revoked
// before the move, and a session from before the move, pending or exchanged, is revoked
// after it like any other (one by one and in bulk), its marker then under the cluster's
// name; another account's session is left alone.
func TestMovingToAClusterForgetsNoRevocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	single := devstack.RedisForTest(t)
	cluster := devstack.RedisClusterForTest(t, devstack.RedisClusterConfig{})
	before, err := redisx.Open(redisx.RedisConfig{Mode: redisx.ModeSingle, URL: single.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	old := redisstore.New(redisx.NewDurable(before, 0, time.Second))
	acc, other := storetest.Account(), storetest.Account()
	exchanged := func(acc int64) (string, string) {
		id, sid := storetest.Saved(t, old, acc)
		if _, err := old.ExchangeSession(ctx, id, time.Hour); err != nil {
			t.Fatal(err)
		}
		return id, sid
	}
	revokedID, revokedSID := exchanged(acc)
	if _, ok, err := old.RevokeSession(ctx, acc, revokedID, revokedSID); !ok || err != nil {
		t.Fatalf("revoke before the move: %v %v", ok, err)
	}
	pendingID, pendingSID := storetest.Saved(t, old, acc)
	liveID, liveSID := exchanged(acc)
	_, bulkPendingSID := storetest.Saved(t, old, acc)
	_, bulkLiveSID := exchanged(acc)
	otherID, otherSID := exchanged(other)

	// Both Redis require a password: the cluster's in REDISCLI_AUTH, the old server's
	// as --cluster-from-pass.
	move := exec.Command("redis-cli", "--cluster", "import", cluster.Nodes[0].Addr,
		"--cluster-from", single.Addr, "--cluster-from-pass", single.Password, "--cluster-copy")
	move.Env = append(os.Environ(), "REDISCLI_AUTH="+cluster.Nodes[0].Password)
	if out, err := move.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster import: %v\n%s", err, out)
	}
	after, err := redisx.Open(redisx.RedisConfig{Mode: redisx.ModeCluster, URL: cluster.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	s, check := redisstore.New(redisx.NewDurable(after, 0, time.Second)), revocation.NewChecker(after, nil)
	revoked := func(sid string) bool {
		t.Helper()
		r, err := check.Revoked(ctx, sid, "")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if !revoked(revokedSID) {
		t.Error("a session revoked before the move is not refused in the cluster")
	}
	for _, sid := range []string{pendingSID, liveSID, bulkPendingSID, bulkLiveSID, otherSID} {
		if revoked(sid) {
			t.Errorf("session %s… refused in the cluster before it was revoked", sid[:8])
		}
	}

	for _, c := range []struct{ name, id, sid string }{{"pending", pendingID, pendingSID}, {"exchanged", liveID, liveSID}} {
		sess, ok, err := s.RevokeSession(ctx, acc, c.id, c.sid)
		if !ok || err != nil || sess.SID != c.sid {
			t.Errorf("revoke a %s session from before the move: %v, %v, %q", c.name, ok, err, sess.SID)
		}
		if _, again, err := s.RevokeSession(ctx, acc, c.id, c.sid); again || err != nil {
			t.Errorf("revoke a %s session from before the move twice: the second found it too (%v, %v)", c.name, again, err)
		}
	}
	if n, err := s.RevokeSIDs(ctx, acc, []string{bulkPendingSID, bulkLiveSID, storetest.HexID(32)}); n != 2 || err != nil {
		t.Errorf("bulk revoke of two sessions from before the move and an unknown sid: %d, %v; want 2", n, err)
	}
	if _, ok, err := s.RevokeSession(ctx, acc, otherID, otherSID); ok || err != nil {
		t.Errorf("revoke another account's session from before the move: %v, %v; want nothing revoked", ok, err)
	}
	scheme := revocation.SchemeOf(after)
	for _, sid := range []string{pendingSID, liveSID, bulkPendingSID, bulkLiveSID} {
		if !revoked(sid) {
			t.Errorf("session %s… from before the move, revoked after it, is not refused", sid[:8])
		}
		if ttl := after.PTTL(ctx, scheme.SessionKey(sid)).Val(); ttl <= time.Minute {
			t.Errorf("session %s…: its marker under the cluster's name lives %s, want a token's remaining lifetime and a minute", sid[:8], ttl)
		}
	}
	if revoked(otherSID) {
		t.Error("another account's session from before the move was revoked")
	}
}
