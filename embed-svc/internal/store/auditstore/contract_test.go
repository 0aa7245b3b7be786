package auditstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
	auditsvc "github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/embed-svc/internal/store/auditstore"
	"github.com/analyticsco/platform/embed-svc/internal/store/auditstore/audittest"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/mongox"
)

// TestStoreContract runs one suite against every Store: MongoDB (FerretDB behind the
// serializing proxy) and the in-memory fake, so tests that use the fake test what
// production does. Each case works in accounts of its own.
func TestStoreContract(t *testing.T) {
	database := devstack.CaseDatabases(t, "audit")
	stores := map[string]func(t *testing.T) auditsvc.Store{
		"mongo": func(t *testing.T) auditsvc.Store {
			s := auditstore.NewMongo(database(t), 0)
			if err := s.EnsureIndexes(context.Background()); err != nil {
				t.Fatal(err)
			}
			return s
		},
		"memory": func(*testing.T) auditsvc.Store { return auditstore.NewMemory() },
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			audittest.Run(t, newStore)
		})
	}
}

func TestMongoRetention(t *testing.T) {
	mongo := devstack.MongoForTest(t)
	ctx := context.Background()
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(ctx, mongo.URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "audit"))
	t.Cleanup(func() { plan.Check(t, db) })
	s := auditstore.NewMongo(db, time.Hour)
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	// A second start with another retention neither fails nor keeps the old expiry.
	if err := auditstore.NewMongo(db, 2*time.Hour).EnsureIndexes(ctx); err != nil {
		t.Fatalf("restart with another retention: %v", err)
	}
	now := time.Now()
	old := audittest.Event(1, 0, "workspace.folder.create", func(e *audit.Event) { e.Time = now.Add(-3 * time.Hour); e.ID = audit.NewID(e.Time) })
	fresh := audittest.Event(1, 0, "workspace.folder.create", func(e *audit.Event) { e.Time = now; e.ID = audit.NewID(now) })
	if err := s.Insert(ctx, []audit.Event{old, fresh}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBefore(ctx, now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, 1, auditsvc.Filter{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != fresh.ID {
		t.Fatalf("after the sweep: %v, want only the fresh event", audittest.IDs(got))
	}
}
