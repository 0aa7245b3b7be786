package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// memberCases are the contract of group membership (embed.UserStore over embed.CatalogStore).
var memberCases = map[string]func(*testing.T, Durable){
	"members-are-added-listed-by-id-and-removed":     membersLifecycle,
	"a-change-of-members-is-a-new-revision":          membersRevisions,
	"a-mints-groups-keep-their-meaning-over-members": membersAndMints,
	"deleting-a-group-ends-its-memberships":          membersOfDeletedGroup,
	"concurrent-adds-count-each-new-member-once":     membersAddedConcurrently,
	"a-user-being-deleted-gains-no-membership":       membersNotOfDeleting,
	"users-and-groups-are-found-by-id-per-account":   membersLookups,
}

// newUsers creates external users ext... in acc with no groups and returns them.
func newUsers(t *testing.T, s Durable, acc int64, tenant string, exts ...string) []embed.ExternalUser {
	t.Helper()
	var out []embed.ExternalUser
	for _, ext := range exts {
		u, err := s.CreateExternalUser(context.Background(), acc, ext, 1000, embed.UserUpdate{Scope: embed.AccountScope, Tenant: tenant}, at(0))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// memberIDs lists the group's members' external ids, a page of first at a time.
func memberIDs(t *testing.T, s Durable, acc int64, scope, group string, first int) []string {
	t.Helper()
	var out []string
	var after int64
	for range 100 {
		page, err := s.ListGroupMembers(context.Background(), acc, scope, group, after, first)
		if err != nil {
			t.Fatal(err)
		}
		for i, u := range page {
			if i > 0 && page[i-1].ID >= u.ID {
				t.Fatalf("members out of id order: %d then %d", page[i-1].ID, u.ID)
			}
			if len(u.Groups) != 0 || len(u.Attributes) != 0 || len(u.Memberships) != 0 || u.ExternalID == "" {
				t.Fatalf("a listed member carries more than its profile: %+v", u)
			}
			out = append(out, u.ExternalID)
		}
		if len(page) < first {
			return out
		}
		after = page[len(page)-1].ID
	}
	t.Fatal("the member list does not end")
	return nil
}

func membersLifecycle(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	g, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "sales"))
	tg, _ := s.CreateDefinition(ctx, definition(acc, "north-tenant", embed.KindGroup, "sales"))
	newUsers(t, s, acc, "north-tenant", "ann", "bob", "cy")
	added, err := s.AddGroupMembers(ctx, acc, embed.AccountScope, g.ID, "sales", []string{"ann", "cy", "nobody"}, at(0))
	if err != nil || added != 2 {
		t.Fatalf("add = %d %v, want 2", added, err)
	}
	if added, err := s.AddGroupMembers(ctx, acc, embed.AccountScope, g.ID, "sales", []string{"ann", "bob", "cy"}, at(0)); err != nil || added != 1 {
		t.Fatalf("add again = %d %v, want 1 (bob)", added, err)
	}
	if got := memberIDs(t, s, acc, embed.AccountScope, g.ID, 2); !reflect.DeepEqual(got, []string{"ann", "bob", "cy"}) {
		t.Fatalf("members %v", got)
	}
	// The tenant's group of the same name is another group.
	if got := memberIDs(t, s, acc, "north-tenant", tg.ID, 10); len(got) != 0 {
		t.Fatalf("the tenant's group has members %v", got)
	}
	u, err := s.ExternalUser(ctx, acc, "ann", embed.AccountScope)
	if err != nil || !reflect.DeepEqual(u.Groups[embed.AccountScope], map[string]string{g.ID: "sales"}) ||
		!reflect.DeepEqual(u.Memberships, []string{embed.MembershipKey(embed.AccountScope, g.ID)}) {
		t.Fatalf("ann as read: groups %v memberships %v (%v)", u.Groups, u.Memberships, err)
	}
	if ok, err := s.RemoveGroupMember(ctx, acc, embed.AccountScope, g.ID, "bob", at(0)); err != nil || !ok {
		t.Fatalf("remove bob = %v %v", ok, err)
	}
	if ok, err := s.RemoveGroupMember(ctx, acc, embed.AccountScope, g.ID, "bob", at(0)); err != nil || ok {
		t.Fatalf("remove bob again = %v %v, want not a member", ok, err)
	}
	if ok, _ := s.RemoveGroupMember(ctx, acc, embed.AccountScope, g.ID, "nobody", at(0)); ok {
		t.Fatal("removed an unknown user")
	}
	if got := memberIDs(t, s, acc, embed.AccountScope, g.ID, 10); !reflect.DeepEqual(got, []string{"ann", "cy"}) {
		t.Fatalf("members after removing bob: %v", got)
	}
	if b, _ := s.ExternalUser(ctx, acc, "bob", embed.AccountScope); len(b.Groups[embed.AccountScope]) != 0 || len(b.Memberships) != 0 {
		t.Fatalf("bob keeps %v %v", b.Groups, b.Memberships)
	}
}

