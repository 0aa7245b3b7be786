package workspace

import (
	"context"
	"net/http"

	"github.com/go-kit/kit/endpoint"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// VersionEndpoints are the endpoints of the published versions (versions.go).
type VersionEndpoints struct {
	DashboardVersions, GetDashboardVersion, RestoreDashboardVersion endpoint.Endpoint
}

type (
	dashboardVersionsRequest struct {
		scope
		Workbook int64
		First    int
		After    string
	}
	dashboardVersionRequest struct {
		scope
		Workbook int64
		Number   int64
	}
)

func makeVersionEndpoints(s Service) VersionEndpoints {
	return VersionEndpoints{
		DashboardVersions: func(ctx context.Context, req any) (any, error) {
			r := req.(dashboardVersionsRequest)
			return s.DashboardVersions(ctx, r.P, r.DeploymentID, r.Workbook, r.First, r.After)
		},
		GetDashboardVersion: func(ctx context.Context, req any) (any, error) {
			r := req.(dashboardVersionRequest)
			return s.GetDashboardVersion(ctx, r.P, r.DeploymentID, r.Workbook, r.Number)
		},
		RestoreDashboardVersion: func(ctx context.Context, req any) (any, error) {
			r := req.(dashboardVersionRequest)
			return s.RestoreDashboardVersion(ctx, r.P, r.DeploymentID, r.Workbook, r.Number)
		},
	}
}

// registerVersions routes the published versions; a restore is a publish, bounded per
// account with the publishes (ClassPublish).
func registerVersions(r *httpx.Router, e Endpoints, o httpx.HandleOptions, fair *fairshare.Limiter) {
	const versions = base + "/workbooks/{workbookId}/dashboard/versions"
	httpx.Handle(r, "GET", versions, e.DashboardVersions, decodeDashboardVersionsRequest, o)
	httpx.Handle(r, "GET", versions+"/{versionNumber}", e.GetDashboardVersion, decodeDashboardVersionRequest, o)
	httpx.Handle(r, "POST", versions+"/{versionNumber}/restore", e.RestoreDashboardVersion, decodeDashboardVersionRequest,
		o.WithAdmit(fair.Guard(ClassPublish)))
}

func decodeDashboardVersionsRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	id, err := pathID(r, "workbookId")
	if err != nil {
		return nil, err
	}
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	return dashboardVersionsRequest{scope: sc, Workbook: id, First: pg.First, After: pg.After}, nil
}

func decodeDashboardVersionRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	id, err := pathID(r, "workbookId")
	if err != nil {
		return nil, err
	}
	n, err := pathID(r, "versionNumber")
	if err != nil {
		return nil, err
	}
	return dashboardVersionRequest{scope: sc, Workbook: id, Number: n}, nil
}

// ActionDashboardRestore is a restore of a kept version: ItemAction(TypeWorkbook,
// "dashboard_restore"), its details the version restored and the version it published.
var ActionDashboardRestore = ItemAction(TypeWorkbook, "dashboard_restore")

func (a *auditing) RestoreDashboardVersion(ctx context.Context, p *identity.Principal, deploymentID, id, number int64) (Workbook, error) {
	w, err := a.Service.RestoreDashboardVersion(ctx, p, deploymentID, id, number)
	d := map[string]any{"restoredVersion": number}
	if db := w.PublishedDashboard; db != nil {
		d["versionNumber"], d["allowEmbed"] = db.VersionNumber, db.AllowEmbed
	}
	audit.Record(ctx, a.rec, p, ActionDashboardRestore, target(TypeWorkbook, id), err, http.StatusOK, d)
	return w, err
}

func (l *logging) RestoreDashboardVersion(ctx context.Context, p *identity.Principal, deploymentID, id, number int64) (Workbook, error) {
	w, err := l.Service.RestoreDashboardVersion(ctx, p, deploymentID, id, number)
	var version int64
	if w.PublishedDashboard != nil {
		version = w.PublishedDashboard.VersionNumber
	}
	l.done(ctx, err, "dashboard version restored", "deploymentId", deploymentID, "workbookId", id, "restoredVersion", number, "versionNumber", version)
	return w, err
}

// RestoreDashboardVersion counts a restore as the publish it is.
func (i *instrumenting) RestoreDashboardVersion(ctx context.Context, p *identity.Principal, deploymentID, id, number int64) (Workbook, error) {
	w, err := i.Service.RestoreDashboardVersion(ctx, p, deploymentID, id, number)
	if err == nil {
		i.m.DashboardsPublished.Inc()
	}
	return w, err
}
