// Package publish is the publishing side of the audit trail: the AUDIT stream the events
// travel on, the Publisher (an audit.Recorder) that gets them there durably, and the
// MongoDB outbox it falls back on.
package publish

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/natsx"
)

// Pending is an event on its way to the stream: the message it will be.
type Pending struct {
	ID      string
	Subject string
	Data    []byte
	Header  map[string]string // trace context
}

// Outbox keeps the events that could not be published, in the recording service's own
// database, until the relay publishes them.
type Outbox interface {
	Put(ctx context.Context, events []Pending) error
	// Take returns up to limit events, oldest first; they stay until Remove.
	Take(ctx context.Context, limit int) ([]Pending, error)
	Remove(ctx context.Context, ids []string) error
}

// Options configure a Publisher.
type Options struct {
	Service  string       // the recording service: the events' service and subject
	NATS     *nats.Conn   // nil: every event goes to the outbox
	Outbox   Outbox       // nil: no outbox; an event the stream refuses is held in memory
	Logger   *slog.Logger // every event is one line at info: "audit event"
	Registry prometheus.Registerer
	// PublishTimeout bounds the wait for the stream's acknowledgements, publishes sent
	// again while the stream has no leader included (default 2s); the outbox write has
	// the same bound.
	PublishTimeout time.Duration
	// MaxHeld bounds the events held in memory when neither the stream nor the outbox
	// takes them (default 10,000); past it the oldest are dropped, and logged as such.
	MaxHeld int
	// RelayInterval is how often held and outboxed events are sent again (default 1s).
	RelayInterval time.Duration
	// OutboxSweep is how often the relay looks into the outbox when this process put
	// nothing there (default 30s): events another replica left before it stopped.
	OutboxSweep time.Duration
	Now         func() time.Time
}

// Publisher records events for one service. The guarantee: when Record returns, every
// event it was given is in the AUDIT stream (acknowledged) or in the service's outbox,
// unless both were unavailable at that moment; then it is held in memory and sent by
// Run as soon as either takes it. Every event is also one structured log line. Events
// of no account (an exchange of an unknown session id) are only logged: no account's
// admin could ever read them.
type Publisher struct {
	o    Options
	js   jetstream.JetStream
	m    *publisherMetrics
	prop propagation.TextMapPropagator

	mu   sync.Mutex
	held []Pending
	// outboxed: this process put events in the outbox that may still be there. The relay
	// reads the outbox when it is set, and otherwise only every OutboxSweep (for what a
	// replica that stopped left behind), not on every tick.
	outboxed  atomic.Bool
	relayMu   sync.Mutex // one relay at a time (Run and Flush)
	lastSweep time.Time  // guarded by relayMu
}

// NewPublisher builds the publisher; Run relays what the stream did not take at once.
func NewPublisher(o Options) (*Publisher, error) {
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = 2 * time.Second
	}
	if o.MaxHeld <= 0 {
		o.MaxHeld = 10_000
	}
	if o.RelayInterval <= 0 {
		o.RelayInterval = time.Second
	}
	if o.OutboxSweep <= 0 {
		o.OutboxSweep = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{o: o, prop: otel.GetTextMapPropagator()}
	if o.NATS != nil {
		js, err := jetstream.New(o.NATS)
		if err != nil {
			return nil, err
		}
		p.js = js
	}
	p.m = newPublisherMetrics(o.Registry, p.heldCount)
	return p, nil
}

// Record completes, logs and delivers events (see Publisher). It outlives ctx's
// cancellation: the action happened whether or not its caller is still waiting.
func (p *Publisher) Record(ctx context.Context, events ...audit.Event) {
	ctx = context.WithoutCancel(ctx)
	pending := make([]Pending, 0, len(events))
	for i := range events {
		ev := &events[i]
		audit.Complete(ctx, ev, p.o.Service, p.o.Now())
		p.o.Logger.LogAttrs(ctx, slog.LevelInfo, "audit event", slog.Any("audit", ev))
		if ev.AccountID == 0 {
			p.m.recorded.WithLabelValues("log_only").Inc()
			continue
		}
		data, err := json.Marshal(ev)
		if err != nil { // an Event always marshals; a detail value of an odd type may not
			ev.Details = map[string]any{"unencodable": true}
			data, _ = json.Marshal(ev)
		}
		pe := Pending{ID: ev.ID, Subject: Subject(ev.Service), Data: data, Header: map[string]string{}}
		p.prop.Inject(ctx, propagation.MapCarrier(pe.Header))
		pending = append(pending, pe)
	}
	if len(pending) == 0 {
		return
	}
	left := p.publish(ctx, pending)
	p.m.recorded.WithLabelValues("stream").Add(float64(len(pending) - len(left)))
	if len(left) == 0 {
		return
	}
	kept := len(left)
	left = p.store(ctx, left)
	p.m.recorded.WithLabelValues("outbox").Add(float64(kept - len(left)))
	if len(left) > 0 {
		p.m.recorded.WithLabelValues("memory").Add(float64(len(left)))
		p.o.Logger.ErrorContext(ctx, "audit events neither published nor kept in the outbox: held in memory until the stream or the outbox takes them",
			"events", len(left))
		p.hold(left, false)
	}
}

