package webhooks_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/embed-svc/internal/store/webhookstore"
	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
	"github.com/analyticsco/platform/libs/mongox"
)

// engine is a deliverer over the real store on FerretDB, with short settings; secrets
// are stored unsealed (Open returns them as they are).
type engine struct {
	store *webhookstore.Mongo
	db    *mongo.Database
	d     *webhooks.Deliverer
	n     atomic.Int64

	mu       sync.Mutex
	disabled []string
}

func newEngine(t *testing.T, tune func(*webhooks.DelivererOptions)) *engine {
	t.Helper()
	m := devstack.MongoForTest(t)
	client, err := mongox.ConnectWith(context.Background(), m.URI, mongox.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	e := &engine{db: client.Database(devstack.UniqueName(t, "webhooks"))}
	e.store = webhookstore.NewMongo(e.db)
	if err := e.store.EnsureIndexes(context.Background()); err != nil {
		t.Fatal(err)
	}
	o := webhooks.DelivererOptions{Store: e.store, Open: func(b []byte, _ string) ([]byte, error) { return b, nil },
		Workers: 8, MaxInFlight: 2, AttemptTimeout: 300 * time.Millisecond, FirstRetry: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		AllowedHosts: []string{"127.0.0.1/8"}, Poll: 20 * time.Millisecond,
		Disabled: func(_ context.Context, s webhooks.Subscription) {
			e.mu.Lock()
			e.disabled = append(e.disabled, s.ID)
			e.mu.Unlock()
		}}
	if tune != nil {
		tune(&o)
	}
	e.d = webhooks.NewDeliverer(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

var key = []byte("0123456789abcdef0123456789abcdef")

// subscribe stores an enabled subscription of account to url.
func (e *engine) subscribe(t *testing.T, account int64, url string) string {
	t.Helper()
	id := fmt.Sprintf("wh_%d_%d", account, e.n.Add(1))
	s := webhooks.Subscription{ID: id, AccountID: account, URL: url, Events: []string{"*"}, Enabled: true, Secret: key, CreatedAt: time.Now()}
	if _, err := e.db.Collection(webhookstore.SubscriptionsCollection).InsertOne(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return id
}

// queue adds a delivery of a new event to subscription sub, to retry for period.
func (e *engine) queue(t *testing.T, account int64, sub string, period time.Duration) string {
	t.Helper()
	n := e.n.Add(1)
	now := time.Now()
	d := webhooks.Delivery{ID: fmt.Sprintf("dlv_%d", n), AccountID: account, SubscriptionID: sub, EventID: fmt.Sprintf("ev_%d", n),
		Type: "workspace.folder.create", Seq: n, Body: []byte(fmt.Sprintf(`{"type":"workspace.folder.create","sequence":%d,"data":{}}`, n)),
		Status: webhooks.StatusPending, Due: now, Expires: now.Add(period), CreatedAt: now}
	if _, err := e.store.Enqueue(context.Background(), d, 1<<20); err != nil {
		t.Fatal(err)
	}
	e.d.Wake()
	return d.ID
}

// wait is the delivery once it has ended (or the test fails after limit).
func (e *engine) wait(t *testing.T, id string, limit time.Duration) webhooks.Delivery {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var d webhooks.Delivery
		if err := e.db.Collection(webhookstore.DeliveriesCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
			t.Fatal(err)
		}
		if d.Status != webhooks.StatusPending {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s still pending after %s: %+v", id, limit, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDelivererAttemptsRetriesAndBounds(t *testing.T) {
	e := newEngine(t, nil)
	wh, err := standardwebhooks.NewWebhook(webhooks.EncodeSecret(key))
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	verified := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body [4096]byte
		n, _ := r.Body.Read(body[:])
		if err := wh.Verify(body[:n], r.Header); err != nil || r.Header.Get("webhook-sequence") == "" {
			http.Error(w, "unverified: "+fmt.Sprint(err), 400)
			return
		}
		if calls.Add(1) == 1 {
			w.WriteHeader(500) // the first attempt fails
			return
		}
		w.WriteHeader(204)
	}))
	defer verified.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 1 << 10 { // 64 MiB, never read past the excerpt
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer huge.Close()
	redirect := httptest.NewServer(http.RedirectHandler("http://10.0.0.1/steal", http.StatusFound))
	defer redirect.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String() + "/"
	_ = ln.Close()

	t.Run("a-500-is-retried-and-then-succeeds", func(t *testing.T) {
		d := e.wait(t, e.queue(t, 1, e.subscribe(t, 1, verified.URL), time.Minute), 10*time.Second)
		if d.Status != webhooks.StatusSucceeded || d.Attempts != 2 || d.Last.Status != 204 {
			t.Fatalf("%+v %+v", d, d.Last)
		}
	})
	t.Run("a-slow-receiver-times-out-and-the-delivery-fails-at-its-period", func(t *testing.T) {
		d := e.wait(t, e.queue(t, 2, e.subscribe(t, 2, slow.URL), 700*time.Millisecond), 10*time.Second)
		if d.Status != webhooks.StatusFailed || d.Attempts < 1 || d.Last.Error != "timeout" || d.Last.LatencyMS > 2000 {
			t.Fatalf("%+v %+v", d, d.Last)
		}
	})
	t.Run("a-huge-answer-is-read-to-the-excerpt", func(t *testing.T) {
		start := time.Now()
		d := e.wait(t, e.queue(t, 3, e.subscribe(t, 3, huge.URL), time.Minute), 10*time.Second)
		if d.Status != webhooks.StatusSucceeded || len(d.Last.Excerpt) != webhooks.ExcerptBytes || time.Since(start) > 5*time.Second {
			t.Fatalf("%+v excerpt %d bytes", d, len(d.Last.Excerpt))
		}
	})
	t.Run("a-redirect-is-not-followed", func(t *testing.T) {
		d := e.wait(t, e.queue(t, 4, e.subscribe(t, 4, redirect.URL), 300*time.Millisecond), 10*time.Second)
		if d.Status != webhooks.StatusFailed || d.Last.Error != "redirect" || d.Last.Status != 302 {
			t.Fatalf("%+v %+v", d, d.Last)
		}
	})
	t.Run("a-private-address-is-refused-at-dial-time", func(t *testing.T) {
		d := e.wait(t, e.queue(t, 5, e.subscribe(t, 5, "http://10.255.255.1:9/hook"), 300*time.Millisecond), 10*time.Second)
		if d.Status != webhooks.StatusFailed || d.Last.Error != "refused_address" {
			t.Fatalf("%+v %+v", d, d.Last)
		}
	})
	t.Run("a-dead-receiver-fails-and-its-subscription-is-disabled", func(t *testing.T) {
		f := newEngine(t, func(o *webhooks.DelivererOptions) { o.DisableAfter = 150 * time.Millisecond })
		sub := f.subscribe(t, 6, dead)
		d := f.wait(t, f.queue(t, 6, sub, 2*time.Second), 10*time.Second)
		// Its attempts fail until the subscription is disabled; the next one then ends it
		// without dialing.
		if d.Status != webhooks.StatusFailed || (d.Last.Error != "connection" && d.Last.Error != "subscription_disabled") {
			t.Fatalf("%+v %+v", d, d.Last)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.disabled) != 1 || f.disabled[0] != sub {
			t.Fatalf("disabled %v, want [%s]", f.disabled, sub)
		}
		if s, _ := f.store.Subscription(context.Background(), 6, sub); s.Enabled || s.DisabledReason != webhooks.DisabledFailing {
			t.Fatalf("subscription %+v", s)
		}
		// A delivery of the disabled subscription ends without an attempt.
		if d := f.wait(t, f.queue(t, 6, sub, time.Minute), 5*time.Second); d.Last.Error != "subscription_disabled" || d.Attempts != 1 {
			t.Fatalf("%+v %+v", d, d.Last)
		}
	})
}

// One account's receivers that hang hold at most MaxInFlight of the workers: another
// account's delivery goes out at once.
func TestASlowAccountDelaysNoOther(t *testing.T) {
	e := newEngine(t, func(o *webhooks.DelivererOptions) { o.AttemptTimeout = 3 * time.Second })
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // read whole, the server notices the client leave
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer func() { close(hang); slow.Close() }()
	var fastAt atomic.Int64
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fastAt.Store(time.Now().UnixNano())
		w.WriteHeader(200)
	}))
	defer fast.Close()
	sub := e.subscribe(t, 10, slow.URL)
	for range 20 {
		e.queue(t, 10, sub, time.Minute)
	}
	time.Sleep(200 * time.Millisecond) // the slow account's deliveries are in flight
	start := time.Now()
	id := e.queue(t, 11, e.subscribe(t, 11, fast.URL), time.Minute)
	d := e.wait(t, id, 5*time.Second)
	if d.Status != webhooks.StatusSucceeded {
		t.Fatalf("%+v", d)
	}
	if took := time.Unix(0, fastAt.Load()).Sub(start); took > time.Second {
		t.Fatalf("the other account's delivery took %s behind the slow account", took)
	}
}

// A dead receiver of an account holds half the account's bound: the account's other
// subscription still gets its deliveries while the dead one's attempts hang.
func TestADeadReceiverHoldsHalfItsAccount(t *testing.T) {
	e := newEngine(t, func(o *webhooks.DelivererOptions) { o.AttemptTimeout = 3 * time.Second; o.MaxInFlight = 4 })
	hang := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer func() { close(hang); dead.Close() }()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer ok.Close()
	deadSub := e.subscribe(t, 20, dead.URL)
	for range 10 {
		e.queue(t, 20, deadSub, time.Minute)
	}
	time.Sleep(200 * time.Millisecond)
	var ids []string
	okSub := e.subscribe(t, 20, ok.URL)
	for range 4 {
		ids = append(ids, e.queue(t, 20, okSub, time.Minute))
	}
	for _, id := range ids {
		if d := e.wait(t, id, 2*time.Second); d.Status != webhooks.StatusSucceeded {
			t.Fatalf("%+v", d)
		}
	}
}
