// Package app wires embed-svc: the stores, the keyring, the branch resolver, the identity
// lookups and the service behind its HTTP transport. main and the black-box tests build the same thing.
package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/embed-svc/internal/branches"
	"github.com/analyticsco/platform/embed-svc/internal/directory"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/keys"
	"github.com/analyticsco/platform/embed-svc/internal/store/auditstore"
	"github.com/analyticsco/platform/embed-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/embed-svc/internal/store/redisstore"
	"github.com/analyticsco/platform/embed-svc/internal/store/webhookstore"
	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
	libaudit "github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/idempotency"
	idemstore "github.com/analyticsco/platform/libs/idempotency/mongostore"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/libs/redisx"
	"github.com/analyticsco/platform/libs/sealbox"
	"github.com/analyticsco/platform/libs/server"
)

// Deps are what the service needs from its process.
type Deps struct {
	Logger   *slog.Logger
	Registry *prometheus.Registry
	Signer   *identity.Signer // verifies the gateway's forwarded identity
	Mongo    *mongo.Client
	Database string // embed-svc's own database
	Redis    redis.UniversalClient
	// RedisDurable sends exchanges and revocations, waiting for Redis's replicas; nil:
	// through Redis with no wait.
	RedisDurable     *redisx.Durable
	NATS             *nats.Conn
	KeyEncryptionKey string
	TokenIssuer      string
	KeyPublishDelay  time.Duration
	KeyRefresh       time.Duration
	BranchTimeout    time.Duration
	IdentityTimeout  time.Duration    // the identity lookups the gateway answers (0: 2s)
	ReachTimeout     time.Duration    // the dashboard reach workspace-svc answers (0: 2s)
	SessionRetention time.Duration    // 0: embed.DefaultSessionRetention
	Now              func() time.Time // nil: time.Now
	Limits           embed.Limits     // zero fields: embed.DefaultLimits
	// MaxInFlightPerAccount bounds one account's generate-session requests in flight on
	// this replica; 0: unbounded.
	MaxInFlightPerAccount int
	Audit                 AuditDeps
	Webhooks              webhooks.Limits      // the webhooks API's limits (zero fields: their defaults)
	Delivery              WebhookDelivery      // the webhook dispatcher and deliverer
	Idempotency           idempotency.Settings // the Idempotency-Key records (zero fields: their defaults)
	// Checks gate /readyz: the readiness checks main's server.Connect* returned (MongoDB,
	// Redis and NATS: a session is minted, exchanged and resolved through all three).
	Checks []server.Check
}

// AuditDeps configure the audit trail: embed-svc's own events, and the trail's owner
// (the ingester of the AUDIT stream, the store, GET /api/v1/audit).
type AuditDeps struct {
	Database  string        // the trail's database ("": "audit")
	Retention time.Duration // 0: auditstore.DefaultRetention
	Stream    publish.StreamLimits
	MaxHeld   int           // events held in memory when neither stream nor outbox takes them
	Mongo     *mongo.Client // nil: Deps.Mongo (tests give the trail a client of its own to count the service's round trips alone)
	Relay     time.Duration // how often outboxed events are sent again (0: 1s)
	// AccountMax events of one account are stored one by one per AccountWindow (0: no
	// bound); the rest are merged into the window's summary event.
	AccountMax    int
	AccountWindow time.Duration
}

// WebhookDelivery configure the webhook engine: the stream of stored events the
// ingester republishes to, the dispatcher reading it, the deliverer sending (zero
// fields: their defaults).
type WebhookDelivery struct {
	Stored         audit.StoredLimits
	MaxQueuedBytes int64
	Workers        int
	MaxInFlight    int
	AttemptTimeout time.Duration
	FirstRetry     time.Duration
	DisableAfter   time.Duration
}

// App is the wired service.
type App struct {
	Handler    http.Handler // the public listener: the API, /healthz
	Internal   http.Handler // the internal listener: /healthz, /readyz, /metrics
	Keyring    *keys.Keyring
	Store      *mongostore.Store
	AuditStore *auditstore.Mongo
}

