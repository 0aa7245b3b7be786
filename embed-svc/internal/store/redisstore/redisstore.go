// Package redisstore keeps embed session ids, live sessions and revocations in Redis.
//
// Keys: embed:session:<sha256 of the id> (an unexchanged session, 5-minute TTL, single
// use: keyed by the hash so that reading Redis yields no usable session id),
// embed:live:<sid> (the exchanged session, until its token expires), and the revocation
// markers the gateway checks, whose scheme embed-svc publishes in package revocation.
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
	"github.com/analyticsco/platform/embed-svc/revocation"
)

// Key prefixes of embed-svc's own records (the revocation markers are in package
// revocation: the gateway reads them).
const (
	SessionPrefix = "embed:session:"
	LivePrefix    = "embed:live:"
	// AccountSessionsPrefix + account: a sorted set of the account's live sessions (a
	// sid's first 16 hex digits, scored by its token's expiry in Unix ms).
	AccountSessionsPrefix = "embed:account-sessions:"
	// ExchangeFailuresPrefix + sid: the refused exchanges of a known session id since the
	// last one the audit trail recorded (n), and when that was (at, Unix ms).
	ExchangeFailuresPrefix = "embed:exchange-failures:"
)

// failureScript counts a refused exchange; it answers the count since the last report,
// this one included, and starts a new count, when ARGV[2] ms have passed since that
// report, else 0. One key. KEYS: the sid's count. ARGV: now (ms), window (ms).
var failureScript = redis.NewScript(`
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
local at = tonumber(redis.call('HGET', KEYS[1], 'at') or '0')
local now = tonumber(ARGV[1])
if now - at >= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'n', 0, 'at', now)
  redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[2]))
  return n
end
return 0`)

// CountExchangeFailure counts a refused exchange of sid (see embed.SessionStore).
func (s *Store) CountExchangeFailure(ctx context.Context, sid string, window time.Duration) (int64, error) {
	n, err := failureScript.Run(ctx, s.rdb, []string{ExchangeFailuresPrefix + sid}, time.Now().UnixMilli(), window.Milliseconds()).Int64()
	return n, wrap(err)
}

// liveScript counts a new session among its account's live sessions unless the account
// already has ARGV[3]: it drops the expired ones first. One key (the account's), so it
// runs on one node of a cluster as is.
// KEYS: the account's set. ARGV: now (ms), the session's token expiry (ms), the limit,
// the member, the set's lifetime (ms).
var liveScript = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`

// RevokeSigningKey marks kid withdrawn for ttl (at least the lifetime of the tokens it
// signed). Set it before the key leaves the keyring, so no gateway ever accepts a
// token of a key that is gone from the JWKS but not yet marked.
func (s *Store) RevokeSigningKey(ctx context.Context, kid string, ttl time.Duration) error {
	return wrap(s.rdb.Set(ctx, revocation.SigningKeyKey(kid), "1", ttl).Err())
}

// Store implements embed.SessionStore.
type Store struct{ rdb redis.UniversalClient }

// New wraps a Redis client.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// A session's value is "<account>|<session JSON>" (embed.EncodeSession), a reserved id's
// "<account>|": the scripts read the account from the prefix and never decode a session.
// Values stored before the prefix (a bare session JSON, "" for a reserved id) live at most
// a token's lifetime; the scripts read their "acc" from the JSON's first bytes, where the
// session's fixed-size ids and its account come first.

// accountOf is the Lua function the scripts read a value's account with (nil: none).
const accountOf = `
local function accountOf(v)
  if string.byte(v, 1) == 123 then
    return tonumber(string.match(string.sub(v, 1, 256), '"acc":(%d+)'))
  end
  local sep = string.find(v, '|', 1, true)
  if not sep then return nil end
  return tonumber(string.sub(v, 1, sep - 1))
end
`

// exchangeScript consumes the id (GETDEL) and keeps the session live under its sid; a
// reserved id, not yet saved, is not exchangeable.
var exchangeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or v == '' or string.sub(v, -1) == '|' then return false end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], v, 'PX', ARGV[1])
return v`)

// revokeScript: before the exchange it deletes the id; after it, it marks the sid
// revoked for the live session's remaining lifetime plus a minute. The marker's value is
// the revocation time (ms), for the session list; a revoked pending session is marked
// too (for a token lifetime), so the list can tell it from one that was never used.
// Sessions of another account are left alone (the caller still gets its 204). It returns
// the revoked value when ARGV[4] is "1" (the spec's revoke names the session in the
// audit trail), else 1; nil when there was nothing (left) to revoke.
// KEYS: session id key, live key, revoked key. ARGV: account, now (ms), token lifetime
// (ms), whether to return the value.
var revokeScript = redis.NewScript(accountOf + `
local acc = tonumber(ARGV[1])
local function revoked(v)
  if ARGV[4] == '1' then return v end
  return 1
end
local v = redis.call('GET', KEYS[1])
if v then
  if v == '' or accountOf(v) == acc then
    redis.call('DEL', KEYS[1])
    redis.call('SET', KEYS[3], ARGV[2], 'PX', tonumber(ARGV[3]) + 60000)
    return revoked(v)
  end
  return false
end
local l = redis.call('GET', KEYS[2])
if l and accountOf(l) == acc then
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl > 0 then
    -- The live key's TTL was set a moment before the token's exp was computed: the marker
    -- outlives the token by a margin, never the other way round.
    redis.call('SET', KEYS[3], ARGV[2], 'PX', ttl + 60000)
  end
  redis.call('DEL', KEYS[2])
  return revoked(l)
end
return false`)

// encode is a session's value: its account, then its JSON.
func encode(sess embed.Session) (string, error) {
	raw, err := embed.EncodeSession(sess)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(sess.AccountID, 10) + "|" + string(raw), nil
}

