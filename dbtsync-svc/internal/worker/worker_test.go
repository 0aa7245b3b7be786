package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/memqueue"
	"github.com/analyticsco/platform/dbtsync-svc/internal/store/memstore"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker/workertest"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
)

// The worker's rules, unit-tested over the in-memory fakes of its ports: jobs queued by
// the real service, consumed by the real worker, no server.

const dep = 5

// git is a repository whose clone fails with err.
type git struct{ err error }

func (git) CheckRepository(context.Context, string) error                     { return nil }
func (git) HasRef(context.Context, dbtsync.Integration, string) (bool, error) { return true, nil }
func (g git) Load(context.Context, dbtsync.Integration, string, string) (*convert.Project, error) {
	return nil, g.err
}

type fixture struct {
	svc    dbtsync.Service
	store  *memstore.Store
	queue  *memqueue.Queue
	audit  *audit.Memory
	git    git
	logger *slog.Logger // the workers'
}

var developer = &identity.Principal{Account: identity.Account{ID: 1}, User: &identity.User{ID: 9, Role: identity.RoleDeveloper},
	Deployment: &identity.Deployment{ID: dep, ProductionBranch: "main"}}

func newFixture(t *testing.T, g git) *fixture {
	f := &fixture{store: memstore.New(), queue: memqueue.New(), audit: &audit.Memory{}, git: g, logger: slogDiscard}
	f.svc = dbtsync.NewService(dbtsync.Ports{Branches: f.store, Integrations: f.store, Jobs: f.queue, Manifests: f.queue, Ledgers: f.queue, Git: g}, dbtsync.Options{})
	return f
}

