package webhookstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/embed-svc/internal/store/webhookstore"
	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/mongox"
)

// storeDB is a fresh database with the store's indexes, each of the store's queries
// checked against them when the test ends.
func storeDB(t *testing.T) (*webhookstore.Mongo, *mongo.Database) {
	t.Helper()
	mdb := devstack.MongoForTest(t)
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(context.Background(), mdb.URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "webhooks"))
	t.Cleanup(func() { plan.Check(t, db) })
	s := webhookstore.NewMongo(db)
	if err := s.EnsureIndexes(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, db
}

var base = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func sub(acc int64, n int, mod func(*webhooks.Subscription)) webhooks.Subscription {
	at := base.Add(time.Duration(n) * time.Second)
	s := webhooks.Subscription{ID: "wh_" + audit.NewID(at), AccountID: acc, URL: fmt.Sprintf("https://hooks.example.com/%d", n),
		Events: []string{"workspace.*"}, Enabled: true, Secret: []byte("sealed-1"), CreatedAt: at, UpdatedAt: at, CreatedBy: "7"}
	if mod != nil {
		mod(&s)
	}
	return s
}

func TestSubscriptionsContract(t *testing.T) {
	s, db := storeDB(t)
	ctx := context.Background()

	t.Run("create-get-round-trip", func(t *testing.T) {
		want := sub(1, 1, func(s *webhooks.Subscription) {
			s.DeploymentIDs = []int64{3, 4}
			s.IncludeRefused = true
			s.Description = "ops"
		})
		if err := s.CreateSubscription(ctx, want, 25); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSubscription(ctx, 1, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID || got.URL != want.URL || fmt.Sprint(got.DeploymentIDs) != "[3 4]" || !got.IncludeRefused || !got.Enabled ||
			got.Description != "ops" || string(got.Secret) != "sealed-1" || !got.CreatedAt.Equal(want.CreatedAt) || got.CreatedBy != "7" {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
		if _, err := s.GetSubscription(ctx, 2, want.ID); !errors.Is(err, webhooks.ErrNotFound) {
			t.Fatalf("another account's read: %v, want ErrNotFound", err)
		}
		if _, err := s.GetSubscription(ctx, 1, "wh_nope"); !errors.Is(err, webhooks.ErrNotFound) {
			t.Fatalf("unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("limit-holds-under-concurrent-creates", func(t *testing.T) {
		const acc, max, tries = 10, 5, 12
		// The account's document exists already without a count, as the deliverer's
		// queued bytes make it.
		if _, err := db.Collection(webhookstore.AccountsCollection).InsertOne(ctx, bson.D{{Key: "_id", Value: int64(acc)}, {Key: "queued", Value: int64(0)}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errc := make(chan error, tries)
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errc <- s.CreateSubscription(ctx, sub(acc, 100+i, nil), max)
			}()
		}
		wg.Wait()
		close(errc)
		created, limited := 0, 0
		for err := range errc {
			switch {
			case err == nil:
				created++
			case errors.Is(err, webhooks.ErrLimit):
				limited++
			default:
				t.Fatalf("create: %v", err)
			}
		}
		list, err := s.ListSubscriptions(ctx, acc, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if created != max || limited != tries-max || len(list) != max {
			t.Fatalf("created %d, limited %d, stored %d; want %d, %d, %d", created, limited, len(list), max, tries-max, max)
		}
		// A delete frees a slot; a second delete of it frees none.
		if err := s.DeleteSubscription(ctx, acc, list[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSubscription(ctx, acc, list[0].ID); !errors.Is(err, webhooks.ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		if err := s.CreateSubscription(ctx, sub(acc, 200, nil), max); err != nil {
			t.Fatalf("create after a delete: %v", err)
		}
		if err := s.CreateSubscription(ctx, sub(acc, 201, nil), max); !errors.Is(err, webhooks.ErrLimit) {
			t.Fatalf("create past the limit: %v, want ErrLimit", err)
		}
		// A higher limit admits more at once; a duplicate id gives its slot back.
		dup := sub(acc, 202, nil)
		if err := s.CreateSubscription(ctx, dup, max+2); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSubscription(ctx, dup, max+2); err == nil {
			t.Fatal("a duplicate id was stored")
		}
		if err := s.CreateSubscription(ctx, sub(acc, 203, nil), max+2); err != nil {
			t.Fatalf("the duplicate kept its slot: %v", err)
		}
	})

	t.Run("list-pages-in-id-order", func(t *testing.T) {
		const acc = 20
		var want []string
		for i := range 5 {
			x := sub(acc, i, nil)
			want = append(want, x.ID)
			if err := s.CreateSubscription(ctx, x, 25); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateSubscription(ctx, sub(acc+1, 9, nil), 25); err != nil {
			t.Fatal(err)
		}
		first, err := s.ListSubscriptions(ctx, acc, "", 2)
		if err != nil {
			t.Fatal(err)
		}
		rest, err := s.ListSubscriptions(ctx, acc, first[1].ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, x := range append(first, rest...) {
			got = append(got, x.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("pages: %v, want %v", got, want)
		}
		empty, err := s.ListSubscriptions(ctx, 99, "", 10)
		if err != nil || empty == nil || len(empty) != 0 {
			t.Fatalf("an account without subscriptions: %v, %v; want an empty list", empty, err)
		}
	})

	t.Run("update-sets-fields-and-enabling-clears-the-disable", func(t *testing.T) {
		x := sub(30, 1, func(s *webhooks.Subscription) { s.DeploymentIDs = []int64{1}; s.Description = "d" })
		if err := s.CreateSubscription(ctx, x, 25); err != nil {
			t.Fatal(err)
		}
		// The deliverer disabled it, and numbered some deliveries.
		if _, err := db.Collection(webhookstore.SubscriptionsCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: x.ID}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "enabled", Value: false}, {Key: "disabledAt", Value: base}, {Key: "disabledReason", Value: "failing"},
				{Key: "failingSince", Value: base.Add(-time.Hour)}, {Key: "seq", Value: int64(41)}}}}); err != nil {
			t.Fatal(err)
		}
		read, err := s.GetSubscription(ctx, 30, x.ID)
		if err != nil {
			t.Fatal(err)
		}
		f := webhooks.Fields{URL: "https://other.example.com/h", Events: []string{"*"}, Enabled: false}
		got, err := s.UpdateSubscription(ctx, 30, x.ID, read.UpdatedAt, f, base.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if got.URL != f.URL || fmt.Sprint(got.Events) != "[*]" || got.DeploymentIDs != nil || got.Description != "" || got.Enabled ||
			got.DisabledReason != "failing" || got.FailingSince.IsZero() || got.Seq != 41 || !got.UpdatedAt.Equal(base.Add(time.Minute)) {
			t.Fatalf("update keeping it disabled: %+v", got)
		}
		// A stale read is refused.
		if _, err := s.UpdateSubscription(ctx, 30, x.ID, read.UpdatedAt, f, base.Add(2*time.Minute)); !errors.Is(err, webhookstore.ErrChanged) {
			t.Fatalf("stale update: %v, want ErrChanged", err)
		}
		f.Enabled, f.DeploymentIDs, f.Description = true, []int64{5}, "again"
		got, err = s.UpdateSubscription(ctx, 30, x.ID, got.UpdatedAt, f, base.Add(3*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if !got.Enabled || got.DisabledReason != "" || !got.DisabledAt.IsZero() || !got.FailingSince.IsZero() || fmt.Sprint(got.DeploymentIDs) != "[5]" ||
			got.Description != "again" || got.Seq != 41 {
			t.Fatalf("update enabling it: %+v", got)
		}
		if _, err := s.UpdateSubscription(ctx, 31, x.ID, got.UpdatedAt, f, base); !errors.Is(err, webhooks.ErrNotFound) {
			t.Fatalf("another account's update: %v, want ErrNotFound", err)
		}
	})

	t.Run("rotate-keeps-the-previous-secret", func(t *testing.T) {
		x := sub(40, 1, nil)
		if err := s.CreateSubscription(ctx, x, 25); err != nil {
			t.Fatal(err)
		}
		until := base.Add(24 * time.Hour)
		got, err := s.RotateSecret(ctx, 40, x.ID, x.Secret, []byte("sealed-2"), until, base.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Secret) != "sealed-2" || string(got.PrevSecret) != "sealed-1" || !got.PrevUntil.Equal(until) {
			t.Fatalf("rotated: %+v", got)
		}
		if _, err := s.RotateSecret(ctx, 40, x.ID, x.Secret, []byte("sealed-3"), until, base); !errors.Is(err, webhookstore.ErrChanged) {
			t.Fatalf("rotation from a stale secret: %v, want ErrChanged", err)
		}
		if _, err := s.RotateSecret(ctx, 41, x.ID, []byte("sealed-2"), []byte("sealed-3"), until, base); !errors.Is(err, webhooks.ErrNotFound) {
			t.Fatalf("another account's rotation: %v, want ErrNotFound", err)
		}
	})
}

// delivery stores a delivery as the dispatcher would.
func delivery(t *testing.T, db *mongo.Database, acc int64, subID string, n int, status string) webhooks.Delivery {
	t.Helper()
	at := base.Add(time.Duration(n) * time.Second)
	d := webhooks.Delivery{ID: "dlv_" + audit.NewID(at), AccountID: acc, SubscriptionID: subID, EventID: audit.NewID(at), Type: "workspace.folder.create",
		Seq: int64(n), Body: []byte(`{"type":"workspace.folder.create"}`), Status: status, Attempts: 1, Due: at, Expires: at.Add(24 * time.Hour), CreatedAt: at,
		Last: &webhooks.Attempt{At: at, Status: 500, LatencyMS: 12, Error: "status", Excerpt: "oops"}}
	if status != webhooks.StatusPending {
		d.DoneAt = at
	}
	if _, err := db.Collection(webhookstore.DeliveriesCollection).InsertOne(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func queued(t *testing.T, db *mongo.Database, acc int64) int64 {
	t.Helper()
	var doc struct {
		Queued int64 `bson:"queued"`
	}
	err := db.Collection(webhookstore.AccountsCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: acc}}).Decode(&doc)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatal(err)
	}
	return doc.Queued
}

func TestDeliveriesReadContract(t *testing.T) {
	s, db := storeDB(t)
	ctx := context.Background()
	x := sub(1, 1, nil)
	other := sub(1, 2, nil)
	for _, y := range []webhooks.Subscription{x, other} {
		if err := s.CreateSubscription(ctx, y, 25); err != nil {
			t.Fatal(err)
		}
	}
	var ds []webhooks.Delivery
	for i := range 6 {
		status := []string{webhooks.StatusSucceeded, webhooks.StatusFailed, webhooks.StatusPending}[i%3]
		ds = append(ds, delivery(t, db, 1, x.ID, i, status))
	}
	delivery(t, db, 1, other.ID, 10, webhooks.StatusFailed)

	t.Run("list-newest-first-paged-and-filtered-without-bodies", func(t *testing.T) {
		first, err := s.ListDeliveries(ctx, 1, x.ID, "", "", 4)
		if err != nil {
			t.Fatal(err)
		}
		rest, err := s.ListDeliveries(ctx, 1, x.ID, "", first[3].ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		all := append(first, rest...)
		if len(all) != 6 {
			t.Fatalf("got %d deliveries, want 6", len(all))
		}
		for i, d := range all {
			if d.ID != ds[5-i].ID || d.Body != nil {
				t.Fatalf("at %d: %s (body %q), want %s without its body", i, d.ID, d.Body, ds[5-i].ID)
			}
		}
		if l := all[0].Last; l == nil || l.Status != 500 || l.Excerpt != "oops" || l.LatencyMS != 12 {
			t.Fatalf("last attempt: %+v", all[0].Last)
		}
		failed, err := s.ListDeliveries(ctx, 1, x.ID, webhooks.StatusFailed, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(failed) != 2 || failed[0].ID != ds[4].ID || failed[1].ID != ds[1].ID {
			t.Fatalf("failed ones: %v", failed)
		}
		none, err := s.ListDeliveries(ctx, 2, x.ID, "", "", 10)
		if err != nil || len(none) != 0 || none == nil {
			t.Fatalf("another account's: %v, %v", none, err)
		}
	})

	t.Run("get", func(t *testing.T) {
		d, err := s.GetDelivery(ctx, 1, x.ID, ds[0].ID)
		if err != nil || d.ID != ds[0].ID || d.Body != nil || d.Seq != 0 || d.Status != webhooks.StatusSucceeded {
			t.Fatalf("get: %+v, %v", d, err)
		}
		for _, c := range []struct {
			acc     int64
			sub, id string
		}{{2, x.ID, ds[0].ID}, {1, other.ID, ds[0].ID}, {1, x.ID, "dlv_nope"}} {
			if _, err := s.GetDelivery(ctx, c.acc, c.sub, c.id); !errors.Is(err, webhooks.ErrNotFound) {
				t.Fatalf("get %+v: %v, want ErrNotFound", c, err)
			}
		}
	})

	t.Run("redeliver", func(t *testing.T) {
		before := queued(t, db, 1)
		now, exp := base.Add(time.Hour), base.Add(25*time.Hour)
		d, err := s.Redeliver(ctx, 1, x.ID, ds[1].ID, now, exp)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != webhooks.StatusPending || !d.Due.Equal(now) || !d.Expires.Equal(exp) || d.Attempts != 1 || !d.DoneAt.IsZero() || d.Body != nil {
			t.Fatalf("redelivered: %+v", d)
		}
		if got := queued(t, db, 1) - before; got != int64(len(`{"type":"workspace.folder.create"}`)) {
			t.Fatalf("queued bytes grew by %d", got)
		}
		if _, err := s.Redeliver(ctx, 1, x.ID, ds[1].ID, now, exp); !errors.Is(err, webhookstore.ErrPending) {
			t.Fatalf("a second redelivery: %v, want ErrPending", err)
		}
		if _, err := s.Redeliver(ctx, 1, other.ID, ds[0].ID, now, exp); !errors.Is(err, webhooks.ErrNotFound) {
			t.Fatalf("through another subscription: %v, want ErrNotFound", err)
		}
	})

	t.Run("ping-takes-the-next-sequence", func(t *testing.T) {
		now := base.Add(2 * time.Hour)
		p1, err := s.InsertPing(ctx, 1, x.ID, now, now.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		p2, err := s.InsertPing(ctx, 1, x.ID, now, now.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if p1.Seq != 1 || p2.Seq != 2 || p1.Type != webhooks.TypePing || p1.Status != webhooks.StatusPending || !p1.Due.Equal(now) ||
			len(p1.EventID) != len("ping_")+26 || p1.EventID[:5] != "ping_" || p1.EventID == p2.EventID {
			t.Fatalf("pings: %+v, %+v", p1, p2)
		}
		var stored webhooks.Delivery
		if err := db.Collection(webhookstore.DeliveriesCollection).FindOne(ctx, bson.D{{Key: "_id", Value: p2.ID}}).Decode(&stored); err != nil {
			t.Fatal(err)
		}
		var env struct {
			Type      string            `json:"type"`
			Timestamp time.Time         `json:"timestamp"`
			Sequence  int64             `json:"sequence"`
			Data      map[string]string `json:"data"`
		}
		if err := json.Unmarshal(stored.Body, &env); err != nil {
			t.Fatal(err)
		}
		if env.Type != webhooks.TypePing || env.Sequence != 2 || env.Data["webhookId"] != x.ID || !env.Timestamp.Equal(now) {
			t.Fatalf("ping body: %s", stored.Body)
		}
		if _, err := s.InsertPing(ctx, 2, x.ID, now, now); !errors.Is(err, webhooks.ErrNotFound) {
			t.Fatalf("another account's ping: %v, want ErrNotFound", err)
		}
	})

	t.Run("delete-takes-the-deliveries-and-their-queued-bytes", func(t *testing.T) {
		before := queued(t, db, 1)
		// The pending ones: ds[2], ds[5] (never counted in this test), ds[1] and two pings.
		if err := s.DeleteSubscription(ctx, 1, x.ID); err != nil {
			t.Fatal(err)
		}
		left, err := s.ListDeliveries(ctx, 1, x.ID, "", "", 100)
		if err != nil || len(left) != 0 {
			t.Fatalf("deliveries left: %d, %v", len(left), err)
		}
		if kept, err := s.ListDeliveries(ctx, 1, other.ID, "", "", 100); err != nil || len(kept) != 1 {
			t.Fatalf("the other subscription's deliveries: %d, %v", len(kept), err)
		}
		body := int64(len(`{"type":"workspace.folder.create"}`))
		if got := before - queued(t, db, 1); got < 3*body {
			t.Fatalf("queued bytes fell by %d, want at least %d", got, 3*body)
		}
	})
}
