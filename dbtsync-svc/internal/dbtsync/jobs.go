package dbtsync

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Job statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCanceled  = "canceled"
)

// Where a sync's input comes from, and what it makes.
const (
	SourceGit      = "git"
	SourceManifest = "manifest"
	OutputBranch   = "branch"
	OutputFiles    = "files"
)

// Progress is where a job is.
type Progress struct {
	Phase       string `json:"phase"`
	ModelsDone  int    `json:"modelsDone"`
	ModelsTotal *int   `json:"modelsTotal"`
}

// Job is a sync job as the job queue keeps it: its input, where it is, and who started it.
type Job struct {
	SyncJobID    string
	DeploymentID int64
	Status       string
	Source       string
	Output       string
	Ref          *string // git: the ref to clone instead of the integration's branch
	BranchName   string
	WorkflowID   string
	Progress     Progress
	Error        *string // what the tenant reads of a failure (PublicFailure)
	ErrorCode    string  // ... and its code
	Warnings     []convert.Warning
	CreatedAt    time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	// Attempts counts the runs that count against the job: every run started, except one
	// its worker stopped during while other jobs ran beside it (the crash may have been
	// theirs).
	Attempts int
	// Runs counts every start of the job, interrupted or not: a worker writes the
	// outcome of its run only while the job's Runs is still the one its start set, so a
	// run that another worker took over (its delivery redelivered while it still ran)
	// writes nothing, and the job ends once, with one run's result.
	Runs int
	// Alone: a worker stopped during a run of this job, which since runs alone on its
	// worker, so a crash it causes again is pinned on it and on no other job.
	Alone            bool
	ProductionBranch string
	HasManifest      bool // the job converts an uploaded manifest (ManifestJobID's)
	// ManifestCharge is what that manifest is charged in the storage ledgers: whoever
	// deletes it frees that.
	ManifestCharge Charge
	Version        int64
	// Changed: for a succeeded branch job, whether it wrote a new version (false: the
	// output was byte-identical to the branch's latest version).
	Changed *bool
	// CancelRequested is set by a cancel while the job runs; the worker stops at its next
	// model and ends the job canceled.
	CancelRequested bool
	CanceledBy      int64
	// AccountID, StartedBy and RequestID say whose job it is and which request queued it:
	// the audit trail's event of its end names them.
	AccountID int64
	StartedBy int64
	RequestID string
	RetryOf   string
	// ManifestOf names the job whose uploaded manifest this one converts (a retry's).
	ManifestOf string
	// ResultCharge is what the files result (output files) is charged in the storage
	// ledgers: a run that replaces the result moves the charge from it.
	ResultCharge Charge
	// FinishedByWorker: a worker ended the job (not a cancel of a queued job), and the
	// audit trail holds its finish event (FinishEvent), which a redelivery records again
	// under the same id in case the worker stopped before it could.
	FinishedByWorker bool
	// Select and Exclude are the model selector the job applies (nil: none), as its
	// request and the integration made it; Selection is what it kept and dropped.
	Select, Exclude *string
	Selection       *convert.Selection
	// Trigger is what started the job: TriggerAPI (a request) or TriggerPush (a push
	// webhook, DeliveryID its provider's delivery id). Commit is the pushed commit the
	// job syncs: the branch's head must still be it when the job clones.
	Trigger    string
	Commit     string
	DeliveryID string
}

// TriggerAPI is the trigger of a job a request to the API started.
const TriggerAPI = "api"

// Terminal reports whether the job is over: it runs no more and cannot be canceled.
func (j *Job) Terminal() bool {
	return j.Status == StatusSucceeded || j.Status == StatusFailed || j.Status == StatusCanceled
}

// ManifestJobID names the job whose upload this job converts: its own, or for a retry
// the upload of the job it retries.
func (j *Job) ManifestJobID() string {
	if j.ManifestOf != "" {
		return j.ManifestOf
	}
	return j.SyncJobID
}

// jobView is the job as the API shows it: an error only on a failed job, a cancel
// request only while it still runs.
func jobView(j Job) SyncJob {
	v := SyncJob{SyncJobID: j.SyncJobID, DeploymentID: j.DeploymentID, Status: j.Status, Source: j.Source, Output: j.Output,
		Ref: j.Ref, BranchName: j.BranchName, WorkflowID: j.WorkflowID, Progress: j.Progress, Attempts: j.Attempts, Warnings: j.Warnings,
		CreatedAt: httpx.At(j.CreatedAt), StartedAt: httpx.AtPtr(j.StartedAt), FinishedAt: httpx.AtPtr(j.FinishedAt), Changed: j.Changed,
		CancelRequested: j.CancelRequested && !j.Terminal(), Select: j.Select, Exclude: j.Exclude, Selection: j.Selection,
		Trigger: j.Trigger, Commit: strPtr(j.Commit)}
	if v.Trigger == "" {
		v.Trigger = TriggerAPI
	}
	if j.RetryOf != "" {
		r := j.RetryOf
		v.RetryOf = &r
	}
	if j.Status == StatusFailed {
		v.Error = j.Error
		if j.ErrorCode != "" {
			code := j.ErrorCode
			v.ErrorCode = &code
		}
	}
	if v.Warnings == nil {
		v.Warnings = []convert.Warning{}
	}
	return v
}

