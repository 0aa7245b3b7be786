package revocation_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/revocation"
	"github.com/analyticsco/platform/libs/redisx"
)

// TestMarkerNamesOutsideAClusterAreUnchanged: on a single server and a Sentinel group
// the markers keep the names every release before Redis Cluster support wrote and read,
// so a rolling upgrade neither misses a marker an old embed-svc wrote nor hides one from
// an old gateway.
func TestMarkerNamesOutsideAClusterAreUnchanged(t *testing.T) {
	for _, s := range []revocation.Scheme{{}, revocation.SchemeOf(redis.NewClient(&redis.Options{}))} {
		if got := s.SessionKey("0123abcd"); got != "embed:revoked:0123abcd" || got != revocation.SessionKey("0123abcd") {
			t.Errorf("session marker %q, want embed:revoked:0123abcd", got)
		}
	}
	if got := revocation.SigningKeyKey("kid-1"); got != "embed:revoked-key:kid-1" {
		t.Errorf("signing-key marker %q", got)
	}
	cluster := revocation.SchemeOf(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}))
	if got := cluster.SessionKey("0123abcd"); got != "embed:revoked:{0123abcd}" {
		t.Errorf("session marker in a cluster %q, want embed:revoked:{0123abcd}", got)
	}
}

// TestCheckerSeesEitherMarkerInEveryMode: a token is refused for its session's marker or
// its signing key's, on a single server and on a Redis Cluster, where the two markers
// are in different slots (one EXISTS over both would be refused with CROSSSLOT).
func TestCheckerSeesEitherMarkerInEveryMode(t *testing.T) {
	t.Parallel()
	single := devstack.RedisForTest(t)
	cluster := devstack.RedisClusterForTest(t, devstack.RedisClusterConfig{})
	for _, c := range []struct{ mode, url string }{{redisx.ModeSingle, single.URL}, {redisx.ModeCluster, cluster.URL}} {
		t.Run(c.mode, func(t *testing.T) {
			ctx := context.Background()
			rdb, err := redisx.Open(redisx.RedisConfig{Mode: c.mode, URL: c.url})
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			scheme, check := revocation.SchemeOf(rdb), revocation.NewChecker(rdb, nil)
			sid, kid := differentSlots(t, rdb, scheme)
			for _, step := range []struct {
				name, sid, kid string
				mark           string
				want           bool
			}{
				{"nothing-revoked", sid, kid, "", false},
				{"nothing-revoked-no-kid", sid, "", "", false},
				{"signing-key-withdrawn", sid, kid, revocation.SigningKeyKey(kid), true},
				{"session-revoked", sid + "x", kid + "x", scheme.SessionKey(sid + "x"), true},
				{"session-revoked-no-kid", sid + "y", "", scheme.SessionKey(sid + "y"), true},
			} {
				if step.mark != "" {
					if err := rdb.Set(ctx, step.mark, "1", time.Minute).Err(); err != nil {
						t.Fatal(err)
					}
				}
				got, err := check.Revoked(ctx, step.sid, step.kid)
				if err != nil || got != step.want {
					t.Errorf("%s: revoked %v, %v; want %v", step.name, got, err, step.want)
				}
			}
		})
	}
}

// TestClusterReaderReadsPreClusterMarkersForOneTokenLifetime: a marker written under the
// name every release before Redis Cluster support used (embed:revoked:<sid>, imported
// into the cluster on the move) still refuses its session's tokens in a cluster, for a
// token's lifetime after the reader starts; past that no such marker can refuse a token
// that has not expired, and the lookup is dropped.
func TestClusterReaderReadsPreClusterMarkersForOneTokenLifetime(t *testing.T) {
	t.Parallel()
	if revocation.LegacyReadWindow < embed.TokenLifetime+time.Minute {
		t.Fatalf("LegacyReadWindow %s is shorter than a token's lifetime and its marker's extra minute (%s)",
			revocation.LegacyReadWindow, embed.TokenLifetime+time.Minute)
	}
	cluster := devstack.RedisClusterForTest(t, devstack.RedisClusterConfig{})
	ctx := context.Background()
	rdb, err := redisx.Open(redisx.RedisConfig{Mode: redisx.ModeCluster, URL: cluster.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	started := time.Now()
	now := started
	check := revocation.NewChecker(rdb, func() time.Time { return now })
	scheme := revocation.SchemeOf(rdb)
	old, current, kid := randomHex(16), randomHex(16), randomHex(8)
	for _, k := range []string{revocation.SessionKey(old), scheme.SessionKey(current)} {
		if err := rdb.Set(ctx, k, "1", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name     string
		at       time.Time
		sid, kid string
		want     bool
	}{
		{"pre-cluster-marker-at-start", started, old, kid, true},
		{"pre-cluster-marker-no-kid", started, old, "", true},
		{"pre-cluster-marker-just-within-the-window", started.Add(revocation.LegacyReadWindow - time.Second), old, kid, true},
		{"cluster-marker", started, current, kid, true},
		{"unrevoked", started, randomHex(16), kid, false},
		{"pre-cluster-name-no-longer-read", started.Add(revocation.LegacyReadWindow), old, kid, false},
		{"cluster-marker-still-read", started.Add(revocation.LegacyReadWindow), current, "", true},
	} {
		now = step.at
		got, err := check.Revoked(ctx, step.sid, step.kid)
		if err != nil || got != step.want {
			t.Errorf("%s: revoked %v, %v; want %v", step.name, got, err, step.want)
		}
	}
}

// differentSlots returns a random sid and kid whose markers are in different hash slots
// (in a cluster; anything elsewhere).
func differentSlots(t *testing.T, rdb redis.UniversalClient, scheme revocation.Scheme) (string, string) {
	t.Helper()
	for range 100 {
		sid, kid := randomHex(16), randomHex(8)
		if !scheme.Cluster {
			return sid, kid
		}
		a, err := rdb.ClusterKeySlot(context.Background(), scheme.SessionKey(sid)).Result()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := rdb.ClusterKeySlot(context.Background(), revocation.SigningKeyKey(kid)).Result()
		if a != b {
			return sid, kid
		}
	}
	t.Fatal("no sid and kid in different slots")
	return "", ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
