package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/queuetest"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
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
	j := queuetest.Job(1, "main")
	queuetest.Enqueue(t, q, j)
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}) // the server's refusals, expected
	q, err = jetstream.Open(context.Background(), devstack.NATSConnForTest(t, n.UserURL("nowatch"), quiet), jetstream.Options{Names: names,
		Limits: jetstream.Limits{ObjectMaxBytes: 8 << 20}, Retry: natsx.Retrier{Budget: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := q.Job(context.Background(), queuetest.Dep, j.SyncJobID); err != nil || got.SyncJobID != j.SyncJobID {
		t.Fatalf("the job read by the watching queue: %v, %v", got.SyncJobID, err)
	}

	ctx := contextWithin(t, time.Minute) // the job's deadline
	requested, err := q.WatchCancel(ctx, queuetest.Dep, j.SyncJobID)
	if !errors.Is(err, dbtsync.ErrQueueUnavailable) || requested != nil || ctx.Err() != nil {
		t.Fatalf("watch: %v (the job's deadline: %v); want unavailable before the deadline", err, ctx.Err())
	}
}

// While the job bucket's leader is killed and elected again, workers keep making cancel
// watches (one per job they start): each is made, or refused unavailable, long before
// its job's deadline (nats.go alone waited for that deadline, each of four such watches
// in most runs, as the natsha suite's workers did with every slot), and a watch made
// once the cluster is whole again sees the job's cancel.
func TestCancelWatchesAcrossAKilledLeaderEndBeforeTheJobsDeadline(t *testing.T) {
	t.Parallel()
	c := devstack.NATSClusterForTest(t, 3)
	names := clusterNames(t)
	q := openQueue(t, clusterConn(t, c), names, 3)
	j := queuetest.Job(1, "main")
	queuetest.Enqueue(t, q, j)

	var mu sync.Mutex
	var made, refused int
	var late []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 { // two workers' slots
		untilStopped(&wg, stop, func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the job's deadline
			defer cancel()                                                        // ends the watch
			_, err := q.WatchCancel(ctx, queuetest.Dep, j.SyncJobID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ctx.Err() != nil:
				late = append(late, fmt.Sprint(err))
			case err == nil:
				made++
			case errors.Is(err, dbtsync.ErrQueueUnavailable):
				refused++
			default:
				t.Errorf("watch: %v", err)
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return made + refused + len(late) }
	apitest.Eventually(t, 30*time.Second, "watches before the kill", func() (bool, string) { return count() > 8, "" })
	leader, err := c.StreamLeader(context.Background(), "KV_"+names.KV)
	if err != nil || leader < 0 {
		t.Fatalf("leader of the job bucket: %d %v", leader, err)
	}
	c.Kill(leader)
	after := count()
	apitest.Eventually(t, 2*time.Minute, "watches made again after the kill", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return made+refused+len(late) > after+8, fmt.Sprintf("%d made, %d refused, %d at the deadline", made, refused, len(late))
	})
	if err := c.Restart(contextWithin(t, 2*time.Minute), leader); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d watches made, %d refused unavailable", made, refused)
	if len(late) > 0 {
		t.Errorf("%d watches ended at their job's deadline: %v", len(late), late)
	}

	queuetest.CancelIsSeen(contextWithin(t, time.Minute), t, q, j)
}
