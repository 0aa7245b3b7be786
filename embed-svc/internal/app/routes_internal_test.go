package app

import (
	"testing"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
)

// TestRouterServesWhatTheDocumentSays: the router embed-svc serves (built with no
// endpoints behind it: only its table is read) holds exactly the operations openapi.yaml
// says embed-svc serves.
func TestRouterServesWhatTheDocumentSays(t *testing.T) {
	if err := api.CheckRoutes("embed-svc", newRouter(embed.Endpoints{}, nil, webhooks.Endpoints{}, nil, nil, nil).Routes()); err != nil {
		t.Fatal(err)
	}
}
