package httpx_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
)

func TestRouterAnswersUnknownPathsAndMethodsInJSON(t *testing.T) {
	r := httpx.NewRouter()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	r.Handle("GET", "/api/v1/things/{id}", ok)
	r.Handle("DELETE", "/api/v1/things/{id}", ok)
	r.Handle("POST", "/api/v1/things", ok)
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/api/v1/things/7", 204, ""},
		{"HEAD", "/api/v1/things/7", 204, ""},
		{"DELETE", "/api/v1/things/7", 204, ""},
		{"PUT", "/api/v1/things/7", 405, "DELETE, GET, HEAD"},
		{"GET", "/api/v1/things", 405, "POST"},
		{"PATCH", "/api/v1/things", 405, "POST"},
		{"GET", "/api/v1/other", 404, ""},
		{"BREW", "/", 404, ""},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		if w.Code != c.status || w.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q, want %d Allow %q", c.method, c.path, w.Code, w.Header().Get("Allow"), c.status, c.allow)
		}
		if c.status >= 400 {
			var e errs.Body
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Status != c.status || e.Code == "" || e.Message == "" {
				t.Errorf("%s %s: body %s", c.method, c.path, w.Body)
			}
		}
	}
}

func TestRouterListsItsRoutesInRegistrationOrder(t *testing.T) {
	r := httpx.NewRouter()
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	r.Handle("GET", "/api/v1/things/{id}", ok)
	r.Handle("POST", "/api/v1/things", ok)
	r.Handle("DELETE", "/api/v1/things/{id}", ok)
	want := []string{"GET /api/v1/things/{id}", "DELETE /api/v1/things/{id}", "POST /api/v1/things"}
	if got := r.Routes(); !slices.Equal(got, want) {
		t.Fatalf("Routes() = %q, want %q", got, want)
	}
	// The 404 and 405 answers installed by the first request are not routes.
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/nowhere", nil))
	if got := r.Routes(); !slices.Equal(got, want) {
		t.Fatalf("after the first request, Routes() = %q, want %q", got, want)
	}
}
