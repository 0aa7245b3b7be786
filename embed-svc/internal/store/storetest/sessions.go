package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// sessionCases are the contract of embed.SessionStore.
var sessionCases = map[string]func(*testing.T, embed.SessionStore){
	"a-session-id-is-exchanged-once":                  exchangedOnce,
	"a-reserved-id-is-never-exchangeable":             reservedNotExchangeable,
	"of-concurrent-exchanges-exactly-one-wins":        concurrentExchanges,
	"revoke-before-the-exchange-ends-the-id":          revokePending,
	"revoke-after-the-exchange-marks-the-sid":         revokeLive,
	"revoke-leaves-other-accounts-sessions-alone":     revokeOtherAccount,
	"bulk-revoke-counts-what-it-revoked":              revokeSIDs,
	"states-tell-pending-live-revoked-and-unknown":    liveStates,
	"a-reserved-id-can-be-revoked-before-it-is-saved": revokeReserved,
	"a-revoke-before-the-save-stays":                  revokedBeforeSave,
	"only-a-reserved-id-is-saved":                     savedOnlyIfReserved,
	"a-session-over-its-cap-is-not-stored":            overCap,
	"an-accounts-live-sessions-are-bounded":           liveSessionsBounded,
	"refused-exchanges-are-reported-once-a-window":    exchangeFailuresCounted,
}

// Saved reserves and saves a fresh session of acc and returns its id and sid.
func Saved(t *testing.T, s embed.SessionStore, acc int64) (string, string) {
	t.Helper()
	ctx, id := context.Background(), embed.NewSessionID()
	if err := s.ReserveSession(ctx, acc, id, 1000); err != nil {
		t.Fatal(err)
	}
	sid := embed.PublicSessionHandle(id)
	if err := s.SaveSession(ctx, id, embed.Session{SID: sid, RecordID: HexID(16), AccountID: acc, DeploymentID: 7, Branch: "main", GeneratedAt: at(0)}); err != nil {
		t.Fatal(err)
	}
	return id, sid
}

// pendingAndLive saves two sessions of acc and exchanges the second; it returns their sids.
func pendingAndLive(t *testing.T, s embed.SessionStore, acc int64) (pending, live string) {
	t.Helper()
	_, pending = Saved(t, s, acc)
	liveID, live := Saved(t, s, acc)
	if _, err := s.ExchangeSession(context.Background(), liveID, time.Hour); err != nil {
		t.Fatal(err)
	}
	return pending, live
}

func exchangedOnce(t *testing.T, s embed.SessionStore) {
	ctx, acc := context.Background(), Account()
	id, sid := Saved(t, s, acc)
	sess, err := s.ExchangeSession(ctx, id, time.Hour)
	if err != nil || sess.SID != sid || sess.AccountID != acc || sess.Branch != "main" {
		t.Fatalf("exchange: %+v %v", sess, err)
	}
	if _, err := s.ExchangeSession(ctx, id, time.Hour); !errors.Is(err, embed.ErrSessionUnusable) {
		t.Fatalf("second exchange: %v", err)
	}
	if live, err := s.LiveSession(ctx, sid); err != nil || live.SID != sid || live.RecordID != sess.RecordID {
		t.Fatalf("live: %+v %v", live, err)
	}
	if _, err := s.ExchangeSession(ctx, embed.NewSessionID(), time.Hour); !errors.Is(err, embed.ErrSessionUnusable) {
		t.Fatalf("an unknown id: %v", err)
	}
	if _, err := s.LiveSession(ctx, HexID(32)); !errors.Is(err, embed.ErrNotFound) {
		t.Fatalf("an unknown sid: %v", err)
	}
}

func reservedNotExchangeable(t *testing.T, s embed.SessionStore) {
	ctx, id := context.Background(), embed.NewSessionID()
	if err := s.ReserveSession(ctx, Account(), id, 1000); err != nil {
		t.Fatal(err)
	}
	if err := s.ReserveSession(ctx, Account(), id, 1000); err == nil {
		t.Fatal("an id reserved twice")
	}
	if _, err := s.ExchangeSession(ctx, id, time.Hour); !errors.Is(err, embed.ErrSessionUnusable) {
		t.Fatalf("a reserved id exchanged: %v", err)
	}
}

func concurrentExchanges(t *testing.T, s embed.SessionStore) {
	id, _ := Saved(t, s, Account())
	var ok, unusable atomic.Int64
	together(20, func(int) {
		_, err := s.ExchangeSession(context.Background(), id, time.Hour)
		switch {
		case err == nil:
			ok.Add(1)
		case errors.Is(err, embed.ErrSessionUnusable):
			unusable.Add(1)
		}
	})
	if ok.Load() != 1 || unusable.Load() != 19 {
		t.Fatalf("20 concurrent exchanges: %d ok, %d unusable", ok.Load(), unusable.Load())
	}
}

