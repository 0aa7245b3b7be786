package embed_test

import (
	"context"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/identity"
)

// embedPrincipal is the principal of the session's embed token, as the gateway forwards it.
func (f *fixture) embedPrincipal(id string, internal bool) *identity.Principal {
	p := &identity.Principal{Credential: identity.CredentialEmbed, Account: f.acc,
		Embed: &identity.Embed{SessionID: embed.PublicSessionHandle(id), DeploymentID: f.dep, Internal: internal}}
	if internal {
		p.User = &identity.User{ID: 7, Username: "acme-admin", Role: identity.RoleAdmin}
	}
	return p
}

// TestRevokeSemantics: the spec's revoke, by session id. Before the exchange the id
// becomes unusable; after it, the session ends on its next request; another account's
// session, an unknown id or a repeated revoke change nothing and are answered the same;
// only an admin of an account with embedding may revoke.
func TestRevokeSemantics(t *testing.T) {
	ctx := context.Background()
	t.Run("revoke-before-the-exchange", func(t *testing.T) {
		f := newFixture(t)
		id := f.mint(t, f.adminKey(), f.external("u"))
		if err := f.svc.RevokeSession(ctx, f.adminKey(), id); err != nil {
			t.Fatal(err)
		}
		_, err := f.svc.ExchangeSession(ctx, id)
		if status, code, _ := answer(err); status != 401 || code != "session_id_invalid" {
			t.Fatalf("exchange after revoke: %d %s", status, code)
		}
	})
	t.Run("revoke-after-the-exchange", func(t *testing.T) {
		f := newFixture(t)
		id := f.mint(t, f.adminKey(), f.external("u"))
		if _, err := f.svc.ExchangeSession(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.SessionInfo(ctx, f.embedPrincipal(id, false)); err != nil {
			t.Fatalf("before the revoke: %v", err)
		}
		if err := f.svc.RevokeSession(ctx, f.adminKey(), id); err != nil {
			t.Fatal(err)
		}
		_, err := f.svc.SessionInfo(ctx, f.embedPrincipal(id, false))
		if status, _, msg := answer(err); status != 401 || msg != "the embed session has ended" {
			t.Fatalf("after the revoke: %d %q", status, msg)
		}
		states, _ := f.sessions.LiveStates(ctx, []string{embed.PublicSessionHandle(id)})
		if !states[0].Revoked {
			t.Fatal("no revocation marker for the gateway")
		}
		// Repeated: the same answer, nothing more revoked.
		if err := f.svc.RevokeSession(ctx, f.adminKey(), id); err != nil {
			t.Fatal(err)
		}
		evs := f.trail.Events()
		if last := evs[len(evs)-1]; last.Action != embed.ActionSessionRevoke || last.Details["revoked"] != false || evs[len(evs)-2].Details["revoked"] != true {
			t.Fatalf("the revokes' events: %+v", evs)
		}
	})
	t.Run("revoke-of-another-accounts-session-changes-nothing", func(t *testing.T) {
		f := newFixture(t)
		id := f.mint(t, f.adminKey(), f.external("u"))
		other := f.adminKey()
		other.Account.ID = otherAccountID
		if err := f.svc.RevokeSession(ctx, other, id); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.RevokeSession(ctx, other, embed.NewSessionID()); err != nil {
			t.Fatalf("an unknown id: %v", err)
		}
		if _, err := f.svc.ExchangeSession(ctx, id); err != nil {
			t.Fatalf("exchange after another account's revoke: %v", err)
		}
	})
	t.Run("who-may-revoke", func(t *testing.T) {
		f := newFixture(t)
		id := f.mint(t, f.adminKey(), f.external("u"))
		viewer := f.adminKey()
		viewer.Credential, viewer.User = identity.CredentialBearer, &identity.User{ID: 9, Role: identity.RoleViewer}
		noEmbedding := f.adminKey()
		noEmbedding.Account.EmbeddingEnabled = false
		scoped := f.adminKey()
		scoped.KeyScope = []int64{f.otherDep}
		for name, c := range map[string]struct {
			p      *identity.Principal
			status int
		}{
			"revoke-403-viewer":                 {viewer, 403},
			"revoke-403-embedding-off":          {noEmbedding, 403},
			"revoke-403-external-embed-token":   {f.embedPrincipal(id, false), 403},
			"revoke-204-internal-admin-session": {f.embedPrincipal(id, true), 0},
			"revoke-204-scoped-admin-key":       {scoped, 0},
		} {
			err := f.svc.RevokeSession(ctx, c.p, embed.NewSessionID())
			if status, _, _ := answer(err); (c.status == 0 && err != nil) || (c.status != 0 && status != c.status) {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
}
