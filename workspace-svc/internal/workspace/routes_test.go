package workspace_test

import (
	"log/slog"
	"testing"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/fairshare/fairsharetest"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestRouterServesWhatTheDocumentSays: the router NewHTTPHandler builds (with no
// endpoints behind it: only its table is read) holds exactly the operations openapi.yaml
// says workspace-svc serves.
func TestRouterServesWhatTheDocumentSays(t *testing.T) {
	h, ok := workspace.NewHTTPHandler(workspace.Endpoints{}, nil, nil, nil).(interface{ Routes() []string })
	if !ok {
		t.Fatal("NewHTTPHandler no longer returns a router that lists its routes")
	}
	if err := api.CheckRoutes("workspace-svc", h.Routes()); err != nil {
		t.Fatal(err)
	}
}

// Bulk move and publish are bounded per account before their body is read: the bound
// served, one more refused 429 concurrency_limit unread, another account served.
func TestExpensiveRoutesBoundedPerAccount(t *testing.T) {
	for _, rt := range []struct{ class, path string }{
		{workspace.ClassBulkMove, "/api/v1/deployments/1/workspace/bulk-move"},
		{workspace.ClassPublish, "/api/v1/deployments/1/workbooks/5/publish"},
	} {
		t.Run(rt.class, func(t *testing.T) {
			fair := fairshare.New(nil, "workspace-svc", 2)
			fairsharetest.Check(t, fairsharetest.Route{Handler: workspace.NewHTTPHandler(workspace.Endpoints{}, slog.New(slog.DiscardHandler), fair, nil),
				Limiter: fair, Class: rt.class, Method: "POST", Path: rt.path,
				Principal: func(account int64) *identity.Principal {
					return &identity.Principal{Account: identity.Account{ID: account}, User: &identity.User{ID: 1, Role: "admin"}, Deployment: &identity.Deployment{ID: 1}}
				}})
		})
	}
}
