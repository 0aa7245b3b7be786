// Package config is embed-svc's configuration, read from the environment.
package config

import (
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/redisx"
)

// Config is everything embed-svc reads from its environment.
type Config struct {
	config.Common
	HTTPAddr                string        `env:"HTTP_ADDR" default:"127.0.0.1:8082" help:"public listen address: the API and /healthz"`
	InternalAddr            string        `env:"INTERNAL_ADDR" default:"127.0.0.1:9082" help:"internal listen address: /healthz, /readyz and /metrics for probes and Prometheus"`
	MongoURI                string        `env:"MONGODB_URI" default:"mongodb://127.0.0.1:27018/" secret:"true" help:"MongoDB connection string (may hold a password)"`
	MongoDatabase           string        `env:"MONGODB_DATABASE" default:"embed" help:"database owned by embed-svc"`
	NATSURL                 string        `env:"NATS_URL" default:"nats://127.0.0.1:4223" secret:"true" help:"NATS, for the branch resolver of dbtsync-svc, the identity lookups the gateway answers and the audit trail (outside the local stack it carries the user and password: nats://user:password@host:4222)"`
	IdentitySigningKey      string        `env:"IDENTITY_SIGNING_KEY" required:"true" secret:"true" help:"this service's own forwarded-identity key (platformctl identity-key --service embed-svc: svc:embed-svc:...), or the gateway's key; verifies the identity the gateway forwards"`
	KeyEncryptionKey        string        `env:"EMBED_KEY_ENCRYPTION_KEY" required:"true" secret:"true" help:"base64 32-byte AES-256-GCM keys, comma-separated, encrypting the embed token signing keys stored in MongoDB: the first seals, all open; keys are re-sealed under the first at load (rotation: deploy/README.md)"`
	TokenIssuer             string        `env:"EMBED_TOKEN_ISSUER" default:"https://embed.platform.local" help:"iss claim of embed tokens; the gateway expects the same value"`
	KeyPublishDelay         time.Duration `env:"EMBED_KEY_PUBLISH_DELAY" default:"10m" help:"after rotate-keys, how long a new key is published in the JWKS before it signs; keep above the gateway's JWKS refresh"`
	KeyRefresh              time.Duration `env:"EMBED_KEY_REFRESH" default:"30s" help:"how often a replica reloads the signing keys from MongoDB"`
	BranchResolveTimeout    time.Duration `env:"BRANCH_RESOLVE_TIMEOUT" default:"2s" help:"how long generate-session waits for dbtsync-svc's branch resolver"`
	DashboardReachTimeout   time.Duration `env:"DASHBOARD_REACH_TIMEOUT" default:"2s" help:"how long a dry-run generate-session waits for workspace-svc's answer of the dashboards the user would open; past it the dry run is 503"`
	IdentityLookupTimeout   time.Duration `env:"IDENTITY_LOOKUP_TIMEOUT" default:"2s" help:"how long generate-session waits for the gateway's answer to an identity lookup (whose a deployment is, an internal user); past it the answer is 503"`
	MaxSecurityContextBytes int           `env:"EMBED_MAX_SECURITY_CONTEXT_BYTES" default:"16384" help:"largest securityContext of a generate-session request, as sent; larger is 413"`
	MaxSecurityContextDepth int           `env:"EMBED_MAX_SECURITY_CONTEXT_DEPTH" default:"32" help:"deepest nesting of objects and arrays in a securityContext; deeper is 400"`
	MaxArrayEntries         int           `env:"EMBED_MAX_ARRAY_ENTRIES" default:"1000" help:"most entries of groups, userAttributes and each definitions array of a generate-session request; more is 400"`
	MaxAttributeValueBytes  int           `env:"EMBED_MAX_ATTRIBUTE_VALUE_BYTES" default:"16384" help:"largest value of one userAttributes entry of a generate-session request, as sent (JSON); it is stored on the user and signed into its tokens; larger is 413"`
	MaxDefinitionsPerScope  int           `env:"EMBED_MAX_DEFINITIONS_PER_SCOPE" default:"10000" help:"most group and attribute definitions of one scope (account-wide or one tenant); a new one past it is 400"`
	MaxTenantsPerAccount    int           `env:"EMBED_MAX_TENANTS_PER_ACCOUNT" default:"10000" help:"most embed tenants of one account; a mint naming a new tenant past it is 400"`
	MaxUserAttributeBytes   int           `env:"EMBED_MAX_USER_ATTRIBUTE_BYTES" default:"65536" help:"most bytes of attribute values one external user keeps, all scopes together (each value's JSON); a mint that would store more is 413, nothing written"`
	MaxPictureURLBytes      int           `env:"EMBED_MAX_PICTURE_URL_BYTES" default:"2048" help:"longest userProfile.picture of a generate-session request; longer is 413"`
	MaxLiveSessions         int           `env:"EMBED_MAX_LIVE_SESSIONS_PER_ACCOUNT" default:"10000" help:"most embed sessions of one account whose token has not expired (minted in the last 24 hours, revoked ones included: each may hold a session or a revocation marker in Redis); a mint past it is 403 live_session_limit"`
	MaxInFlightPerAccount   int           `env:"EMBED_MAX_INFLIGHT_PER_ACCOUNT" default:"8" help:"generate-session requests of one account a replica runs at once; past it 429 concurrency_limit with Retry-After, before the body is read (0: unbounded)"`
	MaxDefinitionChanges    int           `env:"EMBED_MAX_DEFINITION_CHANGES" default:"1000" help:"most group and attribute definitions one generate-session may create or change (written in one batch); more is 400. The default is one definitions array at EMBED_MAX_ARRAY_ENTRIES: a request may define a whole array, not both arrays full"`
	MaxListScan             int           `env:"EMBED_MAX_LIST_SCAN" default:"1000" help:"sessions or tenant users a filtered page of their list reads and examines before it answers the page so far (hasNextPage true, a cursor to go on)"`
	ExchangeFailureAudit    time.Duration `env:"EMBED_EXCHANGE_FAILURE_AUDIT_INTERVAL" default:"1m" help:"the audit trail records refused exchanges of one session id at most once per this interval, each event counting the refusals since the previous one (details.failedAttempts)"`
	SessionRetention        time.Duration `env:"EMBED_SESSION_RETENTION" default:"168h" help:"how long a session stays listed (GET /api/v1/embed/sessions) after its token expires"`
	publish.Config
	idempotency.Settings
	// The audit trail's owner (embed-svc's audit module) reads the rest.
	AuditDatabase       string          `env:"AUDIT_MONGODB_DATABASE" default:"audit" help:"database of the audit trail (owned by embed-svc's audit module): the events every service records"`
	AuditRetention      time.Duration   `env:"AUDIT_RETENTION" default:"9600h" help:"how long audit events are kept (default 400 days): a TTL index on MongoDB, a sweep where the database has none; a shorter value also drops the events already past it"`
	AuditStreamMaxBytes config.ByteSize `env:"AUDIT_STREAM_MAX_BYTES" default:"1GiB" help:"most bytes of audit events waiting in the AUDIT stream while the trail cannot store them; past it services keep new events in their outbox"`
	AuditStreamMaxAge   time.Duration   `env:"AUDIT_STREAM_MAX_AGE" default:"336h" help:"an audit event still in the AUDIT stream after this long (the trail's store down that long) is dropped"`
	AuditStreamReplicas int             `env:"AUDIT_STREAM_REPLICAS" default:"1" help:"replicas of the AUDIT stream: 1 on a single NATS server, 3 on a three-node cluster (a node lost is then a leader election, not lost events); applied to an existing stream at start"`
	AuditAccountMax     int             `env:"AUDIT_ACCOUNT_MAX_EVENTS" default:"3000" help:"audit events one account stores one by one per AUDIT_ACCOUNT_WINDOW; the rest of the window's events are merged into its one summary event (action audit.events.merge, details.merged: how many) and counted in audit_events_merged_total; 0: no bound"`
	AuditAccountWindow  time.Duration   `env:"AUDIT_ACCOUNT_WINDOW" default:"1m" help:"the window of AUDIT_ACCOUNT_MAX_EVENTS"`
	// The webhooks API (subscriptions to the audit trail's events).
	WebhookMaxSubscriptions int             `env:"WEBHOOK_MAX_SUBSCRIPTIONS" default:"25" help:"most webhooks of one account; a create past it is 409 webhook_limit"`
	WebhookSecretOverlap    time.Duration   `env:"WEBHOOK_SECRET_OVERLAP" default:"24h" help:"after a webhook's secret is rotated, how long the previous secret stays valid: deliveries carry a signature by each until then"`
	WebhookRetryPeriod      time.Duration   `env:"WEBHOOK_RETRY_PERIOD" default:"24h" help:"how long a webhook delivery is retried (the first retry within WEBHOOK_FIRST_RETRY, then doubling up to an hour, each with jitter); past it the delivery is failed"`
	WebhookFirstRetry       time.Duration   `env:"WEBHOOK_FIRST_RETRY" default:"5s" help:"the delay before a failed webhook delivery's first retry (drawn between its half and itself); each later one doubles, up to an hour"`
	WebhookAttemptTimeout   time.Duration   `env:"WEBHOOK_ATTEMPT_TIMEOUT" default:"10s" help:"one webhook delivery attempt's deadline, from the dial to the last byte of the answer read"`
	WebhookDisableAfter     time.Duration   `env:"WEBHOOK_DISABLE_AFTER" default:"72h" help:"a webhook whose attempts all fail for this long is disabled (disabledReason failing, audit event embed.webhook.disable); PATCH enabled: true turns it on again"`
	WebhookWorkers          int             `env:"WEBHOOK_WORKERS" default:"32" help:"webhook delivery attempts one replica makes at once, all accounts together"`
	WebhookMaxInFlight      int             `env:"WEBHOOK_MAX_IN_FLIGHT" default:"4" help:"webhook delivery attempts of one account one replica makes at once: one account's slow receivers hold no more of the workers"`
	WebhookMaxQueuedBytes   config.ByteSize `env:"WEBHOOK_MAX_QUEUED_BYTES" default:"16MiB" help:"bytes of one account's webhook deliveries waiting to succeed; past it a new delivery is stored failed (lastAttempt.error queue_full), listed and redeliverable"`
	WebhookStreamMaxAge     time.Duration   `env:"WEBHOOK_STREAM_MAX_AGE" default:"24h" help:"how long the AUDIT_STORED stream (stored audit events, which the webhook dispatcher reads) keeps an event; a dispatcher stopped longer misses the older ones"`
	WebhookStreamMaxBytes   config.ByteSize `env:"WEBHOOK_STREAM_MAX_BYTES" default:"1GiB" help:"most bytes of the AUDIT_STORED stream; past it its oldest events go (limits retention: it never blocks the audit trail)"`
	WebhookAllowedHosts     []string        `env:"WEBHOOK_ALLOWED_HOSTS" help:"comma-separated host names, addresses or CIDR prefixes webhooks may be delivered to although they are loopback, private or link-local, and over http (a receiver on the local stack); every other webhook URL is https to a public internet address"`

	// Redis keeps single-use session ids, live sessions and revocations (REDIS_MODE,
	// REDIS_URL), and exchanges and revocations wait for its replicas (REDIS_DURABLE_*).
	redisx.RedisConfig
	redisx.Durability
}

