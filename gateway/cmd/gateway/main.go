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
	"runtime/debug"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/gateway/config"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/embedauth"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/openapi"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/gateway/internal/store"
	libconfig "github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/redisx"
	"github.com/analyticsco/platform/libs/server"
)

const serviceName = "gateway"

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
	if os.Getenv("GOGC") == "" {
		// The gateway's heap is small and short-lived (about 13 KB per request); collecting
		// less often trades a few MiB for CPU on every request. GOGC overrides it.
		debug.SetGCPercent(400)
	}
	log := logging.New(os.Stdout, cfg.LogLevel, serviceName)
	log.Info("starting", "config", libconfig.LogValue(cfg))

	ctx, stop := server.SignalContext()
	defer stop()

	shutdownTracing, err := obs.SetupTracing(ctx, serviceName, cfg.OTLPEndpoint)
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracing(context.Background()) }()

	signer, err := identity.NewSigner(cfg.IdentitySigningKey)
	if err != nil {
		return err
	}
	reg := obs.NewRegistry()
	client, err := mongox.ConnectWithMetrics(ctx, cfg.MongoURI, nil, mongox.NewMetrics(reg))
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	st := store.New(client.Database(cfg.MongoDatabase))

	keys, err := loadKeys(cfg)
	if err != nil {
		return err
	}
	go keys.Run(ctx, cfg.JWKSRefresh)
	authn := auth.New(auth.Options{
		Directory: st,
		Verifier:  auth.NewVerifier(keys, cfg.JWTIssuer, cfg.JWTAudience, nil),
		CacheTTL:  cfg.AuthCacheTTL,
		Logger:    log,
	})
	go authn.WatchChanges(ctx, cfg.RevocationPoll)

	ropts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	redisx.NewMetrics(reg).Instrument(rdb)
	embedJWKS := cfg.EmbedJWKSURL
	if embedJWKS == "" {
		embedJWKS = strings.TrimSuffix(strings.Split(cfg.EmbedURL, ",")[0], "/") + embedauth.JWKSPath
	}
	embedKeys := auth.NewKeySet(nil, embedJWKS).WithRequestDecorator(embedauth.SignedRequest(signer))
	go embedKeys.Run(ctx, cfg.JWKSRefresh)
	embed := embedauth.New(embedKeys, cfg.EmbedTokenIssuer, rdb, authn, nil).Instrument(reg)

	gsLimit, err := ratelimit.ParseLimit(cfg.RateLimitGenerateSession)
	if err != nil {
		return fmt.Errorf("RATE_LIMIT_GENERATE_SESSION: %w", err)
	}
	exLimit, err := ratelimit.ParseLimit(cfg.RateLimitExchange)
	if err != nil {
		return fmt.Errorf("RATE_LIMIT_EXCHANGE: %w", err)
	}
	afLimit, err := ratelimit.ParseLimit(cfg.AuthFailureLimit)
	if err != nil {
		return fmt.Errorf("AUTH_FAILURE_LIMIT: %w", err)
	}
	proxies, err := gateway.ParsePrefixes(cfg.TrustedProxies)
	if err != nil {
		return fmt.Errorf("GATEWAY_TRUSTED_PROXIES: %w", err)
	}

	upstreams := map[string][]*url.URL{}
	for name, raw := range map[string]string{"workspace-svc": cfg.WorkspaceURL, "embed-svc": cfg.EmbedURL, "dbtsync-svc": cfg.DBTSyncURL} {
		urls, err := gateway.ParseUpstreams(raw)
		if err != nil {
			return fmt.Errorf("%s URL: %w", name, err)
		}
		upstreams[name] = urls
	}
	spec, err := openapi.JSON()
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Options{
		Auth:            authn,
		Embed:           embed,
		Signer:          signer,
		Upstreams:       upstreams,
		BodyLimit:       int64(cfg.BodyLimitDefault),
		BigBodyLimit:    int64(cfg.BodyLimitDBTSync),
		UpstreamTimeout: cfg.UpstreamTimeout,
		DialTimeout:     cfg.DialTimeout,
		OpenAPIJSON:     spec,
		Logger:          log,
		Metrics:         obs.NewHTTPMetrics(reg, serviceName),

		RateLimiter:          ratelimit.New(rdb, "ratelimit:"),
		GenerateSessionLimit: gsLimit,
		ExchangeLimit:        exLimit,
		AuthFailureLimit:     afLimit,
		TrustedProxies:       proxies,
		BodyTimeout:          cfg.ClientBodyTimeout,
		UploadTimeout:        cfg.ClientUploadTimeout,
	})
	if err != nil {
		return err
	}

	// Only liveness is on the public listener, matched by a switch in front of the
	// gateway rather than a ServeMux: every proxied request passes here, and pattern
	// matching is not free. Readiness and metrics are on the internal listener.
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
			server.Health(w, r)
			return
		}
		gw.ServeHTTP(w, r)
	})
	internal := server.InternalHandler(reg, []server.Check{{Name: "mongodb", Check: st.Ping}})

	if cfg.PprofAddr != "" {
		go servePprof(ctx, log, cfg.PprofAddr)
	}
	err = server.RunAll(ctx, log, cfg.ShutdownTimeout,
		server.Listener{Name: "public", Addr: cfg.Addr, Handler: mux},
		server.Listener{Name: "internal", Addr: cfg.InternalAddr, Handler: internal})
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	log.Info("stopped")
	return err
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
