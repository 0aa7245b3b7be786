package audit

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
)

// IngesterOptions configure the consumer of the AUDIT stream.
type IngesterOptions struct {
	NATS   *nats.Conn
	Store  Store
	Limits publish.StreamLimits
	Logger *slog.Logger
	// Registry receives the ingest metrics (nil: none).
	Registry prometheus.Registerer
	// Batch is how many events one insert stores at most (default 200); MaxWait how long a
	// fetch waits for a batch to fill (default 200ms): the longest an event waits in an
	// idle stream before it is stored.
	Batch   int
	MaxWait time.Duration
	// AccountLimit bounds the events one account stores per AccountWindow (default 1m):
	// the rest of the window's events are merged into its one summary event
	// (ActionMerged) and counted in audit_events_merged_total. Zero: no bound.
	AccountLimit  int
	AccountWindow time.Duration
	// Stored, when set, republishes every stored event (and each merge's summary) on
	// the stream of stored events, after the store write and before the acknowledgement:
	// a failed republish hands the batch back like a failed store write.
	Stored *StoredLimits
	Now    func() time.Time
}

// Ingester stores the events of the AUDIT stream: the trail's only consumer, a durable
// one, so replicas share the work and an event leaves the stream only once stored. An
// event is acknowledged after the store has it; while the store is down events are
// handed back (redelivered a second later), so they wait in the stream, not in memory.
type Ingester struct {
	o    IngesterOptions
	m    ingestMetrics
	prop propagation.TextMapPropagator
}

type ingestMetrics struct {
	stored   prometheus.Counter
	merged   prometheus.Counter
	failures *prometheus.CounterVec
	delay    prometheus.Histogram
}