// membersRevisions: adding and removing a membership moves the user to a new revision,
// so a mint computed from the user before is refused and computed again.
func membersRevisions(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	g, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "ops"))
	u := newUsers(t, s, acc, "", "dee")[0]
	if _, err := s.AddGroupMembers(ctx, acc, embed.AccountScope, g.ID, "ops", []string{"dee"}, at(0)); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateExternalUser(ctx, acc, "dee", embed.UserUpdate{Scope: embed.AccountScope, Groups: map[string]string{}, Memberships: []string{}}, u.Rev, at(0)); !errors.Is(err, embed.ErrStale) {
		t.Fatalf("an update from before the add: %v, want stale", err)
	}
	added, _ := s.ExternalUser(ctx, acc, "dee")
	if _, err := s.RemoveGroupMember(ctx, acc, embed.AccountScope, g.ID, "dee", at(0)); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateExternalUser(ctx, acc, "dee", embed.UserUpdate{Scope: embed.AccountScope}, added.Rev, at(0)); !errors.Is(err, embed.ErrStale) {
		t.Fatalf("an update from before the remove: %v, want stale", err)
	}
}

// membersAndMints: a mint's groups (an update with Groups) replace its scope's
// memberships, routes' included, and leave the other scopes'; an update without groups
// keeps them.
func membersAndMints(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	a1, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "a1"))
	a2, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "a2"))
	t1, _ := s.CreateDefinition(ctx, definition(acc, "cm-tenant", embed.KindGroup, "t1"))
	newUsers(t, s, acc, "cm-tenant", "eve")
	for _, g := range []embed.Definition{a1, t1} {
		if _, err := s.AddGroupMembers(ctx, acc, g.Scope, g.ID, g.Name, []string{"eve"}, at(0)); err != nil {
			t.Fatal(err)
		}
	}
	// Omitted groups keep what the route set.
	update(t, s, acc, "eve", embed.UserUpdate{Scope: embed.AccountScope, DisplayName: ptr("Eve")}, at(0))
	if got := memberIDs(t, s, acc, embed.AccountScope, a1.ID, 10); !reflect.DeepEqual(got, []string{"eve"}) {
		t.Fatalf("a1 after a mint without groups: %v", got)
	}
	// A list replaces the account scope's: a1 goes, a2 comes, t1 stays. The update's
	// memberships are the read user's, as the service computes them.
	cur, _ := s.ExternalUser(ctx, acc, "eve", embed.AccountScope)
	want := []string{embed.MembershipKey(embed.AccountScope, a1.ID), embed.MembershipKey("cm-tenant", t1.ID)}
	slices.Sort(want)
	if !reflect.DeepEqual(cur.Memberships, want) {
		t.Fatalf("a read of the account scope carries memberships %v, want every scope's %v", cur.Memberships, want)
	}
	keys := []string{embed.MembershipKey(embed.AccountScope, a2.ID), embed.MembershipKey("cm-tenant", t1.ID)}
	slices.Sort(keys)
	if err := s.UpdateExternalUser(ctx, acc, "eve", embed.UserUpdate{Scope: embed.AccountScope, Groups: map[string]string{a2.ID: "a2"}, Memberships: keys}, cur.Rev, at(0)); err != nil {
		t.Fatal(err)
	}
	for g, want := range map[embed.Definition][]string{a1: nil, a2: {"eve"}, t1: {"eve"}} {
		if got := memberIDs(t, s, acc, g.Scope, g.ID, 10); !reflect.DeepEqual(got, want) {
			t.Fatalf("members of %s after a mint replaced the account's groups: %v, want %v", g.Name, got, want)
		}
	}
	// Empty clears the scope's.
	cur, _ = s.ExternalUser(ctx, acc, "eve")
	if err := s.UpdateExternalUser(ctx, acc, "eve", embed.UserUpdate{Scope: embed.AccountScope, Groups: map[string]string{},
		Memberships: []string{embed.MembershipKey("cm-tenant", t1.ID)}}, cur.Rev, at(0)); err != nil {
		t.Fatal(err)
	}
	if got := memberIDs(t, s, acc, embed.AccountScope, a2.ID, 10); len(got) != 0 {
		t.Fatalf("a2 after a mint cleared the account's groups: %v", got)
	}
	// A new user's memberships are its groups'.
	if _, err := s.CreateExternalUser(ctx, acc, "fay", 1000, embed.UserUpdate{Scope: embed.AccountScope, Groups: map[string]string{a1.ID: "a1"},
		Memberships: []string{embed.MembershipKey(embed.AccountScope, a1.ID)}}, at(0)); err != nil {
		t.Fatal(err)
	}
	if got := memberIDs(t, s, acc, embed.AccountScope, a1.ID, 10); !reflect.DeepEqual(got, []string{"fay"}) {
		t.Fatalf("a1 after fay was created in it: %v", got)
	}
}

