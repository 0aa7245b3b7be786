// Package redisstore keeps embed session ids, live sessions and revocations in Redis.
//
// Keys: embed:session:<sha256 of the id> (an unexchanged session, 5-minute TTL, single
// use: keyed by the hash so that reading Redis yields no usable session id),
// embed:live:<sid> (the exchanged session, until its token expires), and the revocation
// markers the gateway checks, whose scheme embed-svc publishes in package revocation.
// Save, exchange and revoke are Lua scripts, so each is atomic and one round trip (a save
// never brings back an id a revoke has ended). In Redis
// Cluster the sid in a session's keys is in braces (revocation.Scheme.Tag), so the
// scripts' keys share one hash slot; elsewhere the names are unchanged.
//
// Exchanges and revocations are durable (redisx.Durable): each waits for the replicas
// (REDIS_DURABLE_REPLICAS) before it is answered, so a failover neither brings back a
// revoked token nor makes a used session id usable again. One the replicas do not
// acknowledge in time is ErrUnavailable (503).
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/revocation"
	"github.com/analyticsco/platform/libs/redisx"
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
// runs on one node of a cluster as is; the pipeline that sends it with the id's
// reservation is not a transaction, and a cluster client sends each to its own node.
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
// It is durable: acknowledged by the replicas before it returns.
func (s *Store) RevokeSigningKey(ctx context.Context, kid string, ttl time.Duration) error {
	key := revocation.SigningKeyKey(kid)
	var set *redis.StatusCmd
	err := s.durable.Run(ctx, key, func(pipe redis.Pipeliner) { set = pipe.Set(ctx, key, "1", ttl) })
	if err == nil {
		err = set.Err()
	}
	return wrap(err)
}

// Store implements embed.SessionStore.
type Store struct {
	rdb     redis.UniversalClient
	durable *redisx.Durable
	scheme  revocation.Scheme
	// legacyUntil: until when a revoke also looks under a session's pre-cluster names
	// (legacy.go).
	legacyUntil time.Time
}

// New returns the store over d's client; exchanges and revocations go through d.
func New(d *redisx.Durable) *Store {
	scheme := revocation.SchemeOf(d.Client())
	return &Store{rdb: d.Client(), durable: d, scheme: scheme, legacyUntil: legacyUntil(scheme, time.Now())}
}

// The keys of session sid (its hash-tagged form in a cluster).
func (s *Store) pendingKey(sid string) string { return SessionPrefix + s.scheme.Tag(sid) }
func (s *Store) liveKey(sid string) string    { return LivePrefix + s.scheme.Tag(sid) }

