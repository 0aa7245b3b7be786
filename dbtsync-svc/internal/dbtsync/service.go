// Package dbtsync is the dbt sync and data-model branch domain: the Service (sync jobs,
// the dbt git integration, branches), its domain types and rules (what "served" means,
// branch and ref names), the ports its adapters implement (ports.go), and the go-kit
// endpoints, transports and decorators around it. The adapters live beside it:
// internal/store/mongostore (branches, versions, integrations), internal/queue/jetstream
// (jobs, their state, manifests), internal/gitsource (clones) and internal/worker (the
// queue's consumer).
package dbtsync

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/kit"
)

// Service is the dbt sync and data-model branch domain. Every method takes the verified
// caller and the deployment it acts on, and decides the caller's role itself: it is the
// one place the roles of dbtsync-svc are checked.
type Service interface {
	// StartSync queues a sync job and returns once it is durably queued. The request body
	// is read by body, which StartSync calls once the caller is authorized, with the sink
	// the manifest streams into: an upload never sits in memory, and a caller without
	// the role never reaches the manifest store.
	StartSync(ctx context.Context, p *identity.Principal, deploymentID int64, body SyncRequestBody) (SyncStarted, error)
	GetJob(ctx context.Context, p *identity.Principal, deploymentID int64, syncJobID string) (SyncJob, error)
	ListJobs(ctx context.Context, p *identity.Principal, deploymentID int64, pg httpx.PageQuery) (httpx.Page[SyncJob], error)
	// CancelJob cancels a queued job (it never runs) or asks a running one to stop at its
	// next model; a finished job is a conflict.
	CancelJob(ctx context.Context, p *identity.Principal, deploymentID int64, syncJobID string) (SyncJob, error)
	// RetryJob queues a new job with the finished job's input.
	RetryJob(ctx context.Context, p *identity.Principal, deploymentID int64, syncJobID string) (SyncAccepted, error)

	PutIntegration(ctx context.Context, p *identity.Principal, deploymentID int64, in IntegrationInput) (DbtGitIntegration, error)
	GetIntegration(ctx context.Context, p *identity.Principal, deploymentID int64) (DbtGitIntegration, error)

	ListBranches(ctx context.Context, p *identity.Principal, deploymentID int64, pg httpx.PageQuery) (httpx.Page[Branch], error)
	GetBranch(ctx context.Context, p *identity.Principal, deploymentID int64, name string) (Branch, error)
	// ListFiles and GetFile read one version of the branch; version 0 is the latest.
	ListFiles(ctx context.Context, p *identity.Principal, deploymentID int64, name string, version int64) (FileList, error)
	GetFile(ctx context.Context, p *identity.Principal, deploymentID int64, name, path string, version int64) (FileContent, error)
	ListVersions(ctx context.Context, p *identity.Principal, deploymentID int64, name string, pg httpx.PageQuery) (httpx.Page[BranchVersion], error)
	OpenBranch(ctx context.Context, p *identity.Principal, deploymentID int64, name string) (Branch, error)
	SetStaging(ctx context.Context, p *identity.Principal, deploymentID int64, name string, enabled bool) (Branch, error)
	// PushWebhook starts a sync of the commit a GitHub or GitLab push to the integration's
	// branch names, once per delivery and per commit. Its signature is its authentication:
	// p is the gateway's anonymous principal for the deployment of the path.
	PushWebhook(ctx context.Context, p *identity.Principal, deploymentID int64, req PushRequest) (PushResult, error)
}

// Ports are the adapters the service works through.
type Ports struct {
	Branches     BranchStore
	Integrations IntegrationStore
	Jobs         JobQueue
	Manifests    ManifestStore
	Ledgers      LedgerStore
	Git          GitSource
	Sealer       Sealer
	Pushes       PushLog
}

