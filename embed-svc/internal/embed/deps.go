package embed

import (
	"log/slog"
	"time"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/kit"
)

// Ports are what the service is built on: its stores, the directory, the branch
// resolver, the token signer and the audit trail.
type Ports struct {
	Catalog   CatalogStore
	Users     UserStore
	Directory Directory // the identity store's deployments and internal users
	Sessions  SessionStore
	Records   SessionRecordStore
	Branches  BranchResolver
	Signer    TokenSigner
	Audit     audit.Recorder // nil: nothing is recorded
	// Reach answers the dry run's dashboards (workspace-svc); nil: a dry run is 503.
	Reach DashboardReach
}

// Options tune the service; zero values take the defaults.
type Options struct {
	Issuer string           // iss of every token
	Now    func() time.Time // nil: time.Now
	Limits Limits           // zero fields: DefaultLimits
	// What the service's decorators are built from, each nil to leave its decorator out:
	// the logger of the changes done (logging.go) and the domain counters (metrics.go).
	Logger  *slog.Logger
	Metrics *Metrics
}

// Limits bound what one request or one account can make embed-svc store.
type Limits struct {
	SecurityContextBytes int // size of a session's securityContext JSON
	SecurityContextDepth int // nesting of objects and arrays in it (Redis's cjson stops at 1000)
	ArrayEntries         int // entries of groups, userAttributes and each definitions array
	AttributeValueBytes  int // one userAttributes value's JSON, as sent (stored on the user, signed into its tokens)
	DefinitionsPerScope  int // group and attribute definitions of one scope (account-wide or a tenant)
	TenantsPerAccount    int // embed tenants of one account
	DefinitionChanges    int // definitions one generate-session may create or change
	UserAttributeBytes   int // all of one external user's stored values (ValueBytes), every scope
	PictureURLBytes      int // userProfile.picture
	// LiveSessionsPerAccount bounds the sessions of one account whose token has not
	// expired (each may hold a session or a revocation marker in Redis).
	LiveSessionsPerAccount int
	// ExchangeFailureAudit is how often at most the audit trail records refused exchanges
	// of one session id (each event counts those since the previous one).
	ExchangeFailureAudit time.Duration
	// ListScan bounds the entries a filtered page of the session or tenant user list
	// examines.
	ListScan int
}

// DefaultLimits apply where Limits leaves a field zero: the defaults of the config tags
// (EMBED_MAX_*), which a fitness test keeps equal (systemtest/architecture).
var DefaultLimits = Limits{SecurityContextBytes: 16 << 10, SecurityContextDepth: 32, ArrayEntries: 1000, AttributeValueBytes: 16 << 10, DefinitionsPerScope: 10_000, TenantsPerAccount: 10_000,
	DefinitionChanges: 1000, UserAttributeBytes: 64 << 10, PictureURLBytes: 2 << 10, LiveSessionsPerAccount: 10_000,
	ExchangeFailureAudit: time.Minute, ListScan: 1000}

// WithDefaults is l with every limit not set (zero or less) at its DefaultLimits value.
func (l Limits) WithDefaults() Limits { return config.OrDefaults(l, DefaultLimits) }

// service implements Service over Ports.
type service struct {
	d       Ports
	issuer  string
	now     func() time.Time
	limits  Limits
	tenants *knownTenants
}

// NewService builds the embed service, wrapped in its decorators in the platform's order
// (kit.Decorate).
func NewService(p Ports, o Options) Service {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	s := &service{d: p, issuer: o.Issuer, now: now, limits: o.Limits.WithDefaults(), tenants: &knownTenants{}}
	return kit.Decorate[Service](s, kit.Decorators[Service]{
		// No auditing decorator: the service records its events itself (Ports.Audit). A
		// mint's event needs what only the mint resolves (the plan, the tenant, the
		// session), and the refused exchanges of one session id are recorded at most once
		// per Limits.ExchangeFailureAudit, counted in the session store.
		Audit:   nil,
		Log:     loggingMiddleware(o.Logger),
		Metrics: instrumentingMiddleware(o.Metrics),
	})
}
