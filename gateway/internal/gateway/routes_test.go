package gateway_test

import (
	"testing"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/gateway/internal/gateway"
)

// TestOwnRoutesAreWhatTheDocumentSays: the routes the gateway answers itself are exactly
// the operations openapi.yaml says the gateway serves (TestRoutingAndLimits's
// reference-public-and-read-only requests each one).
func TestOwnRoutesAreWhatTheDocumentSays(t *testing.T) {
	if err := api.CheckRoutes("gateway", gateway.OwnRoutes()); err != nil {
		t.Fatal(err)
	}
}
