// Package config is the gateway's configuration, read from the environment.
package config

import (
	"time"

	"github.com/analyticsco/platform/gateway/internal/apikeys"
	"github.com/analyticsco/platform/gateway/internal/serviceaccounts"
	"github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/redisx"
)

// Config is everything the gateway reads from its environment.
type Config struct {
	config.Common
	Addr                     string          `env:"GATEWAY_ADDR" default:"127.0.0.1:8080" help:"public listen address: the API and /healthz"`
	InternalAddr             string          `env:"INTERNAL_ADDR" default:"127.0.0.1:9080" help:"internal listen address: /healthz, /readyz and /metrics for probes and Prometheus; never expose it publicly"`
	WorkspaceURL             string          `env:"WORKSPACE_URL" default:"http://127.0.0.1:8081" help:"base URL of workspace-svc; comma-separated URLs of several replicas are balanced round robin"`
	EmbedURL                 string          `env:"EMBED_URL" default:"http://127.0.0.1:8082" help:"base URL of embed-svc (replicas: comma-separated)"`
	DBTSyncURL               string          `env:"DBTSYNC_URL" default:"http://127.0.0.1:8083" help:"base URL of dbtsync-svc (replicas: comma-separated)"`
	MongoURI                 string          `env:"MONGODB_URI" default:"mongodb://127.0.0.1:27018/" secret:"true" help:"MongoDB connection string (may hold a password)"`
	MongoDatabase            string          `env:"MONGODB_DATABASE" default:"identity" help:"database of the identity store (accounts, deployments, users, API keys)"`
	IdentitySigningKey       string          `env:"IDENTITY_SIGNING_KEY" required:"true" secret:"true" help:"base64 HMAC key (at least 32 bytes) from which the key of each service's forwarded identity is derived; only the gateway holds it (services get their own key: platformctl identity-key)"`
	JWTIssuer                string          `env:"AUTH_JWT_ISSUER" default:"https://auth.platform.local" help:"required iss of bearer tokens"`
	JWTAudience              string          `env:"AUTH_JWT_AUDIENCE" default:"platform-api" help:"required aud of bearer tokens"`
	JWTPublicKeysFile        string          `env:"AUTH_JWT_PUBLIC_KEYS_FILE" help:"PEM file with one or more Ed25519 or RSA public keys that sign bearer tokens"`
	JWKSURL                  string          `env:"AUTH_JWKS_URL" help:"JWKS URL with the bearer-token signing keys (alternative or addition to the PEM file)"`
	JWKSRefresh              time.Duration   `env:"AUTH_JWKS_REFRESH" default:"5m" help:"how often AUTH_JWKS_URL is fetched again (an unknown kid also triggers a fetch)"`
	AuthCacheTTL             time.Duration   `env:"AUTH_CACHE_TTL" default:"30s" help:"how long a verified credential is cached (never past its expiry; key revocations are picked up within AUTH_REVOCATION_POLL)"`
	RevocationPoll           time.Duration   `env:"AUTH_REVOCATION_POLL" default:"1s" help:"how often the gateway looks for revoked API keys and changed users"`
	NATSURL                  string          `env:"NATS_URL" default:"nats://127.0.0.1:4223" secret:"true" help:"NATS, where the gateway answers the services' identity lookups (a deployment's account and production branch, a user of an account) from its identity store (outside the local stack it carries the user and password: nats://user:password@host:4222)"`
	EmbedTokenIssuer         string          `env:"EMBED_TOKEN_ISSUER" default:"https://embed.platform.local" help:"required iss of embed session tokens (must match embed-svc)"`
	EmbedJWKSURL             string          `env:"EMBED_JWKS_URL" help:"JWKS of embed session tokens; default EMBED_URL + /api/v1/embed/.well-known/jwks.json"`
	BodyLimitDefault         config.ByteSize `env:"BODY_LIMIT_DEFAULT" default:"1MiB" help:"largest request body on every route but dbt-sync"`
	BodyLimitDBTSync         config.ByteSize `env:"BODY_LIMIT_DBT_SYNC" default:"256MiB" help:"largest request body on the dbt-sync route (uploaded manifests) and on workspace import (bundles)"`
	MaxHeaderBytes           config.ByteSize `env:"GATEWAY_MAX_HEADER_BYTES" default:"16KiB" help:"largest header section of a request, its fields together (431 beyond); at most nginx's default, so the gateway never accepts a head an nginx ingress would refuse"`
	MaxHeaderFieldBytes      config.ByteSize `env:"GATEWAY_MAX_HEADER_FIELD_BYTES" default:"8KiB" help:"longest header field line of a request (431 beyond); nginx's default"`
	MaxURIBytes              config.ByteSize `env:"GATEWAY_MAX_URI_BYTES" default:"8KiB" help:"longest request target (path and query) on a route (414 beyond; a path that matches no route is 404 at any length); nginx's default"`
	UpstreamTimeout          time.Duration   `env:"UPSTREAM_TIMEOUT" default:"30s" help:"how long the gateway waits for a service: for its response headers once the request is sent, and for each further part of a request or answer body it streams"`
	RateLimitGenerateSession string          `env:"RATE_LIMIT_GENERATE_SESSION" default:"600/1m" help:"generate-session requests per API key, as N/window (e.g. 600/1m), counted in Redis across replicas; 0 disables; over it: 429 with Retry-After"`
	RateLimitExchange        string          `env:"RATE_LIMIT_EXCHANGE" default:"300/1m" help:"session exchanges per client IP address (IPv6: per /64), as N/window; 0 disables; over it: 429 with Retry-After"`
	RateLimitDbtWebhook      string          `env:"RATE_LIMIT_DBT_WEBHOOK" default:"60/1m" help:"dbt push webhooks (POST .../dbt-git-integration/webhook) per deployment, signed or not, as N/window (per deployment, not per address: GitHub and GitLab send from a few shared addresses); 0 disables; over it: 429 with Retry-After"`
	AuthFailureLimit         string          `env:"AUTH_FAILURE_LIMIT" default:"60/1m" help:"failed authentications (401) per client IP address (IPv6: per /64) and per credential (API key id, bearer token), as N/window, counted in Redis; over it the address or credential gets 429 with Retry-After for what fails, while credentials that verify are still served (bearer tokens; API keys, looked up again at most once per key id and second, and key ids the gateway never verified within this limit again per address); 0 disables"`
	RateLimitPlanFree        string          `env:"RATE_LIMIT_PLAN_FREE" default:"600/1m" help:"request budget of a free account, as N/window (quota units: a request costs 1, bulk move 10, import and manifest uploads 20), spent per account by its bearer tokens and API keys and apart by its embed session tokens, counted in Redis by GCRA; an account's own override replaces it; 0 disables; over it: 429 rate_limited with Retry-After"`
	RateLimitPlanPremium     string          `env:"RATE_LIMIT_PLAN_PREMIUM" default:"3000/1m" help:"request budget of a premium account, as N/window, as RATE_LIMIT_PLAN_FREE"`
	RateLimitPlanEnterprise  string          `env:"RATE_LIMIT_PLAN_ENTERPRISE" default:"12000/1m" help:"request budget of an enterprise account, as N/window, as RATE_LIMIT_PLAN_FREE"`
	ThrottledKeyLookup       time.Duration   `env:"AUTH_THROTTLED_KEY_LOOKUP" default:"1s" help:"from a client address over AUTH_FAILURE_LIMIT, how often at most an API key id that the caches do not hold is looked up in the identity store, per key id and replica"`
	TrustedProxies           []string        `env:"GATEWAY_TRUSTED_PROXIES" help:"comma-separated addresses (or narrow CIDR prefixes) of the proxies in front of the gateway (the ingress), never a whole private range: only from them is X-Forwarded-For read to find the client address for per-client limits and the audit trail"`
	MaxConns                 int             `env:"GATEWAY_MAX_CONNS" default:"10000" help:"most client connections the gateway serves at once; a connection beyond it is answered 503 with Connection: close and closed (-1: no cap)"`
	MaxConnsPerClient        int             `env:"GATEWAY_MAX_CONNS_PER_CLIENT" default:"256" help:"most connections of one client IP address (IPv6: per /64) at once, beyond which it gets 503 and is closed (-1: no cap); a peer in GATEWAY_TRUSTED_PROXIES is capped by GATEWAY_MAX_CONNS_PER_PROXY instead, since it carries many clients"`
	MaxConnsPerProxy         int             `env:"GATEWAY_MAX_CONNS_PER_PROXY" default:"0" help:"most connections of one peer in GATEWAY_TRUSTED_PROXIES (the ingress) at once; 0: GATEWAY_MAX_CONNS"`
	BehindProxy              bool            `env:"GATEWAY_BEHIND_PROXY" default:"false" help:"true when a proxy that sets X-Forwarded-For (an ingress) is in front of the gateway: the gateway then refuses to start with GATEWAY_TRUSTED_PROXIES empty, since every client would count as the proxy's one address"`
	ClientBodyTimeout        time.Duration   `env:"CLIENT_BODY_TIMEOUT" default:"30s" help:"how long a client may take to send a request body (408 after)"`
	ClientUploadTimeout      time.Duration   `env:"CLIENT_UPLOAD_TIMEOUT" default:"10m" help:"the same for manifest uploads on the dbt-sync route"`
	PprofAddr                string          `env:"PPROF_ADDR" help:"when set, serves net/http/pprof on this address (keep it private: loopback or a debug port)"`
	DialTimeout              time.Duration   `env:"UPSTREAM_DIAL_TIMEOUT" default:"2s" help:"how long the gateway waits to connect to a service before answering 503"`

	// APIKeys bounds the keys of /api/v1/api-keys and platformctl keys.
	APIKeys

	// ServiceAccounts bounds /api/v1/service-accounts and the tokens of
	// /api/v1/oauth/token.
	ServiceAccounts

	// Idempotency bounds the Idempotency-Key records of the gateway's own POSTs.
	idempotency.Settings

	// Redis holds the embed-session revocations, checked on every embed-token request,
	// and the rate-limit counters (REDIS_MODE, REDIS_URL).
	redisx.RedisConfig
}

