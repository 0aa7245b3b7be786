package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Consume pulls jobs with the workers' durable consumer (explicit acks, redelivery after
// ackWait) and hands each to handle in its own goroutine, at most concurrency at once.
// Jobs in flight when ctx ends are neither acknowledged nor retried: JetStream delivers
// them again after ackWait, as after a crash. A message that is no job message is
// dropped; transient pull errors are logged.
func (q *Queue) Consume(ctx context.Context, concurrency int, ackWait time.Duration, handle func(context.Context, dbtsync.Delivery)) error {
	cons, err := q.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: q.names.Workers, AckPolicy: natsjs.AckExplicitPolicy, AckWait: ackWait,
		MaxDeliver: -1, FilterSubject: q.names.Subject + ".>", MaxAckPending: 10000,
	})
	if err != nil {
		return fmt.Errorf("workers consumer: %w", err)
	}
	it, err := cons.Messages(natsjs.PullMaxMessages(concurrency))
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, natsjs.ErrMsgIteratorClosed) {
				return nil
			}
			q.logger.Warn("job queue", "err", err)
			continue
		}
		var jm jobMessage
		if err := json.Unmarshal(msg.Data(), &jm); err != nil || jm.SyncJobID == "" {
			_ = msg.Term()
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
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
