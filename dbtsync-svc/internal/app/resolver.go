package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/dbtsync-svc/client"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

// serveResolver answers the branch resolver (the contract is package client) with r, in
// its queue group, so API replicas share the requests, through natsx's server: each
// answer a span of the requester's trace, bounded in time and in handlers in flight. It
// is the NATS transport of the domain's Resolver, kept out of package dbtsync so that
// the domain links no NATS client.
func serveResolver(nc *nats.Conn, r *dbtsync.Resolver, logger *slog.Logger, reg prometheus.Registerer) (*natsx.Server, error) {
	s := natsx.NewServer(nc, natsx.ServerOptions{Metrics: natsx.NewRequestMetrics(reg), Logger: logger})
	err := client.Serve(s, func(ctx context.Context, req client.ResolveRequest) (client.ResolveReply, error) {
		st, err := r.Resolve(ctx, req.DeploymentID, req.BranchName, req.ProductionBranch)
		if err != nil {
			return client.ResolveReply{}, errors.Join(errs.ErrUnavailable, err) // logged by the server; answered 503
		}
		return client.ResolveReply{Exists: st.Exists, Served: st.Served, Production: st.Production}, nil
	})
	return s, err
}
