package memqueue

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// deliver hands d to a consumer, now or as soon as one takes it (never blocking the
// caller, which may hold the lock).
func (q *Queue) deliver(d *delivery) {
	select {
	case q.pending <- d:
	default:
		go func() { q.pending <- d }()
	}
}

// Consume hands every delivery to handle in its own goroutine, at most concurrency at
// once, until ctx ends. A delivery not settled (acknowledged, retried or discarded)
// within ackWait of its last KeepAlive is delivered again.
func (q *Queue) Consume(ctx context.Context, concurrency int, ackWait time.Duration, handle func(context.Context, dbtsync.Delivery)) error {
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		var d *delivery
		select {
		case <-ctx.Done():
			return nil
		case d = <-q.pending:
		}
		d.arm(ackWait) // from here on, it comes back unless settled in time
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			handle(otel.GetTextMapPropagator().Extract(ctx, d.trace), d)
		}()
	}
}

// delivery is one delivery of a job.
type delivery struct {
	q       *Queue
	dep     int64
	id      string
	trace   propagation.MapCarrier
	mu      sync.Mutex
	settled bool
	ackWait time.Duration
	timer   *time.Timer
}

func (d *delivery) DeploymentID() int64 { return d.dep }
func (d *delivery) SyncJobID() string   { return d.id }

// again is a new delivery of the same job.
func (d *delivery) again() *delivery {
	return &delivery{q: d.q, dep: d.dep, id: d.id, trace: d.trace}
}

func (d *delivery) arm(ackWait time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ackWait = ackWait
	d.timer = time.AfterFunc(ackWait, func() {
		if d.settle() {
			d.q.deliver(d.again())
		}
	})
}

// settle marks the delivery answered; false when it already was.
func (d *delivery) settle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled {
		return false
	}
	d.settled = true
	if d.timer != nil {
		d.timer.Stop()
	}
	return true
}

func (d *delivery) Ack()     { d.settle() }
func (d *delivery) Discard() { d.settle() }

func (d *delivery) Retry(delay time.Duration) {
	if d.settle() {
		time.AfterFunc(delay, func() { d.q.deliver(d.again()) })
	}
}

func (d *delivery) KeepAlive() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.settled && d.timer != nil {
		d.timer.Reset(d.ackWait)
	}
}
