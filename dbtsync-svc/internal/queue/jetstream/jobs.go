package jetstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/natsx"
)

// jobRecord is a job's state in the KV bucket (key job.<deploymentId>.<syncJobId>).
type jobRecord struct {
	SyncJobID        string             `json:"syncJobId"`
	DeploymentID     int64              `json:"deploymentId"`
	Status           string             `json:"status"`
	Source           string             `json:"source"`
	Output           string             `json:"output"`
	Ref              *string            `json:"ref"`
	BranchName       string             `json:"branchName"`
	WorkflowID       string             `json:"workflowId"`
	Progress         dbtsync.Progress   `json:"progress"`
	Error            *string            `json:"error"`
	ErrorCode        string             `json:"errorCode,omitempty"`
	Warnings         []convert.Warning  `json:"warnings"`
	CreatedAt        httpx.Time         `json:"createdAt"`
	StartedAt        *httpx.Time        `json:"startedAt"`
	FinishedAt       *httpx.Time        `json:"finishedAt"`
	Attempts         int                `json:"attempts"`
	Runs             int                `json:"runs,omitempty"`
	Alone            bool               `json:"alone,omitempty"`
	ProductionBranch string             `json:"productionBranch"`
	HasManifest      bool               `json:"hasManifest"`
	Version          int64              `json:"version,omitempty"`
	Changed          *bool              `json:"changed,omitempty"`
	CancelRequested  bool               `json:"cancelRequested,omitempty"`
	CanceledBy       int64              `json:"canceledBy,omitempty"`
	AccountID        int64              `json:"accountId,omitempty"`
	StartedBy        int64              `json:"startedBy,omitempty"`
	RequestID        string             `json:"requestId,omitempty"`
	RetryOf          string             `json:"retryOf,omitempty"`
	ManifestOf       string             `json:"manifestOf,omitempty"`
	Select           *string            `json:"select,omitempty"`
	Exclude          *string            `json:"exclude,omitempty"`
	Selection        *convert.Selection `json:"selection,omitempty"`
	Trigger          string             `json:"trigger,omitempty"`
	Commit           string             `json:"commit,omitempty"`
	DeliveryID       string             `json:"deliveryId,omitempty"`
	// The stored manifest's charge in the storage ledgers (dbtsync.Charge's stored part).
	ManifestBytes int64 `json:"manifestBytes,omitempty"`
	ManifestHour  int64 `json:"manifestHour,omitempty"`
	// The files result's charge, likewise.
	ResultBytes int64 `json:"resultBytes,omitempty"`
	ResultHour  int64 `json:"resultHour,omitempty"`
	// FinishedByWorker: a worker ended the job (and recorded its finish event).
	FinishedByWorker bool `json:"finishedByWorker,omitempty"`
	// Ops are the ids of the last writes that stored this record (the newest last), each
	// "<id>@<unix ms of the write>": a writer whose reply was lost (a leader change)
	// reads the record back and knows whether its write landed, even when others wrote
	// after it.
	Ops []string `json:"ops,omitempty"`
}

// A record keeps every write id of the last opRetention (see Queue.opRetention), and
// at least the last keptOps whatever their age, up to maxOps. A writer whose reply was
// lost reads the record back within its retry budget (DBT_SYNC_JETSTREAM_RETRY_TIMEOUT,
// 12 s by default, for the write and as much for the read): however many writes others
// made meanwhile, its id is still there. A count alone is not enough: writers that go
// on while one waits out a leader change can push its id out, and it would then apply
// its change twice.
const (
	keptOps = 16
	maxOps  = 512
)

// opRetention is how long a job record keeps every write id: three retry budgets, and
// at least a minute.
func (q *Queue) opRetention() time.Duration {
	budget := q.retry.Budget
	if budget <= 0 {
		budget = natsx.DefaultRetryBudget
	}
	return max(time.Minute, 3*budget)
}

// withOp is r with op, written at now, added to prev's write ids, less those older
// than retention (but for the last keptOps).
func (r jobRecord) withOp(prev []string, op string, now time.Time, retention time.Duration) jobRecord {
	ops := make([]string, 0, min(len(prev)+1, maxOps))
	for i, o := range prev {
		if len(prev)-i <= keptOps-1 || now.Sub(opTime(o)) < retention {
			ops = append(ops, o)
		}
	}
	ops = append(ops, op+"@"+strconv.FormatInt(now.UnixMilli(), 10))
	if len(ops) > maxOps {
		ops = ops[len(ops)-maxOps:]
	}
	r.Ops = ops
	return r
}

