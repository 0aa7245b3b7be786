// Package mongox connects to MongoDB with the command monitoring every service uses:
// a span per command, and an optional counter so tests and benchmarks can count round
// trips (the honest cost measure on FerretDB, whose timings say nothing about MongoDB).
// Every client writes with majority, journaled write concern and reads from the primary
// (clientOptions), and its timeouts outlast an election; Unavailable tells the errors
// of a database that cannot answer now from those of a bad command.
package mongox

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// CommandCounter counts the commands a client sends, by command name.
type CommandCounter struct {
	total  atomic.Int64
	reply  atomic.Int64 // bytes of the replies to counted commands
	docs   atomic.Int64 // documents returned by counted commands
	mu     sync.Mutex
	byName map[string]int64
}

// Total is the number of commands started since the last Reset.
func (c *CommandCounter) Total() int64 { return c.total.Load() }

// ReplyBytes is the size of the server's replies to the counted commands since the last
// Reset: what the client read, the measure of a query that reads more than it needs.
func (c *CommandCounter) ReplyBytes() int64 { return c.reply.Load() }

// Documents is the number of documents the server returned to the counted commands since
// the last Reset (cursor batches and findAndModify values): what the requests read.
func (c *CommandCounter) Documents() int64 { return c.docs.Load() }

// ByName returns a copy of the per-command counts.
func (c *CommandCounter) ByName() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.byName))
	for k, v := range c.byName {
		out[k] = v
	}
	return out
}

// Reset sets the counts to zero.
func (c *CommandCounter) Reset() {
	c.mu.Lock()
	c.byName = nil
	c.total.Store(0)
	c.reply.Store(0)
	c.docs.Store(0)
	c.mu.Unlock()
}

func (c *CommandCounter) add(name string) {
	c.total.Add(1)
	c.mu.Lock()
	if c.byName == nil {
		c.byName = map[string]int64{}
	}
	c.byName[name]++
	c.mu.Unlock()
}

// handshake commands are the driver's own connection upkeep, not our round trips.
var handshake = map[string]bool{"hello": true, "isMaster": true, "ismaster": true, "saslStart": true, "saslContinue": true, "endSessions": true, "ping": true, "buildInfo": true, "getFreeMonitoringStatus": true}

// Connect opens a client for uri with a span per command, counting commands in
// counter when it is not nil.
func Connect(ctx context.Context, uri string, counter *CommandCounter) (*mongo.Client, error) {
	return ConnectWithMetrics(ctx, uri, counter, nil)
}

// ConnectWithMetrics is Connect that also feeds metrics (nil: none), the process's
// mongodb_client_* counters.
func ConnectWithMetrics(ctx context.Context, uri string, counter *CommandCounter, metrics *Metrics) (*mongo.Client, error) {
	return ConnectWith(ctx, uri, ConnectOptions{Counter: counter, Metrics: metrics})
}

// ConnectOptions are what a client reports beside its spans, each optional.
type ConnectOptions struct {
	// Counter counts the commands sent, by name.
	Counter *CommandCounter
	// Metrics are the process's mongodb_client_* counters.
	Metrics *Metrics
	// Observe is called with every command the client starts (handshakes included), in
	// the goroutine that sends it, so the caller's stack is the code that built it: how
	// tests hold each command against the indexes (devstack/mongoplan). It must not block.
	Observe func(context.Context, *event.CommandStartedEvent)
}

// ConnectWith opens a client for uri with a span per command and what o asks for.
func ConnectWith(ctx context.Context, uri string, o ConnectOptions) (*mongo.Client, error) {
	counter, metrics := o.Counter, o.Metrics
	tracer := otel.Tracer("mongo")
	var spans sync.Map  // request id -> trace.Span
	var labels sync.Map // request id -> [2]string (command, collection labels)
	monitor := &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			if o.Observe != nil {
				o.Observe(ctx, e)
			}
			if counter != nil && !handshake[e.CommandName] {
				counter.add(e.CommandName)
			}
			if metrics != nil && !handshake[e.CommandName] {
				cmd, coll := metrics.started(e)
				labels.Store(e.RequestID, [2]string{cmd, coll})
			}
			_, span := tracer.Start(ctx, "mongo."+e.CommandName, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("db.system", "mongodb"), attribute.String("db.name", e.DatabaseName), attribute.String("db.operation", e.CommandName)))
			spans.Store(e.RequestID, span)
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			if counter != nil && !handshake[e.CommandName] {
				counter.reply.Add(int64(len(e.Reply)))
				counter.docs.Add(int64(returned(e.CommandName, e.Reply)))
			}
			if l, ok := labels.LoadAndDelete(e.RequestID); ok {
				lv := l.([2]string)
				metrics.succeeded(lv[0], lv[1], e)
			}
			if s, ok := spans.LoadAndDelete(e.RequestID); ok {
				s.(trace.Span).End()
			}
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			if l, ok := labels.LoadAndDelete(e.RequestID); ok {
				lv := l.([2]string)
				metrics.failed(lv[0], lv[1])
			}
			if s, ok := spans.LoadAndDelete(e.RequestID); ok {
				span := s.(trace.Span)
				span.SetStatus(codes.Error, e.Failure.Error())
				span.End()
			}
		},
	}
	opts, err := clientOptions(uri)
	if err != nil {
		return nil, err
	}
	opts.SetMonitor(monitor)
	if metrics != nil {
		opts.SetServerMonitor(&event.ServerMonitor{
			ServerHeartbeatFailed: func(*event.ServerHeartbeatFailedEvent) { metrics.heartbeats.Inc() },
		})
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("mongo connect: %w", err)
	}
	return client, nil
}

// Ping is a readiness check: whether the process reaches the replica set, any member of
// it. It pings the primary when there is one and a secondary otherwise (primaryPreferred),
// so an election does not take every replica of every service out of its load balancer
// at once: while no primary is elected, reads that need it and writes answer 503 (their
// errors are Unavailable) and the process stays ready to answer again the moment one is.
func Ping(client *mongo.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		return client.Ping(ctx, readpref.PrimaryPreferred())
	}
}

// IDAllocator hands out integer ids from blocks reserved atomically in a counters
// collection, so several replicas allocate at once without contending on one document
// per id: one findAndModify per block of Block ids.
type IDAllocator struct {
	coll  *mongo.Collection
	name  string
	block int64
	mu    sync.Mutex
	next  int64
	limit int64
}

// NewIDAllocator allocates ids named name (the counter document's _id) in blocks.
func NewIDAllocator(counters *mongo.Collection, name string, block int64) *IDAllocator {
	if block < 1 {
		block = 1
	}
	return &IDAllocator{coll: counters, name: name, block: block}
}

// Next returns a fresh id (ids start at 1 and never repeat).
func (a *IDAllocator) Next(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == 0 || a.next > a.limit {
		var doc struct {
			Seq int64 `bson:"seq"`
		}
		err := a.coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: a.name}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "seq", Value: a.block}}}},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&doc)
		if err != nil {
			return 0, fmt.Errorf("allocate ids %s: %w", a.name, err)
		}
		a.limit = doc.Seq
		a.next = doc.Seq - a.block + 1
	}
	id := a.next
	a.next++
	return id, nil
}
