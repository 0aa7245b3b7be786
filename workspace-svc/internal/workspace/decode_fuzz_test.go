package workspace_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// fuzzDecoder feeds body to dec as a request of deployment 7 and requires either a
// decoded request or a 4xx client error: never a panic, never another error.
func fuzzDecoder(f *testing.F, pattern, path string, dec kithttp.DecodeRequestFunc, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		mux := http.NewServeMux()
		var err error
		served := false
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(nil, r.Body, workspace.MaxBodyBytes)
			served = true
			_, err = dec(r.Context(), r)
		})
		method, _, _ := strings.Cut(pattern, " ")
		req := httptest.NewRequest(method, path, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		p := &identity.Principal{User: &identity.User{ID: 1, Role: identity.RoleAdmin}, Deployment: &identity.Deployment{ID: 7}}
		req = req.WithContext(identity.NewContext(context.Background(), p))
		mux.ServeHTTP(httptest.NewRecorder(), req)
		if !served {
			t.Fatalf("pattern %s did not match %s %s", pattern, method, path)
		}
		if err == nil {
			return
		}
		status, _, msg, ok := errs.Answer(err)
		if !ok || status < 400 || status > 499 || msg == "" {
			t.Fatalf("body %q: want a 4xx client error, got %#v", body, err)
		}
	})
}

func FuzzDecodeBulkMoveRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+workspace.Base+"/workspace/bulk-move", "/api/v1/deployments/7/workspace/bulk-move", workspace.DecodeBulkMoveRequest,
		`{"items":[{"type":"WORKBOOK","id":1}],"folderId":3}`, `{"items":[]}`, `{"items":[{"type":"X","id":1.5}]}`,
		`{"items":null,"folderId":null}`, `[]`, `{"items":[{"type":"FOLDER","id":-1}]}`, `{`, ``, `{"items":[{}]}`)
}

func FuzzDecodeMoveRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+workspace.Base+"/workspace/move", "/api/v1/deployments/7/workspace/move", workspace.DecodeMoveRequest,
		`{"type":"WORKBOOK","id":7,"folderId":3}`, `{"type":"REPORT","id":7,"folderId":null}`, `{"id":"7"}`, `{"type":1}`, `null`)
}

func FuzzDecodeCreateFolderRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+workspace.Base+"/folders", "/api/v1/deployments/7/folders", workspace.DecodeCreateFolderRequest,
		`{"name":"a","parentId":2,"position":1.5}`, `{"name":""}`, `{"parentId":0}`, `{"name":"a","position":"x"}`)
}

func FuzzDecodeCreateItemRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+workspace.Base+"/workbooks", "/api/v1/deployments/7/workbooks", workspace.DecodeCreateItemRequest(workspace.TypeWorkbook),
		`{"name":"a","meta":{"x":1},"calculatedFields":{},"dashboardDraft":{"kind":"APP","app":{"entry":"index.html"},"widgets":[{"id":"w","type":"CHART","position":{"x":0,"y":0,"w":1,"h":1},"responsiveLayouts":{"lg":{"x":1}}}]}}`,
		`{"name":"a","meta":[1]}`, `{"name":"a","dashboardDraft":{"layout":{"cols":{"lg":"x"}}}}`, `{"name":"a","dashboardDraft":{"widgets":[{}]}}`)
}

func FuzzDecodeSetPermissionsRequest(f *testing.F) {
	fuzzDecoder(f, "PUT "+workspace.Base+"/folders/{folderId}/permissions", "/api/v1/deployments/7/folders/3/permissions", workspace.DecodeSetPermissionsRequest,
		`{"grants":[{"userId":5,"level":"edit"}]}`, `{"grants":[]}`, `{"grants":[{"userId":5}]}`, `{}`)
}

func FuzzDecodeUpdateFolderRequest(f *testing.F) {
	fuzzDecoder(f, "PATCH "+workspace.Base+"/folders/{folderId}", "/api/v1/deployments/7/folders/3", workspace.DecodeUpdateFolderRequest,
		`{"name":"b"}`, `{"position":2}`, `{}`, `{"name":null}`)
}

