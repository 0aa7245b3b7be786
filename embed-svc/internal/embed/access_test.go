package embed_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/identity"
)

// mintIn mints a session for external user ext in deployment dep (tenant "scope-tenant")
// with the unscoped admin key, and returns its session id.
func (f *fixture) mintIn(t *testing.T, dep int64, ext string) string {
	t.Helper()
	req := f.external(ext)
	req.DeploymentID, req.EmbedTenantName = ptr(dep), ptr("scope-tenant")
	return f.mint(t, f.adminKey(), req)
}

// revoked reports whether the session with id is revoked.
func (f *fixture) revoked(t *testing.T, id string) bool {
	t.Helper()
	states, err := f.sessions.LiveStates(context.Background(), []string{embed.PublicSessionHandle(id)})
	if err != nil {
		t.Fatal(err)
	}
	return states[0].Revoked
}

// listedDeployments lists the sessions p sees and returns their deployments.
func (f *fixture) listedDeployments(t *testing.T, p *identity.Principal, q embed.SessionQuery) []int64 {
	t.Helper()
	q.First = 200
	page, err := f.svc.ListSessions(context.Background(), p, q)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var deps []int64
	for _, it := range page.Items {
		if !slices.Contains(deps, it.DeploymentID) {
			deps = append(deps, it.DeploymentID)
		}
	}
	slices.Sort(deps)
	return deps
}

func TestScopedKeyListsOnlyItsDeploymentsSessions(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.mintIn(t, f.dep, "ann")
	f.mintIn(t, f.dep2, "bob")
	if got := f.listedDeployments(t, f.adminKey(), embed.SessionQuery{}); !slices.Equal(got, []int64{f.dep, f.dep2}) {
		t.Fatalf("the unscoped key lists deployments %v, want both", got)
	}
	if got := f.listedDeployments(t, f.scopedKey(f.dep), embed.SessionQuery{}); !slices.Equal(got, []int64{f.dep}) {
		t.Fatalf("the key scoped to %d lists deployments %v", f.dep, got)
	}
	if got := f.listedDeployments(t, f.scopedKey(f.dep), embed.SessionQuery{ExternalID: "bob"}); len(got) != 0 {
		t.Fatalf("a filter naming another deployment's user lists %v", got)
	}
	if got := f.listedDeployments(t, f.scopedKey(f.dep), embed.SessionQuery{DeploymentID: f.dep}); !slices.Equal(got, []int64{f.dep}) {
		t.Fatalf("its own deployment by name: %v", got)
	}
	_, err := f.svc.ListSessions(ctx, f.scopedKey(f.dep), embed.SessionQuery{DeploymentID: f.dep2, First: 10})
	if status, code, msg := answer(err); status != 403 || code != "key_out_of_scope" || !strings.Contains(msg, "scoped to other deployments") {
		t.Fatalf("asking for another deployment: %d %s %q, want 403 key_out_of_scope", status, code, msg)
	}
	// A personal key without a scope reaches every deployment of its account.
	if got := f.listedDeployments(t, f.personalKey(), embed.SessionQuery{}); !slices.Equal(got, []int64{f.dep, f.dep2}) {
		t.Fatalf("the unscoped personal key lists deployments %v", got)
	}
}

