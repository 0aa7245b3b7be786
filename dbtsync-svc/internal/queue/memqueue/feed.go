package memqueue

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// depQueue is one deployment's queue, as the JetStream adapter's subject and consumer
// for it: deliveries ready to hand out, and the count of those handed out and not yet
// settled (a retry waiting its delay included), bounded by the running limit.
type depQueue struct {
	ready []*delivery
	out   int
	jobs  int // queued or running: ready, out, and waiting for a redelivery
}

// queueOf returns the deployment's queue; q.mu is held.
func (q *Queue) queueOf(k dbtsync.QueueKey) *depQueue {
	dq := q.queues[k]
	if dq == nil {
		dq = &depQueue{}
		q.queues[k] = dq
	}
	return dq
}

// ready makes d available again (first in its queue, as JetStream redelivers before
// delivering new messages) and wakes the consumers; back is a redelivery.
func (q *Queue) ready(d *delivery, back bool) {
	q.mu.Lock()
	dq := q.queueOf(d.key)
	if back {
		dq.out--
		dq.ready = append([]*delivery{d}, dq.ready...)
	} else {
		dq.ready = append(dq.ready, d)
	}
	q.mu.Unlock()
	q.poke()
}

func (q *Queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next hands out the next delivery in the scheduler's order, or nil when no queue may
// hand one out now; q.mu is held.
func (q *Queue) next(s *dbtsync.FairScheduler) *delivery {
	var keys []dbtsync.QueueKey
	for k, dq := range q.queues {
		if len(dq.ready) > 0 {
			keys = append(keys, k)
		}
	}
	for _, k := range s.Order(keys) {
		dq := q.queues[k]
		if dq.out >= q.limits.MaxRunning {
			continue
		}
		d := dq.ready[0]
		dq.ready = dq.ready[1:]
		dq.out++
		s.Served(k)
		return d
	}
	return nil
}

// Consume hands deliveries to handle, each in its own goroutine, at most concurrency at
// once, fairly across queues, until ctx ends. A delivery not settled (acknowledged,
// retried or discarded) within ackWait of its last KeepAlive is delivered again.
func (q *Queue) Consume(ctx context.Context, concurrency int, ackWait time.Duration, handle func(context.Context, dbtsync.Delivery)) error {
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	var sched dbtsync.FairScheduler
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		var d *delivery
		for d == nil {
			q.mu.Lock()
			d = q.next(&sched)
			q.mu.Unlock()
			if d != nil {
				break
			}
			select {
			case <-q.wake:
			case <-ctx.Done():
				return nil
			}
		}
		// Another consumer may be waiting as well: let it look too.
		q.poke()
		d.arm(ackWait) // from here on, it comes back unless settled in time
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
	key     dbtsync.QueueKey
	id      string
	trace   propagation.MapCarrier
	mu      sync.Mutex
	settled bool
	ackWait time.Duration
	timer   *time.Timer
}

func (d *delivery) DeploymentID() int64 { return d.key.Deployment }
func (d *delivery) SyncJobID() string   { return d.id }

// again is a new delivery of the same job.
func (d *delivery) again() *delivery {
	return &delivery{q: d.q, key: d.key, id: d.id, trace: d.trace}
}

func (d *delivery) arm(ackWait time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ackWait = ackWait
	d.timer = time.AfterFunc(ackWait, func() {
		if d.settle() {
			d.q.ready(d.again(), true)
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

// done takes the job out of its queue.
func (d *delivery) done() {
	if !d.settle() {
		return
	}
	d.q.mu.Lock()
	dq := d.q.queueOf(d.key)
	dq.out--
	dq.jobs--
	if dq.jobs == 0 && len(dq.ready) == 0 {
		delete(d.q.queues, d.key)
	}
	d.q.mu.Unlock()
	d.q.poke()
}

func (d *delivery) Ack()     { d.done() }
func (d *delivery) Discard() { d.done() }

// Retry delivers the job again after delay; until then it still counts against its
// deployment's running limit, as a JetStream NAK with a delay does.
func (d *delivery) Retry(delay time.Duration) {
	if d.settle() {
		time.AfterFunc(delay, func() { d.q.ready(d.again(), true) })
	}
}

func (d *delivery) KeepAlive() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.settled && d.timer != nil {
		d.timer.Reset(d.ackWait)
	}
}
