package webhookstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/store/webhookstore"
	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
)

// engineStore is a store of the case's own (storeDB's).
func engineStore(t *testing.T) *webhookstore.Mongo {
	t.Helper()
	s, _ := storeDB(t)
	return s
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func queuedDelivery(account int64, sub, event string, body string) webhooks.Delivery {
	return webhooks.Delivery{ID: "dlv_" + sub + "_" + event, AccountID: account, SubscriptionID: sub, EventID: event, Type: "workspace.folder.create",
		Body: []byte(body), Status: webhooks.StatusPending, Due: t0, Expires: t0.Add(time.Hour), CreatedAt: t0}
}

func TestDeliveryStore(t *testing.T) {
	s := engineStore(t)
	ctx := context.Background()
	t.Run("one-delivery-per-subscription-and-event", func(t *testing.T) {
		if q, err := s.Enqueue(ctx, queuedDelivery(1, "wh_a", "ev1", `{"a":1}`), 1<<20); err != nil || !q {
			t.Fatalf("first: %v %v", q, err)
		}
		if _, err := s.Enqueue(ctx, queuedDelivery(1, "wh_a", "ev1", `{"a":1}`), 1<<20); !errors.Is(err, webhookstore.ErrDuplicate) {
			t.Fatalf("again: %v", err)
		}
		if n, _ := s.QueuedBytes(ctx, 1); n != 7 {
			t.Fatalf("queued %d bytes, want 7: a duplicate counts once", n)
		}
	})
	t.Run("past-the-queued-bytes-it-is-stored-failed", func(t *testing.T) {
		if q, err := s.Enqueue(ctx, queuedDelivery(2, "wh_b", "ev1", "0123456789"), 15); err != nil || !q {
			t.Fatalf("within: %v %v", q, err)
		}
		if q, err := s.Enqueue(ctx, queuedDelivery(2, "wh_b", "ev2", "0123456789"), 15); err != nil || q {
			t.Fatalf("past the bound: %v %v", q, err)
		}
		if n, _ := s.QueuedBytes(ctx, 2); n != 10 {
			t.Fatalf("queued %d", n)
		}
		got, _ := s.Claim(ctx, t0, time.Minute, webhooks.Exclude{}, 100)
		for _, d := range got {
			if d.EventID == "ev2" && d.SubscriptionID == "wh_b" {
				t.Fatal("a queue_full delivery was claimed")
			}
		}
	})
	t.Run("an-account-with-only-its-subscription-count-queues", func(t *testing.T) {
		if err := s.SetSubscriptionCountForTest(ctx, 9, 2); err != nil {
			t.Fatal(err)
		}
		if q, err := s.Enqueue(ctx, queuedDelivery(9, "wh_z", "ev1", "{}"), 1<<20); err != nil || !q {
			t.Fatalf("queued %v %v", q, err)
		}
		if n, _ := s.QueuedBytes(ctx, 9); n != 2 {
			t.Fatalf("queued %d", n)
		}
	})
	t.Run("a-claim-holds-it-for-its-lease-and-record-applies-once", func(t *testing.T) {
		s := engineStore(t)
		if _, err := s.Enqueue(ctx, queuedDelivery(3, "wh_c", "ev1", "{}"), 1<<20); err != nil {
			t.Fatal(err)
		}
		got, err := s.Claim(ctx, t0, time.Minute, webhooks.Exclude{}, 10)
		if err != nil || len(got) != 1 {
			t.Fatalf("claim: %v %v", got, err)
		}
		if again, _ := s.Claim(ctx, t0.Add(30*time.Second), time.Minute, webhooks.Exclude{}, 10); len(again) != 0 {
			t.Fatalf("claimed twice within the lease: %v", again)
		}
		// Handed back unattempted, it is due again at once.
		if err := s.Release(ctx, got[0], t0); err != nil {
			t.Fatal(err)
		}
		if got, err = s.Claim(ctx, t0, time.Minute, webhooks.Exclude{}, 10); err != nil || len(got) != 1 {
			t.Fatalf("claim after the release: %v %v", got, err)
		}
		if excl, _ := s.Claim(ctx, t0.Add(2*time.Minute), time.Minute, webhooks.Exclude{Accounts: []int64{3}}, 10); len(excl) != 0 {
			t.Fatal("an excluded account's delivery was claimed")
		}
		if excl, _ := s.Claim(ctx, t0.Add(2*time.Minute), time.Minute, webhooks.Exclude{Subscriptions: []string{got[0].SubscriptionID}}, 10); len(excl) != 0 {
			t.Fatal("an excluded subscription's delivery was claimed")
		}
		ok, err := s.Record(ctx, got[0], webhooks.Attempt{At: t0, Status: 500}, webhooks.StatusPending, t0.Add(5*time.Second))
		if err != nil || !ok {
			t.Fatalf("record: %v %v", ok, err)
		}
		if ok, _ := s.Record(ctx, got[0], webhooks.Attempt{At: t0}, webhooks.StatusSucceeded, time.Time{}); ok {
			t.Fatal("a stale claim recorded over a newer attempt")
		}
		next, _ := s.Claim(ctx, t0.Add(6*time.Second), time.Minute, webhooks.Exclude{}, 10)
		if len(next) != 1 || next[0].Attempts != 1 || next[0].Last == nil || next[0].Last.Status != 500 {
			t.Fatalf("the retry: %+v", next)
		}
		if ok, err := s.Record(ctx, next[0], webhooks.Attempt{At: t0.Add(6 * time.Second), Status: 204}, webhooks.StatusSucceeded, time.Time{}); !ok || err != nil {
			t.Fatalf("success: %v %v", ok, err)
		}
		if n, _ := s.QueuedBytes(ctx, 3); n != 0 {
			t.Fatalf("queued %d after the success", n)
		}
	})
	t.Run("concurrent-claims-take-each-delivery-once", func(t *testing.T) {
		s := engineStore(t)
		for i := range 20 {
			if _, err := s.Enqueue(ctx, queuedDelivery(4, "wh_d", fmt.Sprint("ev", i), "{}"), 1<<20); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, _ := s.Claim(ctx, t0, time.Minute, webhooks.Exclude{}, 20)
				mu.Lock()
				defer mu.Unlock()
				for _, d := range got {
					seen[d.ID]++
				}
			}()
		}
		wg.Wait()
		if len(seen) != 20 {
			t.Fatalf("%d of 20 claimed", len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("%s claimed %d times", id, n)
			}
		}
	})
}