// start runs a worker until stop is called or the test ends.
func (f *fixture) start(t *testing.T, opts worker.Options) (stop func()) {
	if opts.AckWait == 0 {
		opts.AckWait = 5 * time.Second
	}
	opts.BlockedDelay, opts.Audit = 10*time.Millisecond, f.audit
	if opts.Backoff == nil {
		opts.Backoff = func(int) time.Duration { return 10 * time.Millisecond }
	}
	w := worker.New(worker.Ports{Jobs: f.queue, Feed: f.queue, Manifests: f.queue, Ledgers: f.queue, Branches: f.store, Integrations: f.store, Git: f.git},
		dbtsync.NewMetrics(prometheus.NewRegistry()), f.logger, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func manifest(models ...string) string {
	nodes := ""
	for i, m := range models {
		if i > 0 {
			nodes += ","
		}
		nodes += fmt.Sprintf(`"model.p.%s":{"resource_type":"model","name":%q,"alias":%q,"database":"db","schema":"s","config":{"materialized":"table"},`+
			`"columns":{"id":{"name":"id","data_type":"integer"}}}`, m, m, m)
	}
	return `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{` + nodes + `}}`
}

// manifestSync is the body of a manifest sync into branch; "" is a git sync.
func manifestSync(branch, manifest string) dbtsync.SyncRequestBody {
	return func(w io.Writer) (dbtsync.StartSyncInput, error) {
		if manifest == "" {
			return dbtsync.StartSyncInput{Source: dbtsync.SourceGit, Output: dbtsync.OutputBranch}, nil
		}
		_, err := io.WriteString(w, manifest)
		return dbtsync.StartSyncInput{Source: dbtsync.SourceManifest, Output: dbtsync.OutputBranch, BranchName: &branch, HasManifest: true, SchemaVersion: 12}, err
	}
}

func (f *fixture) sync(t *testing.T, branch, manifest string) string {
	t.Helper()
	res, err := f.svc.StartSync(context.Background(), developer, dep, manifestSync(branch, manifest))
	if err != nil {
		t.Fatal(err)
	}
	return res.Accepted.SyncJobID
}

// wait polls the job until it is over.
func (f *fixture) wait(t *testing.T, id string) dbtsync.SyncJob {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := f.svc.GetJob(context.Background(), developer, dep, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == dbtsync.StatusSucceeded || j.Status == dbtsync.StatusFailed || j.Status == dbtsync.StatusCanceled {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not finish: %+v", id, j)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAManifestJobWritesItsBranchOnce(t *testing.T) {
	f := newFixture(t, git{})
	f.start(t, worker.Options{})
	id := f.sync(t, "dbt/x", manifest("orders", "customers"))
	j := f.wait(t, id)
	if j.Status != dbtsync.StatusSucceeded || j.Changed == nil || !*j.Changed || j.Attempts != 1 || j.Progress.ModelsDone != 2 {
		t.Fatalf("job %+v", j)
	}
	fin := f.settled(t, id)
	b, err := f.store.Branch(context.Background(), dep, "dbt/x")
	if err != nil || b.LatestVersion != 1 || b.Versions[0].SyncJobID != id || b.Versions[0].FileCount != 2 {
		t.Errorf("branch %+v %v", b, err)
	}
	if ok, _ := f.queue.HasManifest(context.Background(), id); ok {
		t.Error("a succeeded job's upload is kept")
	}
	if head, _ := f.queue.LineHead(context.Background(), dep, "dbt/x"); head != "" {
		t.Errorf("the finished job holds its line (%q)", head)
	}
	if len(fin) != 1 || fin[0].Details["status"] != "succeeded" || fin[0].Details["version"] != int64(1) || fin[0].Details["startedBy"] != int64(9) {
		t.Errorf("finish events %+v", fin)
	}
	// The same output again writes no version.
	if j := f.wait(t, f.sync(t, "dbt/x", manifest("orders", "customers"))); *j.Changed {
		t.Errorf("identical resync %+v", j)
	}
}

func TestJobsOfOneBranchRunInOrder(t *testing.T) {
	f := newFixture(t, git{})
	// Both are queued before a worker runs: the first holds the branch until released.
	a := f.sync(t, "b", manifest("a"))
	b := f.sync(t, "b", manifest("a", "b"))
	release := make(chan struct{})
	waited := make(chan string, 100)
	f.start(t, worker.Options{Concurrency: 4, Phase: func(_ context.Context, id, phase string) {
		switch {
		case phase == "converting" && id == a:
			<-release
		case phase == "waiting":
			select {
			case waited <- id:
			default: // enough seen
			}
		}
	}})
	for got := ""; got != b; {
		select {
		case got = <-waited:
		case <-time.After(10 * time.Second):
			t.Fatal("the second job never waited for the first")
		}
	}
	close(release)
	ja, jb := f.wait(t, a), f.wait(t, b)
	if ja.Status != dbtsync.StatusSucceeded || jb.Status != dbtsync.StatusSucceeded || jb.StartedAt.Before(ja.FinishedAt.Time) {
		t.Errorf("jobs %+v %+v", ja, jb)
	}
	if st, _ := f.store.Branch(context.Background(), dep, "b"); st.LatestVersion != 2 || st.Versions[1].SyncJobID != b {
		t.Errorf("branch %+v", st)
	}
}

func TestFailures(t *testing.T) {
	t.Run("a-transient-failure-is-retried-until-max-attempts", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, git{err: dbtsync.Failure(dbtsync.CodeRepositoryUnavailable, "git server example.test cannot be reached (network error)")})
		if err := f.store.SaveIntegration(context.Background(), dbtsync.Integration{DeploymentID: dep, RepoURL: "https://example.test/r.git", Branch: "main"}); err != nil {
			t.Fatal(err)
		}
		f.start(t, worker.Options{MaxAttempts: 3})
		j := f.wait(t, f.sync(t, "", ""))
		if j.Status != dbtsync.StatusFailed || j.Attempts != 3 || j.Error == nil || *j.Error != "git server example.test cannot be reached (network error)" ||
			j.ErrorCode == nil || *j.ErrorCode != dbtsync.CodeRepositoryUnavailable {
			t.Errorf("job %+v", j)
		}
	})
	t.Run("a-permanent-failure-fails-at-once", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, git{})
		f.start(t, worker.Options{MaxAttempts: 3})
		id := f.sync(t, "dbt/manifest", `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"}}`)
		j := f.wait(t, id)
		if j.Status != dbtsync.StatusFailed || j.Attempts != 1 || j.Error == nil || j.ErrorCode == nil || *j.ErrorCode != dbtsync.CodeInvalidManifest {
			t.Errorf("job %+v", j)
		}
		if ok, _ := f.queue.HasManifest(context.Background(), id); !ok {
			t.Error("a failed job's upload is gone: it cannot be retried")
		}
	})
	t.Run("a-cancel-stops-a-running-job-before-it-writes", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, git{})
		f.start(t, worker.Options{Phase: func(ctx context.Context, id, phase string) {
			if phase != "converting" {
				return
			}
			if _, err := f.svc.CancelJob(context.Background(), developer, dep, id); err != nil {
				t.Error(err)
			}
			<-ctx.Done() // the watch ends the run
		}})
		j := f.wait(t, f.sync(t, "c", manifest("a")))
		if j.Status != dbtsync.StatusCanceled || j.CancelRequested {
			t.Errorf("job %+v", j)
		}
		if _, err := f.store.Branch(context.Background(), dep, "c"); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("a canceled run wrote its branch (%v)", err)
		}
	})
}

var slogDiscard = slog.New(slog.DiscardHandler)