// decode reads a value written by encode, or a bare session JSON stored before the
// account prefix.
func decode(v string) (embed.Session, error) {
	if _, rest, ok := strings.Cut(v, "|"); ok && !strings.HasPrefix(v, "{") {
		v = rest
	}
	var sess embed.Session
	err := json.Unmarshal([]byte(v), &sess)
	return sess, err
}

// ReserveSession counts the session among its account's live sessions (refused at
// maxLive) and claims its id with a placeholder ("<account>|", never exchangeable),
// pipelined in one round trip, before the mint writes anything to MongoDB: if Redis
// cannot take it, the mint fails before it has changed anything.
func (s *Store) ReserveSession(ctx context.Context, accountID int64, sessionID string, maxLive int) error {
	sid := embed.PublicSessionHandle(sessionID)
	now := time.Now()
	pipe := s.rdb.Pipeline()
	counted := pipe.Eval(ctx, liveScript, []string{AccountSessionsPrefix + strconv.FormatInt(accountID, 10)},
		now.UnixMilli(), now.Add(embed.TokenLifetime).UnixMilli(), maxLive, sid[:16], (embed.TokenLifetime + time.Minute).Milliseconds())
	reserved := pipe.SetNX(ctx, SessionPrefix+sid, strconv.FormatInt(accountID, 10)+"|", embed.SessionIDTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap(err)
	}
	if n, _ := counted.Int(); n == 0 {
		if reserved.Val() {
			if err := s.rdb.Del(ctx, SessionPrefix+sid).Err(); err != nil {
				return wrap(err)
			}
		}
		return embed.ErrLiveSessionLimit
	}
	if !reserved.Val() {
		return errors.New("session id collision")
	}
	return nil
}

// SaveSession stores a fresh session id for embed.SessionIDTTL.
func (s *Store) SaveSession(ctx context.Context, sessionID string, sess embed.Session) error {
	v, err := encode(sess)
	if err != nil {
		return err
	}
	return wrap(s.rdb.Set(ctx, SessionPrefix+embed.PublicSessionHandle(sessionID), v, embed.SessionIDTTL).Err())
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
	return decode(raw)
}

// LiveSession returns an exchanged session.
func (s *Store) LiveSession(ctx context.Context, sid string) (embed.Session, error) {
	raw, err := s.rdb.Get(ctx, LivePrefix+sid).Result()
	if errors.Is(err, redis.Nil) {
		return embed.Session{}, embed.ErrNotFound
	}
	if err != nil {
		return embed.Session{}, wrap(err)
	}
	return decode(raw)
}

// RevokeSession ends a session of accountID.
func (s *Store) RevokeSession(ctx context.Context, accountID int64, sessionID, sid string) (embed.Session, bool, error) {
	raw, err := revokeScript.Run(ctx, s.rdb, []string{SessionPrefix + embed.PublicSessionHandle(sessionID), LivePrefix + sid, revocation.SessionKey(sid)},
		accountID, time.Now().UnixMilli(), embed.TokenLifetime.Milliseconds(), "1").Text()
	if errors.Is(err, redis.Nil) {
		return embed.Session{}, false, nil
	}
	if err != nil {
		return embed.Session{}, false, wrap(err)
	}
	sess, _ := decode(raw) // a reserved id: revoked, nothing to tell
	return sess, true, nil
}

// RevokeSIDs revokes sessions by sid with the revoke script (the pending id is stored
// under the sid too), pipelined: one round trip per call, plus loading the script when
// Redis does not have it (first use, or after a restart). It returns how many it revoked.
func (s *Store) RevokeSIDs(ctx context.Context, accountID int64, sids []string) (int, error) {
	if len(sids) == 0 {
		return 0, nil
	}
	now, life := time.Now().UnixMilli(), embed.TokenLifetime.Milliseconds()
	run := func() (int, error) {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(sids))
		for i, sid := range sids {
			cmds[i] = revokeScript.EvalSha(ctx, pipe, []string{SessionPrefix + sid, LivePrefix + sid, revocation.SessionKey(sid)}, accountID, now, life, "0")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return 0, err
		}
		n := 0
		for _, c := range cmds {
			switch _, err := c.Result(); {
			case err == nil:
				n++
			case !errors.Is(err, redis.Nil):
				return n, err
			}
		}
		return n, nil
	}
	n, err := run()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		if err := revokeScript.Load(ctx, s.rdb).Err(); err != nil {
			return 0, wrap(err)
		}
		n, err = run()
	}
	return n, wrap(err)
}

// LiveStates reads, in one pipelined round trip, each sid's revocation marker, live
// record lifetime and pending id.
func (s *Store) LiveStates(ctx context.Context, sids []string) ([]embed.LiveState, error) {
	out := make([]embed.LiveState, len(sids))
	if len(sids) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	revoked := make([]*redis.StringCmd, len(sids))
	live := make([]*redis.DurationCmd, len(sids))
	pending := make([]*redis.IntCmd, len(sids))
	for i, sid := range sids {
		revoked[i] = pipe.Get(ctx, revocation.SessionKey(sid))
		live[i] = pipe.PTTL(ctx, LivePrefix+sid)
		pending[i] = pipe.Exists(ctx, SessionPrefix+sid)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap(err)
	}
	for i := range sids {
		if v, err := revoked[i].Result(); err == nil {
			out[i].Revoked = true
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 1 {
				t := time.UnixMilli(ms).UTC()
				out[i].RevokedAt = &t
			}
		}
		if d, err := live[i].Result(); err == nil && d > 0 {
			out[i].LiveTTL = d
		}
		out[i].Pending = pending[i].Val() > 0
	}
	return out, nil
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
