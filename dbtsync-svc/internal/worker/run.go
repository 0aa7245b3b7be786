package worker

import (
	"bufio"
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/isolate"
)

// run converts the job's input and writes the outcome (a branch version or the result
// files); it is safe to run again for the same job. A run that another run superseded
// (errSuperseded) stops before it writes anything.
func (w *Worker) run(ctx context.Context, job dbtsync.Job) (outcome, error) {
	var res convert.Result
	var total int
	var err error
	if w.opts.Isolate != nil {
		res, total, err = w.produceIsolated(ctx, job)
	} else {
		res, total, err = w.produce(ctx, job)
	}
	if err != nil {
		return outcome{}, err
	}
	out := outcome{res: &res}
	// The last look before writing: a run superseded by now writes nothing (one that is
	// superseded while it writes writes what the run that took over writes too, from the
	// same input; only one of them records the job's end).
	if err := w.progress(ctx, job, dbtsync.Progress{Phase: "writing", ModelsTotal: &total, ModelsDone: total}); errors.Is(err, errSuperseded) {
		return outcome{}, err
	}
	if job.Output == dbtsync.OutputFiles {
		if err := w.putResult(ctx, job, res.Files); err != nil {
			return outcome{}, err
		}
	} else {
		version, changed, err := w.Branches.WriteVersion(ctx, job.DeploymentID, job.BranchName, job.SyncJobID, res.Files, time.Now().UTC())
		if err != nil {
			return outcome{}, err
		}
		out.version, out.unchanged = version, !changed
		if changed {
			w.metrics.Versions.Inc()
		}
	}
	w.phase(ctx, job.SyncJobID, "committed")
	if ctx.Err() != nil {
		return outcome{}, ctx.Err()
	}
	return out, nil
}

// putResult stores a files job's output, charged to its deployment and account until
// the store removes it: a result past a storage quota fails the job, saying which. The
// job records the result's charge before the ledgers take it, and a run moves the charge
// from what the job records: a run of the job again (a retry, a redelivery) replaces
// the result and its charge instead of charging it twice. A run that stops between the
// two leaves the job recording a charge the ledgers do not hold; the next run's move
// from it then frees the earlier result's bytes, which its own result (the same input,
// the same size) takes again.
func (w *Worker) putResult(ctx context.Context, job dbtsync.Job, files []convert.File) error {
	prev := job.ResultCharge
	charge := w.storage.StoredCharge(int64(len(dbtsync.ResultJSON(files))), time.Now())
	setCharge := func(ctx context.Context, c dbtsync.Charge) error {
		_, err := w.Jobs.UpdateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *dbtsync.Job) error {
			if err := current(j, job); err != nil {
				return err
			}
			j.ResultCharge = c
			return nil
		})
		return err
	}
	if err := setCharge(ctx, charge); err != nil {
		return err
	}
	bg := context.WithoutCancel(ctx)
	if err := w.storage.Move(ctx, job.AccountID, job.DeploymentID, prev, charge); err != nil {
		_ = setCharge(bg, prev)
		var q *dbtsync.QuotaError
		if errors.As(err, &q) {
			return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeStorageQuota, "the files result of %d bytes for %s", charge.Stored, q))
		}
		return err
	}
	// A result an earlier run may have left (it recorded a charge) is removed first, by
	// the API (Objects), so the put finds no object to replace (which the worker may not).
	if prev != (dbtsync.Charge{}) {
		if err := w.Objects.RemoveResult(ctx, job); err != nil {
			// The earlier result stays as it was, and so does its charge.
			if w.storage.Move(bg, job.AccountID, job.DeploymentID, charge, prev) == nil {
				_ = setCharge(bg, prev)
			}
			if refused(err) {
				return err
			}
			return &removalError{err}
		}
	}
	if err := w.Manifests.PutResult(ctx, job.SyncJobID, files); err != nil {
		// The charge is the earlier result's again (whose object, if it was removed, is
		// gone: its charge stays until its age, as a lost result's does).
		if w.storage.Move(bg, job.AccountID, job.DeploymentID, charge, prev) == nil {
			_ = setCharge(bg, prev)
		}
		return err
	}
	return nil
}

// removalError: the API could not be asked to remove an earlier result. The run is
// tried again shortly and does not count as an attempt (failed): the job never fails
// for it.
type removalError struct{ err error }

func (e *removalError) Error() string { return "remove the earlier files result: " + e.err.Error() }
func (e *removalError) Unwrap() error { return e.err }

// progress stores where the job is (best effort: a lost update is overwritten by the
// next), unless another run took the job over (errSuperseded).
func (w *Worker) progress(ctx context.Context, job dbtsync.Job, p dbtsync.Progress) error {
	_, err := w.Jobs.UpdateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *dbtsync.Job) error {
		if err := current(j, job); err != nil {
			return err
		}
		j.Progress = p
		return nil
	})
	return err
}

// loaded records that the job's input is read, with its models, and passes the
// "converting" phase.
func (w *Worker) loaded(ctx context.Context, job dbtsync.Job, total int) error {
	if err := w.progress(ctx, job, dbtsync.Progress{Phase: "converting", ModelsTotal: &total}); errors.Is(err, errSuperseded) {
		return err
	}
	w.phase(ctx, job.SyncJobID, "converting")
	return ctx.Err()
}