// A job failed by the platform (a store's driver error naming hosts, a worker path) shows
// its tenant a code and a generic message, in the job and in the audit trail; the detail
// goes to the worker's log only.
func TestAJobFailedByThePlatformShowsACodeAndAGenericMessage(t *testing.T) {
	t.Parallel()
	const detail = "server selection error: mongo-0.dbtsync.svc:27017 connection refused; /var/lib/dbtsync-clones-1/job-2"
	f := newFixture(t, git{err: errors.New(detail)})
	if err := f.store.SaveIntegration(context.Background(), dbtsync.Integration{DeploymentID: dep, RepoURL: "https://example.test/r.git", Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	var log devstack.LogBuffer
	f.logger = slog.New(slog.NewJSONHandler(&log, nil))
	f.start(t, worker.Options{MaxAttempts: 2})
	j := f.wait(t, f.sync(t, "", ""))
	if j.Status != dbtsync.StatusFailed || j.ErrorCode == nil || *j.ErrorCode != dbtsync.CodeInternal || j.Error == nil ||
		strings.Contains(*j.Error, "27017") || !strings.Contains(*j.Error, "error of the platform") {
		t.Fatalf("job %+v", j)
	}
	for _, ev := range f.settled(t, j.SyncJobID) {
		if ev.Action == dbtsync.ActionSyncFinish && (strings.Contains(fmt.Sprint(ev.Details), "27017") || ev.Details["errorCode"] != dbtsync.CodeInternal) {
			t.Errorf("finish event %+v", ev.Details)
		}
	}
	if !strings.Contains(log.String(), "mongo-0.dbtsync.svc:27017") || !strings.Contains(log.String(), j.SyncJobID) {
		t.Errorf("the worker's log lacks the detail of the job's failure:\n%s", log.String())
	}
}

// A job that stops its worker (here: the test stops the worker whenever it converts that
// job) is retried alone on its worker, so the crashes are pinned on it: the job that ran
// beside it when it first took the worker down is not blamed (that attempt is not
// counted), never runs beside it again, and succeeds.
func TestAJobThatStopsItsWorkerRunsAloneAndItsNeighbourIsNotBlamed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	const maxAttempts = 2
	poison, innocent := f.sync(t, "poison", manifest("p")), f.sync(t, "innocent", manifest("i"))
	crash := workertest.NewCrash(poison, innocent)
	opts := worker.Options{Concurrency: 2, MaxAttempts: maxAttempts, AckWait: time.Second, Phase: crash.Phase}
	crash.Rounds(t, maxAttempts, func() func() { return f.start(t, opts) }, func() bool {
		j, _ := f.svc.GetJob(context.Background(), developer, dep, poison)
		return j.Status == dbtsync.StatusFailed
	})
	p, i := f.wait(t, poison), f.wait(t, innocent)
	if i.Status != dbtsync.StatusSucceeded || i.Attempts != 1 {
		t.Errorf("innocent job %+v, want succeeded, the crash beside it not counted (1 attempt)", i)
	}
	if p.Status != dbtsync.StatusFailed || p.Attempts != maxAttempts || p.ErrorCode == nil || *p.ErrorCode != dbtsync.CodeWorkerStopped ||
		!strings.Contains(*p.Error, "stopped each time") {
		t.Errorf("poisoned job %+v, want failed after %d runs alone", p, maxAttempts)
	}
}

// used is what the deployment's storage ledger holds now.
func (f *fixture) used(t *testing.T) int64 {
	t.Helper()
	var n int64
	_ = f.queue.UpdateLedger(context.Background(), dbtsync.LedgerKey(fmt.Sprintf("deployment.%d", dep)), func(l *dbtsync.Ledger) error {
		n = l.Used(time.Now())
		return errors.New("read only")
	})
	return n
}

// What a job keeps in the object store is charged to its deployment: a succeeded job's
// upload is removed and its charge freed, a files result is charged until it expires,
// and a result past the quota fails its job naming the quota.
func TestStoredObjectsAreChargedAndFreed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	f.start(t, worker.Options{Quotas: dbtsync.StorageQuotas{Deployment: 4000, Account: 1 << 20}})
	id := f.sync(t, "x", manifest("a"))
	if j := f.wait(t, id); j.Status != dbtsync.StatusSucceeded {
		t.Fatalf("job %+v", j)
	}
	if n := f.used(t); n != 0 {
		t.Errorf("a succeeded job's upload is still charged: %d bytes", n)
	}
	res, err := f.svc.StartSync(context.Background(), developer, dep, filesSync(manifest("a")))
	if err != nil {
		t.Fatal(err)
	}
	if j := f.wait(t, res.Accepted.SyncJobID); j.Status != dbtsync.StatusSucceeded {
		t.Fatalf("files job %+v", j)
	}
	if n := f.used(t); n < 100 {
		t.Errorf("a files result is charged %d bytes", n)
	}
	var models []string
	for i := range 40 {
		models = append(models, fmt.Sprintf("model_with_a_long_name_%02d", i))
	}
	res, err = f.svc.StartSync(context.Background(), developer, dep, filesSync(manifest(models...)))
	if err != nil {
		t.Fatal(err)
	}
	j := f.wait(t, res.Accepted.SyncJobID)
	if j.Status != dbtsync.StatusFailed || j.ErrorCode == nil || *j.ErrorCode != dbtsync.CodeStorageQuota ||
		!strings.Contains(*j.Error, "would pass its limit of") || strings.Contains(*j.Error, "DBT_SYNC_") {
		t.Errorf("a result past the quota: %+v", j)
	}
}

// filesSync is the body of a manifest sync with output files.
func filesSync(manifest string) dbtsync.SyncRequestBody {
	return func(w io.Writer) (dbtsync.StartSyncInput, error) {
		_, err := io.WriteString(w, manifest)
		return dbtsync.StartSyncInput{Source: dbtsync.SourceManifest, Output: dbtsync.OutputFiles, HasManifest: true, SchemaVersion: 12}, err
	}
}
