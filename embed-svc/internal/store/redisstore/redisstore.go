// Package redisstore keeps embed session ids, live sessions and revocations in Redis.
//
// Keys: embed:session:<sha256 of the id> (an unexchanged session, 5-minute TTL, single
// use: keyed by the hash so that reading Redis yields no usable session id),
// embed:live:<sid> (the exchanged session, until its token expires) and
// embed:revoked:<sid> = "1" (until the revoked token's own expiry; the gateway checks it).
// Exchange and revoke are Lua scripts, so each is atomic and one round trip.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// Key prefixes (part of the contract with the gateway: it reads RevokedPrefix).
const (
	SessionPrefix = "embed:session:"
	LivePrefix    = "embed:live:"
	RevokedPrefix = "embed:revoked:"
	// RevokedSigningKeyPrefix marks a withdrawn signing key (`embed:revoked-key:<kid>`):
	// the gateway refuses every token that key signed while the marker lives.
	RevokedSigningKeyPrefix = "embed:revoked-key:"
)

// RevokeSigningKey marks kid withdrawn for ttl (at least the lifetime of the tokens it
// signed). Set it before the key leaves the keyring, so no gateway ever accepts a
// token of a key that is gone from the JWKS but not yet marked.
func (s *Store) RevokeSigningKey(ctx context.Context, kid string, ttl time.Duration) error {
	return wrap(s.rdb.Set(ctx, RevokedSigningKeyPrefix+kid, "1", ttl).Err())
}

// Store implements embed.SessionStore.
type Store struct{ rdb redis.UniversalClient }

// New wraps a Redis client.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// exchangeScript consumes the id (GETDEL) and keeps the session live under its sid.
var exchangeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or v == '' then return false end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], v, 'PX', ARGV[1])
return v`)

// revokeScript: before the exchange it deletes the id; after it, it marks the sid
// revoked for exactly the live session's remaining lifetime. Sessions of another
// account are left alone (the caller still gets its 204).
var revokeScript = redis.NewScript(`
local acc = tonumber(ARGV[1])
local v = redis.call('GET', KEYS[1])
if v then
  if v == '' or cjson.decode(v).acc == acc then redis.call('DEL', KEYS[1]) end
  return 1
end
local l = redis.call('GET', KEYS[2])
if l and cjson.decode(l).acc == acc then
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl > 0 then
    -- The live key's TTL was set a moment before the token's exp was computed: the marker
    -- outlives the token by a margin, never the other way round.
    redis.call('SET', KEYS[3], '1', 'PX', ttl + 60000)
  end
  redis.call('DEL', KEYS[2])
end
return 1`)

// ReserveSession claims a fresh session id with an empty placeholder (never
// exchangeable) before the mint writes anything to MongoDB: if Redis cannot take it,
// the mint fails before it has changed anything.
func (s *Store) ReserveSession(ctx context.Context, sessionID string) error {
	ok, err := s.rdb.SetNX(ctx, SessionPrefix+embed.PublicSessionHandle(sessionID), "", embed.SessionIDTTL).Result()
	if err != nil {
		return wrap(err)
	}
	if !ok {
		return errors.New("session id collision")
	}
	return nil
}

// SaveSession stores a fresh session id for embed.SessionIDTTL.
func (s *Store) SaveSession(ctx context.Context, sessionID string, sess embed.Session) error {
	raw, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	return wrap(s.rdb.Set(ctx, SessionPrefix+embed.PublicSessionHandle(sessionID), raw, embed.SessionIDTTL).Err())
}

// ExchangeSession consumes the id atomically.
func (s *Store) ExchangeSession(ctx context.Context, sessionID string, ttl time.Duration) (embed.Session, error) {
	sid := embed.PublicSessionHandle(sessionID)
	raw, err := exchangeScript.Run(ctx, s.rdb, []string{SessionPrefix + sid, LivePrefix + sid}, strconv.FormatInt(ttl.Milliseconds(), 10)).Text()
	if errors.Is(err, redis.Nil) {
		return embed.Session{}, embed.ErrSessionUnusable
	}
	if err != nil {
		return embed.Session{}, wrap(err)
	}
	var sess embed.Session
	if err := json.Unmarshal([]byte(raw), &sess); err != nil {
		return embed.Session{}, err
	}
	return sess, nil
}

// LiveSession returns an exchanged session.
func (s *Store) LiveSession(ctx context.Context, sid string) (embed.Session, error) {
	raw, err := s.rdb.Get(ctx, LivePrefix+sid).Bytes()
	if errors.Is(err, redis.Nil) {
		return embed.Session{}, embed.ErrNotFound
	}
	if err != nil {
		return embed.Session{}, wrap(err)
	}
	var sess embed.Session
	if err := json.Unmarshal(raw, &sess); err != nil {
		return embed.Session{}, err
	}
	return sess, nil
}

// RevokeSession ends a session of accountID.
func (s *Store) RevokeSession(ctx context.Context, accountID int64, sessionID, sid string) error {
	err := revokeScript.Run(ctx, s.rdb, []string{SessionPrefix + embed.PublicSessionHandle(sessionID), LivePrefix + sid, RevokedPrefix + sid}, accountID).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return wrap(err)
}

// RevokeSIDs revokes sessions by sid with the revoke script (the pending id is stored
// under the sid too), pipelined: one round trip per call.
func (s *Store) RevokeSIDs(ctx context.Context, accountID int64, sids []string) error {
	if len(sids) == 0 {
		return nil
	}
	// Load the script once so the pipeline can use EVALSHA.
	if err := revokeScript.Load(ctx, s.rdb).Err(); err != nil {
		return wrap(err)
	}
	pipe := s.rdb.Pipeline()
	for _, sid := range sids {
		revokeScript.EvalSha(ctx, pipe, []string{SessionPrefix + sid, LivePrefix + sid, RevokedPrefix + sid}, accountID)
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		return wrap(err)
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return wrap(err)
		}
	}
	return nil
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed) || isConnRefused(err) || isOutOfMemory(err) {
		return errors.Join(embed.ErrUnavailable, err)
	}
	return err
}

// isOutOfMemory: Redis at maxmemory under the noeviction policy refuses writes with an
// OOM error. The write did not happen; to the client it is an unavailable store (503),
// and nothing already stored (a revocation above all) was evicted to make room.
func isOutOfMemory(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ")
}

// EvictionPolicy returns Redis's maxmemory-policy, or "" when the server does not let
// clients read its configuration (some managed offerings).
func (s *Store) EvictionPolicy(ctx context.Context) string {
	v, err := s.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return ""
	}
	return v["maxmemory-policy"]
}

func isConnRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