// New wires the service, creating indexes and a first signing key when needed.
func New(ctx context.Context, d Deps) (*App, error) {
	db := d.Mongo.Database(d.Database)
	st := mongostore.New(db)
	st.WithSessionRetention(d.SessionRetention)
	// Purged session records go, where the database has no TTL indexes.
	go st.Sweep(ctx)
	idemStore := idemstore.New(db)
	if err := mongox.EnsureIndexes(ctx, mongox.IndexWait, st.EnsureIndexes, idemStore.EnsureIndexes); err != nil {
		return nil, err
	}
	// Users stored before their memberships were kept beside their groups get them
	// before the service answers (once: a mark says it is done).
	if n, err := st.BackfillMemberships(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		d.Logger.InfoContext(ctx, "external users' memberships backfilled", "users", n)
	}
	kr, err := NewKeyring(d.Mongo.Database(d.Database), d)
	if err != nil {
		return nil, err
	}
	if err := kr.Ensure(ctx); err != nil {
		return nil, err
	}
	kr.RegisterMetrics(d.Registry)
	durable := d.RedisDurable
	if durable == nil {
		durable = redisx.NewDurable(d.Redis, 0, 0)
	}
	sessions := redisstore.New(durable)
	if p := sessions.EvictionPolicy(ctx); p != "" && p != "noeviction" {
		d.Logger.ErrorContext(ctx, "Redis evicts keys under memory pressure: revoked embed sessions could come back; set maxmemory-policy noeviction",
			"maxmemory_policy", p)
	}
	pub, err := publish.NewPublisher(publish.Options{Service: "embed-svc", NATS: d.NATS, Outbox: publish.NewMongoOutbox(db),
		Logger: d.Logger, Registry: d.Registry, MaxHeld: d.Audit.MaxHeld, RelayInterval: d.Audit.Relay})
	if err != nil {
		return nil, err
	}
	pub.Start(ctx)
	trail, err := newAuditTrail(ctx, d)
	if err != nil {
		return nil, err
	}
	// One request-reply client for the process: its cap of requests in flight covers
	// the identity lookups, the branch resolver and the dashboard reach.
	natsMetrics := natsx.NewRequestMetrics(d.Registry) // one per registry: the client's and the viewer lookup's
	rr := natsx.NewClient(d.NATS, natsx.ClientOptions{Metrics: natsMetrics})
	dir := directory.New(rr, d.IdentityTimeout)
	svc := embed.NewService(embed.Ports{
		Catalog: st, Users: st, Directory: dir, Sessions: sessions, Records: st,
		Branches: branches.New(rr, d.BranchTimeout), Signer: kr, Audit: pub, Reach: newReach(rr, d.ReachTimeout),
	}, embed.Options{Issuer: d.TokenIssuer, Now: d.Now, Limits: d.Limits, Logger: d.Logger, Metrics: embed.NewMetrics(d.Registry)})
	// The viewer lookup workspace-svc asks on every embed read of a dashboard.
	if _, err := serveViewers(d.NATS, svc, d.Logger, natsMetrics); err != nil {
		return nil, err
	}
	fair := fairshare.New(d.Registry, "embed-svc", d.MaxInFlightPerAccount)
	idemSealer, err := idempotency.NewSealer(d.Signer.SealKey("idempotency answers"))
	if err != nil {
		return nil, err
	}
	idem := idempotency.New(embed.IdempotencyOptions(idempotency.Options{Store: idemStore, Settings: d.Idempotency, Sealer: idemSealer, Logger: d.Logger, Now: d.Now}))
	hooks, err := newWebhooks(ctx, d, dir, pub)
	if err != nil {
		return nil, err
	}
	routes := newRouter(embed.MakeEndpoints(svc), audit.NewService(trail), webhooks.MakeEndpoints(hooks), d.Logger, fair, idem)
	o := server.Options{
		Service:  "embed-svc",
		Logger:   d.Logger,
		Registry: d.Registry,
		API:      identity.Require(d.Signer.ForService("embed-svc"), routes),
		Checks:   d.Checks,
	}
	return &App{Handler: server.Handler(o), Internal: server.Internal(o), Keyring: kr, Store: st, AuditStore: trail}, nil
}

// newRouter is embed-svc's one router: the embed API, the audit trail's route and its
// webhooks; 404 and 405 as everywhere.
func newRouter(e embed.Endpoints, trail audit.Service, hooks webhooks.Endpoints, logger *slog.Logger, fair *fairshare.Limiter, idem *idempotency.Middleware) *httpx.Router {
	routes := httpx.NewRouter()
	embed.RegisterRoutes(routes, e, logger, fair, idem)
	audit.RegisterRoutes(routes, trail, logger)
	webhooks.RegisterRoutes(routes, hooks, logger, idem)
	return routes
}

// auditDatabase is the audit trail's database, where its webhooks live too.
func auditDatabase(d Deps) *mongo.Database {
	client := d.Audit.Mongo
	if client == nil {
		client = d.Mongo
	}
	name := d.Audit.Database
	if name == "" {
		name = "audit"
	}
	return client.Database(name)
}

// newWebhooks is the webhooks API over its store in the trail's database, the secrets
// sealed by the embed key box, recording its changes in the trail.
func newWebhooks(ctx context.Context, d Deps, dir *directory.Lookup, rec *publish.Publisher) (webhooks.Service, error) {
	store := webhookstore.NewMongo(auditDatabase(d))
	if err := mongox.EnsureIndexes(ctx, mongox.IndexWait, store.EnsureIndexes); err != nil {
		return nil, err
	}
	box, err := keys.ParseEncryptionKey(d.KeyEncryptionKey)
	if err != nil {
		return nil, err
	}
	startWebhookEngine(ctx, d, store, box, rec)
	return webhooks.NewService(webhooks.Ports{Store: store, Deployments: deploymentOwners{dir}, Box: box},
		webhooks.Options{Limits: d.Webhooks, Now: d.Now, Audit: rec, Logger: d.Logger, Metrics: webhooks.NewAPIMetrics(d.Registry)}), nil
}