func TestScopedKeyBulkRevokeResolvesInsideItsScope(t *testing.T) {
	ctx := context.Background()
	internalIn := func(f *fixture, dep int64) string {
		return f.mint(t, f.adminKey(), embed.GenerateSessionRequest{DeploymentID: ptr(dep), InternalID: ptr("acme-admin")})
	}
	// inside[0] is an external user's session in the key's deployment, inside[1] an
	// internal user's; revokes is which of them the selector names (-1: none).
	tests := []struct {
		name    string
		req     func(f *fixture, outside string) embed.RevokeSessionsRequest
		revokes int
	}{
		{"by-tenant", func(*fixture, string) embed.RevokeSessionsRequest {
			return embed.RevokeSessionsRequest{Tenant: ptr("scope-tenant")}
		}, 0},
		{"by-external-user", func(*fixture, string) embed.RevokeSessionsRequest {
			return embed.RevokeSessionsRequest{ExternalID: ptr("ann"), Tenant: ptr("scope-tenant")}
		}, 0},
		{"by-internal-user", func(*fixture, string) embed.RevokeSessionsRequest {
			return embed.RevokeSessionsRequest{InternalID: ptr("acme-admin")}
		}, 1},
		{"by-id-of-another-deployments-session", func(f *fixture, outside string) embed.RevokeSessionsRequest {
			return embed.RevokeSessionsRequest{ID: ptr(f.recordID(t, outside))}
		}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			inside := []string{f.mintIn(t, f.dep, "ann"), internalIn(f, f.dep)}
			outside := []string{f.mintIn(t, f.dep2, "ann"), internalIn(f, f.dep2)}
			res, err := f.svc.RevokeSessions(ctx, f.scopedKey(f.dep), tc.req(f, outside[0]))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range outside {
				if f.revoked(t, id) {
					t.Fatalf("a session of deployment %d was revoked by a key scoped to %d (revoked %d)", f.dep2, f.dep, res.Revoked)
				}
			}
			want := 0
			if tc.revokes >= 0 {
				want = 1
				if !f.revoked(t, inside[tc.revokes]) {
					t.Fatal("the session inside the scope was not revoked")
				}
			}
			if res.Revoked != want {
				t.Fatalf("revoked %d, want %d", res.Revoked, want)
			}
		})
	}
	t.Run("naming-another-deployment-is-403", func(t *testing.T) {
		f := newFixture(t)
		id := f.mintIn(t, f.dep2, "ann")
		_, err := f.svc.RevokeSessions(ctx, f.scopedKey(f.dep), embed.RevokeSessionsRequest{DeploymentID: ptr(f.dep2)})
		if status, code, _ := answer(err); status != 403 || code != "key_out_of_scope" || f.revoked(t, id) {
			t.Fatalf("revoke of deployment %d by a key scoped to %d: %d %s, session revoked %v", f.dep2, f.dep, status, code, f.revoked(t, id))
		}
		if ev := f.trail.Events(); ev[len(ev)-1].Action != embed.ActionSessionsRevoke || ev[len(ev)-1].Outcome.Status != 403 {
			t.Fatalf("the refusal is not audited: %+v", ev[len(ev)-1])
		}
	})
}

// recordID is the public id of the session with id (the id the session list shows).
func (f *fixture) recordID(t *testing.T, id string) string {
	t.Helper()
	rec, err := f.store.SessionRecordBySID(context.Background(), embed.PublicSessionHandle(id))
	if err != nil {
		t.Fatalf("no record of the session: %v", err)
	}
	return rec.ID
}

func TestAccountWideWritesNeedAnUnscopedKey(t *testing.T) {
	ctx := context.Background()
	type write struct {
		name string
		do   func(f *fixture, p *identity.Principal) error
		// changed reports whether the write happened.
		changed func(t *testing.T, f *fixture) bool
	}
	off := false
	writes := []write{
		{"put-embed-settings", func(f *fixture, p *identity.Principal) error {
			_, err := f.svc.PutAccountSettings(ctx, p, embed.AccountSettings{AllowAI: &off})
			return err
		}, func(t *testing.T, f *fixture) bool {
			a, _ := f.store.AccountSettings(ctx, accountID)
			return a.AllowAI != nil
		}},
		{"create-account-group", func(f *fixture, p *identity.Principal) error {
			_, err := f.svc.CreateDefinition(ctx, p, embed.KindGroup, embed.DefinitionInput{Name: "made-here"})
			return err
		}, func(t *testing.T, f *fixture) bool {
			defs, _ := f.store.FindDefinitions(ctx, accountID, embed.AccountScope, []string{"made-here"})
			return len(defs) > 0
		}},
		{"delete-account-attribute", func(f *fixture, p *identity.Principal) error {
			return f.svc.DeleteDefinition(ctx, p, embed.AccountScope, embed.KindAttribute, f.definitionID(t, embed.AccountScope, "region"))
		}, func(t *testing.T, f *fixture) bool {
			defs, _ := f.store.FindDefinitions(ctx, accountID, embed.AccountScope, []string{"region"})
			return len(defs) == 0
		}},
		{"delete-tenant-group", func(f *fixture, p *identity.Principal) error {
			return f.svc.DeleteDefinition(ctx, p, "cm-tenant", embed.KindGroup, f.definitionID(t, "cm-tenant", "crew"))
		}, func(t *testing.T, f *fixture) bool {
			defs, _ := f.store.FindDefinitions(ctx, accountID, "cm-tenant", []string{"crew"})
			return len(defs) == 0
		}},
		{"delete-external-user", func(f *fixture, p *identity.Principal) error {
			_, err := f.svc.DeleteTenantUser(ctx, p, "cm-tenant", "carl")
			return err
		}, func(t *testing.T, f *fixture) bool {
			_, err := f.store.ExternalUser(ctx, accountID, "carl")
			return err != nil
		}},
	}
	callers := []struct {
		name   string
		p      func(f *fixture) *identity.Principal
		status int
		code   string
	}{
		{"scoped-key-403", func(f *fixture) *identity.Principal { return f.scopedKey(f.dep) }, 403, "key_out_of_scope"},
		{"personal-key-403", (*fixture).personalKey, 403, "personal_key"},
		{"unscoped-key-allowed", (*fixture).adminKey, 0, ""},
	}
	for _, w := range writes {
		for _, c := range callers {
			t.Run(w.name+"-"+c.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				f.catalogFixture(t)
				err := w.do(f, c.p(f))
				status, code, _ := answer(err)
				if c.status == 0 {
					if err != nil || !w.changed(t, f) {
						t.Fatalf("the unscoped key's write: %v (changed %v)", err, w.changed(t, f))
					}
					return
				}
				if status != c.status || code != c.code {
					t.Fatalf("%d %s, want %d %s", status, code, c.status, c.code)
				}
				if w.changed(t, f) {
					t.Fatal("the refused write changed the account")
				}
			})
		}
	}
}

