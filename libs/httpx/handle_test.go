package httpx_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
)

// A body over the route's limit is 413 too_large through the one error encoder, and the
// server closes the connection rather than drain the rest (the limit is set with the
// response writer); a domain error is answered by errs.Encoder; a route with its own
// limit takes a body the default would refuse.
func TestHandleBoundsBodiesAndEncodesErrors(t *testing.T) {
	r := httpx.NewRouter()
	echo := func(_ context.Context, req any) (any, error) {
		if req.(map[string]string)["name"] == "refused" {
			return nil, errs.New(errs.Forbidden, "admins only")
		}
		return req, nil
	}
	dec := func(_ context.Context, r *http.Request) (any, error) {
		var body map[string]string
		return body, httpx.DecodeJSON(r, &body)
	}
	enc := func(_ context.Context, w http.ResponseWriter, resp any) error {
		httpx.WriteJSON(w, http.StatusOK, resp)
		return nil
	}
	o := httpx.HandleOptions{Logger: discardLogger(), MaxBody: 64, Encode: enc}
	httpx.Handle(r, http.MethodPost, "/small", echo, dec, o)
	httpx.Handle(r, http.MethodPost, "/large", echo, dec, o.WithMaxBody(1<<20))
	srv := httptest.NewServer(r)
	defer srv.Close()

	post := func(path, body string) (*http.Response, errs.Body) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e errs.Body
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp, e
	}
	big := `{"name":"` + strings.Repeat("x", 1000) + `"}`
	resp, e := post("/small", big)
	if resp.StatusCode != 413 || e.Code != errs.CodeTooLarge || !resp.Close {
		t.Fatalf("oversized body: %d %+v, connection closed %v; want 413 too_large, closed", resp.StatusCode, e, resp.Close)
	}
	if resp, _ := post("/large", big); resp.StatusCode != 200 {
		t.Fatalf("body within the route's own limit: %d", resp.StatusCode)
	}
	if resp, e := post("/small", `{"name":"refused"}`); resp.StatusCode != 403 || e.Code != errs.CodeForbidden {
		t.Fatalf("domain error: %d %+v", resp.StatusCode, e)
	}
}