// startWebhookEngine runs the dispatcher (stored events to deliveries) and the deliverer
// (deliveries to receivers) until ctx ends.
func startWebhookEngine(ctx context.Context, d Deps, store *webhookstore.Mongo, box *sealbox.Box, rec libaudit.Recorder) {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	dv := d.Delivery
	deliverer := webhooks.NewDeliverer(webhooks.DelivererOptions{Store: store,
		Open:    func(sealed []byte, id string) ([]byte, error) { return box.Open(sealed, []byte(id)) },
		Workers: dv.Workers, MaxInFlight: dv.MaxInFlight, AttemptTimeout: dv.AttemptTimeout, FirstRetry: dv.FirstRetry,
		DisableAfter: dv.DisableAfter, AllowedHosts: d.Webhooks.AllowedHosts, Logger: d.Logger, Registry: d.Registry, Now: d.Now,
		Disabled: func(ctx context.Context, s webhooks.Subscription) {
			at := now().UTC().Truncate(time.Millisecond)
			rec.Record(ctx, libaudit.Event{ID: libaudit.NewID(at), Time: at, Service: "embed-svc", AccountID: s.AccountID,
				Actor: libaudit.Actor{Type: libaudit.ActorSystem, ID: "webhook-deliverer"}, Action: webhooks.ActionDisable,
				Target: libaudit.Target{Type: webhooks.TargetWebhook, ID: s.ID}, Outcome: libaudit.Outcome{Result: libaudit.Success},
				Details: map[string]any{"reason": webhooks.DisabledFailing, "failingSince": s.FailingSince.UTC().Format(time.RFC3339)}})
		}})
	dispatcher := webhooks.NewDispatcher(webhooks.DispatcherOptions{NATS: d.NATS, Store: store, Stored: dv.Stored,
		MaxQueuedBytes: dv.MaxQueuedBytes, RetryPeriod: d.Webhooks.RetryPeriod, Queued: deliverer.Wake, Logger: d.Logger, Registry: d.Registry, Now: d.Now})
	go deliverer.Run(ctx)
	go dispatcher.Run(ctx)
}

// deploymentOwners says whose a deployment is, by the identity lookup.
type deploymentOwners struct{ dir *directory.Lookup }

func (o deploymentOwners) AccountOf(ctx context.Context, id int64) (int64, error) {
	dep, err := o.dir.Deployment(ctx, id)
	if errors.Is(err, embed.ErrNotFound) {
		return 0, webhooks.ErrNotFound
	}
	return dep.AccountID, err
}

// newAuditTrail sets up the trail's owner: its store (indexes, retention) and the
// ingester of the AUDIT stream.
func newAuditTrail(ctx context.Context, d Deps) (*auditstore.Mongo, error) {
	store := auditstore.NewMongo(auditDatabase(d), d.Audit.Retention)
	if err := mongox.EnsureIndexes(ctx, mongox.IndexWait, store.EnsureIndexes); err != nil {
		return nil, err
	}
	go store.Sweep(ctx)
	in := audit.NewIngester(audit.IngesterOptions{NATS: d.NATS, Store: store, Limits: d.Audit.Stream, Logger: d.Logger, Registry: d.Registry, Now: d.Now,
		AccountLimit: d.Audit.AccountMax, AccountWindow: d.Audit.AccountWindow, Stored: &d.Delivery.Stored})
	go in.Run(ctx)
	return store, nil
}

// NewKeyring builds the keyring on db's signing_keys collection (also used by the
// rotate-keys command).
func NewKeyring(db *mongo.Database, d Deps) (*keys.Keyring, error) {
	return keys.New(db.Collection("signing_keys"), keys.Options{
		EncryptionKey: d.KeyEncryptionKey, PublishDelay: d.KeyPublishDelay, Refresh: d.KeyRefresh, Now: d.Now,
	})
}

// RevokeSigningKey is the emergency withdrawal of a compromised embed signing key
// (`embed-svc revoke-key`): first the Redis marker, so every gateway replica refuses the
// key's tokens on their next request (cached verifications included: the marker is
// checked on every request with the session's own revocation), then the key leaves the
// keyring and the JWKS, replaced by one that signs at once. The marker outlives every
// token the key can have signed. It returns the replacement key's id.
func RevokeSigningKey(ctx context.Context, kr *keys.Keyring, rdb *redisx.Durable, kid string) (string, error) {
	if !validKeyID(kid) {
		return "", keys.ErrUnknownKey
	}
	if err := redisstore.New(rdb).RevokeSigningKey(ctx, kid, embed.TokenLifetime+time.Hour); err != nil {
		return "", err
	}
	return kr.Revoke(ctx, kid)
}

// validKeyID: key ids are base64url of 12 bytes (keys.KeyID).
func validKeyID(kid string) bool {
	if len(kid) != 16 {
		return false
	}
	for _, c := range kid {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