// sessionKeys are the revoke script's keys for sid: pending id, live session, marker.
func (s *Store) sessionKeys(sid string) []string {
	return []string{s.pendingKey(sid), s.liveKey(sid), s.scheme.SessionKey(sid)}
}

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
-- Nothing (left) to revoke. An earlier try may have revoked it and failed to reach the
-- replicas: the marker is written again (its lifetime unchanged), so the WAIT after this
-- script covers it on any server (before 7.0, WAIT covered only what its own connection
-- had written).
local ttl = redis.call('PTTL', KEYS[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
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
	reserved := pipe.SetNX(ctx, s.pendingKey(sid), strconv.FormatInt(accountID, 10)+"|", embed.SessionIDTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap(err)
	}
	if n, _ := counted.Int(); n == 0 {
		if reserved.Val() {
			if err := s.rdb.Del(ctx, s.pendingKey(sid)).Err(); err != nil {
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

// saveScript makes a reserved id exchangeable: it replaces the reservation with the
// session only while the reservation is there and the sid has no revocation marker. A
// revoke that came first (a bulk revoke reads the session's record, written before the
// save) has deleted the reservation and written the marker: the save then stores
// nothing and answers "revoked" (it deletes the id too, should a marker stand beside
// it), so the revoke stays; an id whose reservation is gone without a marker (expired,
// or lost in a failover) is not stored either ("gone").
// KEYS: session id key, revoked key (one slot: both carry the sid's hash tag).
// ARGV: the session's value, its lifetime (ms).
var saveScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('DEL', KEYS[1])
  return 'revoked'
end
if not redis.call('SET', KEYS[1], ARGV[1], 'XX', 'PX', ARGV[2]) then return 'gone' end
return 'saved'`)

// SaveSession makes a reserved id exchangeable for embed.SessionIDTTL, in one script, only
// while its reservation stands (see embed.SessionStore): embed.ErrSessionRevoked when a
// revoke came first, embed.ErrSessionUnusable when the reservation is gone otherwise.
// It is sent as EVAL, one round trip whether or not the server has the script cached.
func (s *Store) SaveSession(ctx context.Context, sessionID string, sess embed.Session) error {
	v, err := encode(sess)
	if err != nil {
		return err
	}
	sid := embed.PublicSessionHandle(sessionID)
	res, err := saveScript.Eval(ctx, s.rdb, []string{s.pendingKey(sid), s.scheme.SessionKey(sid)}, v, embed.SessionIDTTL.Milliseconds()).Text()
	switch {
	case err != nil:
		return wrap(err)
	case res == "revoked":
		return embed.ErrSessionRevoked
	case res == "gone":
		return embed.ErrSessionUnusable
	}
	return nil
}

// ExchangeSession consumes the id atomically, durably: a failover after it cannot make
// the id usable again.
func (s *Store) ExchangeSession(ctx context.Context, sessionID string, ttl time.Duration) (embed.Session, error) {
	sid := embed.PublicSessionHandle(sessionID)
	var cmd *redis.Cmd
	err := s.durable.Run(ctx, s.pendingKey(sid), func(pipe redis.Pipeliner) {
		cmd = exchangeScript.Eval(ctx, pipe, []string{s.pendingKey(sid), s.liveKey(sid)}, strconv.FormatInt(ttl.Milliseconds(), 10))
	})
	if err != nil {
		return embed.Session{}, wrap(err)
	}
	raw, err := cmd.Text()
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
	raw, err := s.rdb.Get(ctx, s.liveKey(sid)).Result()
	if errors.Is(err, redis.Nil) {
		return embed.Session{}, embed.ErrNotFound
	}
	if err != nil {
		return embed.Session{}, wrap(err)
	}
	return decode(raw)
}

// RevokeSession ends a session of accountID, durably.
func (s *Store) RevokeSession(ctx context.Context, accountID int64, sessionID, sid string) (embed.Session, bool, error) {
	keys := []string{s.pendingKey(embed.PublicSessionHandle(sessionID)), s.liveKey(sid), s.scheme.SessionKey(sid)}
	var cmd *redis.Cmd
	err := s.durable.Run(ctx, keys[0], func(pipe redis.Pipeliner) {
		cmd = revokeScript.Eval(ctx, pipe, keys, accountID, time.Now().UnixMilli(), embed.TokenLifetime.Milliseconds(), "1")
	})
	if err != nil {
		return embed.Session{}, false, wrap(err)
	}
	raw, err := cmd.Text()
	if errors.Is(err, redis.Nil) {
		found, err := s.findLegacy(ctx, accountID, []string{embed.PublicSessionHandle(sessionID)}, []string{sid})
		if err != nil || len(found) == 0 {
			return embed.Session{}, false, err
		}
		if err := s.revokeLegacy(ctx, found); err != nil {
			return embed.Session{}, false, err
		}
		raw = found[0].value
	} else if err != nil {
		return embed.Session{}, false, wrap(err)
	}
	sess, _ := decode(raw) // a reserved id: revoked, nothing to tell
	return sess, true, nil
}

// RevokeSIDs revokes sessions by sid with the revoke script (the pending id is stored
// under the sid too), durably: one pipeline per primary, each ending with the WAIT, all
// at once. A primary that does not have the script (first use, a restart, a failover:
// the script cache is neither kept nor replicated) loads it, and its sids are sent again.
// It returns how many it revoked.
func (s *Store) RevokeSIDs(ctx context.Context, accountID int64, sids []string) (int, error) {
	if len(sids) == 0 {
		return 0, nil
	}
	now, life := time.Now().UnixMilli(), embed.TokenLifetime.Milliseconds()
	n := 0
	for attempt := 1; ; attempt++ {
		pending := make([]string, len(sids))
		for i, sid := range sids {
			pending[i] = s.pendingKey(sid)
		}
		cmds := make([]*redis.Cmd, len(sids))
		err := s.durable.RunGroups(ctx, pending, func(pipe redis.Pipeliner, idx []int) {
			for _, i := range idx {
				cmds[i] = revokeScript.EvalSha(ctx, pipe, s.sessionKeys(sids[i]), accountID, now, life, "0")
			}
		})
		if err != nil {
			return n, wrap(err)
		}
		var missed, none []string
		for i, c := range cmds {
			switch _, err := c.Result(); {
			case err == nil:
				n++
			case redisx.IsScriptMiss(err):
				missed = append(missed, sids[i])
			case errors.Is(err, redis.Nil):
				none = append(none, sids[i])
			default:
				return n, wrap(err)
			}
		}
		found, err := s.findLegacy(ctx, accountID, none, none)
		if err == nil {
			err = s.revokeLegacy(ctx, found)
		}
		if err != nil {
			return n, err
		}
		n += len(found)
		if len(missed) == 0 {
			return n, nil
		}
		if attempt == 3 {
			return n, errors.Join(embed.ErrUnavailable, errors.New("the revoke script is still missing on a primary after loading it (a failover under way)"))
		}
		if err := revokeScript.Load(ctx, s.rdb).Err(); err != nil { // a cluster client loads it on every primary
			return n, wrap(err)
		}
		sids = missed
	}
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
		revoked[i] = pipe.Get(ctx, s.scheme.SessionKey(sid))
		live[i] = pipe.PTTL(ctx, s.liveKey(sid))
		pending[i] = pipe.Exists(ctx, s.pendingKey(sid))
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

// wrap marks what a retry may cure (redisx.Unavailable: Redis unreachable, a failover
// under way, replicas that did not acknowledge, or out of memory under the noeviction
// policy, where the write did not happen and nothing stored, a revocation above all, was
// evicted to make room) as embed.ErrUnavailable: 503 with Retry-After.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	if redisx.Unavailable(err) {
		return errors.Join(embed.ErrUnavailable, err)
	}
	return err
}

// EvictionPolicy returns Redis's maxmemory-policy (in a cluster, the first primary's
// that is not noeviction), or "" when the server does not let clients read its
// configuration (some managed offerings).
func (s *Store) EvictionPolicy(ctx context.Context) string {
	policyOf := func(c redis.Cmdable) string {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return ""
		}
		return v["maxmemory-policy"]
	}
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return policyOf(s.rdb)
	}
	var mu sync.Mutex
	policy := "noeviction"
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		p := policyOf(node)
		mu.Lock()
		defer mu.Unlock()
		if p != "noeviction" && policy == "noeviction" {
			policy = p
		}
		return nil
	})
	if err != nil {
		return ""
	}
	return policy
}
