// Package app wires dbtsync-svc the same way for main and for tests: the API handler
// and the worker.
package app

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
)

// Deps are what both modes need.
type Deps struct {
	Mongo          *mongo.Database
	NATS           *nats.Conn
	Signer         *identity.Signer
	CredentialsKey string // base64 32 bytes
	Registry       prometheus.Registerer
	Logger         *slog.Logger
	MaxBodyBytes   int64             // POST .../dbt-sync body limit (default 256 MiB)
	Git            dbtsync.GitLimits // repository policy and clone limits (zero: defaults, https only)
	Storage        dbtsync.StorageLimits
	UploadQuota    int64 // bytes of one deployment's manifests waiting in the object store (0: default)
	// Audit events go to the AUDIT stream over NATS, else to the outbox in Mongo;
	// AuditMaxHeld bounds those held in memory when neither takes them. Audit, when set,
	// receives the events instead (tests).
	AuditMaxHeld int
	Audit        audit.Recorder
}

type common struct {
	pipeline *dbtsync.Pipeline
	store    *dbtsync.Store
	sealer   *dbtsync.Sealer
	metrics  *dbtsync.Metrics
	audit    audit.Recorder
}

// setup builds what both modes share; service names the process in its audit events.
func setup(ctx context.Context, d Deps, service string) (*common, error) {
	sealer, err := dbtsync.NewSealer(d.CredentialsKey)
	if err != nil {
		return nil, err
	}
	p, err := dbtsync.OpenPipeline(ctx, d.NATS, d.Storage)
	if err != nil {
		return nil, err
	}
	p.RegisterQueueMetrics(d.Registry)
	store := dbtsync.NewStore(d.Mongo)
	if err := store.EnsureIndexes(ctx); err != nil {
		return nil, err
	}
	rec := d.Audit
	if rec == nil {
		pub, err := audit.NewPublisher(audit.Options{Service: service, NATS: d.NATS, Outbox: audit.NewMongoOutbox(d.Mongo),
			Logger: d.Logger, Registry: d.Registry, MaxHeld: d.AuditMaxHeld})
		if err != nil {
			return nil, err
		}
		pub.Start(ctx)
		rec = pub
	}
	return &common{pipeline: p, store: store, sealer: sealer, metrics: dbtsync.NewMetrics(d.Registry), audit: rec}, nil
}

// API is the API process: the HTTP handler (behind identity.Require) and the branch
// resolver subscription; Close stops the resolver.
type API struct {
	Handler http.Handler
	sub     *nats.Subscription
}

// Close unsubscribes the resolver.
func (a *API) Close() { _ = a.sub.Unsubscribe() }

// NewAPI builds the API process.
func NewAPI(ctx context.Context, d Deps) (*API, error) {
	c, err := setup(ctx, d, "dbtsync-svc")
	if err != nil {
		return nil, err
	}
	if d.MaxBodyBytes <= 0 {
		d.MaxBodyBytes = dbtsync.DefaultMaxSyncBodyBytes
	}
	sub, err := dbtsync.ServeResolver(d.NATS, c.store, d.Logger)
	if err != nil {
		return nil, err
	}
	// Step 2 of a DBT_CREDENTIALS_KEY rotation: what is sealed under an older key moves
	// to the first one, in the background (replicas doing it together is harmless).
	go func() {
		rep, err := c.store.ResealCredentials(ctx, c.sealer)
		switch {
		case err != nil:
			d.Logger.WarnContext(ctx, "re-sealing saved git credentials stopped; the next start resumes", "err", err)
		case rep.Unreadable > 0:
			d.Logger.ErrorContext(ctx, "saved git credentials no DBT_CREDENTIALS_KEY key opens: a key was removed before they were re-sealed",
				"unreadable", rep.Unreadable, "resealed", rep.Resealed)
		case rep.Resealed > 0:
			d.Logger.InfoContext(ctx, "saved git credentials re-sealed with the first DBT_CREDENTIALS_KEY key", "resealed", rep.Resealed)
		}
	}()
	svc := dbtsync.NewService(c.pipeline, c.store, c.sealer, d.Git, d.UploadQuota)
	svc = dbtsync.LoggingMiddleware(d.Logger)(svc)
	svc = dbtsync.InstrumentingMiddleware(c.metrics)(svc)
	svc = dbtsync.AuditingMiddleware(c.audit)(svc)
	h := dbtsync.NewHTTPHandler(dbtsync.MakeEndpoints(svc), d.Logger, d.MaxBodyBytes)
	return &API{Handler: identity.Require(d.Signer.ForService("dbtsync-svc"), h), sub: sub}, nil
}

// NewWorker builds the worker process's job consumer.
func NewWorker(ctx context.Context, d Deps, opts dbtsync.WorkerOptions, cloneDir string) (*dbtsync.Worker, error) {
	c, err := setup(ctx, d, "dbtsync-worker")
	if err != nil {
		return nil, err
	}
	if opts.Audit == nil {
		opts.Audit = c.audit
	}
	git, err := dbtsync.NewGitFetcher(c.sealer, cloneDir, d.Git)
	if err != nil {
		return nil, err
	}
	return dbtsync.NewWorker(c.pipeline, c.store, git, c.metrics, d.Logger, opts), nil
}
