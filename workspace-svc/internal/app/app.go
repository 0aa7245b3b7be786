// Package app wires workspace-svc the same way for main and for tests.
package app

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/server"
	"github.com/analyticsco/platform/workspace-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// ServiceName names the service in logs, metrics and traces.
const ServiceName = "workspace-svc"

// Deps are what the service is built from.
type Deps struct {
	Mongo    *mongo.Client
	Database string
	Signer   *identity.Signer
	Logger   *slog.Logger
	Registry *prometheus.Registry
	Limits   workspace.Limits // zero fields: workspace.DefaultLimits
	// NATS carries the audit events to the AUDIT stream; those it cannot take wait in
	// the outbox of the service's database (nil: every event goes there).
	NATS         *nats.Conn
	AuditMaxHeld int
	AuditRelay   time.Duration  // how often outboxed events are sent again (0: 1s)
	Audit        audit.Recorder // set: events go here instead (tests)
	// Checks gate /readyz: the readiness checks main's server.Connect* returned for the
	// connections the service cannot serve without (MongoDB).
	Checks []server.Check
}

// App is the wired service: its public and internal handlers.
type App struct {
	Handler  http.Handler // the public listener: the API behind identity verification, /healthz
	Internal http.Handler // the internal listener: /healthz, /readyz, /metrics
}

// New wires the service. It creates the indexes first.
func New(ctx context.Context, d Deps) (*App, error) {
	store := mongostore.New(d.Mongo.Database(d.Database))
	if err := mongox.EnsureIndexes(ctx, mongox.IndexWait, store.EnsureIndexes); err != nil {
		return nil, err
	}
	rec := d.Audit
	if rec == nil {
		pub, err := publish.NewPublisher(publish.Options{Service: ServiceName, NATS: d.NATS, Outbox: publish.NewMongoOutbox(d.Mongo.Database(d.Database)),
			Logger: d.Logger, Registry: d.Registry, MaxHeld: d.AuditMaxHeld, RelayInterval: d.AuditRelay})
		if err != nil {
			return nil, err
		}
		pub.Start(ctx)
		rec = pub
	}
	metrics := workspace.NewMetrics(d.Registry)
	svc := workspace.NewService(workspace.Ports{Store: store}, workspace.Options{Limits: d.Limits, TreeConflicts: metrics.TreeConflicts})
	// The decorators in every service's order: Auditing, Logging, Instrumenting. Auditing
	// goes innermost: it records a single move from the bulk move of one it asks the
	// service for, so the outer decorators still see the call as a Move.
	svc = workspace.AuditingMiddleware(rec)(svc)
	svc = workspace.LoggingMiddleware(d.Logger)(svc)
	svc = workspace.InstrumentingMiddleware(metrics)(svc)
	o := server.Options{
		Service:  ServiceName,
		Logger:   d.Logger,
		Registry: d.Registry,
		API:      identity.Require(d.Signer.ForService(ServiceName), workspace.NewHTTPHandler(workspace.MakeEndpoints(svc), d.Logger)),
		Checks:   d.Checks,
	}
	return &App{Handler: server.Handler(o), Internal: server.Internal(o)}, nil
}
