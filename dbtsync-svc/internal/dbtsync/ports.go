package dbtsync

import (
	"context"
	"io"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// The ports: what the service and the worker need of their adapters, in domain terms.
// Each has a contract suite run against the real adapter and an in-memory fake
// (internal/store and internal/queue). Unless a method says otherwise, a missing record
// is ErrNotFound, and an adapter whose server cannot be reached wraps the error with
// ErrStoreUnavailable (MongoDB) or ErrQueueUnavailable (JetStream).

// BranchStore keeps data-model branches: their kept versions, the immutable file set of
// each version, and their served state (MongoDB).
type BranchStore interface {
	Branch(ctx context.Context, deploymentID int64, name string) (BranchState, error)
	// Branches returns up to limit of the deployment's branches by name, those after the
	// name after ("": from the first), leaving out the branch named except: a page read
	// with an index, whatever the count of branches.
	Branches(ctx context.Context, deploymentID int64, after, except string, limit int) ([]BranchState, error)
	// Files returns the files of one version (0: the latest) sorted by path, and the
	// version read; path "" means every file, and contents are read only withContent.
	// A version the branch does not keep is ErrNotFound; a path it lacks, no file.
	Files(ctx context.Context, deploymentID int64, name string, version int64, path string, withContent bool) (int64, []StoredFile, error)
	// WriteVersion writes files as a new version of the branch (created when it does not
	// exist), keeping the last KeptVersions. It is idempotent by syncJobID: when a version
	// of that job exists, nothing is written and its number is returned (changed true).
	// When files are byte-identical to the latest version (FilesDigest), nothing is
	// written either: the latest version's number is returned with changed false.
	// Readers see the old or the new file set, never a mix.
	WriteVersion(ctx context.Context, deploymentID int64, name, syncJobID string, files []convert.File, now time.Time) (version int64, changed bool, err error)
	// SetLease sets the branch's lease to until and returns the branch.
	SetLease(ctx context.Context, deploymentID int64, name string, until, now time.Time) (BranchState, error)
	// SetStaging enables or disables the branch's staging and returns the branch.
	SetStaging(ctx context.Context, deploymentID int64, name string, enabled bool, now time.Time) (BranchState, error)
}

// PushLog remembers the push webhooks that started syncs, so a delivery or a commit
// starts one.
type PushLog interface {
	// ClaimPush records key (a delivery id or a commit) of deployment deploymentID for job, unless
	// another job holds it since less than retention: it returns the job that holds it
	// after the call (job itself when the claim is new).
	ClaimPush(ctx context.Context, deploymentID int64, key, job string, now time.Time, retention time.Duration) (string, error)
	// ReleasePush drops job's claim of key (its sync did not start).
	ReleasePush(ctx context.Context, deploymentID int64, key, job string) error
}

// IntegrationStore keeps each deployment's dbt git integration (MongoDB).
type IntegrationStore interface {
	// SaveIntegration creates or replaces the deployment's integration.
	SaveIntegration(ctx context.Context, in Integration) error
	Integration(ctx context.Context, deploymentID int64) (Integration, error)
}

// JobQueue keeps sync jobs and their order (NATS JetStream): each job's state, each
// branch's line of jobs (one job per branch runs at a time, in order), a queue per
// deployment that delivers its jobs to workers (JobFeed), and an index of each
// deployment's jobs to list them by page.
type JobQueue interface {
	// Enqueue records a new job, puts it at the end of its branch's line and in its
	// deployment's index, and queues its delivery on its deployment's queue (QueueKey of
	// its account and deployment), with ctx's trace context; it returns once all are
	// stored, and leaves no line entry, record or delivery behind when it fails. When the
	// deployment already has its queue's limit of jobs queued or running it fails with
	// ErrJobLimit, decided atomically with the queueing.
	Enqueue(ctx context.Context, j Job) error
	// QueuedJobs is how many jobs of the deployment are queued or running.
	QueuedJobs(ctx context.Context, k QueueKey) (int, error)
	Job(ctx context.Context, deploymentID int64, id string) (Job, error)
	// UpdateJob applies fn to the job and stores the result if nobody changed the job
	// in between (else it reads the job again and retries); fn's error aborts the update.
	UpdateJob(ctx context.Context, deploymentID int64, id string, fn func(*Job) error) (Job, error)
	// JobPage returns the ids of up to first jobs of the deployment, newest first, after
	// the cursor after ("": from the newest). It reads about one page of the index per first ids, whatever the deployment's jobs
	// number. A cursor it did not return is ErrBadCursor.
	// The cursor of the last id returned is end; more tells whether older jobs follow.
	JobPage(ctx context.Context, deploymentID int64, after string, first int) (ids []string, end string, more bool, err error)
	// LineHead is the id of the job at the head of the branch's line ("" when empty).
	LineHead(ctx context.Context, deploymentID int64, branch string) (string, error)
	// LeaveLine takes the job out of its branch's line (nothing when it is not in it).
	LeaveLine(ctx context.Context, deploymentID int64, branch, id string) error
	// WatchCancel returns a channel that is closed once a cancel is requested for the job
	// (CancelRequested), or never; the watch ends with ctx.
	WatchCancel(ctx context.Context, deploymentID int64, id string) (<-chan struct{}, error)
}

// JobFeed delivers queued jobs to workers (JetStream's pull consumers, one per
// deployment's queue).
type JobFeed interface {
	// Consume calls handle for every delivery, each in its own goroutine and at most
	// concurrency at once, until ctx ends; then it waits for the handlers and returns.
	// The handler's ctx carries the trace context of the request that queued the job.
	// A delivery that is neither acknowledged nor retried is delivered again after
	// ackWait (a worker that died), unless KeepAlive postpones it. Deliveries are fair:
	// each free slot serves the queues in FairScheduler's order, and a deployment has at
	// most its running limit of deliveries out at once (a delivery counts from the
	// moment it is handed out until it is acknowledged or discarded, waiting for a
	// retry included), across every consumer.
	Consume(ctx context.Context, concurrency int, ackWait time.Duration, handle func(context.Context, Delivery)) error
}

// Delivery is one delivery of a queued job to a worker.
type Delivery interface {
	DeploymentID() int64
	SyncJobID() string
	// Ack: the job is done with; it is never delivered again.
	Ack()
	// Retry delivers the job again after delay.
	Retry(delay time.Duration)
	// Discard drops a delivery that names no job.
	Discard()
	// KeepAlive tells the queue the job is still being worked on.
	KeepAlive()
}

// ManifestStore keeps uploaded manifests until their job no longer needs them, and the
// files of `output: files` jobs (JetStream's object store, whose age and size limits
// remove what is left behind). What each deployment and account keeps there is charged
// to them in the ledgers (LedgerStore, Storage).
type ManifestStore interface {
	// PutManifest stores what r yields as the upload of job id, a job of deploymentID; an error
	// reading r aborts it.
	PutManifest(ctx context.Context, deploymentID int64, id string, r io.Reader) error
	// Manifest opens the upload of job id.
	Manifest(ctx context.Context, id string) (io.ReadCloser, error)
	// HasManifest reports whether the upload of job id is still stored.
	HasManifest(ctx context.Context, id string) (bool, error)
	// DeleteManifest removes the upload of job id; deleted is false when there was none
	// (so a caller frees its charge once).
	DeleteManifest(ctx context.Context, id string) (deleted bool, err error)
	// PutResult stores the files an `output: files` job made.
	PutResult(ctx context.Context, id string, files []convert.File) error
	// Result streams them back: the JSON array of the files, as stored, never read whole.
	Result(ctx context.Context, id string) (io.ReadCloser, error)
}

// LedgerStore keeps the storage ledgers (one per deployment, one per account) that
// Storage charges, with compare-and-set: every charge is atomic, whichever API replica
// or worker makes it.
type LedgerStore interface {
	// UpdateLedger applies fn to the ledger of key (empty when it has none) and stores
	// the result if nobody changed it in between (else it reads it again and retries);
	// fn's error aborts the update.
	UpdateLedger(ctx context.Context, key LedgerKey, fn func(*Ledger) error) error
}

// GitSource reads dbt projects from the integrations' repositories.
type GitSource interface {
	// CheckRepository tells whether an integration may use the repository at url: a
	// *RepositoryRefusedError says why not.
	CheckRepository(ctx context.Context, url string) error
	// HasRef reports whether ref is a branch or a tag of the integration's repository.
	// An error means the repository could not be asked.
	HasRef(ctx context.Context, in Integration, ref string) (bool, error)
	// Load reads the dbt project at ref (a branch, else a tag): the manifest at the
	// integration's manifestPath when it exists there, otherwise the project files. A
	// failure retrying cannot mend is a PermanentError.
	// Load reads the project at ref; commit, when set, must be ref's head
	// (CodeCommitSuperseded otherwise).
	Load(ctx context.Context, in Integration, ref, commit string) (*convert.Project, error)
}

// Sealer encrypts saved git credentials for one deployment.
type Sealer interface {
	Seal(plain []byte, deploymentID int64) []byte
	// Open opens what Seal sealed for the deployment.
	Open(sealed []byte, deploymentID int64) ([]byte, error)
}
