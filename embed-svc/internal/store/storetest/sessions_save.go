package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// revokedBeforeSave: a bulk revoke that comes between an id's reservation and its save
// (it reads the session's record, written in between) ends the id for good: the save
// stores nothing and says so, the id is never exchangeable, and the marker stays.
func revokedBeforeSave(t *testing.T, s embed.SessionStore) {
	ctx, id, acc := context.Background(), embed.NewSessionID(), Account()
	sid := embed.PublicSessionHandle(id)
	if err := s.ReserveSession(ctx, acc, id, 1000); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RevokeSIDs(ctx, acc, []string{sid}); n != 1 || err != nil {
		t.Fatalf("bulk revoke of the reserved id: %d %v", n, err)
	}
	err := s.SaveSession(ctx, id, embed.Session{SID: sid, RecordID: HexID(16), AccountID: acc, DeploymentID: 7, Branch: "main", GeneratedAt: at(0)})
	if !errors.Is(err, embed.ErrSessionRevoked) {
		t.Fatalf("save after the revoke: %v, want ErrSessionRevoked", err)
	}
	if _, err := s.ExchangeSession(ctx, id, time.Hour); !errors.Is(err, embed.ErrSessionUnusable) {
		t.Fatalf("exchange of an id revoked before its save: %v", err)
	}
	states, err := s.LiveStates(ctx, []string{sid})
	if err != nil || !states[0].Revoked || states[0].RevokedAt == nil || states[0].Pending || states[0].LiveTTL != 0 {
		t.Fatalf("states after the save: %+v %v", states, err)
	}
	if n, err := s.RevokeSIDs(ctx, acc, []string{sid}); n != 0 || err != nil {
		t.Fatalf("revoked again after the save: %d %v", n, err)
	}
}

// savedOnlyIfReserved: an id that was never reserved (or whose reservation is gone
// without a revocation) is not made exchangeable by a save.
func savedOnlyIfReserved(t *testing.T, s embed.SessionStore) {
	ctx, id, acc := context.Background(), embed.NewSessionID(), Account()
	sid := embed.PublicSessionHandle(id)
	err := s.SaveSession(ctx, id, embed.Session{SID: sid, RecordID: HexID(16), AccountID: acc, GeneratedAt: at(0)})
	if !errors.Is(err, embed.ErrSessionUnusable) {
		t.Fatalf("save of an id never reserved: %v, want ErrSessionUnusable", err)
	}
	if _, err := s.ExchangeSession(ctx, id, time.Hour); !errors.Is(err, embed.ErrSessionUnusable) {
		t.Fatalf("exchange of an id never reserved: %v", err)
	}
	if states, _ := s.LiveStates(ctx, []string{sid}); states[0] != (embed.LiveState{}) {
		t.Fatalf("states of an id never reserved: %+v", states[0])
	}
}
