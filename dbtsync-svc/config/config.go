// Package config is dbtsync-svc's configuration, read from the environment.
package config

import (
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/gitsource"
	"github.com/analyticsco/platform/dbtsync-svc/internal/isolate"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/idempotency"
)

// Config is everything dbtsync-svc (API and worker mode) reads from its environment.
type Config struct {
	config.Common
	HTTPAddr              string        `env:"HTTP_ADDR" default:"127.0.0.1:8083" help:"public listen address: the API and /healthz (the worker serves only /healthz on it)"`
	InternalAddr          string        `env:"INTERNAL_ADDR" default:"127.0.0.1:9083" help:"internal listen address: /healthz, /readyz and /metrics for probes and Prometheus (give the worker its own when it shares a host with the API)"`
	MongoURI              string        `env:"MONGODB_URI" default:"mongodb://127.0.0.1:27018/" secret:"true" help:"MongoDB connection string (may hold a password)"`
	MongoDatabase         string        `env:"MONGODB_DATABASE" default:"dbtsync" help:"database owned by dbtsync-svc"`
	NATSURL               string        `env:"NATS_URL" default:"nats://127.0.0.1:4223" secret:"true" help:"NATS with JetStream: the job queue, job state and manifest object store (outside the local stack it carries the user and password: nats://user:password@host:4222)"`
	IdentitySigningKey    string        `env:"IDENTITY_SIGNING_KEY" secret:"true" help:"API mode, required there: this service's own forwarded-identity key (platformctl identity-key --service dbtsync-svc: svc:dbtsync-svc:...), or the gateway's key; verifies the identity the gateway forwards (the worker serves no API and must not hold it)"`
	CredentialsKey        string        `env:"DBT_CREDENTIALS_KEY" required:"true" secret:"true" help:"base64 32-byte AES-256-GCM keys, comma-separated, that encrypt saved dbt git credentials: the first seals, all open; the API re-seals under the first at start (rotation: deploy/README.md)"`
	WorkerConcurrency     int           `env:"DBT_SYNC_WORKER_CONCURRENCY" default:"2" help:"worker mode: sync jobs converted at once per replica"`
	MaxAttempts           int           `env:"DBT_SYNC_MAX_ATTEMPTS" default:"5" help:"worker mode: runs of a sync job (with backoff between them) before it ends failed"`
	AckWait               time.Duration `env:"DBT_SYNC_ACK_WAIT" default:"30s" help:"worker mode: a job whose worker went silent this long is redelivered"`
	JobTimeout            time.Duration `env:"DBT_SYNC_JOB_TIMEOUT" default:"15m" help:"worker mode: a job still running after this long fails, saying so"`
	ChildCPULimit         time.Duration `env:"DBT_SYNC_CHILD_CPU_LIMIT" default:"15m" help:"worker mode: CPU time the child process that reads and converts one job's input (clone, tree walk, project or manifest read, conversion) may use; the kernel kills it at the limit (RLIMIT_CPU) and the job fails with work_limit"`
	ChildMemoryLimit      int64         `env:"DBT_SYNC_CHILD_MEMORY_LIMIT" default:"2147483648" help:"worker mode: memory in bytes of the child process that reads and converts one job's input: past it in resident memory (checked every 20 ms) the child stops and the job fails with work_limit; it is also the child's GOMEMLIMIT, and its address space (RLIMIT_AS) is capped 2 GiB above for the Go runtime's reservations. Size the worker's memory for DBT_SYNC_WORKER_CONCURRENCY children (in a cgroup too small for them each child gets 80% of the limit over the concurrency)"`
	CloneTimeout          time.Duration `env:"DBT_SYNC_CLONE_TIMEOUT" default:"2m" help:"worker mode: a git clone still running after this long fails the job, saying so"`
	MaxRepoBytes          int64         `env:"DBT_SYNC_MAX_REPO_BYTES" default:"536870912" help:"worker mode: most bytes a clone downloads, and most bytes of the files it inflates (each object's size is charged from its header before it is inflated); over it the job fails naming it"`
	MaxRepoFiles          int           `env:"DBT_SYNC_MAX_FILES" default:"50000" help:"worker mode: most files (and most directories) of a cloned repository's tree; over it the job fails naming it"`
	MaxFileBytes          int64         `env:"DBT_SYNC_MAX_FILE_BYTES" default:"16777216" help:"worker mode: largest repository file the conversion reads (dbt_project.yml, schema .yml); over it the job fails naming the file"`
	MaxModelPaths         int           `env:"DBT_SYNC_MAX_MODEL_PATHS" default:"64" help:"worker mode: most distinct directories a dbt_project.yml names to read models from (model-paths, cleaned: models, ./models and models/ are one); over it the job fails (work_limit) naming the limit"`
	MaxTreeEntries        int           `env:"DBT_SYNC_MAX_TREE_ENTRIES" default:"200000" help:"worker mode: most tree entries one clone's walk reads, counting the entries a checkout skips (duplicates, ., .., .git, submodules) and a subtree once per directory that names it; over it the job fails (work_limit) naming the limit"`
	MaxPathBytes          int64         `env:"DBT_SYNC_MAX_PATH_BYTES" default:"67108864" help:"worker mode: most bytes of the full paths of the tree entries one clone's walk reads, together (one path is at most 4096 bytes); over it the job fails (work_limit) naming the limit"`
	MaxLookupSteps        int64         `env:"DBT_SYNC_MAX_LOOKUP_STEPS" default:"10000000" help:"worker mode: most path components one clone walks resolving paths and symbolic links (the tree's links, at most 40 per path as the kernel counts them, and every file the conversion opens); over it the job fails (work_limit) naming the limit"`
	MaxMemberBytes        int64         `env:"DBT_SYNC_MANIFEST_MAX_MEMBER_BYTES" default:"33554432" help:"most bytes of one manifest value the conversion reads whole: a node's members it reads, together (not its SQL, which streams past), the metadata, one metric, semantic model or saved query; over it a sync job fails (work_limit) naming the limit (an upload is not refused for it: the worker's read decides)"`
	MaxManifestNames      int           `env:"DBT_SYNC_MANIFEST_MAX_NAMES" default:"524288" help:"most member names a manifest's objects open at once hold together (each is remembered to refuse a duplicate name; the nodes object's names are its node ids): over it an upload is refused (413) and a sync job fails (work_limit), naming the limit; the API and the workers must agree"`
	MaxRefAdvertBytes     int64         `env:"DBT_SYNC_MAX_REF_ADVERTISEMENT_BYTES" default:"8388608" help:"most bytes of a git server's list of references read: the API's check that a SHA-like ref is a branch or tag stops there (the job then finds out), and a clone over it fails naming the limit"`
	MaxSelectorBytes      int           `env:"DBT_SYNC_SELECTOR_MAX_BYTES" default:"4096" help:"most bytes of a dbt model selector's select, and of its exclude, each (the integration's or a sync's); over it the request is 400 (invalid_selector) naming the limit"`
	MaxSelectorTerms      int           `env:"DBT_SYNC_SELECTOR_MAX_TERMS" default:"64" help:"most criteria of a dbt model selector, select and exclude together; over it the request is 400 (invalid_selector) naming the limit"`
	MaxSelectorSteps      int           `env:"DBT_SYNC_SELECTOR_MAX_STEPS" default:"20000000" help:"worker mode: most dependency edges the graph operators of one job's model selector walk, all its criteria together (each walk visits a node once); over it the job fails (work_limit) naming the limit"`
	RefListings           int           `env:"DBT_SYNC_REF_LISTINGS" default:"4" help:"API mode: git servers' reference lists read at once by this process (the check of a SHA-like ref); more wait, within their request's deadline"`
	AllowFileURLs         bool          `env:"DBT_SYNC_ALLOW_FILE_URLS" default:"false" help:"accept file:// repoUrl values (the local stack and tests; never in production)"`
	JobRetention          time.Duration `env:"DBT_SYNC_JOB_RETENTION" default:"720h" help:"job records untouched this long are removed from JetStream (finished jobs' retention)"`
	ObjectMaxAge          time.Duration `env:"DBT_SYNC_OBJECT_MAX_AGE" default:"168h" help:"uploaded manifests and files results older than this are removed from the object store"`
	DeploymentUploads     int64         `env:"DBT_SYNC_MAX_DEPLOYMENT_UPLOAD_BYTES" default:"1073741824" help:"bytes one deployment keeps in the object store: its uploaded manifests waiting to be converted (or kept for a retry) and its files results; an upload past it is 413 (storage_quota), a files job past it fails"`
	AccountUploads        int64         `env:"DBT_SYNC_MAX_ACCOUNT_UPLOAD_BYTES" default:"2147483648" help:"bytes one account keeps in the object store, all its deployments together (keep it well below DBT_SYNC_OBJECT_MAX_BYTES, which every account shares); an upload past it is 413 (storage_quota), a files job past it fails"`
	MaxQueuedJobs         int           `env:"DBT_SYNC_MAX_QUEUED_JOBS" default:"20" help:"sync jobs one deployment may have queued or running (retries included); a sync or retry past it is 429 (job_limit); the API and the workers must agree (both set the job stream's limit per subject)"`
	MaxInFlightPerAccount int           `env:"DBT_SYNC_MAX_INFLIGHT_PER_ACCOUNT" default:"4" help:"API mode: sync starts (POST .../dbt-sync, a manifest upload or a repository sync) of one account a replica runs at once; past it 429 concurrency_limit with Retry-After, before the body is read (0: unbounded)"`
	MaxRunningJobs        int           `env:"DBT_SYNC_MAX_RUNNING_JOBS" default:"2" help:"worker mode: sync jobs of one deployment handed to workers at once, across every worker (a job waiting for its branch or between attempts counts); the workers serve the accounts, then their deployments, in turn"`
	ObjectMaxBytes        int64         `env:"DBT_SYNC_OBJECT_MAX_BYTES" default:"8589934592" help:"bytes of all uploaded manifests and files results in the object store; an upload past it is refused"`
	JetStreamReplicas     int           `env:"DBT_SYNC_JETSTREAM_REPLICAS" default:"1" help:"replicas of the job stream, the job-state and storage-ledger buckets and the manifest object store: 1 on a single NATS server, 3 on a three-node cluster (a node lost is then a leader election, not lost jobs); applied to existing ones at start, so the API and the workers must agree"`
	JetStreamRetry        time.Duration `env:"DBT_SYNC_JETSTREAM_RETRY_TIMEOUT" default:"12s" help:"how long a call to JetStream (a job published and its acknowledgement awaited, a job-state or ledger write, a read) is retried while the cluster elects a leader or the connection moves to another node, within the request's own deadline; past it the request is answered 503 with Retry-After (a connection down for 2s ends the retries at once)"`
	PushMaxBytes          int64         `env:"DBT_SYNC_WEBHOOK_MAX_BYTES" default:"1048576" help:"API mode: most bytes of a GitHub or GitLab push webhook's body (POST .../dbt-git-integration/webhook); over it the sender gets 413 naming the limit (a push needs only its ref and commit)"`
	PushDedup             time.Duration `env:"DBT_SYNC_WEBHOOK_DEDUP_RETENTION" default:"168h" help:"API mode: how long a push webhook's delivery id and commit are remembered: within it a redelivery, or another push of the same commit, starts no second sync"`
	AllowedHosts          []string      `env:"DBT_SYNC_ALLOWED_HOSTS" help:"comma-separated host names, addresses or CIDR prefixes that may be cloned although they are loopback, private or link-local (an in-cluster git server)"`
	publish.Config
	idempotency.Settings
}

