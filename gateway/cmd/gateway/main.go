// Command gateway is the platform's public entry point: routing, authentication and
// identity propagation in front of workspace-svc, embed-svc and dbtsync-svc.
package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"time"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/gateway/config"
	"github.com/analyticsco/platform/gateway/internal/app"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	proc, err := server.Start(app.ServiceName, cfg.Common, cfg)
	if err != nil {
		return err
	}
	defer proc.Close()
	d, closeDeps, err := deps(proc, cfg)
	if err != nil {
		return err
	}
	defer closeDeps()
	a, err := app.New(proc.Ctx, d)
	if err != nil {
		return err
	}
	if cfg.PprofAddr != "" {
		go servePprof(proc.Ctx, proc.Logger, cfg.PprofAddr)
	}
	return server.RunAll(proc.Ctx, proc.Logger, cfg.ShutdownTimeout,
		server.Listener{Name: "public", Addr: cfg.Addr, Server: a.Public},
		server.Listener{Name: "internal", Addr: cfg.InternalAddr, Handler: a.Internal})
}

// deps connects what the configuration names (the identity store, Redis, NATS) and
// parses the rest; close releases the connections.
func deps(proc *server.Process, cfg config.Config) (app.Deps, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (app.Deps, func(), error) { closeAll(); return app.Deps{}, nil, err }
	signer, err := identity.NewSigner(cfg.IdentitySigningKey)
	if err != nil {
		return fail(err)
	}
	reg := obs.NewRegistry()
	client, mongoReady, err := server.ConnectMongo(proc.Ctx, cfg.MongoURI, reg)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = client.Disconnect(context.Background()) })
	keys, err := loadKeys(cfg)
	if err != nil {
		return fail(err)
	}
	rdb, _, err := server.OpenRedis(cfg.RedisConfig, reg)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = rdb.Close() })
	nc, _, err := server.ConnectNATS(cfg.NATSURL, app.ServiceName, reg)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = nc.Drain() })
	d := app.Deps{Logger: proc.Logger, Registry: reg, Store: store.New(client.Database(cfg.MongoDatabase)), Signer: signer,
		Keys: keys, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, Upstreams: map[string][]*url.URL{}, Redis: rdb, NATS: nc,
		// Readiness waits for the identity store only: the gateway serves every route
		// without NATS (only the lookups it answers for embed-svc's generate-session need
		// it), and Redis, like NATS, has never gated it.
		Checks:       []server.Check{mongoReady},
		EmbedJWKSURL: cfg.EmbedJWKSURL, EmbedIssuer: cfg.EmbedTokenIssuer,
		BodyLimit: int64(cfg.BodyLimitDefault), BigBodyLimit: int64(cfg.BodyLimitDBTSync),
		Limits:          h1.Limits{MaxHeaderBytes: int(cfg.MaxHeaderBytes), MaxFieldBytes: int(cfg.MaxHeaderFieldBytes)},
		MaxURIBytes:     int(cfg.MaxURIBytes),
		ConnLimits:      h1.ConnLimits{Max: cfg.MaxConns, PerClient: cfg.MaxConnsPerClient, PerProxy: cfg.MaxConnsPerProxy},
		UpstreamTimeout: cfg.UpstreamTimeout, DialTimeout: cfg.DialTimeout, BodyTimeout: cfg.ClientBodyTimeout, UploadTimeout: cfg.ClientUploadTimeout,
		CacheTTL: cfg.AuthCacheTTL, RevocationPoll: cfg.RevocationPoll, JWKSRefresh: cfg.JWKSRefresh, ThrottledKeyLookup: cfg.ThrottledKeyLookup,
		APIKeys: cfg.APIKeys.Limits(), LastUsedFlush: cfg.APIKeys.LastUsedFlush,
		ServiceAccounts: cfg.ServiceAccounts.Limits(cfg.APIKeys.RevokedRetention), TokenBodyLimit: int64(cfg.OAuthTokenBodyLimit),
		Idempotency: cfg.Settings}
	if cfg.OAuthSigningKeyFile != "" {
		if d.OAuthKey, err = credentials.LoadEd25519PrivateKey(cfg.OAuthSigningKeyFile); err != nil {
			return fail(fmt.Errorf("OAUTH_SIGNING_KEY_FILE: %w", err))
		}
	}
	if d.GenerateSessionLimit, err = ratelimit.ParseLimit(cfg.RateLimitGenerateSession); err != nil {
		return fail(fmt.Errorf("RATE_LIMIT_GENERATE_SESSION: %w", err))
	}
	if d.ExchangeLimit, err = ratelimit.ParseLimit(cfg.RateLimitExchange); err != nil {
		return fail(fmt.Errorf("RATE_LIMIT_EXCHANGE: %w", err))
	}
	if d.DbtWebhookLimit, err = ratelimit.ParseLimit(cfg.RateLimitDbtWebhook); err != nil {
		return fail(fmt.Errorf("RATE_LIMIT_DBT_WEBHOOK: %w", err))
	}
	if d.AuthFailureLimit, err = ratelimit.ParseLimit(cfg.AuthFailureLimit); err != nil {
		return fail(fmt.Errorf("AUTH_FAILURE_LIMIT: %w", err))
	}
	d.PlanLimits = gateway.PlanLimits{}
	for _, p := range []struct{ plan, setting, value string }{
		{store.PlanFree, "RATE_LIMIT_PLAN_FREE", cfg.RateLimitPlanFree},
		{store.PlanPremium, "RATE_LIMIT_PLAN_PREMIUM", cfg.RateLimitPlanPremium},
		{store.PlanEnterprise, "RATE_LIMIT_PLAN_ENTERPRISE", cfg.RateLimitPlanEnterprise},
	} {
		if d.PlanLimits[p.plan], err = ratelimit.ParseLimit(p.value); err != nil {
			return fail(fmt.Errorf("%s: %w", p.setting, err))
		}
	}
	if d.TrustedProxies, err = gateway.ParsePrefixes(cfg.TrustedProxies); err != nil {
		return fail(fmt.Errorf("GATEWAY_TRUSTED_PROXIES: %w", err))
	}
	if err := gateway.CheckProxies(cfg.BehindProxy, d.TrustedProxies); err != nil {
		return fail(err)
	}
	for name, raw := range map[string]string{"workspace-svc": cfg.WorkspaceURL, "embed-svc": cfg.EmbedURL, "dbtsync-svc": cfg.DBTSyncURL} {
		urls, err := gateway.ParseUpstreams(raw)
		if err != nil {
			return fail(fmt.Errorf("%s URL: %w", name, err))
		}
		d.Upstreams[name] = urls
	}
	if d.OpenAPIJSON, err = api.JSON(); err != nil {
		return fail(err)
	}
	return d, closeAll, nil
}

