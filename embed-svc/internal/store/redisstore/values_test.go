package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/store/redisstore"
	"github.com/analyticsco/platform/embed-svc/internal/store/storetest"
	"github.com/analyticsco/platform/libs/redisx"
)

// What only the Redis adapter has: the values it keeps. A value is "<account>|<session
// JSON>"; the revoke scripts read the account from that prefix and never decode a
// session, and values stored before the prefix (a bare session JSON, or "" for a
// reserved id) are still exchanged and revoked, by their account.
func TestRedisSessionValues(t *testing.T) {
	rdb := redisClient(t)
	s := redisstore.New(redisx.NewDurable(rdb, 0, 0))
	ctx := context.Background()

	t.Run("a-value-is-the-account-then-the-session", func(t *testing.T) {
		acc, id := storetest.Account(), embed.NewSessionID()
		if err := s.ReserveSession(ctx, acc, id, 1000); err != nil {
			t.Fatal(err)
		}
		key := redisstore.SessionPrefix + embed.PublicSessionHandle(id)
		if v, _ := rdb.Get(ctx, key).Result(); v != strconv.FormatInt(acc, 10)+"|" {
			t.Fatalf("a reserved id's value %q", v)
		}
		if err := s.SaveSession(ctx, id, embed.Session{SID: embed.PublicSessionHandle(id), AccountID: acc}); err != nil {
			t.Fatal(err)
		}
		if v, _ := rdb.Get(ctx, key).Result(); !strings.HasPrefix(v, strconv.FormatInt(acc, 10)+`|{"sid":`) {
			t.Fatalf("a saved session's value %q", v)
		}
	})
	t.Run("revoke-reads-the-account-without-decoding-the-session", func(t *testing.T) {
		// A value whose session part is no JSON at all: a script that decoded it would fail.
		acc := storetest.Account()
		pendingSID, liveSID := storetest.HexID(32), storetest.HexID(32)
		rdb.Set(ctx, redisstore.SessionPrefix+pendingSID, strconv.FormatInt(acc, 10)+"|{not json", time.Minute)
		rdb.Set(ctx, redisstore.LivePrefix+liveSID, strconv.FormatInt(acc, 10)+"|{not json either", time.Minute)
		if n, err := s.RevokeSIDs(ctx, storetest.Account(), []string{pendingSID, liveSID}); n != 0 || err != nil {
			t.Fatalf("another account revoked %d: %v", n, err)
		}
		if n, err := s.RevokeSIDs(ctx, acc, []string{pendingSID, liveSID}); n != 2 || err != nil {
			t.Fatalf("revoked %d (want 2): %v", n, err)
		}
	})
	t.Run("expired-sessions-leave-the-live-count", func(t *testing.T) {
		acc := storetest.Account()
		key := redisstore.AccountSessionsPrefix + strconv.FormatInt(acc, 10)
		past := float64(time.Now().Add(-time.Second).UnixMilli())
		rdb.ZAdd(ctx, key, redis.Z{Score: past, Member: "expired-1"}, redis.Z{Score: past, Member: "expired-2"})
		if err := s.ReserveSession(ctx, acc, embed.NewSessionID(), 1); err != nil {
			t.Fatalf("two expired sessions and a limit of 1: %v", err)
		}
		if n, _ := rdb.ZCard(ctx, key).Result(); n != 1 {
			t.Fatalf("%d sessions counted, want 1 (the expired ones dropped)", n)
		}
		if ttl, _ := rdb.PTTL(ctx, key).Result(); ttl < embed.TokenLifetime {
			t.Fatalf("the account's count lives %v, less than a token", ttl)
		}
	})
	t.Run("values-stored-before-the-account-prefix", func(t *testing.T) {
		acc := storetest.Account()
		legacy := func(sid string) string {
			return `{"sid":"` + sid + `","rid":"` + storetest.HexID(16) + `","acc":` + strconv.FormatInt(acc, 10) + `,"dep":7,"br":"main|x","sc":{"a":"|"},"gen":"2026-01-01T00:00:00Z"}`
		}
		id := embed.NewSessionID()
		sid := embed.PublicSessionHandle(id)
		rdb.Set(ctx, redisstore.SessionPrefix+sid, legacy(sid), time.Minute)
		sess, err := s.ExchangeSession(ctx, id, time.Hour)
		if err != nil || sess.AccountID != acc || sess.Branch != "main|x" {
			t.Fatalf("exchange of a session stored before the prefix: %+v %v", sess, err)
		}
		if _, revoked, err := s.RevokeSession(ctx, storetest.Account(), id, sid); revoked || err != nil {
			t.Fatalf("another account revoked it: %v %v", revoked, err)
		}
		if _, revoked, err := s.RevokeSession(ctx, acc, id, sid); !revoked || err != nil {
			t.Fatalf("its account's revoke: %v %v", revoked, err)
		}
		if _, err := s.LiveSession(ctx, sid); !errors.Is(err, embed.ErrNotFound) {
			t.Fatalf("live after the revoke: %v", err)
		}
		reserved := embed.NewSessionID()
		rdb.Set(ctx, redisstore.SessionPrefix+embed.PublicSessionHandle(reserved), "", time.Minute)
		if _, err := s.ExchangeSession(ctx, reserved, time.Hour); !errors.Is(err, embed.ErrSessionUnusable) {
			t.Fatalf("a reserved id stored before the prefix was exchanged: %v", err)
		}
	})
}
