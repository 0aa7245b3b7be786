package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// userCases are the contract of embed.UserStore.
var userCases = map[string]func(*testing.T, Durable){
	"a-user-is-created-updated-and-read":               userLifecycle,
	"attribute-values-read-back-as-stored-json":        valuesNormalized,
	"a-read-has-only-the-scopes-it-asks-for":           readsProjectScopes,
	"an-update-from-a-stale-revision-is-refused":       staleUpdates,
	"an-update-within-deployments-needs-all-of-them":   updatesWithinDeployments,
	"deleting-a-definition-recounts-the-values":        deleteRecountsValues,
	"a-user-being-deleted-is-not-written":              markedDeleting,
	"the-limit-counts-users-and-deletes-free-places":   limitAndDeletes,
	"one-new-user-minted-at-once-is-one-user":          sameUserConcurrently,
	"the-limit-holds-under-concurrent-creations":       limitUnderConcurrency,
	"deletes-and-creates-racing-keep-the-limit":        deletesAndCreatesRacing,
	"a-tenants-users-are-listed-by-id":                 tenantUsersListed,
	"users-of-other-accounts-are-neither-read-nor-met": usersIsolated,
}

// update applies upd to the user at its current revision and returns the user as read
// afterwards with upd.Scope's memberships and values; it fails t on an error.
func update(t *testing.T, s Durable, acc int64, ext string, upd embed.UserUpdate, now time.Time) embed.ExternalUser {
	t.Helper()
	cur, err := s.ExternalUser(context.Background(), acc, ext)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateExternalUser(context.Background(), acc, ext, upd, cur.Rev, now); err != nil {
		t.Fatalf("update: %v", err)
	}
	u, err := s.ExternalUser(context.Background(), acc, ext, upd.Scope)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func userLifecycle(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	t0 := at(-time.Hour)
	u, err := s.CreateExternalUser(ctx, acc, "ada", 10, embed.UserUpdate{Email: ptr("ada@example.com"), DisplayName: ptr("Ada"),
		Scope: embed.AccountScope, Tenant: "north-tenant", Groups: map[string]string{"g1": "sales"},
		SetAttributes: map[string]embed.StoredValue{"a1": {Name: "region", Value: []byte(`"eu"`)}}, AttributeBytes: 4}, t0)
	if err != nil || u.ID <= 0 || u.ExternalID != "ada" || *u.Email != "ada@example.com" || *u.DisplayName != "Ada" || u.Picture != nil ||
		!reflect.DeepEqual(u.Groups[embed.AccountScope], map[string]string{"g1": "sales"}) || string(u.Attributes[embed.AccountScope]["a1"].Value) != `"eu"` ||
		!reflect.DeepEqual(u.Tenants, []string{"north-tenant"}) || !u.CreatedAt.Equal(t0) || !u.UpdatedAt.Equal(t0) || u.AttributeBytes != 4 || u.Rev == 0 {
		t.Fatalf("created: %+v %v", u, err)
	}
	if read, err := s.ExternalUser(ctx, acc, "ada", embed.AccountScope); err != nil || !reflect.DeepEqual(read, u) {
		t.Fatalf("read back:\n%+v\nwant\n%+v (%v)", read, u, err)
	}
	// Nil fields keep what is stored; the groups of a scope are replaced; values of other
	// definitions stay; a tenant is added once; each update is a new revision.
	t1 := t0.Add(time.Minute)
	before := u.Rev
	u = update(t, s, acc, "ada", embed.UserUpdate{Picture: ptr("https://cdn.example.com/a.png"), Scope: embed.AccountScope,
		Tenant: "south-tenant", Groups: map[string]string{"g2": "ops"},
		SetAttributes: map[string]embed.StoredValue{"a2": {Name: "quota", Value: []byte(`5`)}}, AttributeBytes: 5}, t1)
	if *u.Email != "ada@example.com" || *u.Picture != "https://cdn.example.com/a.png" ||
		!reflect.DeepEqual(u.Groups[embed.AccountScope], map[string]string{"g2": "ops"}) || len(u.Attributes[embed.AccountScope]) != 2 ||
		!reflect.DeepEqual(u.Tenants, []string{"north-tenant", "south-tenant"}) || !u.UpdatedAt.Equal(t1) || !u.CreatedAt.Equal(t0) ||
		u.AttributeBytes != 5 || u.Rev <= before {
		t.Fatalf("updated: %+v", u)
	}
	u = update(t, s, acc, "ada", embed.UserUpdate{Scope: embed.AccountScope, Tenant: "north-tenant", AttributeBytes: 5}, t1)
	if len(u.Groups[embed.AccountScope]) != 1 || len(u.Tenants) != 2 {
		t.Fatalf("groups nil keeps them, a known tenant is not added twice: %+v", u)
	}
	// An empty list clears the scope's memberships; a cleared value goes; other scopes stay.
	update(t, s, acc, "ada", embed.UserUpdate{Scope: "cm-tenant", Groups: map[string]string{"g9": "crew"}, AttributeBytes: 5}, t1)
	update(t, s, acc, "ada", embed.UserUpdate{Scope: embed.AccountScope, Groups: map[string]string{}, ClearAttributes: []string{"a1"}, AttributeBytes: 1}, t1)
	u, err = s.ExternalUser(ctx, acc, "ada", embed.AccountScope, "cm-tenant")
	if err != nil || len(u.Groups[embed.AccountScope]) != 0 || !reflect.DeepEqual(u.Groups["cm-tenant"], map[string]string{"g9": "crew"}) ||
		len(u.Attributes[embed.AccountScope]) != 1 || u.Attributes[embed.AccountScope]["a2"].Name != "quota" || u.AttributeBytes != 1 {
		t.Fatalf("cleared: groups %v attributes %v bytes %d (%v)", u.Groups, u.Attributes, u.AttributeBytes, err)
	}
	if err := s.UpdateExternalUser(ctx, acc, "nobody", embed.UserUpdate{Scope: embed.AccountScope}, 1, t1); !errors.Is(err, embed.ErrNotFound) {
		t.Fatalf("update of an unknown user: %v", err)
	}
	if _, err := s.ExternalUser(ctx, acc, "nobody"); !errors.Is(err, embed.ErrNotFound) {
		t.Fatalf("read of an unknown user: %v", err)
	}
}

// readsProjectScopes: a read carries the memberships and values of the scopes it names,
// and the size of all values whatever it names; an update answers its own scope's.
func readsProjectScopes(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	if _, err := s.CreateExternalUser(ctx, acc, "pat", 10, embed.UserUpdate{Scope: "north-tenant", Groups: map[string]string{"g1": "crew"},
		SetAttributes: map[string]embed.StoredValue{"a1": {Name: "tier", Value: []byte(`"gold"`)}}, AttributeBytes: 6}, at(0)); err != nil {
		t.Fatal(err)
	}
	u := update(t, s, acc, "pat", embed.UserUpdate{Scope: "south-tenant", Groups: map[string]string{"g2": "ops"},
		SetAttributes: map[string]embed.StoredValue{"a2": {Name: "tier", Value: []byte(`"tin"`)}}, AttributeBytes: 11}, at(0))
	if len(u.Groups) != 1 || len(u.Attributes) != 1 || u.Groups["south-tenant"]["g2"] != "ops" {
		t.Fatalf("a read of south: %v %v, want south's only", u.Groups, u.Attributes)
	}
	none, err := s.ExternalUser(ctx, acc, "pat")
	if err != nil || len(none.Groups) != 0 || len(none.Attributes) != 0 || none.AttributeBytes != 11 || none.ID == 0 {
		t.Fatalf("a read of no scope: %+v %v", none, err)
	}
	north, _ := s.ExternalUser(ctx, acc, "pat", "north-tenant")
	if len(north.Groups) != 1 || len(north.Attributes) != 1 || string(north.Attributes["north-tenant"]["a1"].Value) != `"gold"` {
		t.Fatalf("a read of north: %v %v", north.Groups, north.Attributes)
	}
	users, _ := s.ListTenantUsers(ctx, acc, "", 0, 10)
	for _, l := range users {
		if len(l.Groups) != 0 || len(l.Attributes) != 0 {
			t.Fatalf("a listed user carries memberships or values: %+v", l)
		}
	}
}

// staleUpdates: an update names the revision it was computed from; when another write
// came first it is refused and writes nothing.
func staleUpdates(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	u, err := s.CreateExternalUser(ctx, acc, "sam", 10, embed.UserUpdate{Scope: embed.AccountScope}, at(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateExternalUser(ctx, acc, "sam", embed.UserUpdate{Scope: embed.AccountScope, DisplayName: ptr("first")}, u.Rev, at(0)); err != nil {
		t.Fatal(err)
	}
	first, _ := s.ExternalUser(ctx, acc, "sam")
	if err := s.UpdateExternalUser(ctx, acc, "sam", embed.UserUpdate{Scope: embed.AccountScope, DisplayName: ptr("late")}, u.Rev, at(0)); !errors.Is(err, embed.ErrStale) {
		t.Fatalf("an update from a revision another write replaced: %v", err)
	}
	if got, _ := s.ExternalUser(ctx, acc, "sam"); *got.DisplayName != "first" || got.Rev != first.Rev {
		t.Fatalf("the refused update wrote: %+v", got)
	}
	// Of concurrent updates from one revision exactly one is written.
	var wins atomic.Int64
	together(8, func(i int) {
		if err := s.UpdateExternalUser(ctx, acc, "sam", embed.UserUpdate{Scope: embed.AccountScope, DisplayName: ptr(fmt.Sprint(i))}, first.Rev, at(0)); err == nil {
			wins.Add(1)
		} else if !errors.Is(err, embed.ErrStale) {
			t.Error(err)
		}
	})
	if wins.Load() != 1 {
		t.Fatalf("%d concurrent updates from one revision were written, want 1", wins.Load())
	}
	if _, err := s.CreateExternalUser(ctx, acc, "sam", 10, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); !errors.Is(err, embed.ErrStale) {
		t.Fatalf("creating a user that exists: %v", err)
	}
	if n, _ := s.ExternalUserCount(ctx, acc); n != 1 {
		t.Fatalf("counter %d after creating an existing user, want 1", n)
	}
}

// deleteRecountsValues: deleting an attribute definition removes its values, and the
// user's size of values counts what is left.
func deleteRecountsValues(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	gone, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindAttribute, "region"))
	kept, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindAttribute, "floor"))
	vals := map[string]embed.StoredValue{gone.ID: {Name: "region", Value: []byte(`"north-east"`)}, kept.ID: {Name: "floor", Value: []byte(`12`)}}
	u, err := s.CreateExternalUser(ctx, acc, "val", 10, embed.UserUpdate{Scope: embed.AccountScope, SetAttributes: vals, AttributeBytes: 14}, at(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDefinition(ctx, acc, embed.AccountScope, embed.KindAttribute, gone.ID); err != nil {
		t.Fatal(err)
	}
	after, err := s.ExternalUser(ctx, acc, "val", embed.AccountScope)
	if err != nil || after.AttributeBytes != 2 || len(after.Attributes[embed.AccountScope]) != 1 || after.Rev == u.Rev {
		t.Fatalf("after deleting region: %d bytes, values %v, rev %d (was %d), %v", after.AttributeBytes, after.Attributes, after.Rev, u.Rev, err)
	}
}

func valuesNormalized(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	u, err := s.CreateExternalUser(ctx, acc, "bo", 10, embed.UserUpdate{Scope: embed.AccountScope, SetAttributes: map[string]embed.StoredValue{
		"a": {Name: "regions", Value: []byte(`[ "eu" , "us" ]`)}, "b": {Name: "quota", Value: []byte(`1e2`)}, "c": {Name: "levels", Value: []byte(`[1, 2.5]`)},
	}}, at(0))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range u.Attributes[embed.AccountScope] {
		got[v.Name] = string(v.Value)
	}
	if want := map[string]string{"regions": `["eu","us"]`, "quota": `100`, "levels": `[1,2.5]`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("values %v, want %v", got, want)
	}
}

func limitAndDeletes(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	for _, ext := range []string{"a", "b"} {
		if _, err := s.CreateExternalUser(ctx, acc, ext, 2, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); err != nil {
			t.Fatalf("user %s: %v", ext, err)
		}
	}
	if _, err := s.CreateExternalUser(ctx, acc, "c", 2, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); !errors.Is(err, embed.ErrLimitReached) {
		t.Fatalf("a third user under a limit of 2: %v", err)
	}
	// The place is taken before the user is looked at: a known user is refused too (the
	// service then updates it).
	if _, err := s.CreateExternalUser(ctx, acc, "a", 2, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); !errors.Is(err, embed.ErrLimitReached) {
		t.Fatalf("a known user at the limit: %v", err)
	}
	if n, _ := s.ExternalUserCount(ctx, acc); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
	if deleted, err := s.DeleteExternalUser(ctx, acc, "a"); !deleted || err != nil {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if deleted, err := s.DeleteExternalUser(ctx, acc, "a"); deleted || err != nil {
		t.Fatalf("second delete: %v %v", deleted, err)
	}
	if n, _ := s.ExternalUserCount(ctx, acc); n != 1 {
		t.Fatalf("count after a delete %d, want 1 (a second delete frees nothing)", n)
	}
	if _, err := s.CreateExternalUser(ctx, acc, "c", 2, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); err != nil {
		t.Fatalf("the freed place: %v", err)
	}
	if _, err := s.ExternalUser(ctx, acc, "a"); !errors.Is(err, embed.ErrNotFound) {
		t.Fatalf("a deleted user: %v", err)
	}
}

func sameUserConcurrently(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	var created, exists atomic.Int64
	together(8, func(i int) {
		_, err := s.CreateExternalUser(ctx, acc, "same-user", 1000, embed.UserUpdate{Scope: embed.AccountScope, Tenant: "north-tenant"}, at(0))
		switch {
		case err == nil:
			created.Add(1)
		case errors.Is(err, embed.ErrStale):
			exists.Add(1) // the caller reads the user and updates it
		default:
			t.Error(err)
		}
	})
	if created.Load() != 1 || exists.Load() != 7 {
		t.Fatalf("8 concurrent creations of one user: %d created, %d found it made, want 1 and 7", created.Load(), exists.Load())
	}
	if n, _ := s.ExternalUserCount(ctx, acc); n != 1 {
		t.Fatalf("counter %d, want 1", n)
	}
}

func limitUnderConcurrency(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	if _, err := s.CreateExternalUser(ctx, acc, "first", 5, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); err != nil {
		t.Fatal(err)
	}
	var ok, refused atomic.Int64
	together(16, func(i int) {
		_, err := s.CreateExternalUser(ctx, acc, fmt.Sprintf("user-%d", i), 5, embed.UserUpdate{Scope: embed.AccountScope}, at(0))
		switch {
		case err == nil:
			ok.Add(1)
		case errors.Is(err, embed.ErrLimitReached):
			refused.Add(1)
		default:
			t.Error(err)
		}
	})
	if ok.Load() != 4 || refused.Load() != 12 {
		t.Fatalf("limit 5 with one user: %d created, %d refused; want 4 and 12", ok.Load(), refused.Load())
	}
	if n, _ := s.ExternalUserCount(ctx, acc); n != 5 {
		t.Fatalf("counter %d, want 5", n)
	}
}

func deletesAndCreatesRacing(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	const limit = 5
	create := func(ext string) error {
		_, err := s.CreateExternalUser(ctx, acc, ext, limit, embed.UserUpdate{Scope: embed.AccountScope, Tenant: "race-tenant"}, at(0))
		return err
	}
	for i := range limit {
		if err := create(fmt.Sprintf("old-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var created atomic.Int64
	together(15, func(i int) {
		if i < limit {
			if deleted, err := s.DeleteExternalUser(ctx, acc, fmt.Sprintf("old-%d", i)); !deleted || err != nil {
				t.Errorf("delete old-%d: %v %v", i, deleted, err)
			}
			return
		}
		if create(fmt.Sprintf("new-%d", i)) == nil {
			created.Add(1)
		}
	})
	n, _ := s.ExternalUserCount(ctx, acc)
	users, _ := s.ListTenantUsers(ctx, acc, "race-tenant", 0, 100)
	if created.Load() > limit || n != created.Load() || int64(len(users)) != n {
		t.Fatalf("limit %d: %d created after %d deletes, counter %d, %d users", limit, created.Load(), limit, n, len(users))
	}
	// Whatever the race left, the freed places can be taken up to the limit, no further.
	for i := int(n); i < limit; i++ {
		if err := create(fmt.Sprintf("later-%d", i)); err != nil {
			t.Fatalf("refill %d: %v", i, err)
		}
	}
	if err := create("over"); !errors.Is(err, embed.ErrLimitReached) {
		t.Fatalf("over the limit after refilling: %v", err)
	}
}

func tenantUsersListed(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	for _, c := range []struct {
		ext, tenant  string
		deploymentID int64
	}{{"ann", "north-tenant", 1}, {"bob", "south-tenant", 1}, {"anna", "north-tenant", 2}, {"amy", "north-tenant", 1}, {"al", "south-tenant", 2}} {
		if _, err := s.CreateExternalUser(ctx, acc, c.ext, 100, embed.UserUpdate{Scope: embed.AccountScope, Tenant: c.tenant, Deployment: c.deploymentID}, at(0)); err != nil {
			t.Fatal(err)
		}
	}
	// ann had sessions in deployment 1 and, later, in 3.
	update(t, s, acc, "ann", embed.UserUpdate{Scope: embed.AccountScope, Tenant: "north-tenant", Deployment: 3}, at(0))
	list := func(after int64, limit int) []string {
		users, err := s.ListTenantUsers(ctx, acc, "north-tenant", after, limit)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, u := range users {
			out = append(out, u.ExternalID)
		}
		return out
	}
	if got := list(0, 10); !reflect.DeepEqual(got, []string{"ann", "anna", "amy"}) {
		t.Fatalf("north's users by id: %v", got)
	}
	first, _ := s.ListTenantUsers(ctx, acc, "north-tenant", 0, 1)
	if got := list(first[0].ID, 10); !reflect.DeepEqual(got, []string{"anna", "amy"}) {
		t.Fatalf("after the first: %v", got)
	}
	if got := list(0, 2); !reflect.DeepEqual(got, []string{"ann", "anna"}) {
		t.Fatalf("two: %v", got)
	}
	if !reflect.DeepEqual(first[0].Deployments, []int64{1, 3}) {
		t.Fatalf("a listed user's deployments: %v", first[0].Deployments)
	}
	if u, _ := s.ExternalUser(ctx, acc, "ann"); !reflect.DeepEqual(u.Deployments, []int64{1, 3}) {
		t.Fatalf("ann's deployments: %v", u.Deployments)
	}
}

func usersIsolated(t *testing.T, s Durable) {
	ctx, acc, other := context.Background(), Account(), Account()
	if _, err := s.CreateExternalUser(ctx, acc, "mine", 1, embed.UserUpdate{Scope: embed.AccountScope, Tenant: "north-tenant"}, at(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ExternalUser(ctx, other, "mine"); !errors.Is(err, embed.ErrNotFound) {
		t.Fatalf("another account reads the user: %v", err)
	}
	if users, _ := s.ListTenantUsers(ctx, other, "north-tenant", 0, 10); len(users) != 0 {
		t.Fatalf("another account lists %v", users)
	}
	if deleted, _ := s.DeleteExternalUser(ctx, other, "mine"); deleted {
		t.Fatal("another account deleted the user")
	}
	// Each account has its own limit: the other account's first user fits under 1.
	if u, err := s.CreateExternalUser(ctx, other, "mine", 1, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); err != nil || u.AccountID != other {
		t.Fatalf("the other account's own user: %+v %v", u, err)
	}
}

// markedDeleting: once a delete of a user has begun, reads show it and no update writes
// the user, whatever revision it names.
func markedDeleting(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	if _, err := s.CreateExternalUser(ctx, acc, "gone", 10, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); err != nil {
		t.Fatal(err)
	}
	if marked, err := s.MarkExternalUserDeleting(ctx, acc, "gone"); !marked || err != nil {
		t.Fatalf("mark: %v %v", marked, err)
	}
	u, err := s.ExternalUser(ctx, acc, "gone")
	if err != nil || !u.Deleting {
		t.Fatalf("a read after the mark: %+v %v", u, err)
	}
	if err := s.UpdateExternalUser(ctx, acc, "gone", embed.UserUpdate{Scope: embed.AccountScope, DisplayName: ptr("late")}, u.Rev, at(0)); !errors.Is(err, embed.ErrUserDeleting) {
		t.Fatalf("an update of a user being deleted: %v", err)
	}
	if _, err := s.CreateExternalUser(ctx, acc, "gone", 10, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); !errors.Is(err, embed.ErrStale) {
		t.Fatalf("a creation of a user being deleted: %v", err)
	}
	if marked, err := s.MarkExternalUserDeleting(ctx, acc, "nobody"); marked || err != nil {
		t.Fatalf("marking an unknown user: %v %v", marked, err)
	}
	if deleted, err := s.DeleteExternalUser(ctx, acc, "gone"); !deleted || err != nil {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if _, err := s.CreateExternalUser(ctx, acc, "gone", 10, embed.UserUpdate{Scope: embed.AccountScope}, at(0)); err != nil {
		t.Fatalf("a new user of the id after the delete: %v", err)
	}
}

// updatesWithinDeployments: an update that names deployments (a scoped key's reach) is
// made only on a user whose recorded deployments are all among them, at the right
// revision too; one outside them, or with none recorded, is refused and not written.
func updatesWithinDeployments(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	if _, err := s.CreateExternalUser(ctx, acc, "ola", 10, embed.UserUpdate{Scope: embed.AccountScope, Deployment: 5,
		SetAttributes: map[string]embed.StoredValue{"a1": {Name: "region", Value: []byte(`"eu"`)}}, AttributeBytes: 4}, at(0)); err != nil {
		t.Fatal(err)
	}
	u := update(t, s, acc, "ola", embed.UserUpdate{Scope: embed.AccountScope, Deployment: 5, Within: []int64{5}, DisplayName: ptr("in reach"), AttributeBytes: 4}, at(0))
	if *u.DisplayName != "in reach" || !reflect.DeepEqual(u.Deployments, []int64{5}) {
		t.Fatalf("an update within the user's only deployment: %+v", u)
	}
	u = update(t, s, acc, "ola", embed.UserUpdate{Scope: embed.AccountScope, Deployment: 6, Within: []int64{5, 6}, AttributeBytes: 4}, at(0))
	if !reflect.DeepEqual(u.Deployments, []int64{5, 6}) {
		t.Fatalf("an update within both deployments adds the second: %v", u.Deployments)
	}
	// At the user's current revision, a reach of one of its deployments is refused.
	for _, reach := range [][]int64{{5}, {6}, {7}, {}} {
		err := s.UpdateExternalUser(ctx, acc, "ola", embed.UserUpdate{Scope: embed.AccountScope, Deployment: 5, Within: reach,
			DisplayName: ptr("out of reach"), Groups: map[string]string{}, ClearAttributes: []string{"a1"}}, u.Rev, at(time.Minute))
		if !errors.Is(err, embed.ErrOutOfReach) {
			t.Fatalf("an update within %v of a user of deployments 5 and 6: %v, want ErrOutOfReach", reach, err)
		}
	}
	if got, _ := s.ExternalUser(ctx, acc, "ola", embed.AccountScope); got.Rev != u.Rev || *got.DisplayName != "in reach" ||
		!got.UpdatedAt.Equal(u.UpdatedAt) || string(got.Attributes[embed.AccountScope]["a1"].Value) != `"eu"` || !reflect.DeepEqual(got.Deployments, []int64{5, 6}) {
		t.Fatalf("a refused update wrote: %+v", got)
	}
	// Within reach, a stale revision is still stale; outside it, the reach decides.
	if err := s.UpdateExternalUser(ctx, acc, "ola", embed.UserUpdate{Scope: embed.AccountScope, Within: []int64{5, 6, 7}}, u.Rev-1, at(0)); !errors.Is(err, embed.ErrStale) {
		t.Fatalf("a stale update within reach: %v, want ErrStale", err)
	}
	if err := s.UpdateExternalUser(ctx, acc, "ola", embed.UserUpdate{Scope: embed.AccountScope, Within: []int64{5}}, u.Rev-1, at(0)); !errors.Is(err, embed.ErrOutOfReach) {
		t.Fatalf("a stale update out of reach: %v, want ErrOutOfReach", err)
	}
	// A user with no deployment recorded may have been minted anywhere: only an update
	// without Within writes it.
	legacy, err := s.CreateExternalUser(ctx, acc, "old", 10, embed.UserUpdate{Scope: embed.AccountScope}, at(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateExternalUser(ctx, acc, "old", embed.UserUpdate{Scope: embed.AccountScope, Deployment: 5, Within: []int64{5}}, legacy.Rev, at(0)); !errors.Is(err, embed.ErrOutOfReach) {
		t.Fatalf("an update within a reach of a user with no deployment recorded: %v, want ErrOutOfReach", err)
	}
	if got := update(t, s, acc, "old", embed.UserUpdate{Scope: embed.AccountScope, Deployment: 5}, at(0)); !reflect.DeepEqual(got.Deployments, []int64{5}) {
		t.Fatalf("an update without a reach: %v", got.Deployments)
	}
	// Of concurrent updates from one revision, one adding a deployment outside the others'
	// reach: a reach-bound update never lands after it.
	base, _ := s.ExternalUser(ctx, acc, "old")
	var outsideWon atomic.Bool
	together(8, func(i int) {
		upd := embed.UserUpdate{Scope: embed.AccountScope, Deployment: 5, Within: []int64{5}, DisplayName: ptr(fmt.Sprint("scoped ", i))}
		if i == 0 {
			upd = embed.UserUpdate{Scope: embed.AccountScope, Deployment: 9, DisplayName: ptr("unscoped")}
		}
		err := s.UpdateExternalUser(ctx, acc, "old", upd, base.Rev, at(0))
		switch {
		case err == nil && i == 0:
			outsideWon.Store(true)
		case err != nil && !errors.Is(err, embed.ErrStale) && !errors.Is(err, embed.ErrOutOfReach):
			t.Error(err)
		}
	})
	got, _ := s.ExternalUser(ctx, acc, "old")
	if outsideWon.Load() != (*got.DisplayName == "unscoped") || got.Rev != base.Rev+1 {
		t.Fatalf("after concurrent updates: %q at rev %d (from %d), the unscoped one won: %v", *got.DisplayName, got.Rev, base.Rev, outsideWon.Load())
	}
	if err := s.UpdateExternalUser(ctx, acc, "old", embed.UserUpdate{Scope: embed.AccountScope, Deployment: 5, Within: []int64{5}}, got.Rev, at(0)); outsideWon.Load() != errors.Is(err, embed.ErrOutOfReach) {
		t.Fatalf("a reach-bound update after the race: %v (the unscoped one won: %v)", err, outsideWon.Load())
	}
}
