package workspace_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// serve answers one request of p to the service's HTTP handler (identity already
// verified, as identity.Require leaves it).
func (f *fixture) serve(p *identity.Principal, method, path, body string) *httptest.ResponseRecorder {
	f.t.Helper()
	h := workspace.NewHTTPHandler(workspace.MakeEndpoints(f.svc), slog.New(slog.NewJSONHandler(io.Discard, nil)),
		fairshare.New(nil, "workspace-svc", 8), nil) // every route as served: the bound in front
	req := httptest.NewRequest(method, path, bytes.NewBufferString(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req.WithContext(identity.NewContext(req.Context(), p)))
	return w
}

func decodeJSON(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("%d %q: %v", w.Code, w.Body, err)
	}
	return m
}

// TestHTTPAnswers: the transport's one behaviour for what is not a success: 503 with
// Retry-After when the store is down, bulk-move failures in their own shape, 405 with
// Allow, a JSON 404.
func TestHTTPAnswers(t *testing.T) {
	down := errors.Join(errs.ErrUnavailable, errors.New("connection refused"))
	t.Run("get-folder-503-store-down-with-retry-after", func(t *testing.T) {
		f := newFixture(t)
		folder := f.folder(admin, "f", 0)
		f.store.Fault = func(string) error { return down }
		w := f.serve(admin, "GET", "/api/v1/deployments/7/folders/"+jsonID(folder), "")
		if body := decodeJSON(t, w); w.Code != 503 || w.Header().Get("Retry-After") != "1" || body["code"] != "unavailable" || body["status"] != float64(503) {
			t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
		}
	})
	t.Run("bulk-move-200-store-down-midway-items-not-applied", func(t *testing.T) {
		f := newFixture(t)
		wb := f.item(admin, workspace.TypeWorkbook, "wb", 0)
		f.store.Fault = func(method string) error {
			if method == "MoveItem" {
				return down
			}
			return nil
		}
		dest := f.folder(admin, "dest", 0)
		w := f.serve(admin, "POST", "/api/v1/deployments/7/workspace/bulk-move",
			`{"items":[{"type":"WORKBOOK","id":`+jsonID(wb)+`}],"folderId":`+jsonID(dest)+`}`)
		want := map[string]any{"moved": []any{}, "failed": []any{map[string]any{"type": "WORKBOOK", "id": float64(wb), "error": map[string]any{
			"status": float64(503), "code": "not_applied",
			"message": "workbook " + jsonID(wb) + " may not have been moved: the workspace store failed while moving it; check where it is and retry"}}}}
		if got := decodeJSON(t, w); w.Code != 200 || !reflect.DeepEqual(got, want) {
			t.Fatalf("%d %v, want 200 %v", w.Code, got, want)
		}
	})
	t.Run("folders-405-with-allow", func(t *testing.T) {
		w := newFixture(t).serve(admin, "DELETE", "/api/v1/deployments/7/folders", "")
		if body := decodeJSON(t, w); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "POST" || body["code"] != "method_not_allowed" {
			t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
		}
	})
	t.Run("unknown-path-404-json", func(t *testing.T) {
		w := newFixture(t).serve(admin, "GET", "/api/v1/deployments/7/dashboards", "")
		if body := decodeJSON(t, w); w.Code != 404 || body["code"] != "not_found" {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
}

func jsonID(id int64) string { return strconv.FormatInt(id, 10) }
