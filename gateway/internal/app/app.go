// Package app wires the gateway the same way for main, gatewaytest (other modules'
// black-box tests) and the gateway's own tests: authentication (bearer tokens, API keys,
// embed tokens), rate limits, the route table and the forwarders in front of the
// services, the public and internal handlers, and the identity lookups it answers for
// the services over NATS.
package app

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/gateway/internal/apidocs"
	"github.com/analyticsco/platform/gateway/internal/apikeys"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/embedauth"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/gateway/internal/serviceaccounts"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/idempotency"
	idemstore "github.com/analyticsco/platform/libs/idempotency/mongostore"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/identity/lookup"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
)

// ServiceName names the gateway in logs, metrics and traces.
const ServiceName = "gateway"

// Deps are what the gateway is built from. Zero durations and limits take the defaults.
type Deps struct {
	Logger   *slog.Logger
	Registry *prometheus.Registry // nil: no metrics
	Store    *store.Store         // the identity store
	Signer   *identity.Signer     // signs the forwarded identity
	Keys     *auth.KeySet         // verifies user bearer tokens
	Issuer   string               // required iss of bearer tokens
	Audience string               // required aud of bearer tokens
	// Upstreams are the replicas of "workspace-svc", "embed-svc", "dbtsync-svc".
	Upstreams map[string][]*url.URL
	// Redis holds embed revocations and rate-limit counters; nil accepts no embed token
	// and limits nothing.
	Redis        redis.UniversalClient
	EmbedJWKSURL string // default: the first embed-svc upstream's JWKS path
	EmbedIssuer  string // default https://embed.platform.local
	// Embed replaces the embed-token verifier (tests).
	Embed gateway.EmbedAuthenticator
	// NATS is where the gateway answers the services' identity lookups (identity.lookup.*,
	// libs/identity) from its identity store and caches; nil answers none.
	NATS *nats.Conn
	// Checks gate /readyz: the readiness checks main's server.Connect* returned for the
	// connections the gateway cannot serve without (the identity store).
	Checks []server.Check

	BodyLimit, BigBodyLimit int64
	// Limits bound a request head (h1.Limits; the defaults when zero) and MaxURIBytes
	// the target of a routed request.
	Limits h1.Limits
	// ConnLimits caps the public listener's connections (h1.ConnLimits; the defaults
	// when zero), TrustedProxies being its proxies.
	ConnLimits                          h1.ConnLimits
	MaxURIBytes                         int
	UpstreamTimeout, DialTimeout        time.Duration
	BodyTimeout, UploadTimeout          time.Duration
	GenerateSessionLimit, ExchangeLimit ratelimit.Limit
	DbtWebhookLimit                     ratelimit.Limit // dbt push webhooks per deployment
	AuthFailureLimit                    ratelimit.Limit
	// PlanLimits are the account budgets by plan (nil: none; docs/rate-limits.md).
	PlanLimits            gateway.PlanLimits
	TrustedProxies        []netip.Prefix
	CacheTTL, JWKSRefresh time.Duration
	// ThrottledKeyLookup is how often, at most, a throttled request looks an API key id up
	// in the identity store (auth.Options.ThrottledLookupInterval; default 1s).
	ThrottledKeyLookup time.Duration
	// RevocationPoll is how often the identity store's changes evict cached credentials
	// (default 1s; negative: never, for tests that evict themselves).
	RevocationPoll time.Duration
	// OpenAPIJSON is the document served at /api/v1/openapi.json; with it, /api/v1/docs
	// serves its interactive reference.
	OpenAPIJSON []byte
	Now         func() time.Time // nil: time.Now
	Configure   func(*gateway.Options)

	// APIKeys bound the keys /api/v1/api-keys creates (zero fields: apikeys.DefaultLimits).
	APIKeys apikeys.Limits
	// LastUsedFlush is how often the keys' in-memory last uses are written to the
	// identity store (default 1m): lastUsedAt is at most that far behind.
	LastUsedFlush time.Duration
	// Audit records the API-key changes (nil: a publisher on NATS, with its outbox in
	// the identity store's database).
	Audit audit.Recorder
	// ServiceAccounts bound the service accounts, their secrets and tokens (zero fields:
	// serviceaccounts.DefaultLimits).
	ServiceAccounts serviceaccounts.Limits
	// OAuthKey signs service accounts' access tokens (nil: /api/v1/oauth/token issues
	// none); its public key is trusted for bearer tokens beside Keys.
	OAuthKey ed25519.PrivateKey
	// TokenBodyLimit bounds the token endpoint's form body (default 8 KiB).
	TokenBodyLimit int64
	// Idempotency are the Idempotency-Key settings of the gateway's own POSTs, whose
	// records live in the identity store's database (zero fields: the defaults).
	Idempotency idempotency.Settings
}

