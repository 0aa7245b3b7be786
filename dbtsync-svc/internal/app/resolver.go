package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/dbtsync-svc/client"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// serveResolver answers the branch resolver (the contract is package client) with r, in
// its queue group, so API replicas share the requests; each answer is a span of the
// requester's trace. It is the NATS transport of the domain's Resolver, kept out of
// package dbtsync so that the domain links no NATS client.
func serveResolver(nc *nats.Conn, r *dbtsync.Resolver, logger *slog.Logger) (*nats.Subscription, error) {
	return client.Serve(nc, func(ctx context.Context, req client.ResolveRequest) client.ResolveReply {
		ctx, span := otel.Tracer("dbtsync").Start(ctx, "resolve branch", trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := r.Resolve(ctx, req.DeploymentID, req.BranchName, req.ProductionBranch)
		if err != nil {
			logger.WarnContext(ctx, "resolve branch", "err", err)
			return client.ResolveReply{Error: "branch lookup failed: data-model store unavailable"}
		}
		return client.ResolveReply{Exists: st.Exists, Served: st.Served, Production: st.Production}
	})
}