func loadKeys(cfg config.Config) (*auth.KeySet, error) {
	if cfg.JWTPublicKeysFile == "" && cfg.JWKSURL == "" {
		return nil, errors.New("set AUTH_JWT_PUBLIC_KEYS_FILE or AUTH_JWKS_URL: bearer tokens cannot be verified without keys")
	}
	var static []crypto.PublicKey
	if cfg.JWTPublicKeysFile != "" {
		keys, err := credentials.LoadPublicKeys(cfg.JWTPublicKeysFile)
		if err != nil {
			return nil, fmt.Errorf("AUTH_JWT_PUBLIC_KEYS_FILE: %w", err)
		}
		static = keys
	}
	ks := auth.NewKeySet(static, cfg.JWKSURL)
	return ks, nil
}

// servePprof serves the profiler on its own listener, never on the public address.
func servePprof(ctx context.Context, log *slog.Logger, addr string) {
	pm := http.NewServeMux()
	pm.HandleFunc("/debug/pprof/", pprof.Index)
	pm.HandleFunc("/debug/pprof/profile", pprof.Profile)
	pm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	pm.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if err := server.Run(ctx, log.With("listener", "pprof"), addr, pm, time.Second); err != nil {
		log.Warn("pprof listener stopped", "err", err)
	}
}
