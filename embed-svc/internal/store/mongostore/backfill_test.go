package mongostore

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/mongox"
)

// TestBackfillGivesOldUsersTheirMemberships: users stored before memberships were kept
// beside groups (more than a batch of them) get the field from their groups, every
// scope's, and are then listed as their groups' members; a user that has the field is
// left as it is; once done, a backfill is one read.
func TestBackfillGivesOldUsersTheirMemberships(t *testing.T) {
	ctx := context.Background()
	m := devstack.MongoForTest(t)
	plan := mongoplan.NewRecorder()
	counter := &mongox.CommandCounter{}
	client, err := mongox.ConnectWith(ctx, m.URI, mongox.ConnectOptions{Observe: plan.Observe, Counter: counter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "embed"))
	t.Cleanup(func() { plan.Check(t, db) })
	st := New(db)
	if err := st.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	const acc, old = 7, backfillBatch + 20
	ga, gt := "0123456789abcdef0123456a", "0123456789abcdef0123456b"
	now := time.Now().UTC()
	var docs []any
	for i := 1; i <= old; i++ {
		docs = append(docs, userDoc{ID: int64(i), AccountID: acc, ExternalID: fmt.Sprintf("old-%d", i), Rev: int64(i % 2), CreatedAt: now, UpdatedAt: now,
			Groups: map[string]map[string]string{embed.AccountScope: {ga: "sales"}, "north-tenant": {gt: "crew"}}})
	}
	kept := []string{"_/already"}
	docs = append(docs, userDoc{ID: old + 1, AccountID: acc, ExternalID: "new", Memberships: &kept, CreatedAt: now, UpdatedAt: now,
		Groups: map[string]map[string]string{embed.AccountScope: {ga: "sales"}}})
	if _, err := st.users.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	n, err := st.BackfillMemberships(ctx)
	if err != nil || n != old {
		t.Fatalf("backfill wrote %d users (%v), want %d", n, err, old)
	}
	u, err := st.ExternalUser(ctx, acc, "old-3")
	want := []string{embed.MembershipKey(embed.AccountScope, ga), embed.MembershipKey("north-tenant", gt)}
	if err != nil || !reflect.DeepEqual(u.Memberships, want) || u.Rev != 1 {
		t.Fatalf("old-3 after the backfill: %v rev %d (%v), want %v at its revision", u.Memberships, u.Rev, err, want)
	}
	if u, _ := st.ExternalUser(ctx, acc, "new"); !reflect.DeepEqual(u.Memberships, kept) {
		t.Fatalf("a user with memberships was rewritten: %v", u.Memberships)
	}
	members, err := st.ListGroupMembers(ctx, acc, "north-tenant", gt, 0, 1000)
	if err != nil || len(members) != old {
		t.Fatalf("the tenant group lists %d members (%v), want %d", len(members), err, old)
	}
	counter.Reset()
	if n, err := st.BackfillMemberships(ctx); err != nil || n != 0 || counter.Total() != 1 {
		t.Fatalf("a second backfill wrote %d (%v) in %d commands, want none in one read", n, err, counter.Total())
	}
}
