// Package revocation is embed-svc's published Redis key scheme for ending embed tokens
// before they expire, and the check every reader makes. embed-svc writes the markers;
// the gateway checks them on every embed-token request, uncached, so a revocation is
// seen by every replica on the very next request.
//
//	embed:revoked:<sid>      a revoked session (sid: the token's sid claim); its value is
//	                         the revocation time in Unix milliseconds; it lives at least as
//	                         long as the session's token
//	embed:revoked-key:<kid>  a withdrawn signing key (`embed-svc revoke-key`): every token
//	                         it signed is refused while the marker lives (a token lifetime
//	                         plus an hour)
//
// In Redis Cluster a session's marker is embed:revoked:{<sid>}: the braces make the sid
// the key's hash tag, so the marker shares a slot with the session's other keys (embed-svc
// revokes in one script over them). Outside a cluster the names are as they always were,
// so upgrading a single server or a Sentinel group renames nothing, and no reader of the
// old names misses a marker written under new ones.
//
// Moving to a cluster is the one change of names: markers an earlier release (or this one
// outside a cluster) wrote under embed:revoked:<sid> and imported into the cluster
// (deploy/README.md: moving to a Redis Cluster) are still read, as a third lookup in the
// same pipeline, for LegacyReadWindow after the reader starts: no marker there outlives
// the tokens it refuses by more than that, so a move never forgets a revocation.
package revocation

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/libs/redisx"
)

// The key prefixes.
const (
	SessionPrefix    = "embed:revoked:"
	SigningKeyPrefix = "embed:revoked-key:"
)

// LegacyReadWindow is how long a reader in a cluster keeps reading the session markers'
// pre-cluster names after it starts: an embed token's lifetime (24 h, fixed by the spec;
// a test in embed-svc keeps the two in step) and the marker's extra minute, rounded up to
// an hour.
const LegacyReadWindow = 25 * time.Hour

// SessionKey is the marker of a revoked session on a single server or a Sentinel group.
func SessionKey(sid string) string { return SessionPrefix + sid }

// SigningKeyKey is the marker of a withdrawn signing key (the same in every mode: it is
// read alone).
func SigningKeyKey(kid string) string { return SigningKeyPrefix + kid }

// Scheme names a session's keys for the Redis they are in.
type Scheme struct {
	// Cluster: Redis Cluster, where a session's keys carry its sid as their hash tag.
	Cluster bool
}

// SchemeOf is the scheme of the Redis rdb talks to.
func SchemeOf(rdb redis.UniversalClient) Scheme { return Scheme{Cluster: redisx.IsCluster(rdb)} }

// Tag is what follows a prefix in a session's keys: the sid, in braces in a cluster.
// embed-svc's own keys of the session use it too, so they all hash to one slot.
func (s Scheme) Tag(sid string) string {
	if s.Cluster {
		return "{" + sid + "}"
	}
	return sid
}

// SessionKey is the marker of a revoked session.
func (s Scheme) SessionKey(sid string) string { return SessionPrefix + s.Tag(sid) }

// Checker checks the markers through one client.
type Checker struct {
	rdb    redis.UniversalClient
	scheme Scheme
	now    func() time.Time
	// legacyUntil: in a cluster, until when the session marker's pre-cluster name is read
	// too (zero elsewhere: the names are the same).
	legacyUntil time.Time
}

// NewChecker returns a checker reading through rdb, on the clock now (nil: time.Now).
func NewChecker(rdb redis.UniversalClient, now func() time.Time) *Checker {
	if now == nil {
		now = time.Now
	}
	c := &Checker{rdb: rdb, scheme: SchemeOf(rdb), now: now}
	if c.scheme.Cluster {
		c.legacyUntil = now().Add(LegacyReadWindow)
	}
	return c
}

// Revoked reports whether a token of session sid, signed by the key kid ("" when the
// token names none), is revoked. Outside a cluster that is one EXISTS over both markers;
// in a cluster the markers are in different slots (a multi-key EXISTS would be refused
// with CROSSSLOT), so each is an EXISTS of its own in one pipeline, which the cluster
// client sends to their nodes at once: still one round trip's wait. Within
// LegacyReadWindow of the start the session marker's pre-cluster name is one of them.
func (c *Checker) Revoked(ctx context.Context, sid, kid string) (bool, error) {
	keys := []string{c.scheme.SessionKey(sid)}
	if kid != "" {
		keys = append(keys, SigningKeyKey(kid))
	}
	if c.scheme.Cluster && c.now().Before(c.legacyUntil) {
		keys = append(keys, SessionKey(sid))
	}
	if len(keys) == 1 || !c.scheme.Cluster {
		n, err := c.rdb.Exists(ctx, keys...).Result()
		return n > 0, err
	}
	pipe := c.rdb.Pipeline()
	found := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		found[i] = pipe.Exists(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return false, err
	}
	for _, f := range found {
		if f.Val() > 0 {
			return true, nil
		}
	}
	return false, nil
}
