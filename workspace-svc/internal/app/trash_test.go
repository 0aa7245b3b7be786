package app_test

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestTrash drives the trash through the gateway on FerretDB: a recursive delete and its
// restore give back the same subtree (ids, names, parents, grants, content); bulk delete
// answers per item with the single delete's errors; a purge removes for good; the item
// slots follow trash, restore and purge; another deployment reaches none of it; every
// call is one audit event; the retention sweep purges what outlived it.
func TestTrash(t *testing.T) {
	e := newEnvWithLimits(t, 1, workspace.Limits{ItemsPerDeployment: 8})
	dep, other := e.dep("acme", 0), e.dep("acme", 1)
	admin, viewer := e.bearer("acme", "admin"), e.bearer("acme", "viewer")
	aiUser := e.user("acme", "developer").ID

	a := e.mkFolder(t, dep, admin, "A", 0)
	b := e.mkFolder(t, dep, admin, "B", a)
	c := e.mkFolder(t, dep, admin, "C", b)
	if r := e.do(t, "PUT", depPath(dep, "/folders/"+itoa(b)+"/permissions"), admin, map[string]any{"grants": []any{map[string]any{"userId": aiUser, "level": "edit"}}}); r.Status != 200 {
		t.Fatalf("grants: %s", r)
	}
	wb := e.mkItem(t, dep, admin, "workbooks", "wb", b)
	if r := e.do(t, "PATCH", depPath(dep, "/workbooks/"+itoa(wb)), admin, map[string]any{"meta": map[string]any{"k": "v"}}); r.Status != 200 {
		t.Fatalf("meta: %s", r)
	}
	rp := e.mkItem(t, dep, admin, "reports", "rp", a)
	paths := []string{"/folders/" + itoa(a), "/folders/" + itoa(b), "/folders/" + itoa(c), "/workbooks/" + itoa(wb), "/reports/" + itoa(rp), "/folders/" + itoa(b) + "/permissions"}
	snapshot := func(t *testing.T) []map[string]any {
		t.Helper()
		var out []map[string]any
		for _, p := range paths {
			r := e.do(t, "GET", depPath(dep, p), admin, nil)
			if r.Status != 200 {
				t.Fatalf("GET %s: %s", p, r)
			}
			o := r.Object(t)
			delete(o, "updatedAt")
			delete(o, "updatedBy")
			out = append(out, o)
		}
		return out
	}
	before := snapshot(t)

	t.Run("delete-folder-409-without-recursive", func(t *testing.T) {
		if r := e.do(t, "DELETE", depPath(dep, "/folders/"+itoa(a)), admin, nil); r.Status != 409 || r.Error(t).Code != "folder_not_empty" {
			t.Fatalf("%s", r)
		}
		if r := e.do(t, "DELETE", depPath(dep, "/folders/"+itoa(a)+"?recursive=maybe"), admin, nil); r.Status != 400 {
			t.Fatalf("%s", r)
		}
	})
	t.Run("delete-folder-recursive-204", func(t *testing.T) {
		e.audit.Reset()
		if r := e.do(t, "DELETE", depPath(dep, "/folders/"+itoa(a)+"?recursive=true"), admin, nil); r.Status != 204 {
			t.Fatalf("%s", r)
		}
		for _, p := range paths[:5] {
			if r := e.do(t, "GET", depPath(dep, p), admin, nil); r.Status != 404 {
				t.Fatalf("GET %s after the delete: %s", p, r)
			}
		}
		evs := e.audit.Events()
		if len(evs) != 1 || evs[0].Action != "workspace.folder.delete" || evs[0].Details["recursive"] != true {
			t.Fatalf("events %+v", evs)
		}
	})
	t.Run("list-trash-200", func(t *testing.T) {
		var page struct {
			Items []struct {
				Type        string `json:"type"`
				ID          int64  `json:"id"`
				Name        string `json:"name"`
				FolderID    *int64 `json:"folderId"`
				DeletedBy   int64  `json:"deletedBy"`
				TrashedWith *int   `json:"trashedWith"`
			} `json:"items"`
		}
		e.do(t, "GET", depPath(dep, "/workspace/trash?first=10"), admin, nil).Decode(t, &page)
		if len(page.Items) != 1 || page.Items[0].ID != a || page.Items[0].Name != "A" || page.Items[0].TrashedWith == nil || *page.Items[0].TrashedWith != 4 ||
			page.Items[0].DeletedBy != e.user("acme", "admin").ID {
			t.Fatalf("trash %+v", page.Items)
		}
		if r := e.do(t, "GET", depPath(dep, "/workspace/trash"), viewer, nil); r.Status != 200 || len(r.Object(t)["items"].([]any)) != 0 {
			t.Fatalf("the viewer's trash: %s", r)
		}
		if r := e.do(t, "GET", depPath(other, "/workspace/trash"), admin, nil); r.Status != 200 || len(r.Object(t)["items"].([]any)) != 0 {
			t.Fatalf("another deployment's trash: %s", r)
		}
	})
	t.Run("restore-from-another-deployment-404", func(t *testing.T) {
		r := e.do(t, "POST", depPath(other, "/workspace/trash/restore"), admin, map[string]any{"items": []any{ref("FOLDER", a)}})
		if r.Status != 200 || r.Object(t)["failed"].([]any)[0].(map[string]any)["error"].(map[string]any)["status"].(float64) != 404 {
			t.Fatalf("%s", r)
		}
	})
	t.Run("slots-follow-the-trash", func(t *testing.T) {
		// The five trashed items gave their slots back: five new ones fit (limit 8).
		for i := range 5 {
			e.mkItem(t, dep, admin, "workbooks", "filler "+itoa(int64(i)), 0)
		}
		r := e.do(t, "POST", depPath(dep, "/workspace/trash/restore"), admin, map[string]any{"items": []any{ref("FOLDER", a)}})
		if f := r.Object(t)["failed"].([]any); len(f) != 1 || f[0].(map[string]any)["error"].(map[string]any)["code"] != "item_limit" {
			t.Fatalf("restore past the limit: %s", r)
		}
	})
	var fillers []any
	t.Run("bulk-delete-200-per-item", func(t *testing.T) {
		var list struct {
			Items []struct {
				ID   int64  `json:"id"`
				Type string `json:"type"`
			} `json:"items"`
		}
		e.do(t, "GET", depPath(dep, "/workspace"), admin, nil).Decode(t, &list)
		for _, it := range list.Items {
			if it.Type == "WORKBOOK" {
				fillers = append(fillers, ref("WORKBOOK", it.ID))
			}
		}
		single := e.do(t, "DELETE", depPath(dep, "/workbooks/999999999"), admin, nil)
		e.audit.Reset()
		r := e.do(t, "POST", depPath(dep, "/workspace/bulk-delete"), admin, map[string]any{"items": append([]any{ref("WORKBOOK", 999999999)}, fillers...)})
		var res struct {
			Deleted []map[string]any `json:"deleted"`
			Failed  []struct {
				Error map[string]any `json:"error"`
			} `json:"failed"`
		}
		r.Decode(t, &res)
		if r.Status != 200 || len(res.Deleted) != len(fillers) || len(res.Failed) != 1 || !reflect.DeepEqual(res.Failed[0].Error, single.Object(t)) {
			t.Fatalf("bulk delete %s; the single delete %s", r, single)
		}
		evs := e.audit.Events()
		if len(evs) != 1 || evs[0].Action != "workspace.items.delete" || evs[0].Details["done"] != len(fillers) {
			t.Fatalf("events %+v", evs)
		}
	})
	t.Run("restore-200-gives-back-the-subtree", func(t *testing.T) {
		e.audit.Reset()
		r := e.do(t, "POST", depPath(dep, "/workspace/trash/restore"), admin, map[string]any{"items": []any{ref("FOLDER", a)}})
		if r.Status != 200 || len(r.Object(t)["restored"].([]any)) != 1 || len(r.Object(t)["failed"].([]any)) != 0 {
			t.Fatalf("%s", r)
		}
		// Trash and restore are changes: each item's version moves on, so
		// an expectedVersion read before the trash is stale after it.
		after := snapshot(t)
		for i := range after {
			if v, ok := before[i]["version"].(float64); ok {
				if w, _ := after[i]["version"].(float64); w <= v {
					t.Errorf("%s: version %v after the restore, %v before the trash", paths[i], after[i]["version"], v)
				}
			}
		}
		if !reflect.DeepEqual(withoutVersion(after), withoutVersion(before)) {
			t.Fatalf("restored\n got %v\nwant %v", after, before)
		}
		if evs := e.audit.Events(); len(evs) != 1 || evs[0].Action != "workspace.items.restore" {
			t.Fatalf("events %+v", evs)
		}
	})
	t.Run("purge-200-removes-for-good", func(t *testing.T) {
		if r := e.do(t, "DELETE", depPath(dep, "/folders/"+itoa(a)+"?recursive=true"), admin, nil); r.Status != 204 {
			t.Fatalf("%s", r)
		}
		if r := e.do(t, "POST", depPath(dep, "/workspace/trash/purge"), viewer, map[string]any{"items": []any{ref("FOLDER", a)}}); r.Object(t)["failed"].([]any)[0].(map[string]any)["error"].(map[string]any)["status"].(float64) != 403 {
			t.Fatalf("a viewer's purge: %s", r)
		}
		e.audit.Reset()
		r := e.do(t, "POST", depPath(dep, "/workspace/trash/purge"), admin, map[string]any{"items": append([]any{ref("FOLDER", a)}, fillers...)})
		if r.Status != 200 || len(r.Object(t)["purged"].([]any)) != 1+len(fillers) {
			t.Fatalf("%s", r)
		}
		if evs := e.audit.Events(); len(evs) != 1 || evs[0].Action != "workspace.items.purge" {
			t.Fatalf("events %+v", evs)
		}
		r = e.do(t, "POST", depPath(dep, "/workspace/trash/restore"), admin, map[string]any{"items": []any{ref("FOLDER", a), ref("WORKBOOK", wb)}})
		for _, f := range r.Object(t)["failed"].([]any) {
			if f.(map[string]any)["error"].(map[string]any)["status"].(float64) != 404 {
				t.Fatalf("restore after the purge: %s", r)
			}
		}
		if r := e.do(t, "GET", depPath(dep, "/workspace/trash"), admin, nil); len(r.Object(t)["items"].([]any)) != 0 {
			t.Fatalf("trash after the purge: %s", r)
		}
		// Purged items hold no slot: 8 items fit again (5 fillers deleted and purged, the
		// subtree purged).
		for i := range 8 {
			e.mkItem(t, dep, admin, "reports", "after purge "+itoa(int64(i)), 0)
		}
		if r := e.do(t, "POST", depPath(dep, "/reports"), admin, map[string]any{"name": "one more"}); r.Status != 400 {
			t.Fatalf("one past the limit: %s", r)
		}
	})
	t.Run("sweep-purges-what-outlived-the-retention", func(t *testing.T) {
		var list struct {
			Items []struct {
				ID int64 `json:"id"`
			} `json:"items"`
		}
		e.do(t, "GET", depPath(dep, "/workspace"), admin, nil).Decode(t, &list)
		if r := e.do(t, "DELETE", depPath(dep, "/reports/"+itoa(list.Items[0].ID)), admin, nil); r.Status != 204 {
			t.Fatalf("%s", r)
		}
		client, err := mongox.Connect(context.Background(), e.mongoURI, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
		w := workspace.NewTrashSweeper(workspace.Ports{Store: mongostore.New(client.Database(e.database))}, workspace.Options{},
			workspace.SweepOptions{Retention: -time.Minute, Audit: e.audit})
		e.audit.Reset()
		n, err := w.Sweep(context.Background())
		if err != nil || n != 1 {
			t.Fatalf("swept %d (%v), want 1", n, err)
		}
		if evs := e.audit.Events(); len(evs) != 1 || evs[0].Action != "workspace.report.purge" || evs[0].Actor.Type != "system" {
			t.Fatalf("events %+v", evs)
		}
		if r := e.do(t, "GET", depPath(dep, "/workspace/trash"), admin, nil); len(r.Object(t)["items"].([]any)) != 0 {
			t.Fatalf("trash after the sweep: %s", r)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// withoutVersion copies a snapshot without its items' versions.
func withoutVersion(snap []map[string]any) []map[string]any {
	out := make([]map[string]any, len(snap))
	for i, o := range snap {
		c := make(map[string]any, len(o))
		for k, v := range o {
			if k != "version" {
				c[k] = v
			}
		}
		out[i] = c
	}
	return out
}