// NewIngester builds the consumer; Run consumes.
func NewIngester(o IngesterOptions) *Ingester {
	if o.Batch <= 0 {
		o.Batch = 200
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 200 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AccountWindow <= 0 {
		o.AccountWindow = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	in := &Ingester{o: o, prop: otel.GetTextMapPropagator(), m: ingestMetrics{
		stored: prometheus.NewCounter(prometheus.CounterOpts{Name: "audit_events_stored_total", Help: "Audit events the ingester stored and acknowledged (an event the stream redelivered counts again; it is stored once)."}),
		merged: prometheus.NewCounter(prometheus.CounterOpts{Name: "audit_events_merged_total",
			Help: "Audit events past their account's budget (AUDIT_ACCOUNT_MAX_EVENTS per AUDIT_ACCOUNT_WINDOW), counted in their window's summary event instead of stored one by one."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "audit_ingest_failures_total",
			Help: "Audit ingest failures: store (the batch is redelivered), undecodable (the message is dropped), forged (an event on another service's subject or outside its actions: dropped), stream (fetch failed), republish (the stream of stored events did not take the batch: it is redelivered)."}, []string{"reason"}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "audit_ingest_delay_seconds",
			Help:    "From an event's time to its storage: how long after an action its event is readable.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}}),
	}}
	for _, r := range []string{"store", "undecodable", "forged", "stream", "republish"} {
		in.m.failures.WithLabelValues(r)
	}
	if o.Registry != nil {
		o.Registry.MustRegister(in.m.stored, in.m.merged, in.m.failures, in.m.delay)
	}
	return in
}

// Run consumes until ctx ends, setting the stream and the consumer up again whenever
// fetching fails (NATS restarted, the stream was deleted), after a wait that follows
// retryBackOff.
func (in *Ingester) Run(ctx context.Context) {
	b := retryBackOff()
	for ctx.Err() == nil {
		cons, err := in.consumer(ctx)
		if err == nil {
			err = in.consume(ctx, cons)
		}
		if ctx.Err() != nil {
			return
		}
		in.m.failures.WithLabelValues("stream").Inc()
		in.o.Logger.WarnContext(ctx, "audit ingest: stream unavailable; retrying", "err", err)
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// The waits before setting the stream up again double from retryFirstWait up to
// retryMaxWait, each drawn at random within retryJitter of that (±50%), so replicas
// that lost NATS together do not come back together.
const (
	retryFirstWait = 100 * time.Millisecond
	retryGrowth    = 2
	retryMaxWait   = 5 * time.Second
	retryJitter    = 0.5
)

func retryBackOff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: retryFirstWait, RandomizationFactor: retryJitter, Multiplier: retryGrowth, MaxInterval: retryMaxWait}
}

func (in *Ingester) consumer(ctx context.Context) (jetstream.Consumer, error) {
	js, err := jetstream.New(in.o.NATS)
	if err != nil {
		return nil, err
	}
	s, err := publish.EnsureStream(ctx, js, in.o.Limits)
	if err != nil {
		return nil, err
	}
	if in.o.Stored != nil {
		if _, err := EnsureStoredStream(ctx, js, *in.o.Stored); err != nil {
			return nil, err
		}
	}
	// The consumer is created once (replicas share it); an existing one is used as it is.
	if c, err := s.Consumer(ctx, publish.ConsumerName); err == nil {
		return c, nil
	}
	return s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: publish.ConsumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxAckPending: 4 * in.o.Batch, MaxDeliver: -1,
	})
}

// consume fetches and stores batches until fetching fails.
func (in *Ingester) consume(ctx context.Context, cons jetstream.Consumer) error {
	for ctx.Err() == nil {
		batch, err := cons.Fetch(in.o.Batch, jetstream.FetchMaxWait(in.o.MaxWait))
		if err != nil {
			return err
		}
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && len(msgs) == 0 {
			return err
		}
		if len(msgs) > 0 {
			in.store(ctx, msgs)
		}
	}
	return nil
}

// storeRetry is how long the store gets to come back before a batch is redelivered.
const storeRetry = time.Second

func (in *Ingester) store(ctx context.Context, msgs []jetstream.Msg) {
	events := make([]audit.Event, 0, len(msgs))
	kept := make([]jetstream.Msg, 0, len(msgs))
	for _, m := range msgs {
		ev, ok := in.decode(ctx, m)
		if !ok {
			_ = m.Term()
			continue
		}
		events = append(events, ev)
		kept = append(kept, m)
	}
	if len(events) == 0 {
		return
	}
	// The span continues the trace of the request that recorded the first event.
	sctx := in.prop.Extract(ctx, propagation.HeaderCarrier(kept[0].Headers()))
	sctx, span := otel.Tracer("audit").Start(sctx, "audit ingest", trace.WithSpanKind(trace.SpanKindConsumer))
	fresh, err := in.unstored(sctx, events, kept)
	var stored []audit.Event
	var merged []Merged
	if err == nil {
		stored, merged, err = in.admit(sctx, fresh)
	}
	if err == nil {
		err = in.o.Store.Insert(sctx, stored)
	}
	if err == nil && len(merged) > 0 {
		err = in.o.Store.Merge(sctx, merged)
	}
	if err == nil && in.o.Stored != nil {
		err = in.republish(sctx, events, fresh, stored, merged)
	}
	span.End()
	if err != nil {
		in.m.failures.WithLabelValues("store").Inc()
		in.o.Logger.WarnContext(ctx, "audit ingest: store unavailable; the batch is redelivered", "events", len(events), "err", err)
		for _, m := range kept {
			_ = m.NakWithDelay(storeRetry)
		}
		return
	}
	now := in.o.Now()
	for i, m := range kept {
		_ = m.Ack()
		in.m.delay.Observe(max(now.Sub(events[i].Time), 0).Seconds())
	}
	in.m.stored.Add(float64(len(stored)))
	for _, mg := range merged {
		in.m.merged.Add(float64(mg.Count))
	}
}

// republish puts the batch's events on the stream of stored events: those stored now
// and those a redelivery found stored already, not those merged past their account's
// budget, whose summary events go instead.
func (in *Ingester) republish(ctx context.Context, events, fresh, stored []audit.Event, merged []Merged) error {
	kept := make(map[string]bool, len(stored))
	for _, ev := range stored {
		kept[ev.ID] = true
	}
	dropped := map[string]bool{}
	for _, ev := range fresh {
		if !kept[ev.ID] {
			dropped[ev.ID] = true
		}
	}
	out := make([]audit.Event, 0, len(events))
	for _, ev := range events {
		if !dropped[ev.ID] {
			out = append(out, ev)
		}
	}
	summaries := make([]audit.Event, len(merged))
	for i, mg := range merged {
		summaries[i] = mg.Event()
	}
	js, err := jetstream.New(in.o.NATS)
	if err != nil {
		return err
	}
	if err := republish(ctx, js, out, summaries); err != nil {
		in.m.failures.WithLabelValues("republish").Inc()
		return err
	}
	return nil
}

// serviceActions are the actions each recording process may record: an event on its
// subject outside them is forged (a compromised process recording another's actions).
var serviceActions = map[string]string{
	"workspace-svc":  "workspace.",
	"embed-svc":      "embed.",
	"dbtsync-svc":    "dbtsync.",
	"dbtsync-worker": "dbtsync.",
	"platformctl":    "platform.",
	"gateway":        "platform.", // the API keys it manages
}

// decode reads one message as an event; false (logged, counted) when it can never be
// stored: not an event, or not one its publisher may record. NATS lets each process
// publish only on its own subject (audit.events.<service>), so the subject, not the
// event's own word, says who recorded it.
func (in *Ingester) decode(ctx context.Context, m jetstream.Msg) (audit.Event, bool) {
	var ev audit.Event
	if err := json.Unmarshal(m.Data(), &ev); err != nil || !audit.ValidID(ev.ID) || ev.AccountID <= 0 || ev.Action == "" {
		// Only our services publish here; a message that is no event can never be
		// stored, so it is dropped (and logged) rather than redelivered forever.
		in.m.failures.WithLabelValues("undecodable").Inc()
		in.o.Logger.ErrorContext(ctx, "audit ingest: dropping a message that is not an audit event", "subject", m.Subject(), "bytes", len(m.Data()))
		return ev, false
	}
	audit.Bound(&ev)
	prefix, known := serviceActions[ev.Service]
	if m.Subject() != publish.Subject(ev.Service) || !known || !strings.HasPrefix(ev.Action, prefix) {
		in.m.failures.WithLabelValues("forged").Inc()
		in.o.Logger.ErrorContext(ctx, "audit ingest: dropping an event its publisher may not record",
			"subject", m.Subject(), "service", ev.Service, "action", ev.Action, "audit_event_id", ev.ID)
		return ev, false
	}
	return ev, true
}

// unstored drops the events already stored from a batch that holds redeliveries (an
// acknowledgement lost while the stream changed leader, a batch handed back): they are
// acknowledged again but not counted against their account's budget a second time. A
// batch delivered for the first time is not looked up.
func (in *Ingester) unstored(ctx context.Context, events []audit.Event, msgs []jetstream.Msg) ([]audit.Event, error) {
	if in.o.AccountLimit <= 0 {
		return events, nil // Insert alone is idempotent
	}
	var again []string
	for i, m := range msgs {
		if md, err := m.Metadata(); err == nil && md.NumDelivered > 1 {
			again = append(again, events[i].ID)
		}
	}
	if len(again) == 0 {
		return events, nil
	}
	done, err := in.o.Store.Stored(ctx, again)
	if err != nil || len(done) == 0 {
		return events, err
	}
	fresh := make([]audit.Event, 0, len(events)-len(done))
	for _, ev := range events {
		if !done[ev.ID] {
			fresh = append(fresh, ev)
		}
	}
	return fresh, nil
}

// admit splits events into those stored one by one and, per account and window, the
// count past the account's budget. The budget is counted in the store, so replicas
// share it. A batch redelivered after a failed insert is counted again: the budget errs
// on the strict side.
func (in *Ingester) admit(ctx context.Context, events []audit.Event) ([]audit.Event, []Merged, error) {
	if in.o.AccountLimit <= 0 {
		return events, nil, nil
	}
	type key struct {
		account int64
		window  time.Time
	}
	groups := map[key][]int{}
	var order []key
	for i, ev := range events {
		k := key{ev.AccountID, ev.Time.UTC().Truncate(in.o.AccountWindow)}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	keep := make([]bool, len(events))
	var merged []Merged
	for _, k := range order {
		idx := groups[k]
		before, err := in.o.Store.Admit(ctx, k.account, k.window, len(idx))
		if err != nil {
			return nil, nil, err
		}
		room := int(max(min(int64(in.o.AccountLimit)-before, int64(len(idx))), 0))
		for _, i := range idx[:room] {
			keep[i] = true
		}
		if over := len(idx) - room; over > 0 {
			merged = append(merged, Merged{AccountID: k.account, Window: k.window, Length: in.o.AccountWindow, Limit: in.o.AccountLimit, Count: over})
		}
	}
	stored := make([]audit.Event, 0, len(events))
	for i, ev := range events {
		if keep[i] {
			stored = append(stored, ev)
		}
	}
	return stored, merged, nil
}
