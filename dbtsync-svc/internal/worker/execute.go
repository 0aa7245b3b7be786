package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/errs"
)

// outcome is how a job ended: its status, the error it failed with, and what it wrote.
type outcome struct {
	status    string
	err       error
	res       *convert.Result
	version   int64
	unchanged bool // a branch job whose output was the latest version's
}

// execute runs a claimed job and records how it ended. A run is bounded by JobTimeout
// and stops when a cancel is requested: an isolated run's child is killed then, an
// in-process run stops at its next model.
func (w *Worker) execute(ctx context.Context, d dbtsync.Delivery, job dbtsync.Job, span trace.Span, log *slog.Logger) {
	stopKeepAlive := w.keepAlive(ctx, d)
	runCtx, cancelRun := context.WithTimeout(ctx, w.opts.JobTimeout)
	canceled := w.watchCancel(runCtx, job, cancelRun)
	out, err := w.run(runCtx, job)
	timedOut := runCtx.Err() == context.DeadlineExceeded
	cancelRun()
	stopKeepAlive()
	bg := context.WithoutCancel(ctx)
	switch {
	case ctx.Err() != nil:
		log.Warn("worker stopping mid-job; JetStream will redeliver it")
	case errors.Is(err, errSuperseded):
		log.Warn("sync job started again by another worker while this one ran it; this run's outcome is dropped")
	case err != nil && canceled.Load():
		if w.settle(bg, d, job, outcome{status: dbtsync.StatusCanceled}) {
			log.Info("sync job canceled while running")
		}
	case err != nil:
		if timedOut {
			err = dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeJobTimeout, "the job ran longer than %s, its time limit, and was stopped", w.opts.JobTimeout))
		}
		w.failed(bg, d, job, err, span, log)
	default:
		out.status = dbtsync.StatusSucceeded
		if w.settle(bg, d, job, out) {
			log.Info("sync job succeeded", "files", len(out.res.Files), "warnings", len(out.res.Warnings), "version", out.version, "changed", !out.unchanged)
		}
	}
}

// failed ends the job failed when retrying cannot help or it ran MaxAttempts times, and
// otherwise queues it again after the backoff (unless another run took it over). A run
// that could not have the API remove an earlier result (removalError) is queued again
// after BlockedDelay and does not count as an attempt.
func (w *Worker) failed(ctx context.Context, d dbtsync.Delivery, job dbtsync.Job, err error, span trace.Span, log *slog.Logger) {
	span.RecordError(err)
	var removal *removalError
	uncounted := errors.As(err, &removal)
	if !uncounted && (dbtsync.IsPermanent(err) || job.Attempts >= w.opts.MaxAttempts) {
		span.SetStatus(codes.Error, err.Error())
		if w.settle(ctx, d, job, outcome{status: dbtsync.StatusFailed, err: err}) {
			log.Warn("sync job failed", "err", err, "attempts", job.Attempts)
		}
		return
	}
	code, reason, _ := dbtsync.PublicFailure(err)
	_, uerr := w.Jobs.UpdateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *dbtsync.Job) error {
		if err := current(j, job); err != nil {
			return err
		}
		j.Status, j.Error, j.ErrorCode, j.Progress.Phase = dbtsync.StatusQueued, &reason, code, "retrying"
		if uncounted {
			j.Attempts-- // the next start counts it again
		}
		return nil
	})
	if errors.Is(uerr, errSuperseded) {
		return
	}
	w.metrics.Attempts.WithLabelValues("retry").Inc()
	if uncounted {
		d.Retry(w.opts.BlockedDelay)
		log.Warn("sync job's earlier files result could not be removed; retrying", "err", err)
		return
	}
	d.Retry(w.opts.Backoff(job.Attempts))
	log.Warn("sync job attempt failed; retrying", "err", err, "attempt", job.Attempts)
}

// settle ends the job with o and answers its delivery: acknowledged once the end is
// recorded; left to the run that took the job over when this one was superseded; and
// delivered again shortly when the end could not be recorded (the job queue out of
// reach), so that a later delivery ends it. It reports whether this run ended the job.
func (w *Worker) settle(ctx context.Context, d dbtsync.Delivery, job dbtsync.Job, o outcome) bool {
	err := w.finish(ctx, job, o)
	switch {
	case err == nil:
		d.Ack()
		return true
	case errors.Is(err, errSuperseded):
		w.logger.Warn("sync job ended or started again by another run; this run's outcome is dropped", "sync_job_id", job.SyncJobID)
	default:
		w.logger.Error("record job outcome; the job is delivered again", "sync_job_id", job.SyncJobID, "err", err)
		d.Retry(w.opts.BlockedDelay)
	}
	return false
}

