package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Each deployment's subject has its own durable pull consumer (explicit acks,
// redelivery after ackWait, at most MaxRunningJobs messages pending: the deployment's
// running limit, held by the server across every worker). A worker's free slot asks the
// stream which subjects hold messages, orders them with dbtsync.FairScheduler and
// fetches one message from the first consumer that has one to give. A core subscription
// on the subjects wakes idle workers when a job is published; redeliveries are found by
// polling.

// pollInterval is how often an idle worker looks for redelivered jobs (retries, jobs
// waiting for their branch, jobs of a worker that died).
const pollInterval = 500 * time.Millisecond

// Consume hands jobs to handle, each in its own goroutine, at most concurrency at once,
// fairly across deployments and accounts, until ctx ends. Jobs in flight when ctx ends
// are neither acknowledged nor retried: JetStream delivers them again after ackWait, as
// after a crash. A message that is no job message is dropped; transient errors are
// logged.
func (q *Queue) Consume(ctx context.Context, concurrency int, ackWait time.Duration, handle func(context.Context, dbtsync.Delivery)) error {
	// The single consumer of old filtered every subject, which a work queue allows no
	// other consumer beside.
	if err := q.do(ctx, func(ctx context.Context) error {
		return q.stream.DeleteConsumer(ctx, q.names.Workers)
	}); err != nil && !errors.Is(err, natsjs.ErrConsumerNotFound) {
		return fmt.Errorf("workers consumer of old: %w", err)
	}
	wake := make(chan struct{}, 1)
	sub, err := q.nc.Subscribe(q.names.Subject+".>", func(*nats.Msg) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	f := &fairFeed{q: q, ackWait: ackWait, consumers: map[string]natsjs.Consumer{}}
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		msg := f.next(ctx, wake)
		if msg == nil {
			return nil // ctx ended
		}
		var jm jobMessage
		if err := json.Unmarshal(msg.Data(), &jm); err != nil || jm.SyncJobID == "" {
			_ = msg.Term()
			<-sem
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// The job's span continues the trace of the request that queued it.
			jctx := otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(msg.Headers()))
			handle(jctx, delivery{msg: msg, job: jm})
		}()
	}
}

// fairFeed is one worker's view of the deployments' queues.
type fairFeed struct {
	q         *Queue
	ackWait   time.Duration
	sched     dbtsync.FairScheduler
	consumers map[string]natsjs.Consumer // by subject
}

// next returns the next message in fair order, waiting for one; nil once ctx ends.
func (f *fairFeed) next(ctx context.Context, wake <-chan struct{}) natsjs.Msg {
	for {
		if msg := f.try(ctx); msg != nil {
			return msg
		}
		select {
		case <-wake:
		case <-time.After(pollInterval):
		case <-ctx.Done():
			return nil
		}
	}
}

// try fetches one message from the first queue, in the scheduler's order, that gives one.
func (f *fairFeed) try(ctx context.Context) natsjs.Msg {
	info, err := f.q.stream.Info(ctx, natsjs.WithSubjectFilter(f.q.names.Subject+".>"))
	if err != nil {
		if ctx.Err() == nil {
			f.q.logger.Warn("job queue", "err", err)
		}
		return nil
	}
	keys := make([]dbtsync.QueueKey, 0, len(info.State.Subjects))
	subjects := map[dbtsync.QueueKey]string{}
	for subj := range info.State.Subjects {
		k, ok := f.q.queueKey(subj)
		if !ok {
			continue
		}
		keys = append(keys, k)
		subjects[k] = subj
	}
	for _, k := range f.sched.Order(keys) {
		msg, err := f.fetch(ctx, subjects[k])
		if err != nil {
			if ctx.Err() == nil {
				f.q.logger.Warn("job queue", "subject", subjects[k], "err", err)
			}
			continue
		}
		if msg != nil {
			f.sched.Served(k)
			return msg
		}
	}
	return nil
}

// fetch takes a message of subj, if its consumer gives one now (none when the
// deployment has its running limit of messages pending, or none ready).
func (f *fairFeed) fetch(ctx context.Context, subj string) (natsjs.Msg, error) {
	cons, err := f.consumer(ctx, subj)
	if err != nil {
		return nil, err
	}
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		delete(f.consumers, subj) // gone (an idle consumer is removed): made again next time
		return nil, err
	}
	for msg := range batch.Messages() {
		return msg, nil
	}
	return nil, nil
}

// consumer returns subj's consumer, made (or updated to the current limits) on first use.
func (f *fairFeed) consumer(ctx context.Context, subj string) (natsjs.Consumer, error) {
	if c, ok := f.consumers[subj]; ok {
		return c, nil
	}
	name := f.q.names.Workers + "_" + strings.ReplaceAll(strings.TrimPrefix(subj, f.q.names.Subject+"."), ".", "_")
	c, err := f.q.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: name, FilterSubject: subj, AckPolicy: natsjs.AckExplicitPolicy, AckWait: f.ackWait,
		MaxDeliver: -1, MaxAckPending: f.q.limits.MaxRunningJobs, InactiveThreshold: time.Hour,
	})
	if err != nil {
		return nil, err
	}
	f.consumers[subj] = c
	return c, nil
}

// queueKey reads a deployment's queue from its subject: <Subject>.<account>.<deployment>,
// or <Subject>.<deployment> for a job queued before subjects named accounts.
func (q *Queue) queueKey(subj string) (dbtsync.QueueKey, bool) {
	parts := strings.Split(strings.TrimPrefix(subj, q.names.Subject+"."), ".")
	var nums []int64
	for _, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return dbtsync.QueueKey{}, false
		}
		nums = append(nums, n)
	}
	switch len(nums) {
	case 1:
		return dbtsync.QueueKey{Account: -1, Deployment: nums[0]}, true
	case 2:
		return dbtsync.QueueKey{Account: nums[0], Deployment: nums[1]}, true
	}
	return dbtsync.QueueKey{}, false
}

// delivery is a JetStream message naming a job.
type delivery struct {
	msg natsjs.Msg
	job jobMessage
}

func (d delivery) DeploymentID() int64       { return d.job.DeploymentID }
func (d delivery) SyncJobID() string         { return d.job.SyncJobID }
func (d delivery) Ack()                      { _ = d.msg.Ack() }
func (d delivery) Retry(delay time.Duration) { _ = d.msg.NakWithDelay(delay) }
func (d delivery) Discard()                  { _ = d.msg.Term() }
func (d delivery) KeepAlive()                { _ = d.msg.InProgress() }
