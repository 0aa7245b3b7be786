package mongostore

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/libs/mongox"
)

// TestSameDeploymentsMatchesTheSetOnly holds the filter a scoped key's update is made
// with to what the server does with it: the user's deployments exactly as checked, in
// any order, and not a user one more deployment reached since (the contract suite cannot
// reach between the check and the write).
func TestSameDeploymentsMatchesTheSetOnly(t *testing.T) {
	ctx := context.Background()
	m := devstack.MongoForTest(t)
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(ctx, m.URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "embed"))
	t.Cleanup(func() { plan.Check(t, db) })
	st := New(db)
	docs := []any{
		userDoc{ID: 1, AccountID: 1, ExternalID: "one", Deployments: []int64{5}},
		userDoc{ID: 2, AccountID: 1, ExternalID: "two", Deployments: []int64{5, 6}},
		userDoc{ID: 3, AccountID: 1, ExternalID: "none"},
	}
	if _, err := st.users.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ext     string
		checked []int64
		matches bool
	}{
		{"one", []int64{5}, true},
		{"two", []int64{5}, false},
		{"two", []int64{6}, false},
		{"two", []int64{5, 6}, true},
		{"two", []int64{6, 5}, true},
		{"two", []int64{5, 6, 7}, false},
		{"one", []int64{5, 6}, false},
		{"none", []int64{5}, false},
	} {
		n, err := st.users.CountDocuments(ctx, sameDeployments(bson.D{{Key: "externalId", Value: c.ext}}, c.checked))
		if err != nil {
			t.Fatal(err)
		}
		if (n == 1) != c.matches {
			t.Errorf("user %q against deployments %v: %d matched, want a match: %v", c.ext, c.checked, n, c.matches)
		}
	}
}
