// Package app wires dbtsync-svc the same way for main and for tests: the API handler
// and the worker, each over the adapters of the domain's ports.
package app

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/credentials"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/gitsource"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/idempotency"
	idemstore "github.com/analyticsco/platform/libs/idempotency/mongostore"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/libs/server"
)

// Deps are what both modes need.
type Deps struct {
	Mongo          *mongo.Database
	NATS           *nats.Conn
	Signer         *identity.Signer
	CredentialsKey string // base64 32 bytes
	Registry       *prometheus.Registry
	Logger         *slog.Logger
	MaxBodyBytes   int64 // POST .../dbt-sync body limit (default 256 MiB)
	// MaxPushBodyBytes bounds a push webhook's body (dbtsync.DefaultMaxPushBodyBytes);
	// PushDedupRetention is how long its delivery id and commit are remembered.
	MaxPushBodyBytes   int64
	PushDedupRetention time.Duration
	// MaxInFlightPerAccount bounds one account's POST .../dbt-sync requests in flight on
	// this replica; 0: unbounded.
	MaxInFlightPerAccount int
	Git                   gitsource.Limits // repository policy, clone and manifest read limits (zero: defaults, https only)
	// Storage bounds what JetStream keeps (the queue limits per deployment included);
	// Quotas what one deployment and one account keep in the object store (zero fields:
	// the defaults).
	Storage jetstream.Limits
	Quotas  dbtsync.StorageQuotas
	// Selector bounds the dbt model selectors, in the API and the jobs (zero fields: the
	// defaults).
	Selector convert.SelectorLimits
	// Replicas of the JetStream resources (0: 1), and how long a JetStream call is
	// retried across a leader election (0: natsx.DefaultRetryBudget).
	Replicas    int
	RetryBudget time.Duration
	// Audit events go to the AUDIT stream over NATS, else to the outbox in Mongo;
	// AuditMaxHeld bounds those held in memory when neither takes them. Audit, when set,
	// receives the events instead (tests).
	AuditMaxHeld int
	Audit        audit.Recorder
	// Idempotency are the Idempotency-Key settings of the API (zero fields: the defaults).
	Idempotency idempotency.Settings
	// Checks gate /readyz: the readiness checks main's server.Connect* returned (MongoDB
	// and NATS, in both processes).
	Checks []server.Check
}

// adapters are what both modes share.
type adapters struct {
	queue   *jetstream.Queue
	store   *mongostore.Store
	sealer  *credentials.Sealer
	metrics *dbtsync.Metrics
	audit   audit.Recorder
}

// setup builds what both modes share; service names the process in its audit events.
// The API process makes the JetStream resources (or updates their configuration); the
// worker binds to them as they are (bind), waiting for the API to make them.
func setup(ctx context.Context, d Deps, service string, bind bool) (*adapters, error) {
	sealer, err := credentials.NewSealer(d.CredentialsKey)
	if err != nil {
		return nil, err
	}
	q, err := jetstream.Open(ctx, d.NATS, jetstream.Options{Limits: d.Storage, Replicas: d.Replicas,
		Retry: natsx.Retrier{Budget: d.RetryBudget}, Logger: d.Logger, Bind: bind})
	if err != nil {
		return nil, err
	}
	q.RegisterMetrics(d.Registry)
	store := mongostore.New(d.Mongo)
	if err := mongox.EnsureIndexes(ctx, mongox.IndexWait, store.EnsureIndexes); err != nil {
		return nil, err
	}
	rec := d.Audit
	if rec == nil {
		pub, err := publish.NewPublisher(publish.Options{Service: service, NATS: d.NATS, Outbox: publish.NewMongoOutbox(d.Mongo),
			Logger: d.Logger, Registry: d.Registry, MaxHeld: d.AuditMaxHeld})
		if err != nil {
			return nil, err
		}
		pub.Start(ctx)
		rec = pub
	}
	return &adapters{queue: q, store: store, sealer: sealer, metrics: dbtsync.NewMetrics(d.Registry), audit: rec}, nil
}

// API is the API process: its public handler (the API behind identity.Require, /healthz),
// its internal one (/healthz, /readyz, /metrics) and the server of the branch resolver
// and of the worker's object removals; Close stops it.
type API struct {
	Handler  http.Handler
	Internal http.Handler
	resolver *natsx.Server
}

// Close unsubscribes the resolver and the object removals.
func (a *API) Close() { _ = a.resolver.Close() }