// hasOp reports whether the record was stored by the write op.
func (r jobRecord) hasOp(op string) bool {
	return slices.ContainsFunc(r.Ops, func(o string) bool { id, _, _ := strings.Cut(o, "@"); return id == op })
}

// opTime is when the write id o was written (the zero time for an id without one,
// written before ids carried their time).
func opTime(o string) time.Time {
	_, at, ok := strings.Cut(o, "@")
	ms, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func recordOf(j dbtsync.Job) jobRecord {
	return jobRecord{SyncJobID: j.SyncJobID, DeploymentID: j.DeploymentID, Status: j.Status, Source: j.Source, Output: j.Output, Ref: j.Ref,
		BranchName: j.BranchName, WorkflowID: j.WorkflowID, Progress: j.Progress, Error: j.Error, ErrorCode: j.ErrorCode, Warnings: j.Warnings,
		CreatedAt: httpx.At(j.CreatedAt), StartedAt: httpx.AtPtr(j.StartedAt), FinishedAt: httpx.AtPtr(j.FinishedAt), Attempts: j.Attempts, Runs: j.Runs, Alone: j.Alone,
		ProductionBranch: j.ProductionBranch, HasManifest: j.HasManifest, Version: j.Version, Changed: j.Changed,
		CancelRequested: j.CancelRequested, CanceledBy: j.CanceledBy, AccountID: j.AccountID, StartedBy: j.StartedBy,
		RequestID: j.RequestID, RetryOf: j.RetryOf, ManifestOf: j.ManifestOf,
		ManifestBytes: j.ManifestCharge.Stored, ManifestHour: j.ManifestCharge.StoredHour,
		ResultBytes: j.ResultCharge.Stored, ResultHour: j.ResultCharge.StoredHour, FinishedByWorker: j.FinishedByWorker,
		Select: j.Select, Exclude: j.Exclude, Selection: j.Selection, Trigger: j.Trigger, Commit: j.Commit, DeliveryID: j.DeliveryID}
}

func (r jobRecord) job() dbtsync.Job {
	return dbtsync.Job{SyncJobID: r.SyncJobID, DeploymentID: r.DeploymentID, Status: r.Status, Source: r.Source, Output: r.Output, Ref: r.Ref,
		BranchName: r.BranchName, WorkflowID: r.WorkflowID, Progress: r.Progress, Error: r.Error, ErrorCode: r.ErrorCode, Warnings: r.Warnings,
		CreatedAt: r.CreatedAt.Time, StartedAt: timePtr(r.StartedAt), FinishedAt: timePtr(r.FinishedAt), Attempts: r.Attempts, Runs: r.Runs, Alone: r.Alone,
		ProductionBranch: r.ProductionBranch, HasManifest: r.HasManifest, Version: r.Version, Changed: r.Changed,
		CancelRequested: r.CancelRequested, CanceledBy: r.CanceledBy, AccountID: r.AccountID, StartedBy: r.StartedBy,
		RequestID: r.RequestID, RetryOf: r.RetryOf, ManifestOf: r.ManifestOf,
		ManifestCharge: dbtsync.Charge{Stored: r.ManifestBytes, StoredHour: r.ManifestHour},
		ResultCharge:   dbtsync.Charge{Stored: r.ResultBytes, StoredHour: r.ResultHour}, FinishedByWorker: r.FinishedByWorker,
		Select: r.Select, Exclude: r.Exclude, Selection: r.Selection, Trigger: r.Trigger, Commit: r.Commit, DeliveryID: r.DeliveryID}
}

func timePtr(t *httpx.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

// jobMessage is the queue message: ids only, never the manifest.
type jobMessage struct {
	SyncJobID    string `json:"syncJobId"`
	DeploymentID int64  `json:"deploymentId"`
}

func (q *Queue) get(ctx context.Context, deploymentID int64, id string) (jobRecord, uint64, error) {
	e, err := q.getEntry(ctx, q.kv, jobKey(deploymentID, id))
	if errors.Is(err, natsjs.ErrKeyNotFound) {
		return jobRecord{}, 0, dbtsync.ErrNotFound
	}
	if err != nil {
		return jobRecord{}, 0, unavailable(err)
	}
	var r jobRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return jobRecord{}, 0, err
	}
	return r, e.Revision(), nil
}

// Job reads a job.
func (q *Queue) Job(ctx context.Context, deploymentID int64, id string) (dbtsync.Job, error) {
	r, _, err := q.get(ctx, deploymentID, id)
	if err != nil {
		return dbtsync.Job{}, err
	}
	return r.job(), nil
}

// UpdateJob applies fn to the job with a compare-and-set on the entry's revision. The
// record it writes carries a new op id: when the write's reply is lost and the retry
// finds the revision moved, the record read back says whether the write was its own
// (a read may come from a replica a little behind; only a current one lets a write
// through, and it holds the op if the write landed).
func (q *Queue) UpdateJob(ctx context.Context, deploymentID int64, id string, fn func(*dbtsync.Job) error) (dbtsync.Job, error) {
	op := newOp()
	for {
		r, rev, err := q.get(ctx, deploymentID, id)
		if err != nil {
			return dbtsync.Job{}, err
		}
		if r.hasOp(op) {
			return r.job(), nil
		}
		j := r.job()
		if err := fn(&j); err != nil {
			return dbtsync.Job{}, err
		}
		b, _ := json.Marshal(recordOf(j).withOp(r.Ops, op, time.Now(), q.opRetention()))
		err = q.do(ctx, func(ctx context.Context) error {
			_, err := q.kv.Update(ctx, jobKey(deploymentID, id), b, rev)
			return err
		})
		switch {
		case err == nil:
			return j, nil
		case !isWrongSequence(err):
			return dbtsync.Job{}, unavailable(err)
		}
	}
}

// isWrongSequence reports a compare-and-set that found another revision (10071, or
// 10164 on a replicated stream) or a create that found the key.
func isWrongSequence(err error) bool {
	var apiErr *natsjs.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequenceConstant) {
		return true
	}
	return errors.Is(err, natsjs.ErrKeyExists) || errors.Is(err, natsjs.ErrKeyRevisionMismatch)
}

