package httpx_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/analyticsco/platform/libs/httpx"
)

// TestHandleFirstServesALiteralBesideAWildcard: a route with a literal segment where
// another has a wildcard ("/x/by-key/{key}" beside "/x/{id}/permissions"), which the
// ServeMux refuses as a conflict, is served first, with its wildcards; every other
// request goes on to the mux's routes; Routes lists it.
func TestHandleFirstServesALiteralBesideAWildcard(t *testing.T) {
	r := httpx.NewRouter()
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("X-Route", name+":"+req.PathValue("id")+req.PathValue("key"))
			w.WriteHeader(204)
		})
	}
	r.Handle("PUT", "/api/v1/d/{d}/folders/{id}/permissions", named("permissions"))
	r.Handle("GET", "/api/v1/d/{d}/folders/{id}", named("folder"))
	r.HandleFirst("PUT", "/api/v1/d/{d}/folders/by-key/{key}", named("by-key"))
	for _, c := range []struct {
		method, path string
		status       int
		route        string
	}{
		{"PUT", "/api/v1/d/1/folders/by-key/team", 204, "by-key:team"},
		{"PUT", "/api/v1/d/1/folders/by-key/permissions", 204, "by-key:permissions"},
		{"PUT", "/api/v1/d/1/folders/12/permissions", 204, "permissions:12"},
		{"GET", "/api/v1/d/1/folders/12", 204, "folder:12"},
		{"GET", "/api/v1/d/1/folders/by-key/team", 404, ""},
		{"PUT", "/api/v1/d/1/folders/by-key/", 404, ""},
		{"PUT", "/api/v1/d/1/folders/by-key/a/b", 404, ""},
	} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		if w.Code != c.status || w.Header().Get("X-Route") != c.route {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, w.Code, w.Header().Get("X-Route"), c.status, c.route)
		}
	}
	if !slices.Contains(r.Routes(), "PUT /api/v1/d/{d}/folders/by-key/{key}") {
		t.Errorf("routes %v lack the by-key route", r.Routes())
	}
}
