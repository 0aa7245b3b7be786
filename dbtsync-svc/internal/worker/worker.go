// Package worker is dbtsync-svc's job consumer (`dbtsync-svc worker`): it takes the jobs
// the job feed delivers, one per branch at a time and in order, converts their input
// (an uploaded manifest or a git clone) and writes the outcome (a branch version or a
// files result), through the domain's ports only.
package worker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/isolate"
	"github.com/analyticsco/platform/libs/audit"
)

// Options tune the worker; zero values take the defaults.
type Options struct {
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
	// Quotas and ObjectMaxAge charge files results to their deployment and account, as
	// the API charges uploads (dbtsync.Options: the same settings).
	Quotas       dbtsync.StorageQuotas
	ObjectMaxAge time.Duration
	// Manifest bounds the read of an uploaded manifest in this process (zero fields: the
	// defaults); with Isolate, the child reads it within Isolate.Git's manifest limits.
	// app.NewWorker sets both from the configuration, the API's upload check's limits.
	Manifest convert.ManifestLimits
	// Selector bounds the jobs' model selectors read in this process (zero fields: the
	// defaults); with Isolate, the child applies Isolate.Selector.
	Selector convert.SelectorLimits
	// Isolate, when set, reads and converts each job's input in a child process it can
	// kill (the worker's command and the local stack always set it); nil runs them in
	// this process (tests of the worker's rules over fakes).
	Isolate *isolate.Runner
}

func (o *Options) defaults() {
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
	if o.Quotas.Deployment <= 0 {
		o.Quotas.Deployment = dbtsync.DefaultDeploymentUploadBytes
	}
	if o.Quotas.Account <= 0 {
		o.Quotas.Account = dbtsync.DefaultAccountUploadBytes
	}
	if o.ObjectMaxAge <= 0 {
		o.ObjectMaxAge = dbtsync.DefaultObjectMaxAge
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

// Ports are the adapters the worker works through.
type Ports struct {
	Jobs         dbtsync.JobQueue
	Feed         dbtsync.JobFeed
	Manifests    dbtsync.ManifestStore
	Ledgers      dbtsync.LedgerStore
	Branches     dbtsync.BranchStore
	Integrations dbtsync.IntegrationStore
	Git          dbtsync.GitSource
	// Objects removes a job's objects: the API, which the worker asks (it may not remove
	// anything from the object store itself). Nil: Manifests removes them (stores whose
	// PutResult replaces a result in place, as the tests' in-memory ones do).
	Objects dbtsync.JobObjects
}

// ownObjects is the Objects of a worker given none.
type ownObjects struct{ m dbtsync.ManifestStore }

func (o ownObjects) RemoveManifest(ctx context.Context, job dbtsync.Job) (bool, error) {
	return o.m.DeleteManifest(ctx, job.ManifestJobID())
}

func (ownObjects) RemoveResult(context.Context, dbtsync.Job) error { return nil }

// Worker converts queued jobs.
type Worker struct {
	Ports
	metrics *dbtsync.Metrics
	logger  *slog.Logger
	opts    Options
	storage *dbtsync.Storage
	// runs is held shared by each job running here, and exclusively by one that runs
	// alone; aloneWaiting is set while such a job waits for it or runs.
	runs         sync.RWMutex
	aloneWaiting atomic.Bool
}

// New builds a worker; Run consumes until its context ends.
func New(p Ports, metrics *dbtsync.Metrics, logger *slog.Logger, opts Options) *Worker {
	opts.defaults()
	if p.Objects == nil {
		p.Objects = ownObjects{p.Manifests}
	}
	return &Worker{Ports: p, metrics: metrics, logger: logger, opts: opts,
		storage: &dbtsync.Storage{Ledgers: p.Ledgers, Quotas: opts.Quotas, ObjectMaxAge: opts.ObjectMaxAge, Now: time.Now}}
}

// Run takes jobs from the feed until ctx ends. Jobs in flight then are left to be
// delivered again, as after a crash.
func (w *Worker) Run(ctx context.Context) error {
	return w.Feed.Consume(ctx, w.opts.Concurrency, w.opts.AckWait, w.syncJob)
}

func (w *Worker) phase(ctx context.Context, id, phase string) {
	if w.opts.Phase != nil {
		w.opts.Phase(ctx, id, phase)
	}
}

// syncJob takes one delivery of a sync job: a span of the trace of the request that queued it.
func (w *Worker) syncJob(ctx context.Context, d dbtsync.Delivery) {
	ctx, span := otel.Tracer("dbtsync-worker").Start(ctx, "dbtsync.SyncJob", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("sync_job.id", d.SyncJobID()), attribute.Int64("deployment.id", d.DeploymentID())))
	defer span.End()
	log := w.logger.With("sync_job_id", d.SyncJobID(), "deployment_id", d.DeploymentID(), "trace_id", span.SpanContext().TraceID().String())
	job, release, ok := w.claim(ctx, d, log)
	if !ok {
		return
	}
	defer release()
	w.execute(ctx, d, job, span, log)
}