// newOp is a fresh id of one write.
func newOp() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// create stores a new job record; a retry that finds the key holding its own write (the
// first reply lost) has done it.
func (q *Queue) create(ctx context.Context, j dbtsync.Job) error {
	op := newOp()
	b, _ := json.Marshal(recordOf(j).withOp(nil, op, time.Now(), q.opRetention()))
	err := q.do(ctx, func(ctx context.Context) error {
		_, err := q.kv.Create(ctx, jobKey(j.DeploymentID, j.SyncJobID), b)
		return err
	})
	if isWrongSequence(err) {
		if r, _, gerr := q.get(ctx, j.DeploymentID, j.SyncJobID); gerr == nil && r.hasOp(op) {
			return nil
		}
	}
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// deleteJob removes a job record (an enqueue undone), retried.
func (q *Queue) deleteJob(ctx context.Context, deploymentID int64, id string) {
	_ = q.do(ctx, func(ctx context.Context) error { return q.kv.Delete(ctx, jobKey(deploymentID, id)) })
}

// Enqueue records the job, puts it in its branch's line, publishes its message on its
// deployment's subject (the stream refuses it past the deployment's limit: ErrJobLimit)
// with the caller's trace context in the headers, and adds it to its deployment's index,
// undoing what it did when a step fails (a job refused at its limit never reaches the
// index). A publish whose acknowledgement is lost is sent again with the same message
// id: the stream stores the job once.
func (q *Queue) Enqueue(ctx context.Context, j dbtsync.Job) error {
	if err := q.create(ctx, j); err != nil {
		return err
	}
	bg := context.WithoutCancel(ctx)
	lk := lineKey(j.DeploymentID, j.BranchName)
	if _, err := q.updateLine(ctx, lk, func(ids []string) []string { return appendID(ids, j.SyncJobID) }); err != nil {
		q.deleteJob(bg, j.DeploymentID, j.SyncJobID)
		return err
	}
	undo := func() {
		_, _ = q.updateLine(bg, lk, func(ids []string) []string { return removeID(ids, j.SyncJobID) })
		q.deleteJob(bg, j.DeploymentID, j.SyncJobID)
	}
	body, _ := json.Marshal(jobMessage{SyncJobID: j.SyncJobID, DeploymentID: j.DeploymentID})
	msg := nats.NewMsg(q.subject(dbtsync.QueueKey{Account: j.AccountID, Deployment: j.DeploymentID}))
	msg.Data = body
	msg.Header.Set(natsjs.MsgIDHeader, j.SyncJobID)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(msg.Header))
	var ack *natsjs.PubAck
	err := q.do(ctx, func(ctx context.Context) (err error) {
		ack, err = q.js.PublishMsg(ctx, msg)
		return err
	})
	if err != nil {
		undo()
		if isSubjectFull(err) {
			return dbtsync.ErrJobLimit
		}
		return unavailable(fmt.Errorf("publish job: %w", err))
	}
	if err := q.indexJob(ctx, j.DeploymentID, j.SyncJobID); err != nil {
		// A worker that took the message meanwhile finds no job and drops it.
		_ = q.do(bg, func(ctx context.Context) error { return q.stream.DeleteMsg(ctx, ack.Sequence) })
		undo()
		return err
	}
	return nil
}