// publish sends events to the stream and returns those it did not acknowledge within
// PublishTimeout. A publish the stream could not take yet (no leader while a cluster
// elects one, the connection moving to another server) is sent again with the same
// message id, so an event whose acknowledgement was lost is stored once (the stream's
// Duplicates window); one it refused for good (full) is left at once, for the outbox.
func (p *Publisher) publish(ctx context.Context, events []Pending) []Pending {
	if len(events) == 0 {
		return nil
	}
	if p.js == nil || !p.o.NATS.IsConnected() {
		return events
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.PublishTimeout)
	defer cancel()
	left := events
	r := natsx.Retrier{Budget: p.o.PublishTimeout, Conn: p.o.NATS}
	_ = r.Do(ctx, func(actx context.Context) error {
		var err error
		left, err = p.publishOnce(actx, left)
		return err
	})
	return left
}

// publishOnce publishes events asynchronously and waits for their acknowledgements
// within ctx; it returns those not acknowledged and an error: a transient one
// (natsx.Transient) only when every failure was.
func (p *Publisher) publishOnce(ctx context.Context, events []Pending) ([]Pending, error) {
	futures := make([]jetstream.PubAckFuture, len(events))
	var left []Pending
	var transient, lasting error
	fail := func(pe Pending, err error) {
		left = append(left, pe)
		if natsx.Transient(err) {
			transient = err
		} else {
			lasting = err
		}
	}
	for i, pe := range events {
		m := &nats.Msg{Subject: pe.Subject, Data: pe.Data, Header: nats.Header{}}
		for k, v := range pe.Header {
			http.Header(m.Header).Set(k, v)
		}
		f, err := p.js.PublishMsgAsync(m, jetstream.WithMsgID(pe.ID))
		if err != nil {
			fail(pe, err)
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			fail(events[i], err)
		case <-ctx.Done():
			fail(events[i], ctx.Err())
		}
	}
	if lasting != nil {
		return left, lasting
	}
	return left, transient
}

// store puts events in the outbox and returns those it could not.
func (p *Publisher) store(ctx context.Context, events []Pending) []Pending {
	if len(events) == 0 || p.o.Outbox == nil {
		return events
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.PublishTimeout)
	defer cancel()
	if err := p.o.Outbox.Put(ctx, events); err != nil {
		p.o.Logger.WarnContext(ctx, "audit outbox unavailable", "err", err)
		return events
	}
	p.outboxed.Store(true)
	return nil
}

// hold keeps events in memory for the relay: at the front when they were held before
// (their order is kept), else at the back; past MaxHeld the oldest are dropped.
func (p *Publisher) hold(events []Pending, front bool) {
	if len(events) == 0 {
		return
	}
	p.mu.Lock()
	if front {
		p.held = append(append([]Pending(nil), events...), p.held...)
	} else {
		p.held = append(p.held, events...)
	}
	var dropped []Pending
	if over := len(p.held) - p.o.MaxHeld; over > 0 {
		dropped = append(dropped, p.held[:over]...)
		p.held = append([]Pending(nil), p.held[over:]...)
	}
	p.mu.Unlock()
	for _, d := range dropped {
		// The event's own log line was written when it was recorded; this one says it is
		// all that is left of it.
		p.o.Logger.Error("audit event dropped: too many held while the stream and the outbox were unavailable", "audit_event_id", d.ID)
		p.m.dropped.Inc()
	}
}

func (p *Publisher) takeHeld() []Pending {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.held
	p.held = nil
	return h
}

func (p *Publisher) heldCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// Start delivers what a previous run of the service left in the outbox (within
// PublishTimeout), then relays in the background until ctx ends.
func (p *Publisher) Start(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, p.o.PublishTimeout)
	p.ensureStream(sctx)
	p.relay(sctx)
	cancel()
	go p.Run(ctx)
}

