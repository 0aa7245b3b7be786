package dbtsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

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
