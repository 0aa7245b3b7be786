package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/embed-svc/client"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/natsx"
)

// serveViewers answers the viewer lookup (client.ViewerSubject) with svc in its queue
// group, so replicas share the requests, through natsx's server: the NATS transport of
// the domain's ViewerGroups, kept out of package embed so that the domain links no NATS
// client.
func serveViewers(nc *nats.Conn, svc embed.Service, logger *slog.Logger, m *natsx.RequestMetrics) (*natsx.Server, error) {
	s := natsx.NewServer(nc, natsx.ServerOptions{Metrics: m, Logger: logger})
	err := client.Serve(s, func(ctx context.Context, req client.ViewerRequest) (client.ViewerReply, error) {
		g, err := svc.ViewerGroups(ctx, req.AccountID, req.EmbedTenantName, req.ExternalID)
		if err != nil {
			return client.ViewerReply{}, err // an errs error: 400 or 503 as the service words it
		}
		return client.ViewerReply{AccountGroups: g.Account, TenantGroups: g.Tenant}, nil
	})
	return s, err
}

// reach is the domain's DashboardReach over client.Reach (workspace-svc answers it).
type reach struct{ c *client.Reach }

func newReach(rr *natsx.Client, timeout time.Duration) reach {
	return reach{c: client.NewReach(rr, timeout)}
}

func (r reach) Dashboards(ctx context.Context, q embed.ReachQuery) (embed.ReachAnswer, error) {
	rep, err := r.c.Dashboards(ctx, client.ReachRequest{AccountID: q.AccountID, DeploymentID: q.DeploymentID, EmbedTenantName: q.Tenant,
		AccountGroups: q.AccountGroups, TenantGroups: q.TenantGroups, Resources: q.Resources, InternalUserID: q.InternalUserID, InternalRole: q.InternalRole})
	if err != nil {
		return embed.ReachAnswer{}, err
	}
	if rep.Dashboards == nil {
		rep.Dashboards = []embed.ReachDashboard{}
	}
	return embed.ReachAnswer{Truncated: rep.Truncated, Dashboards: rep.Dashboards}, nil
}
