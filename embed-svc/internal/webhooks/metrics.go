package webhooks

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// APIMetrics count the API's changes of subscriptions.
type APIMetrics struct {
	Changes *prometheus.CounterVec // embed_svc_webhook_api_changes_total{op,result}
}

// apiOps are the operations APIMetrics count.
var apiOps = []string{"create", "update", "delete", "rotate", "redeliver", "ping"}

// NewAPIMetrics registers the counters on reg.
func NewAPIMetrics(reg prometheus.Registerer) *APIMetrics {
	m := &APIMetrics{Changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "embed_svc_webhook_api_changes_total",
		Help: "Webhook API calls that change state, by operation and result (ok, refused: a client error, error: the service's)."}, []string{"op", "result"})}
	reg.MustRegister(m.Changes)
	for _, op := range apiOps {
		for _, r := range []string{"ok", "refused", "error"} {
			m.Changes.WithLabelValues(op, r)
		}
	}
	return m
}

// instrumentingMiddleware counts the API's changes of state by outcome (nil m: no
// decorator).
func instrumentingMiddleware(m *APIMetrics) func(Service) Service {
	if m == nil {
		return nil
	}
	return func(next Service) Service { return &instrumenting{Service: next, m: m} }
}

type instrumenting struct {
	Service
	m *APIMetrics
}

func (i *instrumenting) count(op string, err error) {
	r := "ok"
	if err != nil {
		r = "error"
		if status, _, _, ok := errs.Answer(err); ok && status < 500 {
			r = "refused"
		}
	}
	i.m.Changes.WithLabelValues(op, r).Inc()
}

func (i *instrumenting) Create(ctx context.Context, p *identity.Principal, in Input) (Created, error) {
	out, err := i.Service.Create(ctx, p, in)
	i.count("create", err)
	return out, err
}

func (i *instrumenting) Update(ctx context.Context, p *identity.Principal, id string, patch Patch) (Subscription, error) {
	out, err := i.Service.Update(ctx, p, id, patch)
	i.count("update", err)
	return out, err
}

func (i *instrumenting) Delete(ctx context.Context, p *identity.Principal, id string) error {
	err := i.Service.Delete(ctx, p, id)
	i.count("delete", err)
	return err
}

func (i *instrumenting) RotateSecret(ctx context.Context, p *identity.Principal, id string) (Rotated, error) {
	out, err := i.Service.RotateSecret(ctx, p, id)
	i.count("rotate", err)
	return out, err
}

func (i *instrumenting) Redeliver(ctx context.Context, p *identity.Principal, id, deliveryID string) (Delivery, error) {
	out, err := i.Service.Redeliver(ctx, p, id, deliveryID)
	i.count("redeliver", err)
	return out, err
}

func (i *instrumenting) Ping(ctx context.Context, p *identity.Principal, id string) (Delivery, error) {
	out, err := i.Service.Ping(ctx, p, id)
	i.count("ping", err)
	return out, err
}
