package dbtsync

import (
	"context"
	"log/slog"

	"github.com/analyticsco/platform/libs/identity"
)

// loggingMiddleware logs the API's changes of state once they are done. Failures are
// logged by the transport's error encoder, which knows which of them are the caller's.
// (nil logger: no decorator.)
func loggingMiddleware(logger *slog.Logger) func(Service) Service {
	if logger == nil {
		return nil
	}
	return func(next Service) Service { return &loggingService{Service: next, logger: logger} }
}

type loggingService struct {
	Service
	logger *slog.Logger
}

func (l *loggingService) StartSync(ctx context.Context, p *identity.Principal, deploymentID int64, body SyncRequestBody) (SyncStarted, error) {
	res, err := l.Service.StartSync(ctx, p, deploymentID, body)
	if err == nil {
		l.logger.InfoContext(ctx, "sync job queued", "deploymentId", deploymentID, "syncJobId", res.Accepted.SyncJobID, "branchName", res.Accepted.BranchName,
			"source", res.Source, "manifestBytes", res.ManifestBytes)
	}
	return res, err
}

// PutIntegration logs the save without the repository URL or credentials.
func (l *loggingService) PutIntegration(ctx context.Context, p *identity.Principal, deploymentID int64, in IntegrationInput) (DbtGitIntegration, error) {
	res, err := l.Service.PutIntegration(ctx, p, deploymentID, in)
	if err == nil {
		l.logger.InfoContext(ctx, "dbt git integration saved", "deploymentId", deploymentID, "hasCredentials", res.HasCredentials)
	}
	return res, err
}

func (l *loggingService) SetStaging(ctx context.Context, p *identity.Principal, deploymentID int64, name string, enabled bool) (Branch, error) {
	res, err := l.Service.SetStaging(ctx, p, deploymentID, name, enabled)
	if err == nil {
		l.logger.InfoContext(ctx, "branch staging set", "deploymentId", deploymentID, "branchName", name, "enabled", enabled)
	}
	return res, err
}