// GitLimits are the limits of one clone, and of every manifest read (an upload's, a
// job's, a repository's), as configured (MaxManifest has no setting: the sync body's
// limit applies).
func (c Config) GitLimits() gitsource.Limits {
	return gitsource.Limits{Policy: gitsource.Policy{AllowFile: c.AllowFileURLs, AllowedHosts: c.AllowedHosts},
		CloneTimeout: c.CloneTimeout, MaxRepoBytes: c.MaxRepoBytes, MaxFiles: c.MaxRepoFiles, MaxFileBytes: c.MaxFileBytes, MaxModelPaths: c.MaxModelPaths,
		MaxTreeEntries: c.MaxTreeEntries, MaxPathBytes: c.MaxPathBytes, MaxLookupSteps: c.MaxLookupSteps,
		MaxRefAdverts: c.MaxRefAdvertBytes, RefListings: c.RefListings,
		MaxManifestMemberBytes: c.MaxMemberBytes, MaxManifestNames: c.MaxManifestNames}
}

// SelectorLimits bound the dbt model selectors of the API and of the jobs.
func (c Config) SelectorLimits() convert.SelectorLimits {
	return convert.SelectorLimits{MaxBytes: c.MaxSelectorBytes, MaxTerms: c.MaxSelectorTerms, MaxSteps: c.MaxSelectorSteps}
}

// ChildLimits are what the child process that reads and converts one job's input may use.
func (c Config) ChildLimits() isolate.Limits {
	return isolate.Limits{CPU: c.ChildCPULimit, Memory: c.ChildMemoryLimit}
}

// StorageLimits are what sync jobs may keep in JetStream, as the queue takes them.
func (c Config) StorageLimits() jetstream.Limits {
	return jetstream.Limits{JobRetention: c.JobRetention, ObjectMaxAge: c.ObjectMaxAge, ObjectMaxBytes: c.ObjectMaxBytes,
		MaxQueuedJobs: c.MaxQueuedJobs, MaxRunningJobs: c.MaxRunningJobs}
}

// Load reads the configuration from the environment.
func Load() (Config, error) {
	var c Config
	err := config.Load(&c)
	return c, err
}
