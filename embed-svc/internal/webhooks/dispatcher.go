package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	auditsvc "github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/libs/audit"
)

// DispatchStore is what the dispatcher needs of the store.
type DispatchStore interface {
	Active(ctx context.Context, account int64) ([]Subscription, error)
	NextSequence(ctx context.Context, account int64, id string) (int64, error)
	Enqueue(ctx context.Context, d Delivery, maxQueued int64) (bool, error)
}

// ErrDuplicateDelivery is the store's answer to a delivery its subscription already has
// for the event (a redelivered stream message): nothing was added.
var ErrDuplicateDelivery = errors.New("webhooks: the subscription already has a delivery of the event")

// DefaultMaxQueuedBytes is the default of WEBHOOK_MAX_QUEUED_BYTES.
const DefaultMaxQueuedBytes = 16 << 20

// DispatcherConsumer is the dispatcher's durable consumer of the stream of stored
// events: replicas share it.
const DispatcherConsumer = "webhook-dispatcher"

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	NATS  *nats.Conn
	Store DispatchStore
	// Stored are the stream's limits (the ingester creates it with the same).
	Stored auditsvc.StoredLimits
	// MaxQueuedBytes bounds one account's pending deliveries' bytes; past it a delivery
	// is stored failed (queue_full).
	MaxQueuedBytes int64
	// RetryPeriod is how long a delivery is retried (WEBHOOK_RETRY_PERIOD).
	RetryPeriod time.Duration
	// Queued is called after deliveries were queued (the deliverer's Wake).
	Queued   func()
	Logger   *slog.Logger
	Registry prometheus.Registerer
	Now      func() time.Time
}

// Dispatcher turns each stored event into a delivery for every subscription it matches.
type Dispatcher struct {
	o        DispatcherOptions
	queued   *prometheus.CounterVec
	failures prometheus.Counter
}

// NewDispatcher builds a Dispatcher; Run consumes.
func NewDispatcher(o DispatcherOptions) *Dispatcher {
	if o.MaxQueuedBytes <= 0 {
		o.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Queued == nil {
		o.Queued = func() {}
	}
	d := &Dispatcher{o: o,
		queued: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "webhook_deliveries_queued_total",
			Help: "Webhook deliveries the dispatcher made, by outcome: queued, or queue_full (the account's queued bytes were past WEBHOOK_MAX_QUEUED_BYTES: stored failed)."}, []string{"outcome"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "webhook_dispatch_failures_total",
			Help: "Stored events the dispatcher could not turn into deliveries at once (the store out of reach): handed back to the stream."}),
	}
	if o.Registry != nil {
		o.Registry.MustRegister(d.queued, d.failures)
	}
	return d
}

// Run consumes the stream of stored events until ctx ends, setting the consumer up
// again after a failure.
func (d *Dispatcher) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := d.consume(ctx)
		if ctx.Err() != nil {
			return
		}
		d.o.Logger.WarnContext(ctx, "webhook dispatcher: stream unavailable; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (d *Dispatcher) consume(ctx context.Context) error {
	js, err := jetstream.New(d.o.NATS)
	if err != nil {
		return err
	}
	s, err := auditsvc.EnsureStoredStream(ctx, js, d.o.Stored)
	if err != nil {
		return err
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: DispatcherConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxAckPending: 1000, MaxDeliver: -1, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n += d.dispatch(ctx, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if n > 0 {
			d.o.Queued()
		}
	}
	return nil
}

// dispatch makes the deliveries of one stored event and acknowledges it; a store
// failure hands it back (its deliveries made so far are not made twice: one per
// subscription and event). It returns how many it queued.
func (d *Dispatcher) dispatch(ctx context.Context, m jetstream.Msg) int {
	var ev audit.Event
	if err := json.Unmarshal(m.Data(), &ev); err != nil || ev.AccountID == 0 {
		_ = m.Term()
		return 0
	}
	merged := m.Headers().Get(auditsvc.MergedHeader) == "true"
	n, err := d.deliveries(ctx, ev, merged)
	if err != nil {
		d.failures.Inc()
		d.o.Logger.WarnContext(ctx, "webhook dispatcher: event handed back", "event_id", ev.ID, "err", err)
		_ = m.NakWithDelay(time.Second)
		return n
	}
	_ = m.Ack()
	return n
}

func (d *Dispatcher) deliveries(ctx context.Context, ev audit.Event, merged bool) (int, error) {
	subs, err := d.o.Store.Active(ctx, ev.AccountID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range subs {
		if !Match(s, ev) {
			continue
		}
		seq, err := d.o.Store.NextSequence(ctx, s.AccountID, s.ID)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return n, err
		}
		body, err := json.Marshal(Envelope{Type: ev.Action, Timestamp: ev.Time.UTC(), Sequence: seq, Merged: merged, Data: auditsvc.View(ev)})
		if err != nil {
			return n, err
		}
		now := d.o.Now().UTC()
		dl := Delivery{ID: "dlv_" + audit.NewID(now), AccountID: s.AccountID, SubscriptionID: s.ID, EventID: ev.ID, Type: ev.Action, Seq: seq,
			Body: body, Status: StatusPending, Due: now, Expires: now.Add(d.o.RetryPeriod), CreatedAt: now}
		queued, err := d.o.Store.Enqueue(ctx, dl, d.o.MaxQueuedBytes)
		switch {
		case errors.Is(err, ErrDuplicateDelivery):
			continue
		case err != nil:
			return n, err
		case queued:
			d.queued.WithLabelValues("queued").Inc()
			n++
		default:
			d.queued.WithLabelValues("queue_full").Inc()
		}
	}
	return n, nil
}