func TestSubscriptionHealth(t *testing.T) {
	s := engineStore(t)
	ctx := context.Background()
	if err := s.InsertSubscriptionForTest(ctx, webhooks.Subscription{ID: "wh_h", AccountID: 5, URL: "https://r.example/x", Events: []string{"*"}, Enabled: true, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= 3; want++ {
		if n, err := s.NextSequence(ctx, 5, "wh_h"); err != nil || n != want {
			t.Fatalf("sequence %d: %v", n, err)
		}
	}
	if _, err := s.NextSequence(ctx, 6, "wh_h"); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("another account's subscription: %v", err)
	}
	if d, err := s.Failed(ctx, 5, "wh_h", t0, time.Hour); err != nil || d {
		t.Fatalf("first failure: %v %v", d, err)
	}
	// A success ends the run: failing again later starts a new one.
	if err := s.Succeeded(ctx, 5, "wh_h"); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Failed(ctx, 5, "wh_h", t0.Add(2*time.Hour), time.Hour); d {
		t.Fatal("disabled although a success came between")
	}
	if d, _ := s.Failed(ctx, 5, "wh_h", t0.Add(150*time.Minute), time.Hour); d {
		t.Fatal("disabled before the run lasted disableAfter")
	}
	if d, _ := s.Failed(ctx, 5, "wh_h", t0.Add(3*time.Hour), time.Hour); !d {
		t.Fatal("not disabled after an hour of failures")
	}
	if d, _ := s.Failed(ctx, 5, "wh_h", t0.Add(4*time.Hour), time.Hour); d {
		t.Fatal("disabled twice")
	}
	sub, err := s.Subscription(ctx, 5, "wh_h")
	if err != nil || sub.Enabled || sub.DisabledReason != webhooks.DisabledFailing {
		t.Fatalf("after disabling: %+v %v", sub, err)
	}
	if act, _ := s.Active(ctx, 5); len(act) != 0 {
		t.Fatalf("a disabled subscription is active: %+v", act)
	}
}