// App is the wired gateway.
type App struct {
	// Public serves the public listener, the API and /healthz, with the gateway's own
	// HTTP/1.1 server (h1).
	Public   *h1.Server
	Internal http.Handler // the internal listener: /healthz, /readyz, /metrics
	Auth     *auth.Authenticator
	Gateway  *gateway.Gateway
}

// New wires the gateway; its background work (JWKS refreshes, the identity store's
// change poller) runs until ctx ends.
func New(ctx context.Context, d Deps) (*App, error) {
	var signing *serviceaccounts.Signing
	if d.OAuthKey != nil {
		signing = &serviceaccounts.Signing{Key: d.OAuthKey, Issuer: d.Issuer, Audience: d.Audience}
		d.Keys.AddStatic(d.OAuthKey.Public())
	}
	serviceKid := ""
	if signing != nil {
		serviceKid = signing.KeyID()
	}
	authn := auth.New(auth.Options{
		Directory: d.Store,
		Verifier:  auth.NewVerifier(d.Keys, d.Issuer, d.Audience, d.Now),
		CacheTTL:  cmp.Or(d.CacheTTL, 30*time.Second),
		Logger:    d.Logger,
		Now:       d.Now,

		ThrottledLookupInterval: d.ThrottledKeyLookup,
		ServiceTokenKeyID:       serviceKid,
	})
	if d.RevocationPoll >= 0 {
		go authn.WatchChanges(ctx, cmp.Or(d.RevocationPoll, time.Second))
	}
	go d.Keys.Run(ctx, cmp.Or(d.JWKSRefresh, 5*time.Minute))
	rec := d.Audit
	if rec == nil {
		po := publish.Options{Service: ServiceName, NATS: d.NATS, Outbox: publish.NewMongoOutbox(d.Store.Database()), Logger: d.Logger}
		if d.Registry != nil {
			po.Registry = d.Registry
		}
		pub, err := publish.NewPublisher(po)
		if err != nil {
			return nil, err
		}
		pub.Start(ctx)
		rec = pub
	}
	lastUsedWrites := prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_api_key_last_used_writes_total",
		Help: "API keys whose lastUsedAt a flush wrote (at most one per key, replica and flush interval)."})
	if d.Registry != nil {
		d.Registry.MustRegister(lastUsedWrites)
	}
	go authn.RunLastUsedFlush(ctx, d.Store, cmp.Or(d.LastUsedFlush, time.Minute), func(n int) { lastUsedWrites.Add(float64(n)) })

	idemStore := idemstore.New(d.Store.Database())
	if err := mongox.EnsureIndexes(ctx, mongox.IndexWait, idemStore.EnsureIndexes); err != nil {
		return nil, err
	}
	idemSealer, err := idempotency.NewSealer(d.Signer.SealKey("idempotency answers"))
	if err != nil {
		return nil, err
	}
	o := gateway.Options{
		Idempotency: idempotency.New(idempotency.Options{Store: idemStore, Settings: d.Idempotency, Sealer: idemSealer, Logger: d.Logger, Now: d.Now}),
		Auth:        authn, Embed: d.Embed, Signer: d.Signer, Upstreams: d.Upstreams,
		BodyLimit: cmp.Or(d.BodyLimit, 1<<20), BigBodyLimit: cmp.Or(d.BigBodyLimit, 256<<20),
		UpstreamTimeout: cmp.Or(d.UpstreamTimeout, 30*time.Second), DialTimeout: cmp.Or(d.DialTimeout, 2*time.Second),
		BodyTimeout: d.BodyTimeout, UploadTimeout: d.UploadTimeout, MaxURIBytes: d.MaxURIBytes,
		OpenAPIJSON: d.OpenAPIJSON, Logger: d.Logger,
		GenerateSessionLimit: d.GenerateSessionLimit, ExchangeLimit: d.ExchangeLimit, DbtWebhookLimit: d.DbtWebhookLimit, AuthFailureLimit: d.AuthFailureLimit,
		PlanLimits:      d.PlanLimits,
		TrustedProxies:  d.TrustedProxies,
		APIKeys:         apikeys.New(d.Store, rec, d.APIKeys, d.Now),
		ServiceAccounts: serviceaccounts.New(d.Store, rec, d.ServiceAccounts, signing, d.Now),
		TokenBodyLimit:  d.TokenBodyLimit,
	}
	if len(d.OpenAPIJSON) > 0 {
		ref, err := apidocs.Handler("Analytics Platform Management API: reference", "/api/v1/openapi.json")
		if err != nil {
			return nil, err
		}
		o.APIReference = ref
	}
	var natsMetrics *natsx.RequestMetrics // nil: none
	if d.Registry != nil {
		o.Metrics = obs.NewHTTPMetrics(d.Registry, ServiceName)
		o.LimitMetrics = gateway.NewLimitMetrics(d.Registry)
		natsMetrics = natsx.NewRequestMetrics(d.Registry)
	}
	if d.Redis != nil {
		o.RateLimiter = ratelimit.New(d.Redis, "ratelimit:")
		if o.Embed == nil {
			o.Embed = embedVerifier(ctx, d, authn)
		}
	}
	if d.Configure != nil {
		d.Configure(&o)
	}
	if d.NATS != nil {
		if err := lookup.Serve(natsx.NewServer(d.NATS, natsx.ServerOptions{Metrics: natsMetrics, Logger: d.Logger}), authn); err != nil {
			return nil, err
		}
	}
	gw, err := gateway.New(o)
	if err != nil {
		return nil, err
	}
	// Only liveness is on the public listener, matched by a switch in front of the
	// gateway rather than a ServeMux: every proxied request passes here, and pattern
	// matching is not free. Readiness and metrics are on the internal listener.
	public := &h1.Server{
		Handler: h1.HandlerFunc(func(w *h1.ResponseWriter, r *h1.Request) {
			if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
				w.AddHeader("X-Content-Type-Options", "nosniff")
				server.Health(w, nil)
				return
			}
			gw.ServeH1(w, r)
		}),
		Limits:            d.Limits,
		ConnLimits:        connLimits(d),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		OnError:           gw.Refuse,
		Logger:            d.Logger,
	}
	reg := d.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	internal := server.InternalHandler(reg, d.Checks)
	return &App{Public: public, Internal: internal, Auth: authn, Gateway: gw}, nil
}

// connLimits are the public listener's connection caps, its trusted proxies capped apart.
func connLimits(d Deps) h1.ConnLimits {
	l := d.ConnLimits
	l.Trusted = d.TrustedProxies
	return l
}

// embedVerifier is the gateway's verifier of embed session tokens: embed-svc's JWKS
// (fetched with a signed identity, refetched on an unknown kid) and revocations in Redis.
func embedVerifier(ctx context.Context, d Deps, authn *auth.Authenticator) gateway.EmbedAuthenticator {
	jwks := d.EmbedJWKSURL
	if jwks == "" && len(d.Upstreams["embed-svc"]) > 0 {
		jwks = d.Upstreams["embed-svc"][0].String() + token.JWKSPath
	}
	keys := auth.NewKeySet(nil, jwks).WithRequestDecorator(embedauth.SignedRequest(d.Signer))
	go keys.Run(ctx, cmp.Or(d.JWKSRefresh, 5*time.Minute))
	v := embedauth.New(keys, cmp.Or(d.EmbedIssuer, "https://embed.platform.local"), d.Redis, authn, d.Now)
	if d.Registry != nil {
		v = v.Instrument(d.Registry)
	}
	return v
}