// Options tune the service; zero values take the defaults.
type Options struct {
	// Quotas bound the bytes one deployment and one account keep in the manifest store
	// (DefaultDeploymentUploadBytes, DefaultAccountUploadBytes).
	Quotas StorageQuotas
	// ObjectMaxAge is how long the manifest store keeps an object (7 days).
	ObjectMaxAge time.Duration
	// MaxQueuedJobs is the limit of a deployment's jobs queued or running, which the
	// job queue enforces (DefaultMaxQueuedJobs); the service names it when refusing.
	MaxQueuedJobs int
	// Selector bounds the model selectors the service accepts
	// (convert.DefaultSelectorLimits).
	Selector convert.SelectorLimits
	// PushDedupRetention is how long a push webhook's delivery id and commit are
	// remembered (DefaultPushDedupRetention).
	PushDedupRetention time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// What the service's decorators are built from, each nil to leave its decorator out:
	// the audit trail (audit.go), the logger of the changes done (logging.go) and the
	// domain counters (metrics.go).
	Audit   audit.Recorder
	Logger  *slog.Logger
	Metrics *Metrics
}

// DefaultMaxQueuedJobs is the default of DBT_SYNC_MAX_QUEUED_JOBS, and
// DefaultMaxRunningJobs of DBT_SYNC_MAX_RUNNING_JOBS.
const (
	DefaultMaxQueuedJobs  = 20
	DefaultMaxRunningJobs = 2
)

// DefaultObjectMaxAge is the default of DBT_SYNC_OBJECT_MAX_AGE.
const DefaultObjectMaxAge = 7 * 24 * time.Hour

