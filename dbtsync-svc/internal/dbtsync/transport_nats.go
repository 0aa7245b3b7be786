package dbtsync

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/dbtsync-svc/client"
)

// ServeResolver answers the branch resolver (the contract is package client) with r, in
// its queue group, so API replicas share the requests; each answer is a span of the
// requester's trace.
func ServeResolver(nc *nats.Conn, r *Resolver, logger *slog.Logger) (*nats.Subscription, error) {
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
