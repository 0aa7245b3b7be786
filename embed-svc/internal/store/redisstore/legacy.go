package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/revocation"
)

// Moving to a Redis Cluster (deploy/README.md) imports the sessions an earlier release,
// or this one outside a cluster, wrote under the names without hash tags
// (embed:session:<id>, embed:live:<sid>). They live at most a token's lifetime from the
// move. For revocation.LegacyReadWindow after it starts, a store in a cluster that finds
// nothing to revoke under a session's cluster names looks under those: a session from
// before the move is revoked like any other, and its marker is written under the
// cluster's name, which every gateway reads.

// legacyUntil is until when s looks for sessions under their pre-cluster names (zero
// outside a cluster: the names are the same).
func legacyUntil(scheme revocation.Scheme, now time.Time) time.Time {
	if !scheme.Cluster {
		return time.Time{}
	}
	return now.Add(revocation.LegacyReadWindow)
}

// legacySession is a session found under its pre-cluster names.
type legacySession struct {
	sid, key, value string        // key: its record (pending id or live session)
	life            time.Duration // how long its marker must outlive now, less a minute
}

// findLegacy looks up sessions sids (their pending ids stored under handles) of
// accountID under their pre-cluster names, in one pipeline.
func (s *Store) findLegacy(ctx context.Context, accountID int64, handles, sids []string) ([]legacySession, error) {
	if !time.Now().Before(s.legacyUntil) || len(sids) == 0 {
		return nil, nil
	}
	type lookup struct {
		pending, live *redis.StringCmd
		ttl           *redis.DurationCmd
	}
	pipe := s.rdb.Pipeline()
	lookups := make([]lookup, len(sids))
	for i, sid := range sids {
		lookups[i] = lookup{pipe.Get(ctx, SessionPrefix+handles[i]), pipe.Get(ctx, LivePrefix+sid), pipe.PTTL(ctx, LivePrefix+sid)}
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	var out []legacySession
	for i, l := range lookups {
		for _, err := range []error{l.pending.Err(), l.live.Err(), l.ttl.Err()} {
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, wrap(err)
			}
		}
		switch {
		case l.pending.Err() == nil && ownedBy(l.pending.Val(), accountID):
			out = append(out, legacySession{sids[i], SessionPrefix + handles[i], l.pending.Val(), embed.TokenLifetime})
		case l.live.Err() == nil && ownedBy(l.live.Val(), accountID) && l.ttl.Val() > 0:
			out = append(out, legacySession{sids[i], LivePrefix + sids[i], l.live.Val(), l.ttl.Val()})
		}
	}
	return out, nil
}

// revokeLegacy revokes sessions found by findLegacy: each one's marker under the
// cluster's name, durably, then its old record deleted. The keys are in different slots,
// so it is no script; nothing but this writes them any more, and a retry after a failure
// finds the record again or the marker already there.
func (s *Store) revokeLegacy(ctx context.Context, found []legacySession) error {
	for _, l := range found {
		marker := s.scheme.SessionKey(l.sid)
		err := s.durable.Run(ctx, marker, func(pipe redis.Pipeliner) {
			pipe.Set(ctx, marker, time.Now().UnixMilli(), l.life+time.Minute)
		})
		if err == nil {
			err = s.rdb.Del(ctx, l.key).Err()
		}
		if err != nil {
			return wrap(err)
		}
	}
	return nil
}

// ownedBy reports whether a stored session value belongs to accountID, as the scripts'
// accountOf reads it ("" is an id reserved before the account prefix: anyone's).
func ownedBy(v string, accountID int64) bool {
	if v == "" {
		return true
	}
	if acc, _, ok := strings.Cut(v, "|"); ok && !strings.HasPrefix(v, "{") {
		n, err := strconv.ParseInt(acc, 10, 64)
		return err == nil && n == accountID
	}
	sess, err := decode(v)
	return err == nil && sess.AccountID == accountID
}
