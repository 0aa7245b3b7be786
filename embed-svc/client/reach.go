package client

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

// Reach asks workspace-svc which dashboards a viewer would open.
type Reach struct {
	e *natsx.Endpoint[ReachRequest, ReachReply]
}

// NewReach returns a client waiting at most timeout (default 2 s) for a reply.
func NewReach(c *natsx.Client, timeout time.Duration) *Reach {
	return &Reach{e: natsx.NewEndpoint[ReachRequest, ReachReply](c, ReachSubject, timeout)}
}

// Dashboards asks about one viewer; every failure wraps ErrReachUnavailable.
func (r *Reach) Dashboards(ctx context.Context, req ReachRequest) (ReachReply, error) {
	reply, err := r.e.Call(ctx, req)
	if err != nil {
		return ReachReply{}, errors.Join(ErrReachUnavailable, err)
	}
	return reply, nil
}

// ServeReach answers reach requests in the queue group on s with reach; a request that
// is not Valid is answered 400.
func ServeReach(s *natsx.Server, reach func(ctx context.Context, req ReachRequest) (ReachReply, error)) error {
	return natsx.Handle(s, ReachSubject, ReachQueue, func(ctx context.Context, req ReachRequest) (ReachReply, error) {
		if !req.Valid() {
			return ReachReply{}, errs.Invalidf(`request must name accountId and deploymentId, at most 1000 groups per catalog and at most 50 resources`)
		}
		return reach(ctx, req)
	})
}
