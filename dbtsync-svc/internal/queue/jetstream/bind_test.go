package jetstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/queuetest"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/natsx"
)

// usersOnly is a nats-server where every connection is a platform user
// (devstack.NATSUsers), and conn connects as one of them.
func usersOnly(t *testing.T) (conn func(user string) *nats.Conn) {
	t.Helper()
	n := devstack.NATSForTest(t, devstack.NATSUsersOnly())
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}) // refusals are expected
	return func(user string) *nats.Conn { return devstack.NATSConnForTest(t, n.UserURL(user), quiet) }
}

var storage = jetstream.Limits{ObjectMaxBytes: 8 << 20}

// The worker's NATS user may not create or update the pipeline's streams: its queue
// binds to what dbtsync-svc made. Started first, it waits for dbtsync-svc, then binds
// and takes the job dbtsync-svc queued; a worker that tried to bring the stream to its
// own settings, as the API process does, is refused.
func TestTheWorkersQueueWaitsForAndBindsToWhatDbtsyncSvcMakes(t *testing.T) {
	t.Parallel()
	conn := usersOnly(t)
	worker := conn("dbtsync-worker")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type opened struct {
		q   *jetstream.Queue
		err error
	}
	bound := make(chan opened, 1)
	go func() {
		q, err := jetstream.Open(ctx, worker, jetstream.Options{Bind: true, Limits: storage})
		bound <- opened{q, err}
	}()
	select {
	case o := <-bound:
		t.Fatalf("the worker's queue opened before dbtsync-svc made the streams: %v", o.err)
	case <-time.After(time.Second):
	}

	api, err := jetstream.Open(ctx, conn("dbtsync-svc"), jetstream.Options{Limits: storage})
	if err != nil {
		t.Fatalf("dbtsync-svc makes the pipeline: %v", err)
	}
	var w opened
	select {
	case w = <-bound:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's queue did not bind within 10s of dbtsync-svc making the pipeline")
	}
	if w.err != nil {
		t.Fatalf("the worker binds: %v", w.err)
	}
	j := queuetest.Job(1, "main")
	queuetest.Enqueue(t, api, j)
	if got, err := w.q.Job(ctx, queuetest.Dep, j.SyncJobID); err != nil || got.SyncJobID != j.SyncJobID {
		t.Fatalf("the worker reads the job dbtsync-svc queued: %+v %v", got, err)
	}
	taken := make(chan string, 1)
	queuetest.Consume(t, w.q, 1, 5*time.Second, func(_ context.Context, d dbtsync.Delivery) {
		select {
		case taken <- d.SyncJobID():
		default:
		}
		d.Ack()
	})
	select {
	case id := <-taken:
		if id != j.SyncJobID {
			t.Fatalf("the worker took %s, want %s", id, j.SyncJobID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker took no job within 10s")
	}

	// Bringing the stream to other settings is an update, which the worker's user may not send.
	_, err = jetstream.Open(ctx, worker, jetstream.Options{Limits: jetstream.Limits{ObjectMaxBytes: 8 << 20, MaxQueuedJobs: 3},
		Retry: natsx.Retrier{Budget: time.Second}})
	if err == nil {
		t.Fatal("the worker's user updated the jobs stream")
	}
}

// A worker whose dbtsync-svc never makes the pipeline gives up when its start's context
// ends, naming what is missing and who makes it.
func TestTheWorkersQueueGivesUpNamingWhatDbtsyncSvcHasNotMade(t *testing.T) {
	t.Parallel()
	conn := usersOnly(t)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := jetstream.Open(ctx, conn("dbtsync-worker"), jetstream.Options{Bind: true, Limits: storage})
	if err == nil || !strings.Contains(err.Error(), "jobs stream not created by dbtsync-svc") {
		t.Fatalf("open = %v, want the jobs stream named as not made by dbtsync-svc", err)
	}
}
