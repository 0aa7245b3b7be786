package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/httpx"
)

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
	Progress         dbtsync.Progress  `json:"progress"`
	Error            *string           `json:"error"`
	ErrorCode        string            `json:"errorCode,omitempty"`
	Warnings         []convert.Warning `json:"warnings"`
	CreatedAt        httpx.Time        `json:"createdAt"`
	StartedAt        *httpx.Time       `json:"startedAt"`
	FinishedAt       *httpx.Time       `json:"finishedAt"`
	Attempts         int               `json:"attempts"`
	Alone            bool              `json:"alone,omitempty"`
	ProductionBranch string            `json:"productionBranch"`
	HasManifest      bool              `json:"hasManifest"`
	Version          int64             `json:"version,omitempty"`
	Changed          *bool             `json:"changed,omitempty"`
	CancelRequested  bool              `json:"cancelRequested,omitempty"`
	CanceledBy       int64             `json:"canceledBy,omitempty"`
	AccountID        int64             `json:"accountId,omitempty"`
	StartedBy        int64             `json:"startedBy,omitempty"`
	RequestID        string            `json:"requestId,omitempty"`
	RetryOf          string            `json:"retryOf,omitempty"`
	ManifestOf       string            `json:"manifestOf,omitempty"`
	// The stored manifest's charge in the storage ledgers (dbtsync.Charge's stored part).
	ManifestBytes int64 `json:"manifestBytes,omitempty"`
	ManifestHour  int64 `json:"manifestHour,omitempty"`
}

func recordOf(j dbtsync.Job) jobRecord {
	return jobRecord{SyncJobID: j.SyncJobID, DeploymentID: j.DeploymentID, Status: j.Status, Source: j.Source, Output: j.Output, Ref: j.Ref,
		BranchName: j.BranchName, WorkflowID: j.WorkflowID, Progress: j.Progress, Error: j.Error, ErrorCode: j.ErrorCode, Warnings: j.Warnings,
		CreatedAt: httpx.At(j.CreatedAt), StartedAt: httpx.AtPtr(j.StartedAt), FinishedAt: httpx.AtPtr(j.FinishedAt), Attempts: j.Attempts, Alone: j.Alone,
		ProductionBranch: j.ProductionBranch, HasManifest: j.HasManifest, Version: j.Version, Changed: j.Changed,
		CancelRequested: j.CancelRequested, CanceledBy: j.CanceledBy, AccountID: j.AccountID, StartedBy: j.StartedBy,
		RequestID: j.RequestID, RetryOf: j.RetryOf, ManifestOf: j.ManifestOf,
		ManifestBytes: j.ManifestCharge.Stored, ManifestHour: j.ManifestCharge.StoredHour}
}