// catalogFixture gives acc an account-wide attribute "region", and in tenant
// "cm-tenant" a group "crew" and an external user "carl" (minted in f.dep).
func (f *fixture) catalogFixture(t *testing.T) {
	t.Helper()
	if _, err := f.svc.CreateDefinition(context.Background(), f.adminKey(), embed.KindAttribute, embed.DefinitionInput{Name: "region", Type: "string"}); err != nil {
		t.Fatal(err)
	}
	req := f.external("carl")
	req.CreatorMode, req.EmbedTenantName = ptr(true), ptr("cm-tenant")
	req.GroupDefinitions = []embed.DefinitionInput{{Name: "crew"}}
	req.Groups = []string{"crew"}
	f.mint(t, f.adminKey(), req)
}

// definitionID is the id of the definition name in scope.
func (f *fixture) definitionID(t *testing.T, scope, name string) string {
	t.Helper()
	defs, err := f.store.FindDefinitions(context.Background(), accountID, scope, []string{name})
	if err != nil || len(defs) != 1 {
		t.Fatalf("definition %s of %s: %v %v", name, scope, defs, err)
	}
	return defs[0].ID
}

func TestScopedKeyReadsCatalogsAndSettings(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.catalogFixture(t)
	for _, p := range []*identity.Principal{f.scopedKey(f.dep2), f.personalKey()} {
		if _, err := f.svc.GetAccountSettings(ctx, p); err != nil {
			t.Errorf("settings: %v", err)
		}
		if page, err := f.svc.ListDefinitions(ctx, p, embed.ListQuery{Scope: embed.AccountScope, Kind: embed.KindAttribute, First: 10}); err != nil || len(page.Items) != 1 {
			t.Errorf("account catalog: %v %v", page.Items, err)
		}
	}
	page, err := f.svc.ListDefinitions(ctx, f.scopedKey(f.dep2), embed.ListQuery{Scope: "cm-tenant", Kind: embed.KindGroup, First: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("tenant catalog: %v %v", page.Items, err)
	}
}

func TestEmbedTokenMayRevokeByIDButNotListOrRevokeInBulk(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	id := f.mint(t, f.adminKey(), embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), InternalID: ptr("acme-admin")})
	if _, err := f.svc.ExchangeSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	other := f.mintIn(t, f.dep, "ann")
	admin := f.embedPrincipal(id, true)
	_, err := f.svc.ListSessions(ctx, admin, embed.SessionQuery{First: 10})
	if status, _, msg := answer(err); status != 403 || !strings.Contains(msg, "embed token") {
		t.Fatalf("an internal admin's embed token lists sessions: %d %q", status, msg)
	}
	_, err = f.svc.RevokeSessions(ctx, admin, embed.RevokeSessionsRequest{Tenant: ptr("scope-tenant")})
	if status, _, _ := answer(err); status != 403 || f.revoked(t, other) {
		t.Fatalf("an internal admin's embed token revokes in bulk: %d, revoked %v", status, f.revoked(t, other))
	}
	if err := f.svc.RevokeSession(ctx, admin, other); err != nil || !f.revoked(t, other) {
		t.Fatalf("the spec's revoke by id with an internal admin's embed token: %v, revoked %v", err, f.revoked(t, other))
	}
}

// What the rules above leave as the spec says: a scoped key mints in its deployment and revokes
// any session of its account whose id it holds (the spec's Authentication 3 and 4).
func TestScopedKeyMintsInItsDeploymentAndRevokesByIDAnywhere(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.svc.GenerateSession(ctx, f.scopedKey(f.dep), f.external("ann")); err != nil {
		t.Fatalf("mint in its deployment: %v", err)
	}
	outside := f.mintIn(t, f.dep2, "bob")
	if err := f.svc.RevokeSession(ctx, f.scopedKey(f.dep), outside); err != nil || !f.revoked(t, outside) {
		t.Fatalf("revoke by id of another deployment's session: %v, revoked %v", err, f.revoked(t, outside))
	}
}
