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

	"github.com/analyticsco/platform/embed-svc/client"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/idempotency"
	idemstore "github.com/analyticsco/platform/libs/idempotency/mongostore"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/natsx"
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
	// the outbox of the service's database (nil: every event goes there). It also
	// carries the embed read path's viewer lookups to embed-svc, and the dashboard reach
	// the service answers for embed-svc's dry-run mints (nil: neither; every embed
	// viewer has no groups).
	NATS *nats.Conn
	// ViewerTimeout bounds the wait for embed-svc's answer to a viewer lookup (0: 2s).
	ViewerTimeout time.Duration
	// Viewers answers the viewer lookups instead of embed-svc over NATS (tests).
	Viewers workspace.ViewerGroups
	// Deployments answers whose a promotion's target deployment is instead of the
	// gateway's identity lookup over NATS (tests); IdentityTimeout bounds the wait for the
	// gateway's answer (0: 2s).
	Deployments     workspace.Deployments
	IdentityTimeout time.Duration
	AuditMaxHeld    int
	// MaxInFlightPerAccount bounds one account's requests in flight on this replica per
	// expensive route class (bulk move, publish); 0: unbounded.
	MaxInFlightPerAccount int
	AuditRelay            time.Duration  // how often outboxed events are sent again (0: 1s)
	Audit                 audit.Recorder // set: events go here instead (tests)
	// Idempotency are the Idempotency-Key settings (zero fields: their defaults).
	Idempotency idempotency.Settings
	// Checks gate /readyz: the readiness checks main's server.Connect* returned for the
	// connections the service cannot serve without (MongoDB).
	Checks []server.Check
	// Trash is the retention sweep's settings (Retention 0: the sweep does not run).
	Trash TrashSweep
}

// App is the wired service: its public and internal handlers, and the server of the
// dashboard reach.
type App struct {
	Handler  http.Handler // the public listener: the API behind identity verification, /healthz
	Internal http.Handler // the internal listener: /healthz, /readyz, /metrics
	reach    *natsx.Server
	sweep    *sweepRun
}

// Close stops answering the dashboard reach and stops the trash sweep.
func (a *App) Close() {
	if a.reach != nil {
		_ = a.reach.Close()
	}
	a.sweep.stop()
}

// New wires the service. It creates the indexes first.
func New(ctx context.Context, d Deps) (*App, error) {
	store := mongostore.New(d.Mongo.Database(d.Database))
	idemStore := idemstore.New(d.Mongo.Database(d.Database))
	if err := mongox.EnsureIndexes(ctx, mongox.IndexWait, store.EnsureIndexes, idemStore.EnsureIndexes); err != nil {
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
	ports := workspace.Ports{Store: store, Viewers: d.Viewers, Deployments: d.Deployments}
	var requests *natsx.RequestMetrics
	if d.NATS != nil {
		requests = natsx.NewRequestMetrics(d.Registry)
		if ports.Viewers == nil {
			ports.Viewers = client.NewViewers(natsx.NewClient(d.NATS, natsx.ClientOptions{Metrics: requests}), d.ViewerTimeout)
		}
		if ports.Deployments == nil {
			ports.Deployments = newDeploymentLookup(natsx.NewClient(d.NATS, natsx.ClientOptions{Metrics: requests}), d.IdentityTimeout)
		}
	}
	svc := workspace.NewService(ports, workspace.Options{Limits: d.Limits, Audit: rec, Logger: d.Logger, Metrics: metrics})
	idemSealer, err := idempotency.NewSealer(d.Signer.SealKey("idempotency answers"))
	if err != nil {
		return nil, err
	}
	idem := idempotency.New(idempotency.Options{Store: idemStore, Settings: d.Idempotency, Sealer: idemSealer, Logger: d.Logger})
	o := server.Options{
		Service:  ServiceName,
		Logger:   d.Logger,
		Registry: d.Registry,
		API: identity.Require(d.Signer.ForService(ServiceName), workspace.NewHTTPHandler(workspace.MakeEndpoints(svc), d.Logger,
			fairshare.New(d.Registry, ServiceName, d.MaxInFlightPerAccount), idem)),
		Checks: d.Checks,
	}
	a := &App{Handler: server.Handler(o), Internal: server.Internal(o)}
	a.sweep = startTrashSweep(ctx, d, ports, metrics, rec)
	if d.NATS != nil {
		reach, err := serveReach(d.NATS, workspace.NewReach(ports, workspace.Options{Limits: d.Limits}), d.Logger, requests)
		if err != nil {
			return nil, err
		}
		a.reach = reach
	}
	return a, nil
}

// serveReach answers embed-svc's dashboard reach (the contract is embed-svc/client) with
// reach, in its queue group, so the replicas share the requests, through natsx's server:
// each answer a span of the asker's trace, bounded in time and in handlers in flight.
// Only embed-svc's NATS user may ask it (devstack.NATSUsers).
func serveReach(nc *nats.Conn, reach func(context.Context, client.ReachRequest) (client.ReachReply, error), logger *slog.Logger, m *natsx.RequestMetrics) (*natsx.Server, error) {
	s := natsx.NewServer(nc, natsx.ServerOptions{Metrics: m, Logger: logger})
	if err := client.ServeReach(s, reach); err != nil {
		return nil, err
	}
	return s, nil
}
