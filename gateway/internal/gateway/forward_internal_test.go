package gateway

import (
	"regexp"
	"testing"

	"github.com/analyticsco/platform/api"
)

// TestEveryDocumentedOperationIsForwardedToItsService: the gateway's route table (match)
// sends every path of openapi.yaml to the process the document says serves it (the
// x-served-by each service's routes test holds its router to), so the three tables (the
// document, the gateway's, each router's) cannot disagree.
func TestEveryDocumentedOperationIsForwardedToItsService(t *testing.T) {
	ops, err := api.Operations()
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for _, op := range ops {
		// A path as a client sends it: a deployment id is a number, other parameters a
		// well-formed name.
		p := param.ReplaceAllStringFunc(op.Path, func(name string) string {
			if name == "{deploymentId}" {
				return "7"
			}
			return "acme-one"
		})
		rt, ok := match(p)
		switch {
		case op.Service == "gateway":
			continue // answered before the table (serveOwn; TestOwnRoutesAreWhatTheDocumentSays)
		case !ok:
			t.Errorf("%s %s (%s): the gateway matches no route for %s", op.Method, op.Path, op.ID, p)
		case rt.svc.String() != op.Service:
			t.Errorf("%s %s (%s): the gateway forwards it to %s, openapi.yaml says %s serves it", op.Method, op.Path, op.ID, rt.svc, op.Service)
		}
	}
}
