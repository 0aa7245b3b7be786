package embed_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// TestDeleteWinsOverConcurrentMints: a delete of an external user and mints of the same
// user at once, many times over: after the delete succeeds no session of the deleted
// user works (none can be exchanged, none is live unrevoked); a mint answered 200 is of
// a new user made after the delete, and a mint that raced it is 409
// external_user_deleting or made that new user.
func TestDeleteWinsOverConcurrentMints(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for round := range 40 {
		ext := fmt.Sprintf("racer-%d", round)
		f.mintIn(t, f.dep, ext)
		before, err := f.store.ExternalUser(ctx, accountID, ext)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var minted []string
		var deleteErr error
		together(5, func(i int) {
			if i == 0 {
				_, deleteErr = f.svc.DeleteTenantUser(ctx, f.adminKey(), "scope-tenant", ext)
				return
			}
			req := f.external(ext)
			req.EmbedTenantName = ptr("scope-tenant")
			id, err := f.svc.GenerateSession(ctx, f.adminKey(), req)
			if status, code, _ := answer(err); err != nil && (status != 409 || code != "external_user_deleting") {
				t.Errorf("round %d: a mint racing the delete: %v", round, err)
			}
			if err == nil {
				mu.Lock()
				minted = append(minted, id)
				mu.Unlock()
			}
		})
		if deleteErr != nil {
			t.Fatalf("round %d: delete: %v", round, deleteErr)
		}
		for _, id := range minted {
			rec, err := f.store.SessionRecordBySID(ctx, embed.PublicSessionHandle(id))
			if err != nil {
				t.Fatal(err)
			}
			if rec.User.ID == before.ID && !f.revoked(t, id) {
				t.Fatalf("round %d: a session of the deleted user (id %d) outlived the delete", round, before.ID)
			}
			if rec.User.ID == before.ID {
				if _, err := f.svc.ExchangeSession(ctx, id); err == nil {
					t.Fatalf("round %d: a session of the deleted user was exchanged after the delete", round)
				}
			}
		}
	}
}