// NewAPI builds the API process.
func NewAPI(ctx context.Context, d Deps) (*API, error) {
	a, err := setup(ctx, d, "dbtsync-svc", false)
	if err != nil {
		return nil, err
	}
	if d.MaxBodyBytes <= 0 {
		d.MaxBodyBytes = dbtsync.DefaultMaxSyncBodyBytes
	}
	resolver, err := serveResolver(d.NATS, dbtsync.NewResolver(a.store, nil), d.Logger, d.Registry)
	if err != nil {
		return nil, err
	}
	if err := serveObjectRemoval(resolver, &dbtsync.ObjectRemover{Jobs: a.queue, Objects: a.queue}); err != nil {
		_ = resolver.Close()
		return nil, err
	}
	go reseal(ctx, a, d.Logger)
	svc := dbtsync.NewService(dbtsync.Ports{Branches: a.store, Integrations: a.store, Jobs: a.queue, Manifests: a.queue, Ledgers: a.queue,
		Git: gitsource.New(a.sealer, d.Git), Sealer: a.sealer, Pushes: a.store},
		dbtsync.Options{Quotas: d.Quotas, ObjectMaxAge: d.Storage.ObjectMaxAge, MaxQueuedJobs: d.Storage.MaxQueuedJobs, Selector: d.Selector, PushDedupRetention: d.PushDedupRetention,
			Audit: a.audit, Logger: d.Logger, Metrics: a.metrics})
	idemStore := idemstore.New(d.Mongo)
	if err := mongox.EnsureIndexes(ctx, mongox.IndexWait, idemStore.EnsureIndexes); err != nil {
		return nil, err
	}
	idemSealer, err := idempotency.NewSealer(d.Signer.SealKey("idempotency answers"))
	if err != nil {
		return nil, err
	}
	idem := idempotency.New(idempotency.Options{Store: idemStore, Settings: d.Idempotency, Sealer: idemSealer, Logger: d.Logger})
	h := dbtsync.NewHTTPHandler(dbtsync.MakeEndpoints(svc), d.Logger, d.MaxBodyBytes, d.Git.ManifestLimits(),
		fairshare.New(d.Registry, "dbtsync-svc", d.MaxInFlightPerAccount), idem, d.MaxPushBodyBytes)
	public, internal := Listeners("dbtsync-svc", d, identity.Require(d.Signer.ForService("dbtsync-svc"), h))
	return &API{Handler: public, Internal: internal, resolver: resolver}, nil
}

// Listeners are a process's public handler (api, nil: none, and /healthz) and internal
// one (/healthz, /readyz over d.Checks, /metrics), as every service builds them.
func Listeners(service string, d Deps, api http.Handler) (public, internal http.Handler) {
	if api == nil {
		api = http.HandlerFunc(server.NotFound)
	}
	o := server.Options{Service: service, Logger: d.Logger, Registry: d.Registry, API: api, Checks: d.Checks}
	return server.Handler(o), server.Internal(o)
}

// reseal is step 2 of a DBT_CREDENTIALS_KEY rotation: what is sealed under an older key
// moves to the first one, in the background (replicas doing it together is harmless).
func reseal(ctx context.Context, a *adapters, logger *slog.Logger) {
	rep, err := a.store.ResealCredentials(ctx, a.sealer)
	switch {
	case err != nil:
		logger.WarnContext(ctx, "re-sealing saved git credentials stopped; the next start resumes", "err", err)
	case rep.Unreadable > 0:
		logger.ErrorContext(ctx, "saved git credentials no DBT_CREDENTIALS_KEY key opens: a key was removed before they were re-sealed",
			"unreadable", rep.Unreadable, "resealed", rep.Resealed)
	case rep.Resealed > 0:
		logger.InfoContext(ctx, "saved git credentials re-sealed with the first DBT_CREDENTIALS_KEY key", "resealed", rep.Resealed)
	}
}

// NewWorker builds the worker process's job consumer; it clones under cloneDir ("": the
// system temp directory).
func NewWorker(ctx context.Context, d Deps, opts worker.Options, cloneDir string) (*worker.Worker, error) {
	a, err := setup(ctx, d, "dbtsync-worker", true)
	if err != nil {
		return nil, err
	}
	if opts.Audit == nil {
		opts.Audit = a.audit
	}
	opts.Quotas, opts.ObjectMaxAge = d.Quotas, d.Storage.ObjectMaxAge
	// Every manifest read, here or in a child, within the limits the API's upload check
	// applies (d.Git's).
	opts.Manifest = d.Git.ManifestLimits()
	opts.Selector = d.Selector
	git, err := gitsource.NewCloner(a.sealer, cloneDir, d.Git)
	if err != nil {
		return nil, err
	}
	if opts.Isolate != nil && opts.Isolate.CloneDir == "" {
		opts.Isolate.CloneDir = git.Root() // the children clone under the worker's own locked directory
	}
	if opts.Isolate != nil {
		opts.Isolate.Selector = d.Selector
		opts.Isolate.Git.MaxManifestMemberBytes, opts.Isolate.Git.MaxManifestNames = d.Git.MaxManifestMemberBytes, d.Git.MaxManifestNames
	}
	// The worker removes no object itself: the API does, when it asks (remoteObjects).
	objects := newRemoteObjects(natsx.NewClient(d.NATS, natsx.ClientOptions{Metrics: natsx.NewRequestMetrics(d.Registry)}))
	return worker.New(worker.Ports{Jobs: a.queue, Feed: a.queue, Manifests: a.queue, Ledgers: a.queue, Branches: a.store, Integrations: a.store, Git: git,
		Objects: objects}, a.metrics, d.Logger, opts), nil
}
