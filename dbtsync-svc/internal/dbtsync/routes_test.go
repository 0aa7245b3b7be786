package dbtsync_test

import (
	"testing"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// TestRouterServesWhatTheDocumentSays: the router NewHTTPHandler builds (with no
// endpoints behind it: only its table is read) holds exactly the operations openapi.yaml
// says dbtsync-svc serves.
func TestRouterServesWhatTheDocumentSays(t *testing.T) {
	h, ok := dbtsync.NewHTTPHandler(dbtsync.Endpoints{}, nil, 1, convert.ManifestLimits{}, nil).(interface{ Routes() []string })
	if !ok {
		t.Fatal("NewHTTPHandler no longer returns a router that lists its routes")
	}
	if err := api.CheckRoutes("dbtsync-svc", h.Routes()); err != nil {
		t.Fatal(err)
	}
}