// NewSyncJobID is time-ordered (newest sorts last) and unguessable.
func NewSyncJobID(now time.Time) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("sj%016x%s", now.UnixNano(), hex.EncodeToString(b[:]))
}

// ValidJobID reports whether id has the shape NewSyncJobID gives: anything else names no
// job (and never reaches a store key).
func ValidJobID(id string) bool {
	if len(id) != 30 || !strings.HasPrefix(id, "sj") {
		return false
	}
	for _, c := range id[2:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ResultJSON is how a files job's result is stored: the JSON array of its files, as the
// API answers it (GetJob streams it as it is).
func ResultJSON(files []convert.File) []byte {
	if files == nil {
		files = []convert.File{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as httpx.WriteJSON
	_ = enc.Encode(files)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// job reads a job of the deployment, 404 when there is none.
func (s *service) job(ctx context.Context, deploymentID int64, id string) (Job, error) {
	if !ValidJobID(id) {
		return Job{}, errs.NotFoundf("sync job %q not found", id)
	}
	j, err := s.Jobs.Job(ctx, deploymentID, id)
	if errors.Is(err, ErrNotFound) {
		return Job{}, errs.NotFoundf("sync job %q not found", id)
	}
	return j, err
}

func (s *service) GetJob(ctx context.Context, p *identity.Principal, deploymentID int64, id string) (SyncJob, error) {
	if err := authorize(p, roleSync); err != nil {
		return SyncJob{}, err
	}
	j, err := s.job(ctx, deploymentID, id)
	if err != nil {
		return SyncJob{}, err
	}
	v := jobView(j)
	if j.Output == OutputFiles && j.Status == StatusSucceeded {
		files, err := s.Manifests.Result(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			// The object store removed it (DBT_SYNC_OBJECT_MAX_AGE): the
			// job is answered, and says so. A 503 would have the client retry forever.
			v.FilesExpired = true
		case err != nil:
			return SyncJob{}, err
		default:
			v.Files = files // streamed by the transport
		}
	}
	return v, nil
}

func (s *service) ListJobs(ctx context.Context, p *identity.Principal, deploymentID int64, pg httpx.PageQuery) (httpx.Page[SyncJob], error) {
	if err := authorize(p, roleSync); err != nil {
		return httpx.Page[SyncJob]{}, err
	}
	// The job index is read by page: a request reads about first ids, however many jobs
	// the deployment has had.
	// The cursor is the queue's own key of the last job listed.
	var after string
	if pg.After != "" {
		var err error
		if after, err = httpx.DecodeCursor[string](pg.After); err != nil {
			return httpx.Page[SyncJob]{}, err
		}
	}
	ids, end, more, err := s.Jobs.JobPage(ctx, deploymentID, after, pg.First)
	if err != nil {
		return httpx.Page[SyncJob]{}, err
	}
	out := httpx.Page[SyncJob]{Items: make([]SyncJob, 0, len(ids)), PageInfo: httpx.PageInfo{HasNextPage: more}}
	if end != "" {
		c := httpx.EncodeCursor(end)
		out.PageInfo.EndCursor = &c
	}
	for _, id := range ids {
		j, err := s.Jobs.Job(ctx, deploymentID, id)
		if errors.Is(err, ErrNotFound) {
			continue // expired since it was listed
		}
		if err != nil {
			return httpx.Page[SyncJob]{}, err
		}
		out.Items = append(out.Items, jobView(j))
	}
	return out, nil
}

func (s *service) CancelJob(ctx context.Context, p *identity.Principal, deploymentID int64, id string) (SyncJob, error) {
	if err := authorize(p, roleSync); err != nil {
		return SyncJob{}, err
	}
	if !ValidJobID(id) {
		return SyncJob{}, errs.NotFoundf("sync job %q not found", id)
	}
	dequeued := false
	j, err := s.Jobs.UpdateJob(ctx, deploymentID, id, func(j *Job) error {
		dequeued = false
		if j.Terminal() {
			return errs.Conflictf("sync job %s is already %s", id, j.Status)
		}
		j.CanceledBy = p.User.ID
		if j.Status == StatusQueued { // never started, or waiting between attempts: no worker holds it
			now := s.now().UTC()
			j.Status, j.FinishedAt, j.Progress.Phase, j.Error = StatusCanceled, &now, "done", nil
			dequeued = true
			return nil
		}
		j.CancelRequested = true // the worker stops at its next model
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return SyncJob{}, errs.NotFoundf("sync job %q not found", id)
	}
	if err != nil {
		return SyncJob{}, err
	}
	if dequeued {
		// Let the branch's next job go; the queue's delivery is acknowledged by the worker
		// that receives it and finds the job over.
		_ = s.Jobs.LeaveLine(context.WithoutCancel(ctx), deploymentID, j.BranchName, id)
	}
	return jobView(j), nil
}
