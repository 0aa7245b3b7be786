package api_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/analyticsco/platform/api"
)

// TestEveryOperationIsServedByAKnownProcess: an operation whose tag names no process (or
// one that runs no routes test) would be checked by no router.
func TestEveryOperationIsServedByAKnownProcess(t *testing.T) {
	ops, err := api.Operations()
	if err != nil {
		t.Fatal(err)
	}
	processes := []string{"gateway", "workspace-svc", "embed-svc", "dbtsync-svc"}
	for _, op := range ops {
		if !slices.Contains(processes, op.Service) {
			t.Errorf("%s %s: tag %q is served by %q, want one of %q", op.Method, op.Path, op.Tag, op.Service, processes)
		}
	}
}

// documentedRoutes is the table a router of service would hold if it matched the
// document exactly, with parameters renamed to prove they compare by shape.
func documentedRoutes(t *testing.T, service string) []string {
	t.Helper()
	ops, err := api.Operations()
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, op := range ops {
		if op.Service == service {
			routes = append(routes, op.Method+" "+strings.ReplaceAll(op.Path, "{deploymentId}", "{dep}"))
		}
	}
	if len(routes) < 10 {
		t.Fatalf("only %d operations served by %s", len(routes), service)
	}
	return routes
}

func TestCheckRoutesAcceptsTheDocumentedTable(t *testing.T) {
	routes := append(documentedRoutes(t, "workspace-svc"), "GET /healthz") // not the API: ignored
	if err := api.CheckRoutes("workspace-svc", routes); err != nil {
		t.Fatal(err)
	}
}

// The check fails on each way a router and the document can drift apart; each case alters
// the documented table once and wants the route named.
func TestCheckRoutesFailsOnATableThatDrifted(t *testing.T) {
	base := documentedRoutes(t, "workspace-svc")
	missing := strings.ReplaceAll(base[3], "{dep}", "{deploymentId}") // as the document writes it
	for _, c := range []struct {
		name   string
		routes []string
		want   string
	}{
		{"a documented operation no route serves", slices.Delete(slices.Clone(base), 3, 4),
			missing + " ("}, // its operationId follows
		{"a route the document does not describe", append(slices.Clone(base), "POST /api/v1/deployments/{d}/folders/{f}/archive"),
			"POST /api/v1/deployments/{d}/folders/{f}/archive is served but openapi.yaml does not describe it"},
		{"a route the document says another process serves", append(slices.Clone(base), "POST /api/v1/embed/generate-session"),
			"POST /api/v1/embed/generate-session is served by workspace-svc but openapi.yaml says embed-svc"},
		{"a route registered twice", append(slices.Clone(base), base[0]),
			base[0] + " is registered twice"},
		{"a method the document does not give the path", append(slices.Clone(base), "PUT /api/v1/deployments/{deploymentId}/workspace/move"),
			"PUT /api/v1/deployments/{deploymentId}/workspace/move is served but openapi.yaml does not describe it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := api.CheckRoutes("workspace-svc", c.routes)
			if err == nil {
				t.Fatal("the altered table passed the check")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name %q", err, c.want)
			}
		})
	}
}
