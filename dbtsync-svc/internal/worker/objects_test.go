package worker_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/errs"
)

// unreachableAPI is the API's object removal (dbtsync.JobObjects) unreachable for its
// first fails requests of each kind, then removing from the fixture's store.
type unreachableAPI struct {
	f     *fixture
	fails int
	mu    sync.Mutex
	calls map[string]int
}

func (u *unreachableAPI) call(kind string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls[kind]++
	if u.calls[kind] <= u.fails {
		return errors.Join(errs.ErrUnavailable, errors.New("no responders"))
	}
	return nil
}

func (u *unreachableAPI) count(kind string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[kind]
}

func (u *unreachableAPI) RemoveManifest(ctx context.Context, job dbtsync.Job) (bool, error) {
	if err := u.call(dbtsync.ObjectManifest); err != nil {
		return false, err
	}
	return u.f.queue.DeleteManifest(ctx, job.ManifestJobID())
}

func (u *unreachableAPI) RemoveResult(context.Context, dbtsync.Job) error {
	return u.call(dbtsync.ObjectResult)
}

// startWith runs a worker whose object removals go to objects.
func (f *fixture) startWith(t *testing.T, opts worker.Options, objects dbtsync.JobObjects) (stop func()) {
	opts.AckWait, opts.BlockedDelay, opts.Audit = 5*time.Second, 10*time.Millisecond, f.audit
	opts.Backoff = func(int) time.Duration { return 10 * time.Millisecond }
	w := worker.New(worker.Ports{Jobs: f.queue, Feed: f.queue, Manifests: f.queue, Ledgers: f.queue, Branches: f.store, Integrations: f.store, Git: f.git,
		Objects: objects}, dbtsync.NewMetrics(prometheus.NewRegistry()), f.logger, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// A succeeded job's upload is removed through the API even while the API cannot be
// reached at first: the job ends succeeded, its delivery asks again until the upload is
// removed, and its charge is freed once.
func TestAnUploadIsRemovedOnceTheAPICanBeReached(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	api := &unreachableAPI{f: f, fails: 3, calls: map[string]int{}}
	f.startWith(t, worker.Options{MaxAttempts: 1}, api)
	id := f.sync(t, "x", manifest("a"))
	if j := f.wait(t, id); j.Status != dbtsync.StatusSucceeded {
		t.Fatalf("job %+v, want succeeded whatever the removal", j)
	}
	apitest.Eventually(t, 10*time.Second, "the upload removed and freed", func() (bool, string) {
		has, _ := f.queue.HasManifest(context.Background(), id)
		return !has && f.used(t) == 0, "still stored or charged"
	})
	if n := api.count(dbtsync.ObjectManifest); n != 4 {
		t.Errorf("removal requests %d, want the 3 unanswered and the one that removed it", n)
	}
}

// A files job run again after its worker stopped past writing the result asks the API
// to remove that result before it writes its own; while the API cannot be reached the
// run is tried again, counting no attempt, and the job still succeeds with one attempt
// allowed.
func TestARetriedFilesJobWaitsForTheAPIToRemoveItsResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	reached := make(chan struct{})
	var once sync.Once
	stop := f.start(t, worker.Options{Phase: func(ctx context.Context, _, phase string) {
		if phase == "committed" {
			once.Do(func() { close(reached) })
			<-ctx.Done() // stopped after writing the result, before recording success
		}
	}})
	res, err := f.svc.StartSync(context.Background(), developer, dep, filesSync(manifest("a")))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker never wrote the result")
	}
	stop()
	api := &unreachableAPI{f: f, fails: 5, calls: map[string]int{}}
	f.startWith(t, worker.Options{MaxAttempts: 1}, api)
	j := f.wait(t, res.Accepted.SyncJobID)
	if j.Status != dbtsync.StatusSucceeded || j.Files == nil {
		t.Fatalf("files job %+v, want succeeded with its files", j)
	}
	b, err := io.ReadAll(j.Files)
	_ = j.Files.Close()
	if err != nil || !strings.Contains(string(b), "model/cubes/a.yml") {
		t.Fatalf("the files result: %q %v", b, err)
	}
	if n := api.count(dbtsync.ObjectResult); n != 6 {
		t.Errorf("result removals %d, want the 5 unanswered and the one that removed it", n)
	}
	if j.Attempts != 1 {
		t.Errorf("attempts %d, want 1: a run the API could not help does not count", j.Attempts)
	}
}