func (o *Options) defaults() {
	if o.PushDedupRetention <= 0 {
		o.PushDedupRetention = DefaultPushDedupRetention
	}
	if o.Quotas.Deployment <= 0 {
		o.Quotas.Deployment = DefaultDeploymentUploadBytes
	}
	if o.Quotas.Account <= 0 {
		o.Quotas.Account = DefaultAccountUploadBytes
	}
	if o.ObjectMaxAge <= 0 {
		o.ObjectMaxAge = DefaultObjectMaxAge
	}
	if o.MaxQueuedJobs <= 0 {
		o.MaxQueuedJobs = DefaultMaxQueuedJobs
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// service implements Service over the ports.
type service struct {
	Ports
	storage        *Storage
	maxQueued      int
	selectorLimits convert.SelectorLimits
	pushDedup      time.Duration
	now            func() time.Time
}

// NewService builds the Service, wrapped in its decorators in the platform's order
// (kit.Decorate).
func NewService(p Ports, o Options) Service {
	o.defaults()
	s := &service{Ports: p, maxQueued: o.MaxQueuedJobs, now: o.Now, selectorLimits: o.Selector.WithDefaults(), pushDedup: o.PushDedupRetention,
		storage: &Storage{Ledgers: p.Ledgers, Quotas: o.Quotas, ObjectMaxAge: o.ObjectMaxAge, Now: o.Now}}
	return kit.Decorate[Service](s, kit.Decorators[Service]{Audit: auditingMiddleware(o.Audit), Log: loggingMiddleware(o.Logger), Metrics: instrumentingMiddleware(o.Metrics)})
}

// The role each operation needs.
const (
	roleSync        = identity.RoleDeveloper
	roleIntegration = identity.RoleAdmin
	roleBranches    = identity.RoleDeveloper
)

// SyncRequestBody reads a start-sync request, streaming its manifest (if any) to manifest.
type SyncRequestBody func(manifest io.Writer) (StartSyncInput, error)

// StartSyncInput is a start-sync request without its manifest.
type StartSyncInput struct {
	Source     string  // SourceGit or SourceManifest
	Ref        *string // git: overrides the integration's branch
	BranchName *string // overrides the derived branch name
	Output     string  // OutputBranch or OutputFiles
	// HasManifest: a manifest was streamed out (only for source "manifest");
	// SchemaVersion is its metadata.dbt_schema_version (0 when it had none).
	HasManifest   bool
	SchemaVersion int
	// Select and Exclude: the model selector of this sync; a field sent replaces the
	// integration's (null: none), one omitted keeps it.
	Select, Exclude SelectorField
}

// SyncAccepted is the answer to a queued sync job.
type SyncAccepted struct {
	BranchName string `json:"branchName"`
	SyncJobID  string `json:"syncJobId"`
	WorkflowID string `json:"workflowId"`
}

// SyncStarted is StartSync's outcome: the API's answer, and what the decorators count
// and log of it.
type SyncStarted struct {
	Accepted SyncAccepted
	Source   string // the job's source
	// ManifestBytes is the size of the manifest stored for the job. It is set with an
	// error too when the upload completed before the request was refused: those bytes
	// were streamed to the store all the same.
	ManifestBytes int64
}

// SyncJob is a sync job as the API shows it.
type SyncJob struct {
	SyncJobID    string   `json:"syncJobId"`
	DeploymentID int64    `json:"deploymentId"`
	Status       string   `json:"status"`
	Source       string   `json:"source"`
	Output       string   `json:"output"`
	Ref          *string  `json:"ref"`
	BranchName   string   `json:"branchName"`
	WorkflowID   string   `json:"workflowId"`
	Progress     Progress `json:"progress"`
	Attempts     int      `json:"attempts"`
	Error        *string  `json:"error"`
	// ErrorCode is a failed job's code (JobFailureCodes): internal_error when the
	// platform failed, whose message then says only that.
	ErrorCode  *string           `json:"errorCode"`
	Warnings   []convert.Warning `json:"warnings"`
	CreatedAt  httpx.Time        `json:"createdAt"`
	StartedAt  *httpx.Time       `json:"startedAt"`
	FinishedAt *httpx.Time       `json:"finishedAt"`
	// Trigger is what started the job ("api" or "push"); Commit the pushed commit of a
	// push's job.
	Trigger string  `json:"trigger"`
	Commit  *string `json:"commit"`
	// Changed is set when a branch job has succeeded: false when its output was
	// byte-identical to the branch's latest version, so no version was written.
	Changed *bool `json:"changed"`
	// CancelRequested: a cancel was asked while the job ran; it stops at its next model.
	CancelRequested bool `json:"cancelRequested"`
	// RetryOf is the job this one retries.
	RetryOf *string `json:"retryOf"`
	// Select and Exclude are the model selector the job applies (null: none), and
	// Selection what it kept and dropped once the job has read its input.
	Select    *string            `json:"select"`
	Exclude   *string            `json:"exclude"`
	Selection *convert.Selection `json:"selection"`
	// Files is a succeeded files job's result, the JSON array as stored: the transport
	// streams it into the answer as "files" (and closes it), never holding it whole.
	Files io.ReadCloser `json:"-"`
	// FilesExpired: a succeeded files job whose result is older than DBT_SYNC_OBJECT_MAX_AGE
	// was removed from the object store; run the sync again for the files.
	FilesExpired bool `json:"filesExpired,omitempty"`
}

// IntegrationInput is a dbt git integration to save, as the caller sent it (PutIntegration
// validates it).
type IntegrationInput struct {
	RepoURL      string
	Branch       string
	ProjectPath  *string // required; "" is the repository's root
	ManifestPath *string
	Credentials  *GitCredentials // nil: none
	// Select and Exclude: the model selector; omitted keeps the stored value, null
	// clears it.
	Select, Exclude SelectorField
	// WebhookSecret: the push webhook's secret, by the same rule (write-only).
	WebhookSecret SelectorField
}

// DbtGitIntegration is the saved integration as the API shows it (never the credentials).
type DbtGitIntegration struct {
	DeploymentID   int64   `json:"deploymentId"`
	RepoURL        string  `json:"repoUrl"`
	Branch         string  `json:"branch"`
	ProjectPath    string  `json:"projectPath"`
	ManifestPath   *string `json:"manifestPath"`
	Select         *string `json:"select"`
	Exclude        *string `json:"exclude"`
	HasCredentials bool    `json:"hasCredentials"`
	// WebhookSecretSet: a push webhook secret is stored (it is never answered).
	WebhookSecretSet bool       `json:"webhookSecretSet"`
	UpdatedAt        httpx.Time `json:"updatedAt"`
}

// FileList is the files of one branch version, without contents.
type FileList struct {
	BranchName string      `json:"branchName"`
	Version    int64       `json:"version"`
	Files      []FileEntry `json:"files"`
}

// FileEntry is one file of a FileList.
type FileEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// FileContent is one file of a branch version with its content (fields in name order:
// the body they encode to is the one clients have always received).
type FileContent struct {
	BranchName string `json:"branchName"`
	Content    string `json:"content"`
	Path       string `json:"path"`
	Version    int64  `json:"version"`
}
