// Package branches asks dbtsync-svc's branch resolver, over NATS request-reply on
// subject dbtsync.branches.resolve, whether a deployment's branch exists and is served.
package branches

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// Subject is the resolver's request subject.
const Subject = "dbtsync.branches.resolve"

// Request is the resolver's request body.
type Request struct {
	DeploymentID     int64  `json:"deploymentId"`
	BranchName       string `json:"branchName"`
	ProductionBranch string `json:"productionBranch"`
}

// Reply is the resolver's reply body.
type Reply struct {
	Exists     bool   `json:"exists"`
	Served     bool   `json:"served"`
	Production bool   `json:"production"`
	Error      string `json:"error,omitempty"`
}

// Resolver implements embed.BranchResolver.
type Resolver struct {
	nc      *nats.Conn
	timeout time.Duration
}

// New returns a resolver client waiting at most timeout for a reply.
func New(nc *nats.Conn, timeout time.Duration) *Resolver {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return &Resolver{nc: nc, timeout: timeout}
}

// ResolveBranch asks about one branch. No responder, a timeout or a resolver error is
// reported as unavailable (503), never as the branch's absence.
func (r *Resolver) ResolveBranch(ctx context.Context, deploymentID int64, branch, production string) (embed.BranchStatus, error) {
	body, _ := json.Marshal(Request{DeploymentID: deploymentID, BranchName: branch, ProductionBranch: production})
	msg := nats.NewMsg(Subject)
	msg.Data = body
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(msg.Header))
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrConnectionClosed) {
			return embed.BranchStatus{}, embed.Unavailable("the branch resolver is unavailable; retry shortly")
		}
		return embed.BranchStatus{}, embed.Unavailable("the branch resolver is unavailable: %v", err)
	}
	var reply Reply
	if err := json.Unmarshal(resp.Data, &reply); err != nil {
		return embed.BranchStatus{}, embed.Unavailable("the branch resolver sent an unreadable reply")
	}
	if reply.Error != "" {
		return embed.BranchStatus{}, embed.Unavailable("the branch resolver failed: %s", reply.Error)
	}
	return embed.BranchStatus{Exists: reply.Exists, Served: reply.Served, Production: reply.Production}, nil
}
