package dbtsync

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/analyticsco/platform/libs/httpx"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/audit"
)

// WorkerOptions tune the worker; zero values take the defaults.
type WorkerOptions struct {
	Concurrency  int           // jobs converted at once (default 2)
	MaxAttempts  int           // runs of a job before it ends failed (default 5)
	AckWait      time.Duration // redelivery after a silent worker (default 30s)
	JobTimeout   time.Duration // a run still going after this long fails (default 15m)
	BlockedDelay time.Duration // retry delay of a job waiting for its branch (default 1s)
	Backoff      func(attempt int) time.Duration
	// Phase, when set, is called as a job passes "waiting", "converting" and "committed";
	// tests use it to stop a worker at a precise point.
	Phase func(ctx context.Context, syncJobID, phase string)
	// ProgressEvery is how many converted models advance progress.modelsDone in the job
	// state (default 100): often enough to watch, rare enough to cost little KV traffic.
	ProgressEvery int
	// Progressed, when set, is called after each such update has been stored.
	Progressed func(ctx context.Context, syncJobID string, modelsDone, modelsTotal int)
	// Audit records the end of every job (nil: nothing is recorded).
	Audit audit.Recorder
}

func (o *WorkerOptions) defaults() {
	if o.Concurrency <= 0 {
		o.Concurrency = 2
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = 15 * time.Minute
	}
	if o.BlockedDelay <= 0 {
		o.BlockedDelay = time.Second
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 100
	}
	if o.Backoff == nil {
		o.Backoff = func(attempt int) time.Duration {
			d := time.Second << min(attempt, 6)
			return min(d, time.Minute)
		}
	}
}

// Worker converts queued jobs.
type Worker struct {
	p       *Pipeline
	store   *Store
	git     *GitFetcher
	metrics *Metrics
	logger  *slog.Logger
	opts    WorkerOptions
}

// NewWorker builds a worker; Run consumes until its context ends.
func NewWorker(p *Pipeline, store *Store, git *GitFetcher, metrics *Metrics, logger *slog.Logger, opts WorkerOptions) *Worker {
	opts.defaults()
	return &Worker{p: p, store: store, git: git, metrics: metrics, logger: logger, opts: opts}
}

// permanentError fails a job at once: retrying cannot help.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// Run pulls jobs with explicit acks until ctx ends. Jobs in flight when ctx ends are
// neither acked nor failed: JetStream redelivers them after AckWait, as after a crash.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.p.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: WorkersName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: w.opts.AckWait,
		MaxDeliver: -1, FilterSubject: JobsSubject + ".>", MaxAckPending: 10000,
	})
	if err != nil {
		return fmt.Errorf("workers consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(w.opts.Concurrency))
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	sem := make(chan struct{}, w.opts.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			w.logger.Warn("job queue", "err", err)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			w.handle(ctx, msg)
		}()
	}
}

func (w *Worker) phase(ctx context.Context, id, phase string) {
	if w.opts.Phase != nil {
		w.opts.Phase(ctx, id, phase)
	}
}