// converted records that done of the job's total models are converted.
func (w *Worker) converted(ctx context.Context, job dbtsync.Job, done, total int) {
	err := w.progress(ctx, job, dbtsync.Progress{Phase: "converting", ModelsTotal: &total, ModelsDone: done})
	if err == nil && w.opts.Progressed != nil {
		w.opts.Progressed(ctx, job.SyncJobID, done, total)
	}
}

// produce reads and converts the job's input in this process (tests that run the
// worker in-process: Options.Isolate nil).
func (w *Worker) produce(ctx context.Context, job dbtsync.Job) (convert.Result, int, error) {
	proj, err := w.load(ctx, job)
	if err != nil {
		return convert.Result{}, 0, err
	}
	selection, err := dbtsync.ApplySelector(proj, job.Select, job.Exclude, w.opts.Selector)
	if err != nil {
		return convert.Result{}, 0, err
	}
	total := len(proj.Models)
	if err := w.loaded(ctx, job, total); err != nil {
		return convert.Result{}, 0, err
	}
	res, err := w.convert(ctx, job, proj)
	res.Selection = selection
	return res, total, err
}

// produceIsolated reads and converts the job's input in a child process (Options.Isolate)
// that is killed when ctx ends (a cancel, the job's deadline): the worker opens the
// input (the uploaded manifest, or the integration and its credentials) and keeps every
// write; the child reads what the tenant supplied and converts it.
func (w *Worker) produceIsolated(ctx context.Context, job dbtsync.Job) (convert.Result, int, error) {
	total := 0
	in := isolate.Input{Source: job.Source, ProgressEvery: w.opts.ProgressEvery, Select: job.Select, Exclude: job.Exclude,
		Loaded:   func(n int) error { total = n; return w.loaded(ctx, job, n) },
		Progress: func(done, n int) { w.converted(ctx, job, done, n) },
		Logger:   w.logger.With("sync_job_id", job.SyncJobID, "deployment_id", job.DeploymentID)}
	if job.Source == dbtsync.SourceManifest {
		r, err := w.Manifests.Manifest(ctx, job.ManifestJobID())
		if errors.Is(err, dbtsync.ErrNotFound) {
			return convert.Result{}, 0, errManifestGone
		}
		if err != nil {
			return convert.Result{}, 0, err
		}
		defer r.Close()
		in.Manifest = r
	} else {
		integ, ref, err := w.integration(ctx, job)
		if err != nil {
			return convert.Result{}, 0, err
		}
		in.Integration, in.Ref, in.Commit = integ, ref, job.Commit
	}
	res, err := w.opts.Isolate.Run(ctx, in)
	return res, total, err
}

// convert renders the project model by model, recording progress every ProgressEvery
// models; it stops before the next model once ctx ends (a cancel, the job's deadline).
func (w *Worker) convert(ctx context.Context, job dbtsync.Job, proj *convert.Project) (convert.Result, error) {
	conv := convert.Prepare(proj)
	total := len(proj.Models)
	res := convert.Result{Files: make([]convert.File, conv.Len()), Warnings: conv.Warnings}
	for i := range res.Files {
		if err := ctx.Err(); err != nil {
			return convert.Result{}, err
		}
		res.Files[i] = conv.File(i)
		// Skipped models (warnings) count as done with the first file, so done reaches total;
		// the files of saved queries (views) count as none.
		done := min(i+1+total-conv.Len(), total)
		if done <= 0 || done%w.opts.ProgressEvery != 0 || done == total {
			continue
		}
		w.converted(ctx, job, done, total)
	}
	return res, nil
}

// load reads the job's input: its uploaded manifest, or the project at its ref of the
// deployment's repository.
func (w *Worker) load(ctx context.Context, job dbtsync.Job) (*convert.Project, error) {
	if job.Source == dbtsync.SourceManifest {
		r, err := w.Manifests.Manifest(ctx, job.ManifestJobID())
		if errors.Is(err, dbtsync.ErrNotFound) {
			return nil, errManifestGone
		}
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return dbtsync.DecodeManifestWith(bufio.NewReaderSize(r, 256<<10), w.opts.Manifest)
	}
	integ, ref, err := w.integration(ctx, job)
	if err != nil {
		return nil, err
	}
	return w.Git.Load(ctx, integ, ref, job.Commit)
}

var errManifestGone = dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeInputGone, "the uploaded manifest is gone from the object store"))

// integration is the deployment's git integration and the ref the job reads.
func (w *Worker) integration(ctx context.Context, job dbtsync.Job) (dbtsync.Integration, string, error) {
	integ, err := w.Integrations.Integration(ctx, job.DeploymentID)
	if errors.Is(err, dbtsync.ErrNotFound) {
		return integ, "", dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeInputGone, "the deployment has no dbt git integration any more"))
	}
	if err != nil {
		return integ, "", err
	}
	ref := integ.Branch
	if job.Ref != nil {
		ref = *job.Ref
	}
	return integ, ref, nil
}
