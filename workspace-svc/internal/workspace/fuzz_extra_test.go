package workspace

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// FuzzDecodeCreateReportRequest: the report variant of the item decoder (same shape as a
// workbook, its own route) decodes or fails with a 4xx; never a panic.
func FuzzDecodeCreateReportRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+base+"/reports", "/api/v1/deployments/7/reports", decodeCreateItemRequest(TypeReport),
		`{"name":"r","folderId":3,"meta":{}}`, `{"name":"r","folderId":null}`, `{"name":"r","folderId":0}`, `{"name":"r","calculatedFields":"x"}`,
		`{"name":"r","dashboardDraft":{"app":{"entry":"`+string(make([]byte, 10))+`"}}}`, `{}`, `{"name":null}`)
}

// FuzzDecodeListRequest: any query of the workspace listing decodes to a folder and page
// size in range or fails with a 4xx; never a panic.
func FuzzDecodeListRequest(f *testing.F) {
	for _, s := range []string{"", "folderId=3", "folderId=0", "folderId=-1", "folderId=x", "first=1", "first=201", "first=0",
		"first=1&after=eyJ4IjoxfQ", "after=%ff", "folderId=9223372036854775808", "folderId=3&folderId=4", "first= 5",
		"q=sales", "q=%2A%28", "type=WORKBOOK", "type=x", "createdBy=me", "createdBy=5", "favorites=true", "favorites=1",
		"sort=-updatedAt", "sort=size", "q=a&type=REPORT&sort=name&folderId=3&first=20"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		mux := http.NewServeMux()
		var (
			req    any
			err    error
			served bool
		)
		mux.HandleFunc("GET "+base+"/workspace", func(w http.ResponseWriter, r *http.Request) {
			served = true
			req, err = decodeListRequest(r.Context(), r)
		})
		r := httptest.NewRequest("GET", "/api/v1/deployments/7/workspace", nil)
		r.URL.RawQuery = query // set directly: a hostile query need not survive a request line
		p := &identity.Principal{User: &identity.User{ID: 1, Role: identity.RoleAdmin}, Deployment: &identity.Deployment{ID: 7}}
		mux.ServeHTTP(httptest.NewRecorder(), r.WithContext(identity.NewContext(context.Background(), p)))
		if !served {
			t.Fatal("the workspace route did not match")
		}
		if err != nil {
			he, ok := err.(*httpx.Error)
			if !ok || he.Status < 400 || he.Status > 499 || he.Message == "" {
				t.Fatalf("query %q: want a 4xx client error, got %#v", query, err)
			}
			return
		}
		switch lr := req.(type) {
		case listRequest:
			if lr.First < 1 || lr.First > MaxPage || lr.Folder < 0 {
				t.Fatalf("query %q: accepted %+v", query, lr)
			}
		case searchRequest:
			in := lr.In
			if in.First < 1 || in.First > MaxPage || (in.Folder != nil && *in.Folder <= 0) || len([]rune(in.Q)) > MaxNameLength ||
				(in.Type != "" && !in.Type.Valid()) || (in.Sort != "" && !slices.Contains(SearchSorts, in.Sort)) {
				t.Fatalf("query %q: accepted %+v", query, in)
			}
		default:
			t.Fatalf("query %q: decoded to %T", query, req)
		}
	})
}

// FuzzDecodeUpdateItemRequest: a workbook change decodes or fails with a 4xx.
func FuzzDecodeUpdateItemRequest(f *testing.F) {
	fuzzDecoder(f, "PATCH "+base+"/workbooks/{workbookId}", "/api/v1/deployments/7/workbooks/3", decodeUpdateItemRequest(TypeWorkbook, "workbookId"),
		`{"name":"b"}`, `{"meta":{"a":1}}`, `{}`, `{"name":null}`, `{"meta":[1]}`, `{"dashboardDraft":{"widgets":[{}]}}`, `{"calculatedFields":"x"}`)
}

// FuzzDecodePublishRequest: a publish (no body, or allowEmbed) decodes or fails with a 4xx.
func FuzzDecodePublishRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+base+"/workbooks/{workbookId}/publish", "/api/v1/deployments/7/workbooks/3/publish", decodePublishRequest,
		``, `{}`, `{"allowEmbed":false}`, `{"allowEmbed":"no"}`, `[]`, `{"allowEmbed":true,"x":1}`)
}