func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	var jm jobMessage
	if err := json.Unmarshal(msg.Data(), &jm); err != nil || jm.SyncJobID == "" {
		_ = msg.Term()
		return
	}
	parent := otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(msg.Headers()))
	ctx, span := otel.Tracer("dbtsync-worker").Start(parent, "dbtsync.SyncJob", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("sync_job.id", jm.SyncJobID), attribute.Int64("deployment.id", jm.DeploymentID)))
	defer span.End()
	log := w.logger.With("sync_job_id", jm.SyncJobID, "deployment_id", jm.DeploymentID, "trace_id", span.SpanContext().TraceID().String())

	job, _, err := w.p.getJob(ctx, jm.DeploymentID, jm.SyncJobID)
	if errors.Is(err, ErrNotFound) {
		_ = msg.Term()
		return
	}
	if err != nil {
		_ = msg.NakWithDelay(w.opts.BlockedDelay)
		return
	}
	if job.terminal() { // a redelivery of a finished job, or one canceled while queued
		_ = msg.Ack()
		return
	}
	if job.CancelRequested { // canceled between two attempts
		w.finish(context.WithoutCancel(ctx), job, StatusCanceled, "", nil, 0, false)
		_ = msg.Ack()
		return
	}
	qk := queueKey(job.DeploymentID, job.BranchName)
	head, err := w.p.queueHead(ctx, qk)
	if err != nil {
		_ = msg.NakWithDelay(w.opts.BlockedDelay)
		return
	}
	if head != "" && head != job.SyncJobID {
		if w.releaseFinishedHead(ctx, job.DeploymentID, qk, head) {
			_ = msg.NakWithDelay(0)
			return
		}
		w.phase(ctx, job.SyncJobID, "waiting")
		_ = msg.NakWithDelay(w.opts.BlockedDelay)
		return
	}
	// Attempts counts runs started, and is stored before the run: a job whose runs never
	// returned (its input crashed or killed the worker every time) ends here, failed,
	// instead of taking a worker down on every redelivery.
	if job.Attempts >= w.opts.MaxAttempts {
		reason := fmt.Sprintf("the job was started %d times and its worker stopped each time (crashed, killed or restarted) before it finished; it is not tried again", job.Attempts)
		w.finish(context.WithoutCancel(ctx), job, StatusFailed, reason, nil, 0, false)
		_ = msg.Ack()
		log.Warn("sync job failed: too many interrupted runs", "attempts", job.Attempts)
		return
	}
	now := time.Now().UTC()
	job, err = w.p.updateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *jobRecord) error {
		if j.terminal() || j.CancelRequested {
			return errJobCanceled // canceled since it was read
		}
		j.Status, j.Attempts, j.Error = StatusRunning, j.Attempts+1, nil
		j.Progress = Progress{Phase: "fetching"}
		if j.StartedAt == nil {
			j.StartedAt = httpx.AtPtr(&now)
		}
		return nil
	})
	if errors.Is(err, errJobCanceled) {
		if job, _, err := w.p.getJob(ctx, jm.DeploymentID, jm.SyncJobID); err == nil && !job.terminal() {
			w.finish(context.WithoutCancel(ctx), job, StatusCanceled, "", nil, 0, false)
		}
		_ = msg.Ack()
		return
	}
	if err != nil {
		_ = msg.NakWithDelay(w.opts.BlockedDelay)
		return
	}
	// Keep the message ours while converting: JetStream would redeliver it after AckWait.
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(w.opts.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress()
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	runCtx, cancelRun := context.WithTimeout(ctx, w.opts.JobTimeout)
	canceled := w.watchCancel(runCtx, job, cancelRun)
	res, version, unchanged, err := w.run(runCtx, job)
	timedOut := runCtx.Err() == context.DeadlineExceeded
	cancelRun()
	close(stop)
	if ctx.Err() != nil {
		log.Warn("worker stopping mid-job; JetStream will redeliver it")
		return
	}
	if err != nil && canceled.Load() {
		w.finish(context.WithoutCancel(ctx), job, StatusCanceled, "", nil, 0, false)
		_ = msg.Ack()
		log.Info("sync job canceled while running")
		return
	}
	if timedOut && err != nil {
		err = permanentError{fmt.Errorf("the job ran longer than %s (DBT_SYNC_JOB_TIMEOUT) and was stopped", w.opts.JobTimeout)}
	}
	bg := context.WithoutCancel(ctx)
	if err != nil {
		span.RecordError(err)
		var perm permanentError
		if errors.As(err, &perm) || job.Attempts >= w.opts.MaxAttempts {
			span.SetStatus(codes.Error, err.Error())
			w.finish(bg, job, StatusFailed, err.Error(), nil, 0, false)
			_ = msg.Ack()
			log.Warn("sync job failed", "err", err, "attempts", job.Attempts)
			return
		}
		_, _ = w.p.updateJob(bg, job.DeploymentID, job.SyncJobID, func(j *jobRecord) error {
			msg := err.Error()
			j.Status, j.Error, j.Progress.Phase = StatusQueued, &msg, "retrying"
			return nil
		})
		w.metrics.Attempts.WithLabelValues("retry").Inc()
		_ = msg.NakWithDelay(w.opts.Backoff(job.Attempts))
		log.Warn("sync job attempt failed; retrying", "err", err, "attempt", job.Attempts)
		return
	}
	w.finish(bg, job, StatusSucceeded, "", res, version, unchanged)
	_ = msg.Ack()
	log.Info("sync job succeeded", "files", len(res.Files), "warnings", len(res.Warnings), "version", version, "changed", !unchanged)
}

