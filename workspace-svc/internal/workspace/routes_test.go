package workspace_test

import (
	"testing"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestRouterServesWhatTheDocumentSays: the router NewHTTPHandler builds (with no
// endpoints behind it: only its table is read) holds exactly the operations openapi.yaml
// says workspace-svc serves.
func TestRouterServesWhatTheDocumentSays(t *testing.T) {
	h, ok := workspace.NewHTTPHandler(workspace.Endpoints{}, nil, nil).(interface{ Routes() []string })
	if !ok {
		t.Fatal("NewHTTPHandler no longer returns a router that lists its routes")
	}
	if err := api.CheckRoutes("workspace-svc", h.Routes()); err != nil {
		t.Fatal(err)
	}
}
