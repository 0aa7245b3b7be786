package embed_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// membersFixture is f with the account-wide group "sales" and users ann and bob minted
// in tenant "north-tenant" (with its group "crew"), returning the groups' ids.
func membersFixture(t *testing.T) (*fixture, string, string) {
	t.Helper()
	ctx := context.Background()
	f := newFixture(t)
	sales, err := f.svc.CreateDefinition(ctx, f.adminKey(), embed.KindGroup, embed.DefinitionInput{Name: "sales"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"ann", "bob"} {
		req := f.external(ext)
		req.EmbedTenantName, req.CreatorMode = ptr("north-tenant"), ptr(true)
		req.GroupDefinitions = []embed.DefinitionInput{{Name: "crew"}}
		f.mint(t, f.adminKey(), req)
	}
	defs, _ := f.store.FindDefinitions(ctx, accountID, "north-tenant", []string{"crew"})
	return f, sales.ID, defs[0].ID
}

func TestGroupMembersRules(t *testing.T) {
	ctx := context.Background()
	f, sales, crew := membersFixture(t)
	add := func(p *identity.Principal, scope, group string, ids ...string) (embed.GroupMembersAdded, error) {
		return f.svc.AddGroupMembers(ctx, p, scope, group, embed.GroupMembersInput{ExternalIDs: ids})
	}
	if got, err := add(f.adminKey(), embed.AccountScope, sales, "ANN ", "bob"); err != nil || got != (embed.GroupMembersAdded{Added: 2}) {
		t.Fatalf("add = %+v %v", got, err)
	}
	if got, _ := add(f.adminKey(), embed.AccountScope, sales, "ann"); got != (embed.GroupMembersAdded{AlreadyMembers: 1}) {
		t.Fatalf("add again = %+v", got)
	}
	page, err := f.svc.ListGroupMembers(ctx, f.adminKey(), embed.AccountScope, sales, embed.UserQuery{First: 1})
	if err != nil || len(page.Items) != 1 || page.Items[0].ExternalID != "ann" || !page.PageInfo.HasNextPage {
		t.Fatalf("page 1 = %+v %v", page, err)
	}
	page, _ = f.svc.ListGroupMembers(ctx, f.adminKey(), embed.AccountScope, sales, embed.UserQuery{First: 1, After: *page.PageInfo.EndCursor})
	if len(page.Items) != 1 || page.Items[0].ExternalID != "bob" || page.PageInfo.HasNextPage {
		t.Fatalf("page 2 = %+v", page)
	}
	for name, c := range map[string]struct {
		err    error
		status int
		code   string
		msg    string
	}{
		"unknown users are named, nothing added": {func() error { _, err := add(f.adminKey(), embed.AccountScope, sales, "zed", "ann", "yan"); return err }(), 404, errs.CodeNotFound, "external users not found: zed, yan"},
		"another tenant's group id":              {func() error { _, err := add(f.adminKey(), embed.AccountScope, crew, "ann"); return err }(), 404, errs.CodeNotFound, fmt.Sprintf("group %q not found", crew)},
		"101 ids": {func() error {
			_, err := add(f.adminKey(), embed.AccountScope, sales, make([]string, 101)...)
			return err
		}(), 400, errs.CodeInvalidRequest, "1 to 100"},
		"a scoped key":   {func() error { _, err := add(f.scopedKey(f.dep), embed.AccountScope, sales, "ann"); return err }(), 403, errs.CodeKeyOutOfScope, ""},
		"a personal key": {func() error { _, err := add(f.personalKey(), embed.AccountScope, sales, "ann"); return err }(), 403, errs.CodePersonalKey, ""},
		"a scoped key lists": {func() error {
			_, err := f.svc.ListGroupMembers(ctx, f.scopedKey(f.dep), embed.AccountScope, sales, embed.UserQuery{First: 5})
			return err
		}(), 403, errs.CodeKeyOutOfScope, ""},
		"a user of no tenant of the group": {func() error { _, err := add(f.adminKey(), "south-tenant", crew, "ann"); return err }(), 404, errs.CodeNotFound, "embed tenant"},
		"delete of an unknown user":        {f.svc.RemoveGroupMember(ctx, f.adminKey(), embed.AccountScope, sales, "nobody"), 404, errs.CodeNotFound, `external user "nobody" not found`},
	} {
		status, code, msg := answer(c.err)
		if status != c.status || code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %s %q", name, status, code, msg)
		}
	}
	if u := f.storedUserOrNone("zed"); u.ID != 0 {
		t.Fatal("zed exists")
	}
	if page, _ := f.svc.ListGroupMembers(ctx, f.adminKey(), embed.AccountScope, sales, embed.UserQuery{First: 10}); len(page.Items) != 2 {
		t.Fatalf("a refused add changed the members: %+v", page.Items)
	}
	// Removing a member and a non-member: 204 both.
	for range 2 {
		if err := f.svc.RemoveGroupMember(ctx, f.adminKey(), embed.AccountScope, sales, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	g, err := f.svc.ViewerGroups(ctx, accountID, "north-tenant", "bob")
	if err != nil || len(g.Account) != 0 {
		t.Fatalf("bob's groups after the removal: %+v %v", g, err)
	}
	// The trail: one event per change, refusals included, naming the group.
	adds, removes := 0, 0
	for _, ev := range f.trail.Events() {
		switch ev.Action {
		case embed.ActionGroupMembershipAdd:
			adds++
		case embed.ActionGroupMembershipRemove:
			removes++
		}
	}
	if adds != 8 || removes != 3 {
		t.Fatalf("audit: %d adds, %d removes", adds, removes)
	}
}

// storedUserOrNone is ext as stored (an empty user when there is none).
func (f *fixture) storedUserOrNone(ext string) embed.ExternalUser {
	u, _ := f.store.ExternalUser(context.Background(), accountID, ext, embed.AccountScope)
	return u
}

// TestViewerGroupsByName: the lookup answers names in both catalogs, nothing for an
// unknown user or one being deleted, 400 for a malformed tenant, 503 for a store down.
func TestViewerGroupsByName(t *testing.T) {
	ctx := context.Background()
	f, sales, crew := membersFixture(t)
	if _, err := f.svc.AddGroupMembers(ctx, f.adminKey(), embed.AccountScope, sales, embed.GroupMembersInput{ExternalIDs: []string{"ann"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AddGroupMembers(ctx, f.adminKey(), "north-tenant", crew, embed.GroupMembersInput{ExternalIDs: []string{"ann"}}); err != nil {
		t.Fatal(err)
	}
	g, err := f.svc.ViewerGroups(ctx, accountID, "north-tenant", "ann")
	if err != nil || !reflect.DeepEqual(g, embed.ViewerGroups{Account: []string{"sales"}, Tenant: []string{"crew"}}) {
		t.Fatalf("ann = %+v %v", g, err)
	}
	if g, _ := f.svc.ViewerGroups(ctx, accountID, "", "ann"); !reflect.DeepEqual(g, embed.ViewerGroups{Account: []string{"sales"}, Tenant: []string{}}) {
		t.Fatalf("ann without a tenant = %+v", g)
	}
	if g, err := f.svc.ViewerGroups(ctx, otherAccountID, "north-tenant", "ann"); err != nil || len(g.Account)+len(g.Tenant) != 0 || g.Account == nil {
		t.Fatalf("another account's ann = %+v %v", g, err)
	}
	if _, err := f.store.MarkExternalUserDeleting(ctx, accountID, "ann"); err != nil {
		t.Fatal(err)
	}
	if g, _ := f.svc.ViewerGroups(ctx, accountID, "north-tenant", "ann"); len(g.Account)+len(g.Tenant) != 0 {
		t.Fatalf("a user being deleted = %+v", g)
	}
	if _, err := f.svc.ViewerGroups(ctx, accountID, "North.Tenant", "ann"); err == nil {
		t.Fatal("a malformed tenant was asked")
	}
	f.deps.Users = downUsers{f.store}
	svc := embed.NewService(f.deps, f.opts)
	if _, err := svc.ViewerGroups(ctx, accountID, "", "bob"); err == nil {
		t.Fatal("a store down answered")
	} else if status, _, _ := answer(err); status != 503 {
		t.Fatalf("a store down: %d", status)
	}
}

// downUsers is a user store that cannot be reached.
type downUsers struct{ embed.UserStore }

func (downUsers) ExternalUser(context.Context, int64, string, ...string) (embed.ExternalUser, error) {
	return embed.ExternalUser{}, errors.Join(embed.ErrUnavailable, errors.New("connection refused"))
}

// TestResourcesReachTheToken: generate-session's resources are carried into the
// session, its description and the token's res claim; absent, there is none.
func TestResourcesReachTheToken(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	req := f.external("res")
	req.Resources = &embed.SessionResources{Dashboards: []string{"AAAAAAAAAAAAAAAA"}}
	id := f.mint(t, f.adminKey(), req)
	tok, err := f.svc.ExchangeSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var c token.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(tok.Token, &c); err != nil {
		t.Fatal(err)
	}
	if c.Resources == nil || !reflect.DeepEqual(c.Resources.Dashboards, []string{"AAAAAAAAAAAAAAAA"}) {
		t.Fatalf("res claim %+v", c.Resources)
	}
	info, err := f.svc.SessionInfo(ctx, f.embedPrincipal(id, false))
	if err != nil || info.Resources == nil || len(info.Resources.Dashboards) != 1 {
		t.Fatalf("session info resources %+v %v", info.Resources, err)
	}
	tok, _ = f.svc.ExchangeSession(ctx, f.mint(t, f.adminKey(), f.external("plain")))
	c = token.Claims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tok.Token, &c); err != nil || c.Resources != nil {
		t.Fatalf("a session without resources claims %+v (%v)", c.Resources, err)
	}
}

// TestDryRunAsksTheReach: the dry run asks the reach with the session's deployment,
// tenant, memberships after the mint's groups and resources (an internal user by id and
// role) and answers its dashboards; a reach that cannot answer is 503; a scoped key's
// dry run for a user outside its reach is refused before the reach is asked.
func TestDryRunAsksTheReach(t *testing.T) {
	ctx := context.Background()
	f, sales, _ := membersFixture(t)
	if _, err := f.svc.AddGroupMembers(ctx, f.adminKey(), embed.AccountScope, sales, embed.GroupMembersInput{ExternalIDs: []string{"ann"}}); err != nil {
		t.Fatal(err)
	}
	req := f.external("ann")
	req.EmbedTenantName, req.DryRun = ptr("north-tenant"), true
	req.Resources = &embed.SessionResources{Dashboards: []string{}}
	out, err := f.svc.DryRunSession(ctx, f.adminKey(), req)
	if err != nil {
		t.Fatal(err)
	}
	eff := out.Effective
	q := f.reach.last()
	if !reflect.DeepEqual(eff.GroupMemberships, embed.DryRunMemberships{Account: []string{"sales"}, Tenant: []string{}}) || len(eff.Dashboards) != 1 ||
		eff.Resources == nil || q.DeploymentID != f.dep || q.Tenant != "north-tenant" || !reflect.DeepEqual(q.AccountGroups, []string{"sales"}) ||
		q.Resources == nil || len(*q.Resources) != 0 || q.InternalUserID != 0 {
		t.Fatalf("dry run %+v, reach asked %+v", eff, q)
	}
	// Creator mode in the tenant: the mint's groups replace the tenant's, the account's stay.
	req.CreatorMode, req.Groups, req.Resources = ptr(true), []string{}, nil
	out, _ = f.svc.DryRunSession(ctx, f.adminKey(), req)
	if !reflect.DeepEqual(out.Effective.GroupMemberships, embed.DryRunMemberships{Account: []string{"sales"}, Tenant: []string{}}) || f.reach.last().Resources != nil {
		t.Fatalf("creator-mode dry run memberships %+v", out.Effective.GroupMemberships)
	}
	internal := embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), InternalID: ptr("acme-admin"), DryRun: true}
	if _, err := f.svc.DryRunSession(ctx, f.adminKey(), internal); err != nil || f.reach.last().InternalUserID != 7 || f.reach.last().InternalRole != identity.RoleAdmin {
		t.Fatalf("internal dry run asked %+v (%v)", f.reach.last(), err)
	}
	f.reach.err = errors.New("nats: no responders")
	if _, err := f.svc.DryRunSession(ctx, f.adminKey(), req); err == nil {
		t.Fatal("a dry run answered without the reach")
	} else if status, _, msg := answer(err); status != 503 || !strings.Contains(msg, "dashboard reach") {
		t.Fatalf("the reach down: %d %q", status, msg)
	}
	f.reach.err = nil
	// ann was minted in f.dep only: a key scoped to dep2 is refused before the reach.
	asked := len(f.reach.queries)
	req = f.external("ann")
	req.DeploymentID, req.DryRun = ptr(f.dep2), true
	if _, err := f.svc.DryRunSession(ctx, f.scopedKey(f.dep2), req); err == nil {
		t.Fatal("a scoped key's dry run for a user outside its reach answered")
	} else if status, code, _ := answer(err); status != 403 || code != errs.CodeKeyOutOfScope || len(f.reach.queries) != asked {
		t.Fatalf("scoped dry run: %d %s, reach asked %d times more", status, code, len(f.reach.queries)-asked)
	}
}