// FuzzDecodeCreateReportRequest: the report variant of the item decoder (same shape as a
// workbook, its own route) decodes or fails with a 4xx; never a panic.
func FuzzDecodeCreateReportRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+workspace.Base+"/reports", "/api/v1/deployments/7/reports", workspace.DecodeCreateItemRequest(workspace.TypeReport),
		`{"name":"r","folderId":3,"meta":{}}`, `{"name":"r","folderId":null}`, `{"name":"r","folderId":0}`, `{"name":"r","calculatedFields":"x"}`,
		`{"name":"r","dashboardDraft":{"app":{"entry":"`+string(make([]byte, 10))+`"}}}`, `{}`, `{"name":null}`)
}

// FuzzDecodeListRequest: any query of the workspace listing decodes to a folder and page
// size in range or fails with a 4xx; never a panic.
func FuzzDecodeListRequest(f *testing.F) {
	for _, s := range []string{"", "folderId=3", "folderId=0", "folderId=-1", "folderId=x", "first=1", "first=201", "first=0",
		"first=1&after=eyJ4IjoxfQ", "after=%ff", "folderId=9223372036854775808", "folderId=3&folderId=4", "first= 5",
		"q=sales", "q=%2A%28", "type=WORKBOOK", "type=x", "createdBy=me", "createdBy=5", "favorites=true", "favorites=1",
		"sort=-updatedAt", "sort=size", "q=a&type=REPORT&sort=name&folderId=3&first=20", "q=%ff%fe", "q=%00", "q=a%0Ab",
		"q=%C3%A9t%C3%A9", "q=%ED%A0%80", "q=%E2%80%8B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		mux := http.NewServeMux()
		var (
			req    any
			err    error
			served bool
		)
		mux.HandleFunc("GET "+workspace.Base+"/workspace", func(w http.ResponseWriter, r *http.Request) {
			served = true
			req, err = workspace.DecodeListRequest(r.Context(), r)
		})
		r := httptest.NewRequest("GET", "/api/v1/deployments/7/workspace", nil)
		r.URL.RawQuery = query // set directly: a hostile query need not survive a request line
		p := &identity.Principal{User: &identity.User{ID: 1, Role: identity.RoleAdmin}, Deployment: &identity.Deployment{ID: 7}}
		mux.ServeHTTP(httptest.NewRecorder(), r.WithContext(identity.NewContext(context.Background(), p)))
		if !served {
			t.Fatal("the workspace route did not match")
		}
		if err != nil {
			status, _, msg, ok := errs.Answer(err)
			if !ok || status < 400 || status > 499 || msg == "" {
				t.Fatalf("query %q: want a 4xx client error, got %#v", query, err)
			}
			return
		}
		switch lr := req.(type) {
		case workspace.ListRequest:
			if lr.First < 1 || lr.First > httpx.MaxPage || lr.Folder < 0 {
				t.Fatalf("query %q: accepted %+v", query, lr)
			}
		case workspace.SearchRequest:
			in := lr.In
			if in.First < 1 || in.First > httpx.MaxPage || (in.Folder != nil && *in.Folder <= 0) || len([]rune(in.Q)) > workspace.MaxNameLength ||
				!utf8.ValidString(in.Q) || strings.ContainsFunc(in.Q, unicode.IsControl) ||
				(in.Type != "" && !in.Type.Valid()) || (in.Sort != "" && !slices.Contains(workspace.SearchSorts, in.Sort)) {
				t.Fatalf("query %q: accepted %+v", query, in)
			}
		default:
			t.Fatalf("query %q: decoded to %T", query, req)
		}
	})
}

// FuzzDecodeUpdateItemRequest: a workbook change decodes or fails with a 4xx.
func FuzzDecodeUpdateItemRequest(f *testing.F) {
	fuzzDecoder(f, "PATCH "+workspace.Base+"/workbooks/{workbookId}", "/api/v1/deployments/7/workbooks/3", workspace.DecodeUpdateItemRequest(workspace.TypeWorkbook, "workbookId"),
		`{"name":"b"}`, `{"meta":{"a":1}}`, `{}`, `{"name":null}`, `{"meta":[1]}`, `{"dashboardDraft":{"widgets":[{}]}}`, `{"calculatedFields":"x"}`)
}

// FuzzDecodePublishRequest: a publish (no body, or allowEmbed) decodes or fails with a 4xx.
func FuzzDecodePublishRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+workspace.Base+"/workbooks/{workbookId}/publish", "/api/v1/deployments/7/workbooks/3/publish", workspace.DecodePublishRequest,
		``, `{}`, `{"allowEmbed":false}`, `{"allowEmbed":"no"}`, `[]`, `{"allowEmbed":true,"x":1}`)
}
