package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// errJobCanceled: the job was canceled before this worker could start it.
var errJobCanceled = errors.New("sync job canceled")

// claim decides what becomes of a delivery before any work: a job that is over, was
// canceled, waits for its branch or ran too often is settled here (ok false, the
// delivery answered); otherwise the job is marked running and returned.
func (w *Worker) claim(ctx context.Context, d dbtsync.Delivery, log *slog.Logger) (job dbtsync.Job, ok bool) {
	bg := context.WithoutCancel(ctx)
	job, err := w.Jobs.Job(ctx, d.DeploymentID(), d.SyncJobID())
	switch {
	case errors.Is(err, dbtsync.ErrNotFound):
		d.Discard()
		return job, false
	case err != nil:
		d.Retry(w.opts.BlockedDelay)
		return job, false
	case job.Terminal(): // a redelivery of a finished job, or one canceled while queued
		d.Ack()
		return job, false
	case job.CancelRequested: // canceled between two attempts
		w.finish(bg, job, outcome{status: dbtsync.StatusCanceled})
		d.Ack()
		return job, false
	}
	if !w.atHeadOfLine(ctx, d, job) {
		return job, false
	}
	// Attempts counts runs started, and is stored before the run: a job whose runs never
	// returned (its input crashed or killed the worker every time) ends here, failed,
	// instead of taking a worker down on every redelivery.
	if job.Attempts >= w.opts.MaxAttempts {
		reason := fmt.Sprintf("the job was started %d times and its worker stopped each time (crashed, killed or restarted) before it finished; it is not tried again", job.Attempts)
		w.finish(bg, job, outcome{status: dbtsync.StatusFailed, err: reason})
		d.Ack()
		log.Warn("sync job failed: too many interrupted runs", "attempts", job.Attempts)
		return job, false
	}
	job, err = w.start(ctx, job)
	if errors.Is(err, errJobCanceled) {
		if current, err := w.Jobs.Job(ctx, d.DeploymentID(), d.SyncJobID()); err == nil && !current.Terminal() {
			w.finish(bg, current, outcome{status: dbtsync.StatusCanceled})
		}
		d.Ack()
		return job, false
	}
	if err != nil {
		d.Retry(w.opts.BlockedDelay)
		return job, false
	}
	return job, true
}

// atHeadOfLine reports whether the job may run now: one job per branch runs at a time,
// in the order they were queued. A job that may not is delivered again later.
func (w *Worker) atHeadOfLine(ctx context.Context, d dbtsync.Delivery, job dbtsync.Job) bool {
	head, err := w.Jobs.LineHead(ctx, job.DeploymentID, job.BranchName)
	if err != nil {
		d.Retry(w.opts.BlockedDelay)
		return false
	}
	if head == "" || head == job.SyncJobID {
		return true
	}
	if w.releaseFinishedHead(ctx, job, head) {
		d.Retry(0)
		return false
	}
	w.phase(ctx, job.SyncJobID, "waiting")
	d.Retry(w.opts.BlockedDelay)
	return false
}

// releaseFinishedHead takes out of job's line a head whose job is already over (its
// worker finished it but died before leaving the line); it reports whether the line moved.
func (w *Worker) releaseFinishedHead(ctx context.Context, job dbtsync.Job, head string) bool {
	h, err := w.Jobs.Job(ctx, job.DeploymentID, head)
	if err != nil && !errors.Is(err, dbtsync.ErrNotFound) {
		return false
	}
	if err == nil && !h.Terminal() {
		return false
	}
	return w.Jobs.LeaveLine(ctx, job.DeploymentID, job.BranchName, head) == nil
}

// start marks the job running for one more attempt, unless it was canceled since it
// was read (errJobCanceled).
func (w *Worker) start(ctx context.Context, job dbtsync.Job) (dbtsync.Job, error) {
	now := time.Now().UTC()
	return w.Jobs.UpdateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *dbtsync.Job) error {
		if j.Terminal() || j.CancelRequested {
			return errJobCanceled
		}
		j.Status, j.Attempts, j.Error = dbtsync.StatusRunning, j.Attempts+1, nil
		j.Progress = dbtsync.Progress{Phase: "fetching"}
		if j.StartedAt == nil {
			j.StartedAt = &now
		}
		return nil
	})
}