// Run relays held and outboxed events to the stream every RelayInterval until ctx
// ends (an event is put aside because the stream did not take it: retrying at once
// would only hammer a stream that is down).
func (p *Publisher) Run(ctx context.Context) {
	p.ensureStream(ctx)
	t := time.NewTicker(p.o.RelayInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.relay(ctx)
		}
	}
}

// relayBatch is how many outboxed events one relay round sends.
const relayBatch = 100

// relay sends what is held in memory (to the stream, else the outbox), then the outbox.
func (p *Publisher) relay(ctx context.Context) {
	p.relayMu.Lock()
	defer p.relayMu.Unlock()
	if held := p.takeHeld(); len(held) > 0 {
		left := p.publish(ctx, held)
		if len(left) > 0 {
			p.ensureStream(ctx)
		}
		p.m.relayed.WithLabelValues("memory").Add(float64(len(held) - len(left)))
		p.hold(p.store(ctx, left), true)
	}
	if p.o.Outbox == nil || p.js == nil || !p.o.NATS.IsConnected() {
		return
	}
	now := time.Now()
	if !p.outboxed.Load() && now.Sub(p.lastSweep) < p.o.OutboxSweep {
		return
	}
	p.lastSweep = now
	p.outboxed.Store(false)
	for ctx.Err() == nil {
		batch, err := p.o.Outbox.Take(ctx, relayBatch)
		if err != nil {
			p.outboxed.Store(true) // look again next tick
			return
		}
		if len(batch) == 0 {
			return
		}
		left := p.publish(ctx, batch)
		sent := make([]string, 0, len(batch))
		for _, pe := range batch {
			if !containsID(left, pe.ID) {
				sent = append(sent, pe.ID)
			}
		}
		if len(sent) > 0 {
			// A failed removal only means these are published again: the stream's
			// duplicate window and the owner's idempotent insert keep them single.
			if err := p.o.Outbox.Remove(ctx, sent); err != nil {
				p.outboxed.Store(true)
				return
			}
			p.m.relayed.WithLabelValues("outbox").Add(float64(len(sent)))
		}
		if len(left) > 0 {
			p.outboxed.Store(true)
			return
		}
		if len(batch) < relayBatch {
			return
		}
	}
}

// ensureStream creates the stream, with the default limits, when it does not exist yet
// (a publisher started before the trail's owner, or NATS lost its state): events wait
// there for the owner, which sets its own limits. It never changes an existing stream.
func (p *Publisher) ensureStream(ctx context.Context) {
	if p.js == nil || !p.o.NATS.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.PublishTimeout)
	defer cancel()
	if _, err := p.js.Stream(ctx, StreamName); !errors.Is(err, jetstream.ErrStreamNotFound) {
		return
	}
	if _, err := p.js.CreateStream(ctx, StreamConfig(DefaultStreamLimits)); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		p.o.Logger.WarnContext(ctx, "audit stream could not be created", "err", err)
	}
}

func containsID(ps []Pending, id string) bool {
	for _, p := range ps {
		if p.ID == id {
			return true
		}
	}
	return false
}

// Flush relays until nothing is held in memory or ctx ends; it reports how many events
// are still held (a command line's last chance before it exits).
func (p *Publisher) Flush(ctx context.Context) int {
	for {
		p.relay(ctx)
		n := p.heldCount()
		if n == 0 || ctx.Err() != nil {
			return n
		}
		select {
		case <-ctx.Done():
			return p.heldCount()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

type publisherMetrics struct {
	recorded *prometheus.CounterVec
	relayed  *prometheus.CounterVec
	dropped  prometheus.Counter
}

func newPublisherMetrics(reg prometheus.Registerer, held func() int) *publisherMetrics {
	m := &publisherMetrics{
		recorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "audit_events_recorded_total",
			Help: "Audit events recorded, by where they went first: stream, outbox, memory (neither took them), log_only (no account).",
		}, []string{"via"}),
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "audit_events_relayed_total", Help: "Audit events relayed to the stream later, from memory or from the outbox.",
		}, []string{"from"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "audit_events_dropped_total", Help: "Audit events dropped because too many were held in memory (their log line remains).",
		}),
	}
	for _, v := range []string{"stream", "outbox", "memory", "log_only"} {
		m.recorded.WithLabelValues(v)
	}
	m.relayed.WithLabelValues("memory")
	m.relayed.WithLabelValues("outbox")
	if reg != nil {
		reg.MustRegister(m.recorded, m.relayed, m.dropped, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "audit_events_held", Help: "Audit events held in memory, waiting for the stream or the outbox.",
		}, func() float64 { return float64(held()) }))
	}
	return m
}
