package workspace

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
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
			r.Body = http.MaxBytesReader(nil, r.Body, MaxBodyBytes)
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
		he, ok := err.(*httpx.Error)
		if !ok || he.Status < 400 || he.Status > 499 || he.Message == "" {
			t.Fatalf("body %q: want a 4xx client error, got %#v", body, err)
		}
	})
}

func FuzzDecodeBulkMoveRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+base+"/workspace/bulk-move", "/api/v1/deployments/7/workspace/bulk-move", decodeBulkMoveRequest,
		`{"items":[{"type":"WORKBOOK","id":1}],"folderId":3}`, `{"items":[]}`, `{"items":[{"type":"X","id":1.5}]}`,
		`{"items":null,"folderId":null}`, `[]`, `{"items":[{"type":"FOLDER","id":-1}]}`, `{`, ``, `{"items":[{}]}`)
}

func FuzzDecodeMoveRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+base+"/workspace/move", "/api/v1/deployments/7/workspace/move", decodeMoveRequest,
		`{"type":"WORKBOOK","id":7,"folderId":3}`, `{"type":"REPORT","id":7,"folderId":null}`, `{"id":"7"}`, `{"type":1}`, `null`)
}

func FuzzDecodeCreateFolderRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+base+"/folders", "/api/v1/deployments/7/folders", decodeCreateFolderRequest,
		`{"name":"a","parentId":2,"position":1.5}`, `{"name":""}`, `{"parentId":0}`, `{"name":"a","position":"x"}`)
}

func FuzzDecodeCreateItemRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+base+"/workbooks", "/api/v1/deployments/7/workbooks", decodeCreateItemRequest(TypeWorkbook),
		`{"name":"a","meta":{"x":1},"calculatedFields":{},"dashboardDraft":{"kind":"APP","app":{"entry":"index.html"},"widgets":[{"id":"w","type":"CHART","position":{"x":0,"y":0,"w":1,"h":1},"responsiveLayouts":{"lg":{"x":1}}}]}}`,
		`{"name":"a","meta":[1]}`, `{"name":"a","dashboardDraft":{"layout":{"cols":{"lg":"x"}}}}`, `{"name":"a","dashboardDraft":{"widgets":[{}]}}`)
}

func FuzzDecodeSetPermissionsRequest(f *testing.F) {
	fuzzDecoder(f, "PUT "+base+"/folders/{folderId}/permissions", "/api/v1/deployments/7/folders/3/permissions", decodeSetPermissionsRequest,
		`{"grants":[{"userId":5,"level":"edit"}]}`, `{"grants":[]}`, `{"grants":[{"userId":5}]}`, `{}`)
}

func FuzzDecodeUpdateFolderRequest(f *testing.F) {
	fuzzDecoder(f, "PATCH "+base+"/folders/{folderId}", "/api/v1/deployments/7/folders/3", decodeUpdateFolderRequest,
		`{"name":"b"}`, `{"position":2}`, `{}`, `{"name":null}`)
}
