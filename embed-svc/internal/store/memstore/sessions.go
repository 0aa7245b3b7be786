package memstore

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// Sessions implements embed.SessionStore as redisstore does in Redis: a session id is
// kept under its sid (the SHA-256 of the id) for embed.SessionIDTTL, single use; an
// exchanged session is live under its sid; a revocation is a marker whose value is the
// revocation time. Every key expires on the store's clock.
type Sessions struct {
	mu      sync.Mutex
	now     func() time.Time
	pending map[string]entry // sid -> the session's JSON ("" for a reserved id)
	live    map[string]entry
	revoked map[string]entry // sid -> revocation time
	// liveOf: each account's live sessions, sid -> its token's expiry.
	liveOf map[int64]map[string]time.Time
	// failures: each sid's refused exchanges since the last report.
	failures map[string]*failureCount
}

type failureCount struct {
	n       int64
	at      time.Time // the last report
	expires time.Time
}

type entry struct {
	account int64 // the session's account (a reserved id's too)
	value   string
	revoked time.Time
	expires time.Time
}

// NewSessions returns an empty store whose keys expire on now (nil: time.Now).
func NewSessions(now func() time.Time) *Sessions {
	if now == nil {
		now = time.Now
	}
	return &Sessions{now: now, pending: map[string]entry{}, live: map[string]entry{}, revoked: map[string]entry{}, liveOf: map[int64]map[string]time.Time{},
		failures: map[string]*failureCount{}}
}

// get returns the live entry of key in m, dropping it when it has expired.
func (s *Sessions) get(m map[string]entry, key string) (entry, bool) {
	e, ok := m[key]
	if ok && !s.now().Before(e.expires) {
		delete(m, key)
		return entry{}, false
	}
	return e, ok
}

// ReserveSession counts the session among its account's live sessions until its token
// expires (embed.ErrLiveSessionLimit at maxLive) and claims its id with a placeholder
// that is never exchangeable.
func (s *Sessions) ReserveSession(_ context.Context, accountID int64, sessionID string, maxLive int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	live := s.liveOf[accountID]
	if live == nil {
		live = map[string]time.Time{}
		s.liveOf[accountID] = live
	}
	for sid, exp := range live {
		if !exp.After(now) {
			delete(live, sid)
		}
	}
	if len(live) >= maxLive {
		return embed.ErrLiveSessionLimit
	}
	sid := embed.PublicSessionHandle(sessionID)
	live[sid] = now.Add(embed.TokenLifetime)
	if _, taken := s.get(s.pending, sid); taken {
		return errors.New("session id collision")
	}
	s.pending[sid] = entry{account: accountID, expires: now.Add(embed.SessionIDTTL)}
	return nil
}

// SaveSession makes a reserved id exchangeable for embed.SessionIDTTL, as redisstore's
// save script does: only while its reservation stands and its sid has no revocation
// marker (embed.ErrSessionRevoked when it has, embed.ErrSessionUnusable when the
// reservation is gone otherwise).
func (s *Sessions) SaveSession(_ context.Context, sessionID string, sess embed.Session) error {
	raw, err := embed.EncodeSession(sess)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sid := embed.PublicSessionHandle(sessionID)
	if _, revoked := s.get(s.revoked, sid); revoked {
		delete(s.pending, sid)
		return embed.ErrSessionRevoked
	}
	if _, reserved := s.get(s.pending, sid); !reserved {
		return embed.ErrSessionUnusable
	}
	s.pending[sid] = entry{account: sess.AccountID, value: string(raw), expires: s.now().Add(embed.SessionIDTTL)}
	return nil
}

func decode(raw string) (embed.Session, error) {
	var sess embed.Session
	err := json.Unmarshal([]byte(raw), &sess)
	return sess, err
}

// ExchangeSession consumes the id and keeps the session live under its sid for ttl.
func (s *Sessions) ExchangeSession(_ context.Context, sessionID string, ttl time.Duration) (embed.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sid := embed.PublicSessionHandle(sessionID)
	e, ok := s.get(s.pending, sid)
	if !ok || e.value == "" {
		return embed.Session{}, embed.ErrSessionUnusable
	}
	delete(s.pending, sid)
	s.live[sid] = entry{account: e.account, value: e.value, expires: s.now().Add(ttl)}
	return decode(e.value)
}

// LiveSession returns an exchanged session (embed.ErrNotFound when none is live).
func (s *Sessions) LiveSession(_ context.Context, sid string) (embed.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.get(s.live, sid)
	if !ok {
		return embed.Session{}, embed.ErrNotFound
	}
	return decode(e.value)
}

// revoke is redisstore's revoke script: before the exchange it removes the id (reserved
// or saved) of accountID; after, it marks the sid revoked for the live session's
// remaining lifetime plus a minute and drops it. It returns what it revoked ("" for a
// reserved id) and whether it revoked anything.
func (s *Sessions) revoke(accountID int64, sid string) (string, bool) {
	now := s.now()
	mark := func(until time.Time) { s.revoked[sid] = entry{revoked: now, expires: until.Add(time.Minute)} }
	if e, ok := s.get(s.pending, sid); ok {
		if e.account != accountID {
			return "", false
		}
		delete(s.pending, sid)
		mark(now.Add(embed.TokenLifetime))
		return e.value, true
	}
	if e, ok := s.get(s.live, sid); ok {
		if e.account != accountID {
			return "", false
		}
		delete(s.live, sid)
		mark(e.expires)
		return e.value, true
	}
	return "", false
}

// RevokeSession ends a session of accountID.
func (s *Sessions) RevokeSession(_ context.Context, accountID int64, sessionID, sid string) (embed.Session, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, revoked := s.revoke(accountID, sid)
	if !revoked || raw == "" {
		return embed.Session{}, revoked, nil
	}
	sess, _ := decode(raw)
	return sess, true, nil
}

// RevokeSIDs revokes the sessions with these sids of accountID and counts them.
func (s *Sessions) RevokeSIDs(_ context.Context, accountID int64, sids []string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sid := range sids {
		if _, ok := s.revoke(accountID, sid); ok {
			n++
		}
	}
	return n, nil
}

// LiveStates reads the state of each sid.
func (s *Sessions) LiveStates(_ context.Context, sids []string) ([]embed.LiveState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]embed.LiveState, len(sids))
	for i, sid := range sids {
		if e, ok := s.get(s.revoked, sid); ok {
			at := e.revoked.UTC().Truncate(time.Millisecond)
			out[i].Revoked, out[i].RevokedAt = true, &at
		}
		if e, ok := s.get(s.live, sid); ok {
			out[i].LiveTTL = e.expires.Sub(s.now())
		}
		_, out[i].Pending = s.get(s.pending, sid)
	}
	return out, nil
}

// CountExchangeFailure counts a refused exchange of sid, as redisstore's script does.
func (s *Sessions) CountExchangeFailure(_ context.Context, sid string, window time.Duration) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c := s.failures[sid]
	if c == nil || !now.Before(c.expires) {
		c = &failureCount{}
		s.failures[sid] = c
	}
	c.n++
	if now.Sub(c.at) < window {
		return 0, nil
	}
	n := c.n
	c.n, c.at, c.expires = 0, now, now.Add(2*window)
	return n, nil
}