func membersOfDeletedGroup(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	g, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "gone"))
	kept, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "kept"))
	newUsers(t, s, acc, "", "gil", "hal")
	for _, d := range []embed.Definition{g, kept} {
		if _, err := s.AddGroupMembers(ctx, acc, embed.AccountScope, d.ID, d.Name, []string{"gil", "hal"}, at(0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteDefinition(ctx, acc, embed.AccountScope, embed.KindGroup, g.ID); err != nil {
		t.Fatal(err)
	}
	if got := memberIDs(t, s, acc, embed.AccountScope, g.ID, 10); len(got) != 0 {
		t.Fatalf("a deleted group lists %v", got)
	}
	u, _ := s.ExternalUser(ctx, acc, "gil", embed.AccountScope)
	if !reflect.DeepEqual(u.Groups[embed.AccountScope], map[string]string{kept.ID: "kept"}) ||
		!reflect.DeepEqual(u.Memberships, []string{embed.MembershipKey(embed.AccountScope, kept.ID)}) {
		t.Fatalf("gil after the delete: %v %v", u.Groups, u.Memberships)
	}
}

func membersAddedConcurrently(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	g, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "crowd"))
	newUsers(t, s, acc, "", "ivy", "jon")
	var total atomic.Int64
	together(8, func(int) {
		n, err := s.AddGroupMembers(ctx, acc, embed.AccountScope, g.ID, "crowd", []string{"ivy", "jon"}, at(0))
		if err != nil {
			t.Error(err)
		}
		total.Add(n)
	})
	if total.Load() != 2 {
		t.Fatalf("8 concurrent adds of 2 users counted %d new members, want 2", total.Load())
	}
	u, _ := s.ExternalUser(ctx, acc, "ivy")
	if len(u.Memberships) != 1 {
		t.Fatalf("ivy's memberships %v", u.Memberships)
	}
}

func membersNotOfDeleting(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	g, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "late"))
	newUsers(t, s, acc, "", "kim")
	if _, err := s.MarkExternalUserDeleting(ctx, acc, "kim"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.AddGroupMembers(ctx, acc, embed.AccountScope, g.ID, "late", []string{"kim"}, at(0)); err != nil || n != 0 {
		t.Fatalf("add of a user being deleted = %d %v", n, err)
	}
	if got := memberIDs(t, s, acc, embed.AccountScope, g.ID, 10); len(got) != 0 {
		t.Fatalf("members %v", got)
	}
}

func membersLookups(t *testing.T, s Durable) {
	ctx, acc, other := context.Background(), Account(), Account()
	g, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "mine"))
	attr, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindAttribute, "region"))
	if d, err := s.Definition(ctx, acc, embed.AccountScope, embed.KindGroup, g.ID); err != nil || d.ID != g.ID || d.Name != "mine" {
		t.Fatalf("definition by id: %+v %v", d, err)
	}
	for name, c := range map[string]struct {
		acc         int64
		scope, kind string
		id          string
	}{
		"another account": {other, embed.AccountScope, embed.KindGroup, g.ID},
		"another scope":   {acc, "north-tenant", embed.KindGroup, g.ID},
		"another kind":    {acc, embed.AccountScope, embed.KindGroup, attr.ID},
		"malformed id":    {acc, embed.AccountScope, embed.KindGroup, "not-an-id"},
		"unknown id":      {acc, embed.AccountScope, embed.KindGroup, "0123456789abcdef01234567"},
	} {
		if _, err := s.Definition(ctx, c.acc, c.scope, c.kind, c.id); !errors.Is(err, embed.ErrNotFound) {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}
	newUsers(t, s, acc, "north-tenant", "lee", "max")
	newUsers(t, s, other, "", "lee")
	users, err := s.FindExternalUsers(ctx, acc, []string{"max", "nobody", "lee"})
	if err != nil || len(users) != 2 || users[0].ExternalID != "lee" || users[1].ExternalID != "max" || users[0].AccountID != acc ||
		!reflect.DeepEqual(users[0].Tenants, []string{"north-tenant"}) || len(users[0].Memberships) != 0 {
		t.Fatalf("find = %+v %v", users, err)
	}
	if n, _ := s.AddGroupMembers(ctx, other, embed.AccountScope, g.ID, "mine", []string{"lee"}, at(0)); n != 1 {
		t.Fatal("another account's lee was not added to a group id of its own scope")
	}
	if got := memberIDs(t, s, acc, embed.AccountScope, g.ID, 10); len(got) != 0 {
		t.Fatalf("acc's group lists another account's member: %v", got)
	}
}