func (r jobRecord) job() dbtsync.Job {
	return dbtsync.Job{SyncJobID: r.SyncJobID, DeploymentID: r.DeploymentID, Status: r.Status, Source: r.Source, Output: r.Output, Ref: r.Ref,
		BranchName: r.BranchName, WorkflowID: r.WorkflowID, Progress: r.Progress, Error: r.Error, ErrorCode: r.ErrorCode, Warnings: r.Warnings,
		CreatedAt: r.CreatedAt.Time, StartedAt: timePtr(r.StartedAt), FinishedAt: timePtr(r.FinishedAt), Attempts: r.Attempts, Alone: r.Alone,
		ProductionBranch: r.ProductionBranch, HasManifest: r.HasManifest, Version: r.Version, Changed: r.Changed,
		CancelRequested: r.CancelRequested, CanceledBy: r.CanceledBy, AccountID: r.AccountID, StartedBy: r.StartedBy,
		RequestID: r.RequestID, RetryOf: r.RetryOf, ManifestOf: r.ManifestOf,
		ManifestCharge: dbtsync.Charge{Stored: r.ManifestBytes, StoredHour: r.ManifestHour}}
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

func (q *Queue) get(ctx context.Context, dep int64, id string) (jobRecord, uint64, error) {
	e, err := q.kv.Get(ctx, jobKey(dep, id))
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
func (q *Queue) Job(ctx context.Context, dep int64, id string) (dbtsync.Job, error) {
	r, _, err := q.get(ctx, dep, id)
	if err != nil {
		return dbtsync.Job{}, err
	}
	return r.job(), nil
}

// UpdateJob applies fn to the job with a compare-and-set on the entry's revision.
func (q *Queue) UpdateJob(ctx context.Context, dep int64, id string, fn func(*dbtsync.Job) error) (dbtsync.Job, error) {
	for {
		r, rev, err := q.get(ctx, dep, id)
		if err != nil {
			return dbtsync.Job{}, err
		}
		j := r.job()
		if err := fn(&j); err != nil {
			return dbtsync.Job{}, err
		}
		b, _ := json.Marshal(recordOf(j))
		if _, err := q.kv.Update(ctx, jobKey(dep, id), b, rev); err != nil {
			if isWrongSequence(err) {
				continue
			}
			return dbtsync.Job{}, unavailable(err)
		}
		return j, nil
	}
}

func isWrongSequence(err error) bool {
	var apiErr *natsjs.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequence || errors.Is(err, natsjs.ErrKeyExists)
}

// Enqueue records the job, puts it in its branch's line, publishes its message on its
// deployment's subject (the stream refuses it past the deployment's limit: ErrJobLimit)
// with the caller's trace context in the headers, and adds it to its deployment's index,
// undoing what it did when a step fails (a job refused at its limit never reaches the
// index).
func (q *Queue) Enqueue(ctx context.Context, j dbtsync.Job) error {
	b, _ := json.Marshal(recordOf(j))
	if _, err := q.kv.Create(ctx, jobKey(j.DeploymentID, j.SyncJobID), b); err != nil {
		return unavailable(err)
	}
	bg := context.WithoutCancel(ctx)
	lk := lineKey(j.DeploymentID, j.BranchName)
	if _, err := q.updateLine(ctx, lk, func(ids []string) []string { return append(ids, j.SyncJobID) }); err != nil {
		_ = q.kv.Delete(bg, jobKey(j.DeploymentID, j.SyncJobID))
		return err
	}
	undo := func() {
		_, _ = q.updateLine(bg, lk, func(ids []string) []string { return removeID(ids, j.SyncJobID) })
		_ = q.kv.Delete(bg, jobKey(j.DeploymentID, j.SyncJobID))
	}
	body, _ := json.Marshal(jobMessage{SyncJobID: j.SyncJobID, DeploymentID: j.DeploymentID})
	msg := nats.NewMsg(q.subject(dbtsync.QueueKey{Account: j.AccountID, Deployment: j.DeploymentID}))
	msg.Data = body
	msg.Header.Set(natsjs.MsgIDHeader, j.SyncJobID)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(msg.Header))
	ack, err := q.js.PublishMsg(ctx, msg)
	if err != nil {
		undo()
		if isSubjectFull(err) {
			return dbtsync.ErrJobLimit
		}
		return unavailable(fmt.Errorf("publish job: %w", err))
	}
	if err := q.indexJob(ctx, j.DeploymentID, j.SyncJobID); err != nil {
		// A worker that took the message meanwhile finds no job and drops it.
		_ = q.stream.DeleteMsg(bg, ack.Sequence)
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
	info, err := q.stream.Info(ctx, natsjs.WithSubjectFilter(subj))
	if err != nil {
		return 0, unavailable(err)
	}
	return int(info.State.Subjects[subj]), nil
}

// updateLine edits a branch's line with compare-and-set.
func (q *Queue) updateLine(ctx context.Context, key string, fn func([]string) []string) ([]string, error) {
	var next []string
	err := casUpdate(ctx, q.kv, key, func(ids *[]string) error {
		next = fn(slices.Clone(*ids))
		*ids = next
		return nil
	})
	return next, err
}

func removeID(ids []string, id string) []string {
	return slices.DeleteFunc(ids, func(s string) bool { return s == id })
}

// LineHead is the job at the head of the branch's line.
func (q *Queue) LineHead(ctx context.Context, dep int64, branch string) (string, error) {
	e, err := q.kv.Get(ctx, lineKey(dep, branch))
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
func (q *Queue) LeaveLine(ctx context.Context, dep int64, branch, id string) error {
	_, err := q.updateLine(ctx, lineKey(dep, branch), func(ids []string) []string { return removeID(ids, id) })
	return err
}

// WatchCancel watches the job's entry and closes the channel at the first update that
// requests a cancel.
func (q *Queue) WatchCancel(ctx context.Context, dep int64, id string) (<-chan struct{}, error) {
	watcher, err := q.kv.Watch(ctx, jobKey(dep, id), natsjs.UpdatesOnly())
	if err != nil {
		return nil, unavailable(err)
	}
	canceled := make(chan struct{})
	go func() {
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
