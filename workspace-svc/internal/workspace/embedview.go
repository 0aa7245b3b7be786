package workspace

import (
	"context"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// EmbedDashboards lists the published dashboards the embed session may open.
func (s *service) EmbedDashboards(ctx context.Context, p *identity.Principal, first int, after string) (httpx.Page[EmbedDashboardSummary], error) {
	return httpx.Page[EmbedDashboardSummary]{}, errs.Unavailablef("the embed read path is being built")
}

// EmbedDashboard returns one published dashboard the embed session may open.
func (s *service) EmbedDashboard(ctx context.Context, p *identity.Principal, publicID string) (Dashboard, error) {
	return Dashboard{}, errs.Unavailablef("the embed read path is being built")
}