// APIKeys are the limits of API keys, read by the gateway and by platformctl (the same
// code creates keys in both).
type APIKeys struct {
	MaxPerAccount    int64         `env:"API_KEY_MAX_PER_ACCOUNT" default:"100" help:"most live (neither revoked nor expired) API keys of one account; a create beyond it is 400 api_key_limit"`
	MaxTTL           time.Duration `env:"API_KEY_MAX_TTL" default:"8760h" help:"farthest expiresAt an API key may have from its creation; a key created without one expires then"`
	MaxNameBytes     int           `env:"API_KEY_MAX_NAME_BYTES" default:"128" help:"longest API key name, in bytes"`
	MaxScope         int           `env:"API_KEY_MAX_SCOPE" default:"100" help:"most deployment ids in an API key's scope"`
	RotationOverlap  time.Duration `env:"API_KEY_ROTATION_OVERLAP" default:"24h" help:"how long the secret a rotation replaced keeps authenticating; then it stops on every gateway at once"`
	RevokedRetention time.Duration `env:"API_KEY_REVOKED_RETENTION" default:"720h" help:"how long a revoked API key stays listed (and readable) by GET /api/v1/api-keys"`
	LastUsedFlush    time.Duration `env:"API_KEY_LAST_USED_FLUSH" default:"1m" help:"how often each gateway writes the lastUsedAt of the keys used since (one bulk write); lastUsedAt is at most this far behind"`
}

