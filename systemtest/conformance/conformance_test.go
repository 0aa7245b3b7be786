package conformance_test

import (
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/systemtest/conformance"
)

// The services whose muxes are the real routers behind the gateway.
var serviceDirs = []string{"workspace-svc", "embed-svc", "dbtsync-svc"}

// publicPath reports whether a mux route is part of the API the gateway forwards; a
// service's own operational endpoints (/healthz, /readyz, /metrics) are not.
func publicPath(p string) bool {
	return strings.HasPrefix(p, "/api/v1/") || strings.HasPrefix(p, "/build/api/v1/")
}

func loadDocument(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.YAML)
	if err != nil {
		t.Fatalf("openapi.yaml does not load: %v", err)
	}
	return doc
}

func TestEveryRouteIsDocumentedAndEveryOperationIsRouted(t *testing.T) {
	root := devstack.RepoRoot(t)
	routed := map[string][]conformance.Route{}
	for _, svc := range serviceDirs {
		routes, unresolved, err := conformance.ServeMuxRoutes(filepath.Join(root, svc))
		if err != nil {
			t.Fatalf("scan %s: %v", svc, err)
		}
		for _, u := range unresolved {
			t.Errorf("%s: cannot evaluate the route pattern %q to constant strings; register routes with literal or constant patterns so they can be checked against openapi.yaml", u.Pos, u.Expr)
		}
		if len(routes) == 0 {
			t.Errorf("%s: no ServeMux route found; the scanner no longer understands how its routes are registered", svc)
		}
		for _, r := range routes {
			if publicPath(r.Path) {
				routed[r.Key()] = append(routed[r.Key()], r)
			}
		}
	}
	own, err := conformance.GatewayOwnRoutes(filepath.Join(root, "gateway", "internal", "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	if len(own) == 0 {
		t.Errorf("gateway: its own GET /api/v1/openapi.json route was not found in gateway/internal/gateway")
	}
	for _, r := range own {
		routed[r.Key()] = append(routed[r.Key()], r)
	}
	for key, rs := range routed {
		if len(rs) > 1 {
			t.Errorf("%s is registered more than once: %v", key, rs)
		}
	}

	documented := map[string]string{}
	for path, item := range loadDocument(t).Paths.Map() {
		for method, op := range item.Operations() {
			documented[method+" "+conformance.NormalizePath(path)] = op.OperationID + " (" + method + " " + path + ")"
		}
	}

	var undocumented, unrouted []string
	for key, rs := range routed {
		if _, ok := documented[key]; !ok {
			undocumented = append(undocumented, rs[0].String())
		}
	}
	for key, op := range documented {
		if _, ok := routed[key]; !ok {
			unrouted = append(unrouted, op)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unrouted)
	if len(undocumented) > 0 {
		t.Errorf("routes served but missing from openapi.yaml:\n  %s", strings.Join(undocumented, "\n  "))
	}
	if len(unrouted) > 0 {
		t.Errorf("operations in openapi.yaml that no router serves:\n  %s", strings.Join(unrouted, "\n  "))
	}
	t.Logf("%d routes served, %d operations documented", len(routed), len(documented))
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadDocument(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	if doc.OpenAPI != "3.0.3" || doc.Info.Version != "1.0.0" {
		t.Errorf("openapi %q, info.version %q; want 3.0.3 and the contract's version 1.0.0", doc.OpenAPI, doc.Info.Version)
	}
	// Every operation has an id and says what its failures look like.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			}
			if op.Responses == nil || op.Responses.Len() == 0 {
				t.Errorf("%s %s documents no response", method, path)
			}
		}
	}
}

// The scanner must understand the ways a service registers routes, or the comparison
// above silently checks nothing.
func TestScannerEvaluatesRoutePatterns(t *testing.T) {
	for _, c := range []struct {
		name string
		src  string
		want []string
	}{
		{"a literal pattern", `package p
func f(mux *http.ServeMux) { mux.HandleFunc("GET /api/v1/things/{id}", nil) }`,
			[]string{"GET /api/v1/things/{}"}},
		{"package and local constants concatenated", `package p
const base = "/api/v1/deployments/{deploymentId}"
func f(mux *http.ServeMux) {
	const build = "/build" + base
	mux.HandleFunc("POST "+base+"/dbt-sync", nil)
	mux.Handle("GET "+build+"/files/{path...}", nil)
}`, []string{"GET /build/api/v1/deployments/{}/files/{}", "POST /api/v1/deployments/{}/dbt-sync"}},
		{"a closure's parameters over its call sites", `package p
const base = "/api/v1/d/{deploymentId}"
func f(mux *http.ServeMux) {
	handle := func(method, path string, h any) { mux.Handle(method+" "+base+path, nil) }
	handle("POST", "/folders", nil)
	handle("PATCH", "/folders/{folderId}", nil)
}`, []string{"PATCH /api/v1/d/{}/folders/{}", "POST /api/v1/d/{}/folders"}},
		{"range over a slice of anonymous structs, positional and keyed", `package p
func f(mux *http.ServeMux) {
	for _, c := range []struct{ path, kind string }{{"groups", "g"}, {kind: "a", path: "user-attributes"}} {
		mux.Handle("GET /api/v1/"+c.path, nil)
	}
}`, []string{"GET /api/v1/groups", "GET /api/v1/user-attributes"}},
		{"range over map keys, and method-less fallbacks ignored", `package p
func f(mux *http.ServeMux) {
	for path, allow := range map[string]string{"/api/v1/a": "GET", "/api/v1/b": "POST"} {
		mux.HandleFunc(allow+" "+path, nil)
		mux.HandleFunc(path, nil)
	}
	mux.HandleFunc("/", nil)
}`, []string{"GET /api/v1/a", "POST /api/v1/b"}},
		{"a router's method and path", `package p
const base = "/api/v1/deployments/{deploymentId}"
func f(r *httpx.Router) {
	r.Handle("GET", base+"/workspace", nil)
	r.HandleFunc(http.MethodPost, "/api/v1/audit", nil)
}`, []string{"GET /api/v1/deployments/{}/workspace", "POST /api/v1/audit"}},
		{"a top-level helper function", `package p
func route(mux *http.ServeMux, method, path string) { mux.Handle(method+" "+path, nil) }
func f(mux *http.ServeMux) { route(mux, "DELETE", "/api/v1/x/{id}") }`,
			[]string{"DELETE /api/v1/x/{}"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			routes, unresolved, err := conformance.ScanSource(c.src)
			if err != nil {
				t.Fatal(err)
			}
			if len(unresolved) > 0 {
				t.Fatalf("unresolved: %+v", unresolved)
			}
			var got []string
			for _, r := range routes {
				got = append(got, r.Key())
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	t.Run("a pattern computed at run time is reported, not skipped", func(t *testing.T) {
		_, unresolved, err := conformance.ScanSource(`package p
func f(mux *http.ServeMux) { mux.HandleFunc(fmt.Sprintf("GET /api/v1/%s", x()), nil) }`)
		if err != nil {
			t.Fatal(err)
		}
		if len(unresolved) != 1 {
			t.Fatalf("unresolved %+v, want the Sprintf pattern", unresolved)
		}
	})
}
