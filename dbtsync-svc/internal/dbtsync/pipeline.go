package dbtsync

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/analyticsco/platform/libs/httpx"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// JetStream resources of the pipeline.
const (
	JobsStream    = "DBTSYNC_JOBS"
	JobsSubject   = "dbtsync.jobs"
	JobsKV        = "dbtsync_jobs"
	ManifestStore = "dbtsync_manifests"
	WorkersName   = "dbtsync-workers"
)

// Job statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCanceled  = "canceled"
)

// Progress is where a job is.
type Progress struct {
	Phase       string `json:"phase"`
	ModelsDone  int    `json:"modelsDone"`
	ModelsTotal *int   `json:"modelsTotal"`
}

// jobRecord is a job's state in the KV bucket (key job.<deploymentId>.<syncJobId>).
type jobRecord struct {
	SyncJobID        string            `json:"syncJobId"`
	DeploymentID     int64             `json:"deploymentId"`
	Status           string            `json:"status"`
	Source           string            `json:"source"`
	Output           string            `json:"output"`
	Ref              *string           `json:"ref"`
	BranchName       string            `json:"branchName"`
	WorkflowID       string            `json:"workflowId"`
	Progress         Progress          `json:"progress"`
	Error            *string           `json:"error"`
	Warnings         []convert.Warning `json:"warnings"`
	CreatedAt        httpx.Time        `json:"createdAt"`
	StartedAt        *httpx.Time       `json:"startedAt"`
	FinishedAt       *httpx.Time       `json:"finishedAt"`
	Attempts         int               `json:"attempts"`
	ProductionBranch string            `json:"productionBranch"`
	HasManifest      bool              `json:"hasManifest"`
	Version          int64             `json:"version,omitempty"`
	// Changed: for a succeeded branch job, whether it wrote a new version (false: the
	// output was byte-identical to the branch's latest version).
	Changed *bool `json:"changed,omitempty"`
	// CancelRequested is set by a cancel while the job runs; the worker stops at its next
	// model and ends the job canceled.
	CancelRequested bool  `json:"cancelRequested,omitempty"`
	CanceledBy      int64 `json:"canceledBy,omitempty"`
	// AccountID, StartedBy and RequestID say whose job it is and which request queued it:
	// the audit trail's event of its end names them.
	AccountID int64  `json:"accountId,omitempty"`
	StartedBy int64  `json:"startedBy,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	RetryOf   string `json:"retryOf,omitempty"`
	// ManifestOf names the job whose uploaded manifest this one converts (a retry's).
	ManifestOf string `json:"manifestOf,omitempty"`
}

func (j *jobRecord) terminal() bool {
	return j.Status == StatusSucceeded || j.Status == StatusFailed || j.Status == StatusCanceled
}

// manifestName is the object holding the job's uploaded manifest: its own, or for a
// retry the manifest of the job it retries.
func (j *jobRecord) manifestName() string {
	if j.ManifestOf != "" {
		return manifestObject(j.ManifestOf)
	}
	return manifestObject(j.SyncJobID)
}

// jobMessage is the queue message: ids only, never the manifest.
type jobMessage struct {
	SyncJobID    string `json:"syncJobId"`
	DeploymentID int64  `json:"deploymentId"`
}

// Pipeline is the JetStream side: the job stream, the job state bucket and the manifest
// object store.
type Pipeline struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	obj    jetstream.ObjectStore
}

// StorageLimits bound what sync jobs keep in JetStream; zero fields take the defaults.
type StorageLimits struct {
	JobRetention   time.Duration // job records (and branch lines) untouched this long are removed
	ObjectMaxAge   time.Duration // uploaded manifests and files results are removed after this long
	ObjectMaxBytes int64         // all uploaded manifests and results together
}

// DefaultStorageLimits apply where StorageLimits leaves a field zero.
var DefaultStorageLimits = StorageLimits{JobRetention: 30 * 24 * time.Hour, ObjectMaxAge: 7 * 24 * time.Hour, ObjectMaxBytes: 8 << 30}

// OpenPipeline creates (or updates) the stream, bucket and object store.
func OpenPipeline(ctx context.Context, nc *nats.Conn, limits StorageLimits) (*Pipeline, error) {
	if limits.JobRetention <= 0 {
		limits.JobRetention = DefaultStorageLimits.JobRetention
	}
	if limits.ObjectMaxAge <= 0 {
		limits.ObjectMaxAge = DefaultStorageLimits.ObjectMaxAge
	}
	if limits.ObjectMaxBytes <= 0 {
		limits.ObjectMaxBytes = DefaultStorageLimits.ObjectMaxBytes
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: JobsStream, Subjects: []string{JobsSubject + ".>"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("jobs stream: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: JobsKV, Storage: jetstream.FileStorage, History: 1,
		TTL: limits.JobRetention})
	if err != nil {
		return nil, fmt.Errorf("jobs bucket: %w", err)
	}
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: ManifestStore, Storage: jetstream.FileStorage,
		TTL: limits.ObjectMaxAge, MaxBytes: limits.ObjectMaxBytes})
	if err != nil {
		return nil, fmt.Errorf("manifest store: %w", err)
	}
	return &Pipeline{js: js, stream: stream, kv: kv, obj: obj}, nil
}

func jobKey(dep int64, id string) string { return fmt.Sprintf("job.%d.%s", dep, id) }

func queueKey(dep int64, branch string) string {
	sum := sha256.Sum256([]byte(branch))
	return fmt.Sprintf("branchq.%d.%s", dep, hex.EncodeToString(sum[:12]))
}

func manifestObject(id string) string { return "manifest/" + id }
func resultObject(id string) string   { return "result/" + id }

// newSyncJobID is time-ordered (newest sorts last) and unguessable.
func newSyncJobID(now time.Time) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("sj%016x%s", now.UnixNano(), hex.EncodeToString(b[:]))
}

func (p *Pipeline) getJob(ctx context.Context, dep int64, id string) (*jobRecord, uint64, error) {
	e, err := p.kv.Get(ctx, jobKey(dep, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrQueueUnavailable, err)
	}
	var j jobRecord
	if err := json.Unmarshal(e.Value(), &j); err != nil {
		return nil, 0, err
	}
	return &j, e.Revision(), nil
}

// updateJob applies fn to the job with compare-and-set on the revision, retrying when
// another writer got there first.
func (p *Pipeline) updateJob(ctx context.Context, dep int64, id string, fn func(*jobRecord) error) (*jobRecord, error) {
	for {
		j, rev, err := p.getJob(ctx, dep, id)
		if err != nil {
			return nil, err
		}
		if err := fn(j); err != nil {
			return nil, err
		}
		b, _ := json.Marshal(j)
		if _, err := p.kv.Update(ctx, jobKey(dep, id), b, rev); err != nil {
			if isWrongSequence(err) {
				continue
			}
			return nil, fmt.Errorf("%w: %v", ErrQueueUnavailable, err)
		}
		return j, nil
	}
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || errors.Is(err, jetstream.ErrKeyExists)
}

// updateQueue edits the per-branch waiting line with compare-and-set.
func (p *Pipeline) updateQueue(ctx context.Context, key string, fn func([]string) []string) ([]string, error) {
	for {
		var ids []string
		var rev uint64
		e, err := p.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("%w: %v", ErrQueueUnavailable, err)
		default:
			rev = e.Revision()
			_ = json.Unmarshal(e.Value(), &ids)
		}
		next := fn(slices.Clone(ids))
		b, _ := json.Marshal(next)
		if rev == 0 {
			_, err = p.kv.Create(ctx, key, b)
		} else {
			_, err = p.kv.Update(ctx, key, b, rev)
		}
		if err != nil {
			if isWrongSequence(err) {
				continue
			}
			return nil, fmt.Errorf("%w: %v", ErrQueueUnavailable, err)
		}
		return next, nil
	}
}

func (p *Pipeline) queueHead(ctx context.Context, key string) (string, error) {
	e, err := p.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrQueueUnavailable, err)
	}
	var ids []string
	_ = json.Unmarshal(e.Value(), &ids)
	if len(ids) == 0 {
		return "", nil
	}
	return ids[0], nil
}

func removeID(ids []string, id string) []string {
	return slices.DeleteFunc(ids, func(s string) bool { return s == id })
}

// enqueue records the job, puts it in its branch's line and publishes its message, with
// the caller's trace context in the headers. It returns once JetStream has stored it.
func (p *Pipeline) enqueue(ctx context.Context, j *jobRecord) error {
	b, _ := json.Marshal(j)
	if _, err := p.kv.Create(ctx, jobKey(j.DeploymentID, j.SyncJobID), b); err != nil {
		return fmt.Errorf("%w: %v", ErrQueueUnavailable, err)
	}
	qk := queueKey(j.DeploymentID, j.BranchName)
	if _, err := p.updateQueue(ctx, qk, func(ids []string) []string { return append(ids, j.SyncJobID) }); err != nil {
		_ = p.kv.Delete(context.WithoutCancel(ctx), jobKey(j.DeploymentID, j.SyncJobID))
		return err
	}
	body, _ := json.Marshal(jobMessage{SyncJobID: j.SyncJobID, DeploymentID: j.DeploymentID})
	msg := nats.NewMsg(fmt.Sprintf("%s.%d", JobsSubject, j.DeploymentID))
	msg.Data = body
	msg.Header.Set(jetstream.MsgIDHeader, j.SyncJobID)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(msg.Header))
	if _, err := p.js.PublishMsg(ctx, msg); err != nil {
		bg := context.WithoutCancel(ctx)
		_, _ = p.updateQueue(bg, qk, func(ids []string) []string { return removeID(ids, j.SyncJobID) })
		_ = p.kv.Delete(bg, jobKey(j.DeploymentID, j.SyncJobID))
		return fmt.Errorf("%w: publish job: %v", ErrQueueUnavailable, err)
	}
	return nil
}

// listJobs returns the deployment's job records, newest first.
func (p *Pipeline) listJobs(ctx context.Context, dep int64) ([]string, error) {
	lister, err := p.kv.ListKeysFiltered(ctx, fmt.Sprintf("job.%d.*", dep))
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %v", ErrQueueUnavailable, err)
	}
	var ids []string
	prefix := fmt.Sprintf("job.%d.", dep)
	for k := range lister.Keys() {
		ids = append(ids, k[len(prefix):])
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids, nil
}