// Limits are the limits of the apikeys service.
func (k APIKeys) Limits() apikeys.Limits {
	return apikeys.Limits{MaxPerAccount: k.MaxPerAccount, MaxTTL: k.MaxTTL, MaxNameBytes: k.MaxNameBytes, MaxScope: k.MaxScope,
		Overlap: k.RotationOverlap, Retention: k.RevokedRetention}
}

// ServiceAccounts are the settings of service accounts and their client-credentials
// tokens.
type ServiceAccounts struct {
	OAuthSigningKeyFile   string          `env:"OAUTH_SIGNING_KEY_FILE" help:"PKCS#8 PEM Ed25519 private key with which the gateway signs service accounts' access tokens (POST /api/v1/oauth/token); its public key is trusted for bearer tokens beside AUTH_JWT_PUBLIC_KEYS_FILE; unset, the token endpoint is 404. Every replica needs the same key"`
	OAuthTokenTTL         time.Duration   `env:"OAUTH_TOKEN_TTL" default:"1h" help:"lifetime of a service account's access token (expires_in)"`
	OAuthTokenBodyLimit   config.ByteSize `env:"OAUTH_TOKEN_BODY_LIMIT" default:"8KiB" help:"largest form body of POST /api/v1/oauth/token (413 beyond)"`
	MaxServiceAccounts    int64           `env:"SERVICE_ACCOUNT_MAX_PER_ACCOUNT" default:"100" help:"most service accounts (not deleted) of one account; a create beyond it is 400 service_account_limit"`
	MaxSecrets            int64           `env:"SERVICE_ACCOUNT_MAX_SECRETS" default:"5" help:"most unrevoked client secrets of one service account; a create beyond it is 400 client_secret_limit"`
	MaxSANameBytes        int             `env:"SERVICE_ACCOUNT_MAX_NAME_BYTES" default:"128" help:"longest service account name, in bytes"`
	MaxTokenScope         int             `env:"OAUTH_TOKEN_MAX_SCOPE" default:"100" help:"most deployment ids in the scope of a token request (400 invalid_scope beyond)"`
	SecretRotationOverlap time.Duration   `env:"SERVICE_ACCOUNT_SECRET_ROTATION_OVERLAP" default:"24h" help:"how long the client secret a rotation replaced keeps authenticating"`
}

// Limits are the limits of the serviceaccounts service; revoked secrets stay listed as
// long as revoked API keys (retention).
func (s ServiceAccounts) Limits(retention time.Duration) serviceaccounts.Limits {
	return serviceaccounts.Limits{MaxPerAccount: s.MaxServiceAccounts, MaxSecrets: s.MaxSecrets, MaxNameBytes: s.MaxSANameBytes,
		TokenTTL: s.OAuthTokenTTL, MaxScope: s.MaxTokenScope, Overlap: s.SecretRotationOverlap, Retention: retention}
}

// LoadAPIKeys reads only the API key limits (platformctl).
func LoadAPIKeys() (APIKeys, error) {
	var k APIKeys
	err := config.Load(&k)
	return k, err
}

// Load reads the configuration from the environment.
func Load() (Config, error) {
	var c Config
	err := config.Load(&c)
	return c, err
}
