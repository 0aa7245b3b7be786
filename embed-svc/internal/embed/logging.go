package embed

import (
	"context"
	"log/slog"

	"github.com/analyticsco/platform/libs/identity"
)

// loggingMiddleware logs the service's changes of state once they are done: sessions
// minted and revoked, definitions created and deleted, users deleted, settings replaced.
// Never a session id or a token (they are credentials); failures are logged by the
// transport's error encoder, which knows which of them are the caller's. (nil logger: no
// decorator.)
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