// finish records the job's end (once: only while the job is still the run's, see
// current), lets its branch's next job go, and removes a succeeded job's upload: a
// failed or canceled job's stays (until DBT_SYNC_OBJECT_MAX_AGE) so the job can be
// retried. A failure is recorded as its tenant may read it (a code and a message); the
// detail of an internal one goes to the log only. The finish event is recorded from the
// job as stored (FinishEvent), so a redelivery can record it again, identical.
func (w *Worker) finish(ctx context.Context, job dbtsync.Job, o outcome) error {
	now := time.Now().UTC()
	var code, msg string
	if o.err != nil {
		var own bool
		if code, msg, own = dbtsync.PublicFailure(o.err); !own {
			w.logger.Error("sync job failed on an internal error", "sync_job_id", job.SyncJobID, "deployment_id", job.DeploymentID, "err", o.err)
		}
	}
	ended, err := w.Jobs.UpdateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *dbtsync.Job) error {
		if err := current(j, job); err != nil {
			return err
		}
		j.Status, j.FinishedAt, j.Progress.Phase, j.Error, j.ErrorCode = o.status, &now, "done", nil, ""
		j.FinishedByWorker = true
		if o.err != nil {
			j.Error, j.ErrorCode = &msg, code
		}
		if o.res != nil {
			j.Warnings, j.Version, j.Selection = o.res.Warnings, o.version, o.res.Selection
			if j.Output == dbtsync.OutputBranch {
				changed := !o.unchanged
				j.Changed = &changed
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	_ = w.Jobs.LeaveLine(ctx, job.DeploymentID, job.BranchName, job.SyncJobID)
	var rerr error
	if job.HasManifest && o.status == dbtsync.StatusSucceeded {
		rerr = w.removeManifest(ctx, ended)
	}
	w.metrics.Jobs.WithLabelValues(o.status).Inc()
	w.metrics.Attempts.WithLabelValues(o.status).Inc()
	if w.opts.Audit != nil {
		w.opts.Audit.Record(ctx, dbtsync.FinishEvent(ended))
	}
	return rerr
}

// removeManifest has a succeeded job's upload removed (by the API: Objects) and frees
// its charge, once, by whoever removed it (two retries of one job may both succeed).
// An error means the API could not be asked: the job, already ended, is delivered
// again shortly and its redelivery asks again (claim); it never fails the job.
func (w *Worker) removeManifest(ctx context.Context, job dbtsync.Job) error {
	deleted, err := w.Objects.RemoveManifest(ctx, job)
	if deleted {
		_ = w.storage.Free(ctx, job.AccountID, job.DeploymentID, job.ManifestCharge)
	}
	if refused(err) {
		w.logger.Error("the API refused to remove a succeeded job's upload; it stays until its age removes it", "sync_job_id", job.SyncJobID, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove the upload of succeeded job %s: %w", job.SyncJobID, err)
	}
	return nil
}

// refused reports whether err is the API's answer that a request is wrong (a client
// error), which asking again does not mend; any other error is asked again.
func refused(err error) bool {
	e, ok := errs.As(err)
	return ok && e.Kind != errs.Unavailable
}

// keepAlive keeps the delivery the worker's while it converts (the queue would deliver it
// again after AckWait), until the returned stop is called.
func (w *Worker) keepAlive(ctx context.Context, d dbtsync.Delivery) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(w.opts.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				d.KeepAlive()
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { close(done) }
}

// watchCancel watches the job while it runs and calls cancel when a cancel is requested
// (which kills an isolated run's child; an in-process conversion checks its context
// before each model). The returned flag tells a
// canceled run from a failed one.
func (w *Worker) watchCancel(ctx context.Context, job dbtsync.Job, cancel context.CancelFunc) *atomic.Bool {
	var flag atomic.Bool
	requested, err := w.Jobs.WatchCancel(ctx, job.DeploymentID, job.SyncJobID)
	if err != nil {
		return &flag // without a watch the job runs to its end; a cancel still ends it queued-side
	}
	go func() {
		select {
		case <-requested:
			flag.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	return &flag
}
