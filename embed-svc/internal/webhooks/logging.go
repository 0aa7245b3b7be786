package webhooks

import (
	"context"
	"log/slog"

	"github.com/analyticsco/platform/libs/identity"
)

// loggingMiddleware logs the API's changes of state once they are done (never a secret,
// a URL by its host only). Failures are logged by the transport's error encoder. (nil
// logger: no decorator.)
func loggingMiddleware(logger *slog.Logger) func(Service) Service {
	if logger == nil {
		return nil
	}
	return func(next Service) Service { return &logging{Service: next, logger: logger} }
}

type logging struct {
	Service
	logger *slog.Logger
}

func (l *logging) Create(ctx context.Context, p *identity.Principal, in Input) (Created, error) {
	out, err := l.Service.Create(ctx, p, in)
	if err == nil {
		l.logger.InfoContext(ctx, "webhook created", "accountId", out.AccountID, "webhookId", out.ID, "host", urlHost(out.URL))
	}
	return out, err
}

func (l *logging) Update(ctx context.Context, p *identity.Principal, id string, patch Patch) (Subscription, error) {
	out, err := l.Service.Update(ctx, p, id, patch)
	if err == nil {
		l.logger.InfoContext(ctx, "webhook updated", "accountId", out.AccountID, "webhookId", id, "enabled", out.Enabled)
	}
	return out, err
}

func (l *logging) Delete(ctx context.Context, p *identity.Principal, id string) error {
	err := l.Service.Delete(ctx, p, id)
	if err == nil {
		l.logger.InfoContext(ctx, "webhook deleted", "accountId", p.Account.ID, "webhookId", id)
	}
	return err
}

func (l *logging) RotateSecret(ctx context.Context, p *identity.Principal, id string) (Rotated, error) {
	out, err := l.Service.RotateSecret(ctx, p, id)
	if err == nil {
		l.logger.InfoContext(ctx, "webhook secret rotated", "accountId", out.AccountID, "webhookId", id, "previousSecretExpiresAt", out.PrevUntil)
	}
	return out, err
}
