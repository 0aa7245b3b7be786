package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
)

// newStore is a store on a database of its own, indexes made, whose client calls
// observe with every command it starts.
func newStore(t *testing.T, observe func(context.Context, *event.CommandStartedEvent)) (*store.Store, *mongo.Database) {
	t.Helper()
	m := devstack.MongoForTest(t)
	client, err := mongox.ConnectWith(t.Context(), m.URI, mongox.ConnectOptions{Observe: observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "identity"))
	st := store.New(db)
	if err := st.EnsureIndexes(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, db
}

func account(t *testing.T, st *store.Store, name string) store.Account {
	t.Helper()
	a, err := st.UpsertAccount(t.Context(), store.AccountSpec{Name: name, Plan: store.PlanEnterprise})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// upsertOn is a user upsert's filter, when cmd is one on the users collection.
func upsertOn(cmd *event.CommandStartedEvent) (bson.Raw, bool) {
	if cmd.CommandName != "findAndModify" {
		return nil, false
	}
	if coll, _ := cmd.Command.Lookup("findAndModify").StringValueOK(); coll != "users" {
		return nil, false
	}
	if up, _ := cmd.Command.Lookup("upsert").BooleanOK(); !up {
		return nil, false
	}
	q, ok := cmd.Command.Lookup("query").DocumentOK()
	return q, ok
}

// A user is created, then updated in place (same id, same creation time); its username
// in another account is refused with ErrConflict and changes nothing of the user.
func TestUpsertUserUpdatesInItsAccountAndRefusesAnother(t *testing.T) {
	st, _ := newStore(t, nil)
	ctx := t.Context()
	acme, globex := account(t, st, "acme"), account(t, st, "globex")
	ann, err := st.UpsertUser(ctx, store.UserSpec{AccountID: acme.ID, Username: "ann", Email: "ann@acme.test", Role: identity.RoleViewer})
	if err != nil || ann.ID == 0 || ann.AccountID != acme.ID || ann.Email != "ann@acme.test" {
		t.Fatalf("create: %+v, %v", ann, err)
	}
	updated, err := st.UpsertUser(ctx, store.UserSpec{AccountID: acme.ID, Username: "ann", Email: "ann@acme.example", FirstName: "Ann", Role: identity.RoleAdmin})
	if err != nil || updated.ID != ann.ID || updated.AccountID != acme.ID || updated.Email != "ann@acme.example" ||
		updated.FirstName != "Ann" || updated.Role != identity.RoleAdmin || !updated.CreatedAt.Equal(ann.CreatedAt) {
		t.Fatalf("update: %+v, %v; want user %d with the new fields, created at %v", updated, err, ann.ID, ann.CreatedAt)
	}

	_, err = st.UpsertUser(ctx, store.UserSpec{AccountID: globex.ID, Username: "ann", Email: "ann@globex.test", Role: identity.RoleDeveloper})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ann in another account: %v, want ErrConflict", err)
	}
	got, err := st.User(ctx, ann.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AccountID != acme.ID || got.Email != updated.Email || got.Role != updated.Role || got.FirstName != updated.FirstName ||
		!got.UpdatedAt.Equal(updated.UpdatedAt) {
		t.Fatalf("after the refused upsert: %+v, want it unchanged: %+v", got, updated)
	}
	if _, err := st.UserByUsername(ctx, globex.ID, "ann"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ann in globex: %v, want not found", err)
	}
}

// Concurrent first creations of one username, all past the update that finds nothing
// before any creates: every one succeeds with the same user, stored once. The creating
// upsert filters on exactly the fields of a unique index, the condition for MongoDB to
// retry on the server an upsert that met a duplicate key (the upserts of a filter with
// other fields both insert there, and one fails).
func TestUpsertUserConcurrentFirstCreations(t *testing.T) {
	const callers = 4
	var mu sync.Mutex
	var filters []bson.Raw
	arrived := 0
	all := make(chan struct{})
	st, db := newStore(t, func(_ context.Context, cmd *event.CommandStartedEvent) {
		q, ok := upsertOn(cmd)
		if !ok {
			return
		}
		mu.Lock()
		filters = append(filters, q)
		if arrived++; arrived == callers {
			close(all)
		}
		mu.Unlock()
		// Hold each creating upsert until every caller has missed its update.
		select {
		case <-all:
		case <-time.After(10 * time.Second):
		}
	})
	ctx := t.Context()
	acme := account(t, st, "acme")
	mu.Lock()
	filters, arrived = nil, 0
	mu.Unlock()

	users := make([]store.User, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			users[i], errs[i] = st.UpsertUser(ctx, store.UserSpec{AccountID: acme.ID, Username: "bob", Email: "bob@acme.test", Role: identity.RoleViewer})
		})
	}
	wg.Wait()
	select {
	case <-all:
	default:
		t.Fatalf("%d of %d callers reached the creating upsert: the race was not set up", arrived, callers)
	}
	for i := range callers {
		if errs[i] != nil || users[i].ID == 0 || users[i].ID != users[0].ID || users[i].AccountID != acme.ID {
			t.Fatalf("caller %d: %+v, %v; want user %d of account %d", i, users[i], errs[i], users[0].ID, acme.ID)
		}
	}
	if n, err := db.Collection("users").CountDocuments(ctx, bson.D{{Key: "username", Value: "bob"}}); err != nil || n != 1 {
		t.Fatalf("%d users named bob (%v), want 1", n, err)
	}

	// The unique indexes of users, by their keys' field names.
	cur, err := db.Collection("users").Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var specs []struct {
		Key    bson.D `bson:"key"`
		Unique bool   `bson:"unique"`
	}
	if err := cur.All(ctx, &specs); err != nil {
		t.Fatal(err)
	}
	var unique [][]string
	for _, s := range specs {
		if s.Unique {
			var keys []string
			for _, k := range s.Key {
				keys = append(keys, k.Key)
			}
			slices.Sort(keys)
			unique = append(unique, keys)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(filters) != callers {
		t.Fatalf("%d creating upserts, want %d", len(filters), callers)
	}
	for _, q := range filters {
		elems, _ := q.Elements()
		var fields []string
		for _, e := range elems {
			fields = append(fields, e.Key())
		}
		slices.Sort(fields)
		if !slices.ContainsFunc(unique, func(k []string) bool { return slices.Equal(k, fields) }) {
			t.Errorf("the creating upsert filters on %v, not exactly on a unique index's keys %v", fields, unique)
		}
	}
}
