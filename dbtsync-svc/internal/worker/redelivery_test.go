package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/audit"
)

// What a redelivery may do to a job (its acknowledgement lost in a leader change, its
// worker silent past AckWait while it still ran, its worker stopped mid-job): the job
// ends once, with one run's result, one finish event, and one charge for its result.

// finishEvents are the job's finish events recorded so far.
func (f *fixture) finishEvents(id string) []audit.Event {
	var out []audit.Event
	for _, ev := range f.audit.Events() {
		if ev.Action == dbtsync.ActionSyncFinish && ev.Target.ID == id {
			out = append(out, ev)
		}
	}
	return out
}

// settled waits (10 s at most) for the job's finish event, the last thing a worker does
// when it ends a job (after its status, its line and its upload), and returns the job's
// finish events then.
func (f *fixture) settled(t *testing.T, id string) []audit.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fin := f.finishEvents(id); len(fin) > 0 {
			return fin
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s ended without a finish event", id)
		}
		time.Sleep(5 * time.Millisecond) // polling interval of a deadline loop
	}
}

// A run whose job another run took over (started again, and ended, while the first
// still converted) writes nothing and records no end: the job keeps the other run's
// outcome, its branch no version of the first run, and its one finish event says what
// the other run did.
func TestARunTakenOverByAnotherWritesAndEndsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	var once sync.Once
	f.start(t, worker.Options{AckWait: 300 * time.Millisecond, Phase: func(ctx context.Context, id, phase string) {
		if phase != "converting" {
			return
		}
		once.Do(func() { // another worker starts the job again and ends it
			now := time.Now().UTC()
			if _, err := f.queue.UpdateJob(ctx, dep, id, func(j *dbtsync.Job) error {
				j.Runs++
				j.Status, j.FinishedAt, j.Version, j.FinishedByWorker = dbtsync.StatusSucceeded, &now, 7, true
				return nil
			}); err != nil {
				t.Error(err)
			}
		})
	}})
	id := f.sync(t, "taken", manifest("a"))
	f.wait(t, id)
	if j, err := f.queue.Job(context.Background(), dep, id); err != nil || j.Status != dbtsync.StatusSucceeded || j.Version != 7 || j.Runs != 2 {
		t.Errorf("job %+v (%v): want the other run's outcome (version 7)", j, err)
	}
	if _, err := f.store.Branch(context.Background(), dep, "taken"); !errors.Is(err, dbtsync.ErrNotFound) {
		t.Errorf("the run taken over wrote its branch (%v)", err)
	}
	// The redelivery to the worker records the other run's event.
	apitest.Eventually(t, 10*time.Second, "a finish event", func() (bool, string) { return len(f.finishEvents(id)) > 0, "none" })
	fin := f.finishEvents(id)
	if len(fin) != 1 || fin[0].Details["version"] != int64(7) {
		t.Errorf("finish events %+v: want one, of the other run's version 7", fin)
	}
}

// lossyAcks drops the first acknowledgement of every job, as a leader change may: the
// queue delivers the job again after AckWait.
type lossyAcks struct {
	dbtsync.JobFeed
	mu   sync.Mutex
	seen map[string]bool
}

func (l *lossyAcks) Consume(ctx context.Context, n int, ackWait time.Duration, handle func(context.Context, dbtsync.Delivery)) error {
	return l.JobFeed.Consume(ctx, n, ackWait, func(ctx context.Context, d dbtsync.Delivery) {
		l.mu.Lock()
		lose := !l.seen[d.SyncJobID()]
		l.seen[d.SyncJobID()] = true
		l.mu.Unlock()
		handle(ctx, lostAck{Delivery: d, lose: lose})
	})
}

type lostAck struct {
	dbtsync.Delivery
	lose bool
}

func (d lostAck) Ack() {
	if !d.lose {
		d.Delivery.Ack()
	}
}

// A finished job delivered again (its acknowledgement was lost) records its finish event
// again, the same event under the same id, so the trail stores it once even when the
// worker stopped before its first recording was safe; the job is not run again.
func TestAFinishedJobDeliveredAgainRecordsTheSameFinishEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	w := worker.New(worker.Ports{Jobs: f.queue, Feed: &lossyAcks{JobFeed: f.queue, seen: map[string]bool{}}, Manifests: f.queue,
		Ledgers: f.queue, Branches: f.store, Integrations: f.store, Git: f.git}, dbtsync.NewMetrics(prometheus.NewRegistry()), f.logger,
		worker.Options{AckWait: 200 * time.Millisecond, BlockedDelay: 10 * time.Millisecond, Audit: f.audit})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	id := f.sync(t, "again", manifest("a"))
	if j := f.wait(t, id); j.Status != dbtsync.StatusSucceeded || j.Attempts != 1 {
		t.Fatalf("job %+v", j)
	}
	apitest.Eventually(t, 10*time.Second, "the event recorded again on the redelivery", func() (bool, string) {
		return len(f.finishEvents(id)) >= 2, "once"
	})
	fin := f.finishEvents(id)
	if len(fin) != 2 || fin[0].ID != fin[1].ID || !fin[0].Time.Equal(fin[1].Time) || fin[0].Details["version"] != fin[1].Details["version"] {
		t.Fatalf("finish events %+v: want the same event twice (recorded, then again on the redelivery)", fin)
	}
	if b, _ := f.store.Branch(context.Background(), dep, "again"); b.LatestVersion != 1 || len(b.Versions) != 1 {
		t.Errorf("branch %+v: the redelivered job ran again", b)
	}
}

// A files job whose worker stopped after it stored the result, before it recorded the
// end, runs again on the redelivery: the new result replaces the old one, and so does
// its charge; the deployment is charged one result, not two.
func TestAFilesJobRunAgainIsChargedItsResultOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	var stopFirst func()
	var once sync.Once
	committed := make(chan struct{})
	opts := worker.Options{AckWait: 200 * time.Millisecond, Phase: func(ctx context.Context, _, phase string) {
		if phase == "committed" {
			once.Do(func() {
				close(committed)
				<-ctx.Done() // the worker stops here: no end recorded
			})
		}
	}}
	stopFirst = f.start(t, opts)
	res, err := f.svc.StartSync(context.Background(), developer, dep, filesSync(manifest("a", "b")))
	if err != nil {
		t.Fatal(err)
	}
	<-committed
	stopFirst()
	f.start(t, opts)
	j := f.wait(t, res.Accepted.SyncJobID)
	stored, _ := f.queue.Job(context.Background(), dep, res.Accepted.SyncJobID)
	if j.Status != dbtsync.StatusSucceeded || stored.Runs != 2 || stored.ResultCharge.Stored == 0 {
		t.Fatalf("job %+v (runs %d, result charge %+v)", j, stored.Runs, stored.ResultCharge)
	}
	if used := f.used(t); used != stored.ResultCharge.Stored {
		t.Errorf("the deployment is charged %d bytes, want its one result's %d", used, stored.ResultCharge.Stored)
	}
}
