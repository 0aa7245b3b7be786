package embed_test

import (
	"context"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// revokeBeforeSave is the session store with a bulk revoke run once, before the first
// save: between the mint's record insert and its save.
type revokeBeforeSave struct {
	embed.SessionStore
	revoke func() (embed.RevokedSessions, error)
	done   bool
	got    embed.RevokedSessions
	err    error
}

func (s *revokeBeforeSave) SaveSession(ctx context.Context, sessionID string, sess embed.Session) error {
	if !s.done {
		s.done = true
		s.got, s.err = s.revoke()
	}
	return s.SessionStore.SaveSession(ctx, sessionID, sess)
}

// TestMintRevokedBeforeItsSaveAnswersARevokedID: a bulk revoke of the user's sessions in
// the tenant that runs after the mint wrote the session's record and before it saved the
// id counts the session; the mint answers the id (minted, then revoked), whose exchange
// is the contract's 401 session_id_invalid, and the list shows the session revoked.
func TestMintRevokedBeforeItsSaveAnswersARevokedID(t *testing.T) {
	f := newFixture(t)
	ctx, tenant := context.Background(), "mid-mint"
	dec := &revokeBeforeSave{SessionStore: f.sessions}
	dec.revoke = func() (embed.RevokedSessions, error) {
		return f.svc.RevokeSessions(ctx, f.adminKey(), embed.RevokeSessionsRequest{ExternalID: ptr("ann"), Tenant: ptr(tenant)})
	}
	f.deps.Sessions = dec
	f.svc = embed.NewService(f.deps, f.opts)

	req := f.external("ann")
	req.EmbedTenantName = ptr(tenant)
	id := f.mint(t, f.adminKey(), req)
	if !dec.done || dec.err != nil || dec.got.Revoked != 1 {
		t.Fatalf("the bulk revoke during the mint: ran %v, %+v %v; want the mint's session counted", dec.done, dec.got, dec.err)
	}
	_, err := f.svc.ExchangeSession(ctx, id)
	if status, code, _ := answer(err); status != 401 || code != "session_id_invalid" {
		t.Fatalf("exchange of the id revoked during its mint: %v (%d %s), want 401 session_id_invalid", err, status, code)
	}
	if !f.revoked(t, id) {
		t.Fatal("the revocation marker is gone after the mint")
	}
	page, err := f.svc.ListSessions(ctx, f.adminKey(), embed.SessionQuery{ExternalID: "ann", Tenant: tenant, First: 10})
	if err != nil || len(page.Items) != 1 || page.Items[0].State != embed.StateRevoked {
		t.Fatalf("list: %+v %v, want the one session revoked", page.Items, err)
	}
}
