// Command gateway is the platform's public entry point: routing, authentication and
// identity propagation in front of workspace-svc, embed-svc and dbtsync-svc.
package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/gateway/config"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/embedauth"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/openapi"
	"github.com/analyticsco/platform/gateway/internal/store"
	libconfig "github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/obs"
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
	client, err := mongox.Connect(ctx, cfg.MongoURI, nil)
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
	embedJWKS := cfg.EmbedJWKSURL
	if embedJWKS == "" {
		embedJWKS = strings.TrimSuffix(cfg.EmbedURL, "/") + embedauth.JWKSPath
	}
	embedKeys := auth.NewKeySet(nil, embedJWKS).WithRequestDecorator(embedauth.SignedRequest(signer))
	go embedKeys.Run(ctx, cfg.JWKSRefresh)
	embed := embedauth.New(embedKeys, cfg.EmbedTokenIssuer, rdb, authn, nil)

	upstreams := map[string]*url.URL{}
	for name, raw := range map[string]string{"workspace-svc": cfg.WorkspaceURL, "embed-svc": cfg.EmbedURL, "dbtsync-svc": cfg.DBTSyncURL} {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return fmt.Errorf("%s URL %q is not an absolute URL", name, raw)
		}
		upstreams[name] = u
	}
	spec, err := openapi.JSON()
	if err != nil {
		return err
	}
	reg := obs.NewRegistry()
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
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle("GET /readyz", server.Ready([]server.Check{{Name: "mongodb", Check: st.Ping}}))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", gw)

	err = server.Run(ctx, log, cfg.Addr, mux, cfg.ShutdownTimeout)
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
