package workspace_test

import (
	"strings"
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

func FuzzDecodeBulkDeleteRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+workspace.Base+"/workspace/bulk-delete", "/api/v1/deployments/7/workspace/bulk-delete", workspace.DecodeTrashItemsRequest(false),
		`{"items":[{"type":"WORKBOOK","id":1}]}`, `{"items":[]}`, `{"items":[{"type":"FOLDER","id":2}],"folderId":3}`, `{"items":null}`, `[]`, `{`)
}

func FuzzDecodeTrashRestoreRequest(f *testing.F) {
	fuzzDecoder(f, "POST "+workspace.Base+"/workspace/trash/restore", "/api/v1/deployments/7/workspace/trash/restore", workspace.DecodeTrashItemsRequest(true),
		`{"items":[{"type":"WORKBOOK","id":1}],"folderId":3}`, `{"items":[{"type":"REPORT","id":1}],"folderId":0}`, `{"items":[{"type":"X","id":1}]}`, `{"folderId":null}`)
}

// TestTrashRequestsAreChecked: the trash's requests refuse what they cannot take, naming
// it, before anything is read.
func TestTrashRequestsAreChecked(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name, method, path, body string
		want                     int
		says                     string
	}{
		{"bulk-delete-400-empty", "POST", "/workspace/bulk-delete", `{"items":[]}`, 400, "1 to 100"},
		{"bulk-delete-400-folder-id", "POST", "/workspace/bulk-delete", `{"items":[{"type":"WORKBOOK","id":1}],"folderId":2}`, 400, "only for a restore"},
		{"bulk-delete-400-over-100", "POST", "/workspace/bulk-delete", `{"items":[` + strings.Repeat(`{"type":"WORKBOOK","id":1},`, 100) + `{"type":"WORKBOOK","id":1}]}`, 400, "not 101"},
		{"restore-400-folder-id-0", "POST", "/workspace/trash/restore", `{"items":[{"type":"WORKBOOK","id":1}],"folderId":0}`, 400, "folderId"},
		{"purge-400-unknown-type", "POST", "/workspace/trash/purge", `{"items":[{"type":"DASHBOARD","id":1}]}`, 400, "type"},
		{"trash-400-first", "GET", "/workspace/trash?first=0", ``, 400, "first"},
		{"delete-folder-400-recursive", "DELETE", "/folders/3?recursive=yes", ``, 400, "recursive"},
		{"bulk-delete-200-failed-entry", "POST", "/workspace/bulk-delete", `{"items":[{"type":"WORKBOOK","id":99}]}`, 200, `"deleted":[],"failed":[{"type":"WORKBOOK","id":99,"error":{"status":404,"code":"not_found","message":"workbook 99 not found"}}]`},
		{"restore-200-failed-entry", "POST", "/workspace/trash/restore", `{"items":[{"type":"REPORT","id":99}]}`, 200, `"failed":[{"type":"REPORT","id":99,"error":{"status":404,"code":"not_found","message":"report 99 is not in the trash"}}],"restored":[]`},
		{"trash-200-empty", "GET", "/workspace/trash", ``, 200, `"items":[]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := f.serve(admin, c.method, "/api/v1/deployments/7"+c.path, c.body)
			if w.Code != c.want || !strings.Contains(w.Body.String(), c.says) {
				t.Fatalf("%d %s, want %d saying %q", w.Code, w.Body, c.want, c.says)
			}
		})
	}
}