func revokePending(t *testing.T, s embed.SessionStore) {
	ctx, acc := context.Background(), Account()
	id, sid := Saved(t, s, acc)
	sess, revoked, err := s.RevokeSession(ctx, acc, id, sid)
	if err != nil || !revoked || sess.SID != sid || sess.RecordID == "" {
		t.Fatalf("revoke: %+v %v %v", sess, revoked, err)
	}
	if _, err := s.ExchangeSession(ctx, id, time.Hour); !errors.Is(err, embed.ErrSessionUnusable) {
		t.Fatalf("exchange of a revoked id: %v", err)
	}
	if _, revoked, err := s.RevokeSession(ctx, acc, id, sid); revoked || err != nil {
		t.Fatalf("revoked twice: %v %v", revoked, err)
	}
}

func revokeLive(t *testing.T, s embed.SessionStore) {
	ctx, acc := context.Background(), Account()
	id, sid := Saved(t, s, acc)
	if _, err := s.ExchangeSession(ctx, id, time.Hour); err != nil {
		t.Fatal(err)
	}
	sess, revoked, err := s.RevokeSession(ctx, acc, id, sid)
	if err != nil || !revoked || sess.SID != sid {
		t.Fatalf("revoke: %+v %v %v", sess, revoked, err)
	}
	if _, err := s.LiveSession(ctx, sid); !errors.Is(err, embed.ErrNotFound) {
		t.Fatalf("a revoked session is live: %v", err)
	}
	states, err := s.LiveStates(ctx, []string{sid})
	if err != nil || !states[0].Revoked || states[0].RevokedAt == nil || states[0].LiveTTL != 0 || states[0].Pending {
		t.Fatalf("states: %+v %v", states, err)
	}
	if d := time.Since(*states[0].RevokedAt); d < -time.Second || d > time.Minute {
		t.Fatalf("revoked at %v, %v ago", states[0].RevokedAt, d)
	}
	if _, revoked, err := s.RevokeSession(ctx, acc, id, sid); revoked || err != nil {
		t.Fatalf("revoked twice: %v %v", revoked, err)
	}
}

func revokeOtherAccount(t *testing.T, s embed.SessionStore) {
	ctx, acc, other := context.Background(), Account(), Account()
	pendingID, pendingSID := Saved(t, s, acc)
	liveID, liveSID := Saved(t, s, acc)
	if _, err := s.ExchangeSession(ctx, liveID, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, sid string }{{pendingID, pendingSID}, {liveID, liveSID}} {
		if _, revoked, err := s.RevokeSession(ctx, other, c.id, c.sid); revoked || err != nil {
			t.Fatalf("another account revoked a session: %v %v", revoked, err)
		}
	}
	if n, err := s.RevokeSIDs(ctx, other, []string{pendingSID, liveSID}); n != 0 || err != nil {
		t.Fatalf("another account's bulk revoke: %d %v", n, err)
	}
	if _, err := s.ExchangeSession(ctx, pendingID, time.Hour); err != nil {
		t.Fatalf("the pending session after another account's revoke: %v", err)
	}
	if _, err := s.LiveSession(ctx, liveSID); err != nil {
		t.Fatalf("the live session after another account's revoke: %v", err)
	}
}

func revokeSIDs(t *testing.T, s embed.SessionStore) {
	ctx, acc := context.Background(), Account()
	pending, live := pendingAndLive(t, s, acc)
	_, others := Saved(t, s, Account())
	if n, err := s.RevokeSIDs(ctx, acc, []string{pending, live, others, HexID(32)}); n != 2 || err != nil {
		t.Fatalf("revoked %d (%v), want 2", n, err)
	}
	if n, err := s.RevokeSIDs(ctx, acc, []string{pending, live}); n != 0 || err != nil {
		t.Fatalf("revoked again: %d %v", n, err)
	}
	if n, err := s.RevokeSIDs(ctx, acc, nil); n != 0 || err != nil {
		t.Fatalf("none: %d %v", n, err)
	}
	states, _ := s.LiveStates(ctx, []string{pending, live})
	if !states[0].Revoked || !states[1].Revoked {
		t.Fatalf("states after the bulk revoke: %+v", states)
	}
}

func liveStates(t *testing.T, s embed.SessionStore) {
	ctx, acc := context.Background(), Account()
	pending, live := pendingAndLive(t, s, acc)
	states, err := s.LiveStates(ctx, []string{pending, live, HexID(32)})
	if err != nil || len(states) != 3 {
		t.Fatalf("%+v %v", states, err)
	}
	if st := states[0]; !st.Pending || st.Revoked || st.LiveTTL != 0 {
		t.Errorf("pending: %+v", st)
	}
	if st := states[1]; st.Pending || st.Revoked || st.LiveTTL <= 59*time.Minute || st.LiveTTL > time.Hour {
		t.Errorf("live for an hour: %+v", st)
	}
	if st := states[2]; st != (embed.LiveState{}) {
		t.Errorf("unknown: %+v", st)
	}
	if states, err := s.LiveStates(ctx, nil); err != nil || len(states) != 0 {
		t.Errorf("none: %+v %v", states, err)
	}
}

