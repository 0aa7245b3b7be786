package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/natsx"
)

// A job's cancel watch is a consumer the server creates on request. A request that is
// never answered (on a cluster: sent to a server lost mid-call, or to a meta leader
// being replaced, which drops it) fails unavailable within the retry budget, long
// before the job's own deadline; before, the worker waited for that deadline (15m)
// with the job running and its delivery kept alive, and its other jobs queued behind
// it. Here the server drops the requests: the queue's user may not send them.
func TestACancelWatchWhoseConsumerIsNeverCreatedFailsUnavailableBeforeTheJobsDeadline(t *testing.T) {
	t.Parallel()
	names := clusterNames(t)
	n := devstack.NATSForTest(t, devstack.NATSUserDenied("nowatch", "$JS.API.CONSUMER.CREATE.KV_"+names.KV+".>"))
	q, err := jetstream.Open(context.Background(), devstack.NATSConnForTest(t, n.URL), jetstream.Options{Names: names,
		Limits: jetstream.Limits{ObjectMaxBytes: 8 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	j := job(1, "main")
	enqueue(t, q, j)
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}) // the server's refusals, expected
	q, err = jetstream.Open(context.Background(), devstack.NATSConnForTest(t, n.UserURL("nowatch"), quiet), jetstream.Options{Names: names,
		Limits: jetstream.Limits{ObjectMaxBytes: 8 << 20}, Retry: natsx.Retrier{Budget: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := q.Job(context.Background(), dep, j.SyncJobID); err != nil || got.SyncJobID != j.SyncJobID {
		t.Fatalf("the job read by the watching queue: %v, %v", got.SyncJobID, err)
	}

	ctx := contextWithin(t, time.Minute) // the job's deadline
	requested, err := q.WatchCancel(ctx, dep, j.SyncJobID)
	if !errors.Is(err, dbtsync.ErrQueueUnavailable) || requested != nil || ctx.Err() != nil {
		t.Fatalf("watch: %v (the job's deadline: %v); want unavailable before the deadline", err, ctx.Err())
	}
}
