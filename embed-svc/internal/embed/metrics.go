package embed

import (
	"context"

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

// instrumentingMiddleware counts the domain outcomes of s (nil m: no decorator).
func instrumentingMiddleware(m *Metrics) func(Service) Service {
	if m == nil {
		return nil
	}
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