// Limits are the domain's limits as configured.
func (c Config) Limits() embed.Limits {
	return embed.Limits{SecurityContextBytes: c.MaxSecurityContextBytes, SecurityContextDepth: c.MaxSecurityContextDepth, ArrayEntries: c.MaxArrayEntries,
		AttributeValueBytes: c.MaxAttributeValueBytes, UserAttributeBytes: c.MaxUserAttributeBytes, PictureURLBytes: c.MaxPictureURLBytes,
		LiveSessionsPerAccount: c.MaxLiveSessions, ExchangeFailureAudit: c.ExchangeFailureAudit, ListScan: c.MaxListScan,
		DefinitionsPerScope: c.MaxDefinitionsPerScope, TenantsPerAccount: c.MaxTenantsPerAccount, DefinitionChanges: c.MaxDefinitionChanges}
}

// Webhooks are the webhooks API's limits as configured.
func (c Config) Webhooks() webhooks.Limits {
	return webhooks.Limits{MaxSubscriptions: c.WebhookMaxSubscriptions, SecretOverlap: c.WebhookSecretOverlap, AllowedHosts: c.WebhookAllowedHosts,
		RetryPeriod: c.WebhookRetryPeriod}
}

// Load reads the configuration from the environment.
func Load() (Config, error) {
	var c Config
	err := config.Load(&c)
	return c, err
}