func revokeReserved(t *testing.T, s embed.SessionStore) {
	ctx, id, acc := context.Background(), embed.NewSessionID(), Account()
	if err := s.ReserveSession(ctx, acc, id, 1000); err != nil {
		t.Fatal(err)
	}
	if _, revoked, err := s.RevokeSession(ctx, Account(), id, embed.PublicSessionHandle(id)); revoked || err != nil {
		t.Fatalf("another account revoked a reserved id: %v %v", revoked, err)
	}
	sess, revoked, err := s.RevokeSession(ctx, acc, id, embed.PublicSessionHandle(id))
	if err != nil || !revoked || sess.SID != "" {
		t.Fatalf("revoke of a reserved id: %+v %v %v", sess, revoked, err)
	}
}

// overCap: a session over embed.MaxSessionBytes is a bug of the caps; no store keeps it.
func overCap(t *testing.T, s embed.SessionStore) {
	ctx, id, acc := context.Background(), embed.NewSessionID(), Account()
	if err := s.ReserveSession(ctx, acc, id, 1000); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", embed.MaxSessionBytes)
	if err := s.SaveSession(ctx, id, embed.Session{SID: embed.PublicSessionHandle(id), AccountID: acc, Branch: huge}); err == nil {
		t.Fatal("a session over MaxSessionBytes was stored")
	}
	if _, err := s.ExchangeSession(ctx, id, time.Hour); !errors.Is(err, embed.ErrSessionUnusable) {
		t.Fatalf("the refused session is exchangeable: %v", err)
	}
}

// liveSessionsBounded: an account reserves at most maxLive sessions whose tokens have not
// expired; a refused reservation reserves nothing; a revoked session still counts (its
// marker lives as long as its token); other accounts have their own count.
func liveSessionsBounded(t *testing.T, s embed.SessionStore) {
	ctx, acc := context.Background(), Account()
	var ids []string
	for range 3 {
		id := embed.NewSessionID()
		if err := s.ReserveSession(ctx, acc, id, 3); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	refused := embed.NewSessionID()
	if err := s.ReserveSession(ctx, acc, refused, 3); !errors.Is(err, embed.ErrLiveSessionLimit) {
		t.Fatalf("a fourth session under a limit of 3: %v", err)
	}
	if states, _ := s.LiveStates(ctx, []string{embed.PublicSessionHandle(refused)}); states[0].Pending {
		t.Fatal("the refused session's id was reserved")
	}
	if _, revoked, err := s.RevokeSession(ctx, acc, ids[0], embed.PublicSessionHandle(ids[0])); !revoked || err != nil {
		t.Fatalf("revoke: %v %v", revoked, err)
	}
	if err := s.ReserveSession(ctx, acc, embed.NewSessionID(), 3); !errors.Is(err, embed.ErrLiveSessionLimit) {
		t.Fatalf("after a revoke (its marker still lives): %v", err)
	}
	if err := s.ReserveSession(ctx, acc, embed.NewSessionID(), 4); err != nil {
		t.Fatalf("under a higher limit: %v", err)
	}
	if err := s.ReserveSession(ctx, Account(), embed.NewSessionID(), 3); err != nil {
		t.Fatalf("another account: %v", err)
	}
}

// exchangeFailuresCounted: the first refused exchange of a session id is reported at
// once; the next ones within the window are counted, not reported; the first after it
// reports them all. Each id has its own count.
func exchangeFailuresCounted(t *testing.T, s embed.SessionStore) {
	ctx, sid, other := context.Background(), HexID(32), HexID(32)
	const window = 300 * time.Millisecond
	if n, err := s.CountExchangeFailure(ctx, sid, window); n != 1 || err != nil {
		t.Fatalf("the first refusal: %d %v", n, err)
	}
	for range 5 {
		if n, err := s.CountExchangeFailure(ctx, sid, window); n != 0 || err != nil {
			t.Fatalf("a refusal within the window: %d %v", n, err)
		}
	}
	if n, _ := s.CountExchangeFailure(ctx, other, window); n != 1 {
		t.Fatalf("another id's first refusal: %d", n)
	}
	var n int64
	calls := int64(5)
	apitest.Eventually(t, 5*time.Second, "a report once the window has passed", func() (bool, string) {
		calls++
		n, _ = s.CountExchangeFailure(ctx, sid, window)
		return n > 0, fmt.Sprintf("%d refusals, none reported", calls)
	})
	if n != calls {
		t.Fatalf("the report after the window counts %d, want the %d refusals since the first report", n, calls)
	}
}