// errJobCanceled: the job was canceled before this worker could start it.
var errJobCanceled = errors.New("sync job canceled")

// watchCancel watches the job's record while it runs and calls cancel when a cancel is
// requested; the conversion checks its context before each model. The returned flag
// tells a canceled run from a failed one.
func (w *Worker) watchCancel(ctx context.Context, job *jobRecord, cancel context.CancelFunc) *atomic.Bool {
	var flag atomic.Bool
	watcher, err := w.p.kv.Watch(ctx, jobKey(job.DeploymentID, job.SyncJobID), jetstream.UpdatesOnly())
	if err != nil {
		return &flag // without a watch the job runs to its end; a cancel still ends it queued-side
	}
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
				var j jobRecord
				if json.Unmarshal(e.Value(), &j) == nil && j.CancelRequested {
					flag.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	return &flag
}

// releaseFinishedHead drops a line head whose job is already over (its worker finished it
// but died before leaving the line); it reports whether the line moved.
func (w *Worker) releaseFinishedHead(ctx context.Context, dep int64, qk, head string) bool {
	j, _, err := w.p.getJob(ctx, dep, head)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false
	}
	if j != nil && !j.terminal() {
		return false
	}
	_, err = w.p.updateQueue(ctx, qk, func(ids []string) []string { return removeID(ids, head) })
	return err == nil
}

func (w *Worker) finish(ctx context.Context, job *jobRecord, status, errMsg string, res *convert.Result, version int64, unchanged bool) {
	now := time.Now().UTC()
	_, err := w.p.updateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *jobRecord) error {
		j.Status, j.FinishedAt, j.Progress.Phase = status, httpx.AtPtr(&now), "done"
		if errMsg != "" {
			j.Error = &errMsg
		} else {
			j.Error = nil
		}
		if res != nil {
			j.Warnings = res.Warnings
			j.Version = version
			if j.Output == "branch" {
				changed := !unchanged
				j.Changed = &changed
			}
		}
		return nil
	})
	if err != nil {
		w.logger.Error("record job outcome", "sync_job_id", job.SyncJobID, "err", err)
	}
	_, _ = w.p.updateQueue(ctx, queueKey(job.DeploymentID, job.BranchName), func(ids []string) []string { return removeID(ids, job.SyncJobID) })
	// A failed or canceled job's manifest stays (until DBT_SYNC_OBJECT_MAX_AGE) so the job
	// can be retried; a successful job's is removed.
	if job.HasManifest && status == StatusSucceeded {
		_ = w.p.obj.Delete(ctx, job.manifestName())
	}
	w.metrics.Jobs.WithLabelValues(status).Inc()
	w.metrics.Attempts.WithLabelValues(status).Inc()
	recordFinish(ctx, w.opts.Audit, job, status, errMsg, version, unchanged)
}

