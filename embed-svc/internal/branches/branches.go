// Package branches is embed.BranchResolver over dbtsync-svc's branch resolver (its
// published contract, dbtsync-svc/client).
package branches

import (
	"context"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/client"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

// Resolver implements embed.BranchResolver.
type Resolver struct{ c *client.Resolver }

// New returns a resolver asking through c, waiting at most timeout for a reply.
func New(c *natsx.Client, timeout time.Duration) *Resolver {
	return &Resolver{c: client.NewResolver(c, timeout)}
}

// ResolveBranch asks about one branch. No responder, a timeout or a resolver error is
// reported as unavailable (503), never as the branch's absence.
func (r *Resolver) ResolveBranch(ctx context.Context, deploymentID int64, branch, production string) (embed.BranchStatus, error) {
	reply, err := r.c.Resolve(ctx, client.ResolveRequest{DeploymentID: deploymentID, BranchName: branch, ProductionBranch: production})
	if err != nil {
		return embed.BranchStatus{}, errs.New(errs.Unavailable, "the branch resolver is unavailable; retry shortly")
	}
	return embed.BranchStatus{Exists: reply.Exists, Served: reply.Served, Production: reply.Production}, nil
}
