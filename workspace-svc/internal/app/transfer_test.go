package app_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestExportImportOverMongo drives export and import through the gateway on FerretDB
// (every query checked against the declared indexes): a small tree with grants, embed
// grants, a dashboard naming a report and a publish, exported, imported into another
// deployment of the account, exported again (equal), imported again (all unchanged); a
// bundle of another format is 400 bundle_format; each is one audit event.
func TestExportImportOverMongo(t *testing.T) {
	e := newEnv(t, 1)
	src, dst := e.dep("acme", 0), e.dep("acme", 1)
	admin := e.bearer("acme", "admin")
	top := e.mkFolder(t, src, admin, "transfer top", 0)
	sub := e.mkFolder(t, src, admin, "transfer sub", top)
	if r := e.do(t, "PUT", depPath(src, fmt.Sprintf("/folders/%d/permissions", top)), admin, map[string]any{"grants": []any{map[string]any{"userId": e.user("acme", "viewer").ID, "level": "view"}}}); r.Status != 200 {
		t.Fatalf("permissions: %d %s", r.Status, r.Body)
	}
	r := e.do(t, "POST", depPath(src, "/reports"), admin, map[string]any{"name": "transfer report", "folderId": sub, "meta": map[string]any{"sql": "select 1", "b": 2, "a": 1}})
	if r.Status != 200 {
		t.Fatalf("report: %d %s", r.Status, r.Body)
	}
	report := int64(r.Object(t)["id"].(float64))
	draft := map[string]any{"widgets": []any{map[string]any{"id": "w1", "type": "CHART", "position": map[string]any{"x": 0, "y": 0, "w": 4, "h": 3}, "config": map[string]any{"reportId": report, "color": "red"}}}}
	r = e.do(t, "POST", depPath(src, "/workbooks"), admin, map[string]any{"name": "transfer board", "folderId": top, "dashboardDraft": draft, "calculatedFields": map[string]any{"m": "a-b"}})
	if r.Status != 200 {
		t.Fatalf("workbook: %d %s", r.Status, r.Body)
	}
	wb := int64(r.Object(t)["id"].(float64))
	if r := e.do(t, "POST", depPath(src, fmt.Sprintf("/workbooks/%d/publish", wb)), admin, nil); r.Status != 200 {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "PUT", depPath(src, fmt.Sprintf("/workbooks/%d/embed-access", wb)), admin, map[string]any{"allEmbedUsers": "read"}); r.Status != 200 {
		t.Fatalf("embed access: %d %s", r.Status, r.Body)
	}

	export := func(dep, folder int64) []byte {
		t.Helper()
		r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workspace/export?folderId=%d", folder)), admin, nil)
		if r.Status != 200 {
			t.Fatalf("export of %d: %d %s", dep, r.Status, r.Body)
		}
		return r.Body
	}
	counts := func(r map[string]any) map[string]float64 {
		out := map[string]float64{}
		for k, v := range r["counts"].(map[string]any) {
			out[k] = v.(float64)
		}
		return out
	}
	first := export(src, top)
	r = e.do(t, "POST", depPath(dst, "/workspace/import"), admin, map[string]any{"bundle": json.RawMessage(first)})
	if r.Status != 200 {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	if c := counts(r.Object(t)); c["create"] != 4 || c["conflict"] != 0 {
		t.Fatalf("import: %v %s", c, r.Body)
	}
	// The destination's whole deployment is the imported subtree.
	r2 := e.do(t, "GET", depPath(dst, "/workspace/export"), admin, nil)
	if r2.Status != 200 {
		t.Fatalf("export of %d: %d %s", dst, r2.Status, r2.Body)
	}
	items := func(b []byte) any {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("bundle: %v %s", err, b)
		}
		return m["items"]
	}
	if a, b := items(first), items(r2.Body); !reflect.DeepEqual(a, b) {
		t.Fatalf("export -> import -> export differs:\n%s\n%s", first, r2.Body)
	}
	r = e.do(t, "POST", depPath(dst, "/workspace/import"), admin, map[string]any{"bundle": json.RawMessage(first)})
	if c := counts(r.Object(t)); r.Status != 200 || c["unchanged"] != 4 {
		t.Fatalf("import again: %d %s", r.Status, r.Body)
	}
	r = e.do(t, "POST", depPath(dst, "/workspace/import"), admin, map[string]any{"bundle": map[string]any{"format": "analytics-workspace-bundle/0", "items": []any{}}})
	if r.Status != 400 || r.Error(t).Code != "bundle_format" {
		t.Fatalf("another format: %d %s", r.Status, r.Body)
	}
	// One event per export and per import, refused ones included, with the counts.
	var exports, imports []map[string]any
	for _, ev := range e.audit.Events() {
		switch ev.Action {
		case workspace.ActionExport:
			exports = append(exports, ev.Details)
		case workspace.ActionImport:
			imports = append(imports, ev.Details)
		}
	}
	if len(exports) != 2 || len(imports) != 3 || imports[0]["create"] != 4 || imports[1]["unchanged"] != 4 || exports[0]["reports"] != 1 {
		t.Fatalf("audit: exports %v, imports %v", exports, imports)
	}
}