// run converts the job's input and writes the outcome (a branch version or the result
// files); it is safe to run again for the same job.
func (w *Worker) run(ctx context.Context, job *jobRecord) (res *convert.Result, version int64, unchanged bool, err error) {
	proj, err := w.load(ctx, job)
	if err != nil {
		return nil, 0, false, err
	}
	total := len(proj.Models)
	_, _ = w.p.updateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *jobRecord) error {
		j.Progress = Progress{Phase: "converting", ModelsTotal: &total}
		return nil
	})
	w.phase(ctx, job.SyncJobID, "converting")
	if ctx.Err() != nil {
		return nil, 0, false, ctx.Err()
	}
	out, err := w.convert(ctx, job, proj)
	if err != nil {
		return nil, 0, false, err
	}
	res = &out
	_, _ = w.p.updateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *jobRecord) error {
		j.Progress = Progress{Phase: "writing", ModelsTotal: &total, ModelsDone: total}
		return nil
	})
	if job.Output == "files" {
		b, _ := json.Marshal(res.Files)
		if _, err := w.p.obj.PutBytes(ctx, resultObject(job.SyncJobID), b); err != nil {
			return nil, 0, false, err
		}
	} else {
		var changed bool
		version, changed, err = w.store.WriteVersion(ctx, job.DeploymentID, job.BranchName, job.SyncJobID, res.Files)
		if err != nil {
			return nil, 0, false, err
		}
		unchanged = !changed
		if changed {
			w.metrics.Versions.Inc()
		}
	}
	w.phase(ctx, job.SyncJobID, "committed")
	if ctx.Err() != nil {
		return nil, 0, false, ctx.Err()
	}
	return res, version, unchanged, nil
}

// convert renders the project model by model, recording progress as it goes; it stops
// before the next model once ctx ends (a cancel, the job's deadline).
func (w *Worker) convert(ctx context.Context, job *jobRecord, proj *convert.Project) (convert.Result, error) {
	conv := convert.Prepare(proj)
	total := len(proj.Models)
	res := convert.Result{Files: make([]convert.File, conv.Len()), Warnings: conv.Warnings}
	for i := range res.Files {
		if err := ctx.Err(); err != nil {
			return convert.Result{}, err
		}
		res.Files[i] = conv.File(i)
		// Skipped models (warnings) count as done with the first file, so done reaches total.
		done := min(i+1+total-conv.Len(), total)
		if done%w.opts.ProgressEvery != 0 || done == total {
			continue
		}
		_, err := w.p.updateJob(ctx, job.DeploymentID, job.SyncJobID, func(j *jobRecord) error {
			j.Progress = Progress{Phase: "converting", ModelsTotal: &total, ModelsDone: done}
			return nil
		})
		if err == nil && w.opts.Progressed != nil {
			w.opts.Progressed(ctx, job.SyncJobID, done, total)
		}
	}
	return res, nil
}

func (w *Worker) load(ctx context.Context, job *jobRecord) (*convert.Project, error) {
	if job.Source == "manifest" {
		obj, err := w.p.obj.Get(ctx, job.manifestName())
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, permanentError{errors.New("the uploaded manifest is gone from the object store")}
		}
		if err != nil {
			return nil, err
		}
		defer obj.Close()
		return decodeManifest(bufio.NewReaderSize(obj, 256<<10))
	}
	integ, err := w.store.integration(ctx, job.DeploymentID)
	if errors.Is(err, ErrNotFound) {
		return nil, permanentError{errors.New("the deployment has no dbt git integration any more")}
	}
	if err != nil {
		return nil, err
	}
	ref := integ.Branch
	if job.Ref != nil {
		ref = *job.Ref
	}
	return w.git.Load(ctx, integ, ref)
}

func decodeManifest(r io.Reader) (*convert.Project, error) {
	p, err := convert.DecodeManifest(r)
	if err != nil {
		if errors.Is(err, convert.ErrNotJSON) || errors.Is(err, convert.ErrNoNodes) || errors.Is(err, convert.ErrNotManifest) || errors.Is(err, convert.ErrUnsupportedVersion) {
			return nil, permanentError{err}
		}
		return nil, err
	}
	return p, nil
}
