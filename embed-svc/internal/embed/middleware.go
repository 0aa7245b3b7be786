package embed

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// Metrics are embed-svc's domain counters.
type Metrics struct {
	Minted    *prometheus.CounterVec
	Revoked   prometheus.Counter
	Exchanges *prometheus.CounterVec
}

// NewMetrics registers the domain counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Minted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "embed_svc_sessions_minted_total", Help: "Embed session ids generated, by user kind (external, internal).",
		}, []string{"user"}),
		Revoked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "embed_svc_sessions_revoked_total", Help: "Accepted revoke requests (204), including ids with nothing to revoke.",
		}),
		Exchanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "embed_svc_session_exchanges_total", Help: "Session id exchanges by outcome (ok, rejected, error).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.Minted, m.Revoked, m.Exchanges)
	for _, o := range []string{"ok", "rejected", "error"} {
		m.Exchanges.WithLabelValues(o)
	}
	m.Minted.WithLabelValues("external")
	m.Minted.WithLabelValues("internal")
	return m
}

// InstrumentingMiddleware counts the domain outcomes of s.
func InstrumentingMiddleware(m *Metrics) func(Service) Service {
	return func(next Service) Service { return &instrumenting{Service: next, m: m} }
}

type instrumenting struct {
	Service
	m *Metrics
}

func (i *instrumenting) GenerateSession(ctx context.Context, p *identity.Principal, req GenerateSessionRequest) (string, error) {
	id, err := i.Service.GenerateSession(ctx, p, req)
	if err == nil {
		kind := "external"
		if req.InternalID != nil {
			kind = "internal"
		}
		i.m.Minted.WithLabelValues(kind).Inc()
	}
	return id, err
}

func (i *instrumenting) ExchangeSession(ctx context.Context, sessionID string) (SessionToken, error) {
	tok, err := i.Service.ExchangeSession(ctx, sessionID)
	switch e, refused := errs.As(err); {
	case err == nil:
		i.m.Exchanges.WithLabelValues("ok").Inc()
	case refused && e.Kind != errs.Unavailable:
		i.m.Exchanges.WithLabelValues("rejected").Inc()
	default:
		i.m.Exchanges.WithLabelValues("error").Inc()
	}
	return tok, err
}

func (i *instrumenting) RevokeSession(ctx context.Context, p *identity.Principal, sessionID string) error {
	err := i.Service.RevokeSession(ctx, p, sessionID)
	if err == nil {
		i.m.Revoked.Inc()
	}
	return err
}

// LoggingMiddleware logs the service's changes of state once they are done: sessions
// minted and revoked, definitions created and deleted, users deleted, settings replaced.
// Never a session id or a token (they are credentials); failures are logged by the
// transport's error encoder, which knows which of them are the caller's.
func LoggingMiddleware(logger *slog.Logger) func(Service) Service {
	return func(next Service) Service { return &logging{Service: next, logger: logger} }
}

type logging struct {
	Service
	logger *slog.Logger
}

func (l *logging) GenerateSession(ctx context.Context, p *identity.Principal, req GenerateSessionRequest) (string, error) {
	id, err := l.Service.GenerateSession(ctx, p, req)
	if err == nil {
		user := "external"
		if req.InternalID != nil {
			user = "internal"
		}
		l.logger.InfoContext(ctx, "embed session minted", "accountId", p.Account.ID, "deploymentId", *req.DeploymentID, "user", user,
			"creatorMode", req.CreatorMode != nil && *req.CreatorMode)
	}
	return id, err
}

func (l *logging) RevokeSession(ctx context.Context, p *identity.Principal, sessionID string) error {
	err := l.Service.RevokeSession(ctx, p, sessionID)
	if err == nil {
		l.logger.InfoContext(ctx, "embed session revoke accepted", "accountId", p.Account.ID)
	}
	return err
}

func (l *logging) RevokeSessions(ctx context.Context, p *identity.Principal, req RevokeSessionsRequest) (RevokedSessions, error) {
	res, err := l.Service.RevokeSessions(ctx, p, req)
	if err == nil {
		l.logger.InfoContext(ctx, "embed sessions revoked", "accountId", p.Account.ID, "revoked", res.Revoked)
	}
	return res, err
}

func (l *logging) CreateDefinition(ctx context.Context, p *identity.Principal, kind string, in DefinitionInput) (Definition, error) {
	d, err := l.Service.CreateDefinition(ctx, p, kind, in)
	if err == nil {
		l.logger.InfoContext(ctx, "definition created", "accountId", p.Account.ID, "kind", kind, "definitionId", d.ID)
	}
	return d, err
}

func (l *logging) DeleteDefinition(ctx context.Context, p *identity.Principal, scope, kind, id string) error {
	err := l.Service.DeleteDefinition(ctx, p, scope, kind, id)
	if err == nil {
		l.logger.InfoContext(ctx, "definition deleted", "accountId", p.Account.ID, "scope", scope, "kind", kind, "definitionId", id)
	}
	return err
}

func (l *logging) DeleteTenantUser(ctx context.Context, p *identity.Principal, tenant, externalID string) (DeletedUser, error) {
	res, err := l.Service.DeleteTenantUser(ctx, p, tenant, externalID)
	if err == nil {
		l.logger.InfoContext(ctx, "external user deleted", "accountId", p.Account.ID, "embedTenant", tenant, "deleted", res.Deleted,
			"sessionsRevoked", res.SessionsRevoked)
	}
	return res, err
}

func (l *logging) PutAccountSettings(ctx context.Context, p *identity.Principal, in AccountSettings) (AccountSettingsView, error) {
	res, err := l.Service.PutAccountSettings(ctx, p, in)
	if err == nil {
		l.logger.InfoContext(ctx, "account embed settings replaced", "accountId", p.Account.ID)
	}
	return res, err
}
