package audit

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/libs/audit"
)

// IngesterOptions configure the consumer of the AUDIT stream.
type IngesterOptions struct {
	NATS   *nats.Conn
	Store  Store
	Limits audit.StreamLimits
	Logger *slog.Logger
	// Registry receives the ingest metrics (nil: none).
	Registry prometheus.Registerer
	// Batch is how many events one insert stores at most (default 200); MaxWait how long a
	// fetch waits for a batch to fill (default 200ms): the longest an event waits in an
	// idle stream before it is stored.
	Batch   int
	MaxWait time.Duration
	Now     func() time.Time
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	in := &Ingester{o: o, prop: otel.GetTextMapPropagator(), m: ingestMetrics{
		stored: prometheus.NewCounter(prometheus.CounterOpts{Name: "audit_events_stored_total", Help: "Audit events the ingester stored and acknowledged (an event the stream redelivered counts again; it is stored once)."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "audit_ingest_failures_total",
			Help: "Audit ingest failures: store (the batch is redelivered), undecodable (the message is dropped), stream (fetch failed)."}, []string{"reason"}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "audit_ingest_delay_seconds",
			Help:    "From an event's time to its storage: how long after an action its event is readable.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}}),
	}}
	for _, r := range []string{"store", "undecodable", "stream"} {
		in.m.failures.WithLabelValues(r)
	}
	if o.Registry != nil {
		o.Registry.MustRegister(in.m.stored, in.m.failures, in.m.delay)
	}
	return in
}

// Run consumes until ctx ends, setting the stream and the consumer up again whenever
// fetching fails (NATS restarted, the stream was deleted).
func (in *Ingester) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
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
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (in *Ingester) consumer(ctx context.Context) (jetstream.Consumer, error) {
	js, err := jetstream.New(in.o.NATS)
	if err != nil {
		return nil, err
	}
	s, err := audit.EnsureStream(ctx, js, in.o.Limits)
	if err != nil {
		return nil, err
	}
	// The consumer is created once (replicas share it); an existing one is used as it is.
	if c, err := s.Consumer(ctx, audit.ConsumerName); err == nil {
		return c, nil
	}
	return s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: audit.ConsumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
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
		var ev audit.Event
		if err := json.Unmarshal(m.Data(), &ev); err != nil || !audit.ValidID(ev.ID) || ev.AccountID <= 0 || ev.Action == "" {
			// Only our services publish here; a message that is no event can never be
			// stored, so it is dropped (and logged) rather than redelivered forever.
			in.m.failures.WithLabelValues("undecodable").Inc()
			in.o.Logger.ErrorContext(ctx, "audit ingest: dropping a message that is not an audit event", "subject", m.Subject(), "bytes", len(m.Data()))
			_ = m.Term()
			continue
		}
		audit.Bound(&ev)
		events = append(events, ev)
		kept = append(kept, m)
	}
	if len(events) == 0 {
		return
	}
	// The span continues the trace of the request that recorded the first event.
	sctx := in.prop.Extract(ctx, propagation.HeaderCarrier(kept[0].Headers()))
	sctx, span := otel.Tracer("audit").Start(sctx, "audit ingest", trace.WithSpanKind(trace.SpanKindConsumer))
	err := in.o.Store.Insert(sctx, events)
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
	in.m.stored.Add(float64(len(events)))
}
