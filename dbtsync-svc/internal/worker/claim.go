package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// errJobCanceled: the job was canceled before this worker could start it.
var errJobCanceled = errors.New("sync job canceled")

// errSuperseded: the job was started again since this run started (its delivery went
// to another worker while this one still ran) or it is over: this run writes nothing
// more and leaves the delivery to the run that took over.
var errSuperseded = errors.New("sync job taken over by another run")

// current reports errSuperseded unless j (the job as stored now) is still the
// non-terminal job that run started.
func current(j *dbtsync.Job, run dbtsync.Job) error {
	if j.Terminal() || j.Runs != run.Runs {
		return errSuperseded
	}
	return nil
}

// claim decides what becomes of a delivery before any work: a job that is over, was
// canceled, waits for its branch or ran too often is settled here (ok false, the
// delivery answered); otherwise the job is admitted (alone on this worker when a worker
// stopped during one of its runs), marked running and returned, with the release of its
// admission.
func (w *Worker) claim(ctx context.Context, d dbtsync.Delivery, log *slog.Logger) (job dbtsync.Job, release func(), ok bool) {
	bg := context.WithoutCancel(ctx)
	job, err := w.Jobs.Job(ctx, d.DeploymentID(), d.SyncJobID())
	switch {
	case errors.Is(err, dbtsync.ErrNotFound):
		d.Discard()
		return job, nil, false
	case err != nil:
		d.Retry(w.opts.BlockedDelay)
		return job, nil, false
	case job.Terminal(): // a redelivery of a finished job, or one canceled while queued
		if job.FinishedByWorker && w.opts.Audit != nil {
			// Its worker may have stopped before its finish event was safe: the same
			// event again (its id derives from the job), stored once.
			w.opts.Audit.Record(bg, dbtsync.FinishEvent(job))
		}
		// Its upload may still be stored (its worker could not have it removed).
		if job.FinishedByWorker && job.HasManifest && job.Status == dbtsync.StatusSucceeded {
			if err := w.removeManifest(bg, job); err != nil {
				log.Warn("the upload of a succeeded job could not be removed; the job is delivered again", "err", err)
				d.Retry(w.opts.BlockedDelay)
				return job, nil, false
			}
		}
		d.Ack()
		return job, nil, false
	case job.CancelRequested: // canceled between two attempts
		w.settle(bg, d, job, outcome{status: dbtsync.StatusCanceled})
		return job, nil, false
	}
	if !w.atHeadOfLine(ctx, d, job) {
		return job, nil, false
	}
	// Attempts is stored before the run: a job whose runs never return (its input crashes
	// or kills the worker) ends here, failed, instead of taking a worker down on every
	// redelivery. Only runs it made alone count then (interrupted).
	if interrupted(job) >= w.opts.MaxAttempts {
		w.settle(bg, d, job, outcome{status: dbtsync.StatusFailed, err: dbtsync.Permanent(errWorkerStopped(job.Attempts))})
		log.Warn("sync job failed: its worker stopped during each of its runs alone", "attempts", job.Attempts)
		return job, nil, false
	}
	release, ok = w.admit(ctx, d, job.Alone || job.Status == dbtsync.StatusRunning)
	if !ok {
		return job, nil, false
	}
	job, err = w.start(ctx, job)
	if errors.Is(err, errJobCanceled) {
		if now, err := w.Jobs.Job(ctx, d.DeploymentID(), d.SyncJobID()); err == nil && !now.Terminal() {
			w.settle(bg, d, now, outcome{status: dbtsync.StatusCanceled})
		} else {
			d.Ack()
		}
		release()
		return job, nil, false
	}
	if err != nil {
		d.Retry(w.opts.BlockedDelay)
		release()
		return job, nil, false
	}
	return job, release, true
}

// errWorkerStopped is the error of a job whose runs alone each stopped their worker.
func errWorkerStopped(attempts int) error {
	return dbtsync.Failure(dbtsync.CodeWorkerStopped, "the job was started %d times and its worker stopped each time (crashed, killed or restarted) while it ran alone; it is not tried again", attempts)
}

// interrupted is the job's attempts as its next start counts them: a job still marked
// running was interrupted (its worker stopped mid-run), and that run counts against it
// only when it ran alone; otherwise the crash may have been a neighbour's.
func interrupted(job dbtsync.Job) int {
	if job.Status == dbtsync.StatusRunning && !job.Alone {
		return job.Attempts - 1
	}
	return job.Attempts
}

// admit lets a job run on this worker: beside others, unless a job runs or waits to run
// alone here; alone (a job during whose run a worker stopped), once this worker's other
// jobs have finished, and no other job starts until it ends. A job that cannot be
// admitted now is delivered again later (to this worker or another).
func (w *Worker) admit(ctx context.Context, d dbtsync.Delivery, alone bool) (release func(), ok bool) {
	if !alone {
		if !w.runs.TryRLock() {
			d.Retry(w.opts.BlockedDelay)
			return nil, false
		}
		return w.runs.RUnlock, true
	}
	if !w.aloneWaiting.CompareAndSwap(false, true) {
		d.Retry(w.opts.BlockedDelay)
		return nil, false
	}
	stop := w.keepAlive(ctx, d) // the other jobs may take a while
	w.runs.Lock()
	stop()
	return func() { w.runs.Unlock(); w.aloneWaiting.Store(false) }, true
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

// start marks the job running for one more attempt and one more run, unless it was
// canceled since it was read (errJobCanceled). A job found running was interrupted (or
// its worker lost its delivery): from now on it runs alone, the interrupted run counts
// only if it already did, and that run is superseded (Runs).
func (w *Worker) start(ctx context.Context, job dbtsync.Job) (dbtsync.Job, error) {
	now := time.Now().UTC()
	return w.Jobs.UpdateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *dbtsync.Job) error {
		if j.Terminal() || j.CancelRequested {
			return errJobCanceled
		}
		j.Attempts, j.Runs = interrupted(*j)+1, j.Runs+1
		j.Alone = j.Alone || j.Status == dbtsync.StatusRunning
		j.Status, j.Error = dbtsync.StatusRunning, nil
		j.Progress = dbtsync.Progress{Phase: "fetching"}
		if j.StartedAt == nil {
			j.StartedAt = &now
		}
		return nil
	})
}
