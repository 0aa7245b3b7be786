package app

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity/lookup"
	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// deploymentLookup is workspace.Deployments over the identity lookup the gateway answers
// from its identity store (identity.lookup.deployment, libs/identity/lookup): how a
// promotion learns whose its target deployment is. workspace-svc reads none of the
// identity store's collections.
type deploymentLookup struct{ l *lookup.Client }

func newDeploymentLookup(c *natsx.Client, timeout time.Duration) deploymentLookup {
	return deploymentLookup{l: lookup.NewClient(c, timeout)}
}

// identityUnavailable is the answer when the identity store cannot be asked: a 503,
// never the deployment's absence.
var identityUnavailable = errs.New(errs.Unavailable, "the identity store is unavailable; retry shortly")

func (d deploymentLookup) Deployment(ctx context.Context, id int64) (workspace.DeploymentInfo, error) {
	dep, err := d.l.Deployment(ctx, id)
	switch {
	case errors.Is(err, lookup.ErrNotFound):
		return workspace.DeploymentInfo{}, workspace.ErrNoSuchDeployment
	case err != nil:
		return workspace.DeploymentInfo{}, errors.Join(identityUnavailable, err)
	}
	return workspace.DeploymentInfo{ID: dep.ID, AccountID: dep.AccountID}, nil
}