// isSubjectFull reports the stream's refusal of a message past its limit per subject.
func isSubjectFull(err error) bool {
	return strings.Contains(err.Error(), "maximum messages per subject exceeded")
}

// QueuedJobs counts the messages of the deployment's subject: its jobs queued or running.
func (q *Queue) QueuedJobs(ctx context.Context, k dbtsync.QueueKey) (int, error) {
	subj := q.subject(k)
	var info *natsjs.StreamInfo
	err := q.do(ctx, func(ctx context.Context) (err error) {
		info, err = q.stream.Info(ctx, natsjs.WithSubjectFilter(subj))
		return err
	})
	if err != nil {
		return 0, unavailable(err)
	}
	return int(info.State.Subjects[subj]), nil
}

// updateLine edits a branch's line with compare-and-set.
func (q *Queue) updateLine(ctx context.Context, key string, fn func([]string) []string) ([]string, error) {
	var next []string
	err := casUpdate(ctx, q, q.kv, key, func(ids *[]string) error {
		next = fn(slices.Clone(*ids))
		*ids = next
		return nil
	})
	return next, err
}

// appendID adds id to the line once: a retried append finds it there.
func appendID(ids []string, id string) []string {
	if slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}

func removeID(ids []string, id string) []string {
	return slices.DeleteFunc(ids, func(s string) bool { return s == id })
}

// LineHead is the job at the head of the branch's line.
func (q *Queue) LineHead(ctx context.Context, deploymentID int64, branch string) (string, error) {
	e, err := q.getEntry(ctx, q.kv, lineKey(deploymentID, branch))
	if errors.Is(err, natsjs.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", unavailable(err)
	}
	var ids []string
	_ = json.Unmarshal(e.Value(), &ids)
	if len(ids) == 0 {
		return "", nil
	}
	return ids[0], nil
}

// LeaveLine takes the job out of its branch's line.
func (q *Queue) LeaveLine(ctx context.Context, deploymentID int64, branch, id string) error {
	_, err := q.updateLine(ctx, lineKey(deploymentID, branch), func(ids []string) []string { return removeID(ids, id) })
	return err
}

// WatchCancel watches the job's entry and closes the channel at the first update that
// requests a cancel. Making the watch (a consumer's creation) is retried like every
// call; the watch then lives as long as ctx.
func (q *Queue) WatchCancel(ctx context.Context, deploymentID int64, id string) (<-chan struct{}, error) {
	var watcher natsjs.KeyWatcher
	var stop context.CancelFunc
	err := q.do(ctx, func(actx context.Context) (err error) {
		watcher, stop, err = outlive(ctx, actx, func(ctx context.Context) (natsjs.KeyWatcher, error) {
			return q.kv.Watch(ctx, jobKey(deploymentID, id), natsjs.UpdatesOnly())
		}, func(w natsjs.KeyWatcher) { _ = w.Stop() })
		return err
	})
	if err != nil {
		return nil, unavailable(err)
	}
	canceled := make(chan struct{})
	go func() {
		defer stop()
		defer func() { _ = watcher.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-watcher.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				var r jobRecord
				if json.Unmarshal(e.Value(), &r) == nil && r.CancelRequested {
					close(canceled)
					return
				}
			}
		}
	}()
	return canceled, nil
}
