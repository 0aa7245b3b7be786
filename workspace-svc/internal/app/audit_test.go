package app_test

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/audit"
)

// TestAuditTrail: every state-changing call through the gateway records one event (a
// move, single or bulk, one listing its items), refused calls included, with the caller,
// the target, the outcome it was answered, the request id it was answered with and the
// client address.
func TestAuditTrail(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin, viewer := e.bearer("acme", "admin"), e.bearer("acme", "viewer")
	adminID := e.user("acme", "admin").ID
	acct := e.acme().ID

	// last returns the one event a call recorded, checked for what every event carries.
	last := func(t *testing.T, r apitest.Response, action string) audit.Event {
		t.Helper()
		evs := e.audit.Events()
		e.audit.Reset()
		if len(evs) != 1 {
			t.Fatalf("%d events recorded, want 1: %+v", len(evs), evs)
		}
		ev := evs[0]
		if ev.Action != action || ev.AccountID != acct || ev.DeploymentID != dep || ev.Service != "workspace-svc" ||
			ev.ClientAddr != "127.0.0.1" || ev.RequestID == "" || ev.RequestID != r.Header.Get("X-Request-Id") || !audit.ValidID(ev.ID) {
			t.Fatalf("event %+v (request id answered %q)", ev, r.Header.Get("X-Request-Id"))
		}
		return ev
	}
	wantOutcome := func(t *testing.T, ev audit.Event, want audit.Outcome) {
		t.Helper()
		if ev.Outcome != want {
			t.Fatalf("outcome %+v, want %+v", ev.Outcome, want)
		}
	}
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	e.audit.Reset()

	var folder, sub, wb, rep int64
	t.Run("create-folder", func(t *testing.T) {
		r := e.do(t, "POST", depPath(dep, "/folders"), admin, map[string]any{"name": "Finance"})
		folder = int64(r.Object(t)["id"].(float64))
		ev := last(t, r, "workspace.folder.create")
		wantOutcome(t, ev, audit.Succeeded(200))
		if ev.Target != (audit.Target{Type: "folder", ID: id(folder)}) || ev.Actor != (audit.Actor{Type: audit.ActorUser, ID: id(adminID), UserID: adminID}) ||
			ev.Details["name"] != "Finance" || ev.Details["parentId"] != nil {
			t.Fatalf("event %+v", ev)
		}
		sub = e.mkFolder(t, dep, admin, "Sub", folder)
		e.audit.Reset()
	})
	t.Run("create-folder-403-viewer-is-recorded", func(t *testing.T) {
		r := e.do(t, "POST", depPath(dep, "/folders"), viewer, map[string]any{"name": "Nope"})
		ev := last(t, r, "workspace.folder.create")
		wantOutcome(t, ev, audit.Failed(403, "forbidden"))
		if ev.Target != (audit.Target{Type: "folder"}) || ev.Actor.UserID != e.user("acme", "viewer").ID {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("create-folder-400-depth-limit-is-recorded", func(t *testing.T) {
		parent := sub
		for i := 3; i <= 8; i++ {
			parent = e.mkFolder(t, dep, admin, fmt.Sprintf("L%d", i), parent)
		}
		e.audit.Reset()
		r := e.do(t, "POST", depPath(dep, "/folders"), admin, map[string]any{"name": "L9", "parentId": parent})
		wantOutcome(t, last(t, r, "workspace.folder.create"), audit.Failed(400, "depth_limit"))
	})
	t.Run("rename-folder", func(t *testing.T) {
		r := e.do(t, "PATCH", depPath(dep, fmt.Sprintf("/folders/%d", sub)), admin, map[string]any{"name": "Renamed"})
		ev := last(t, r, "workspace.folder.update")
		if ev.Target.ID != id(sub) || ev.Details["name"] != "Renamed" {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("permission-change", func(t *testing.T) {
		viewerID := e.user("acme", "viewer").ID
		r := e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", folder)), admin,
			map[string]any{"grants": []any{map[string]any{"userId": viewerID, "level": "edit"}}})
		ev := last(t, r, "workspace.folder.permissions_change")
		levels, _ := ev.Details["userLevels"].([]string)
		if ev.Target.ID != id(folder) || ev.Details["grants"] != 1 || len(levels) != 1 || levels[0] != id(viewerID)+":edit" {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("create-workbook-and-report", func(t *testing.T) {
		r := e.do(t, "POST", depPath(dep, "/workbooks"), admin, map[string]any{"name": "Revenue", "folderId": folder})
		wb = int64(r.Object(t)["id"].(float64))
		ev := last(t, r, "workspace.workbook.create")
		if ev.Target != (audit.Target{Type: "workbook", ID: id(wb)}) || ev.Details["folderId"] != folder {
			t.Fatalf("event %+v", ev)
		}
		r = e.do(t, "POST", depPath(dep, "/reports"), admin, map[string]any{"name": "Churn"})
		rep = int64(r.Object(t)["id"].(float64))
		if ev := last(t, r, "workspace.report.create"); ev.Target != (audit.Target{Type: "report", ID: id(rep)}) {
			t.Fatalf("event %+v", ev)
		}
	})
	// movedItems are the items a move's event lists.
	movedItems := func(t *testing.T, ev audit.Event) []map[string]any {
		t.Helper()
		items, ok := ev.Details["items"].([]map[string]any)
		if !ok {
			t.Fatalf("a move event without its items: %+v", ev.Details)
		}
		return items
	}
	item := func(typ string, n int64, from any, status int, code string) map[string]any {
		m := map[string]any{"type": typ, "id": n, "status": status}
		if from != "-" {
			m["from"] = from
		}
		if code != "" {
			m["code"] = code
		}
		return m
	}
	t.Run("move-records-from-and-to", func(t *testing.T) {
		r := e.do(t, "POST", depPath(dep, "/workspace/move"), admin, map[string]any{"type": "WORKBOOK", "id": wb, "folderId": sub})
		if r.Status != 200 {
			t.Fatalf("move: %d %s", r.Status, r.Body)
		}
		ev := last(t, r, "workspace.items.move")
		wantOutcome(t, ev, audit.Succeeded(200))
		if ev.Target != (audit.Target{Type: "folder", ID: id(sub)}) || ev.Details["to"] != sub || ev.Details["bulk"] != false ||
			!reflect.DeepEqual(movedItems(t, ev), []map[string]any{item("WORKBOOK", wb, folder, 200, "")}) {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("refused-single-move-records-the-items-error", func(t *testing.T) {
		r := e.do(t, "POST", depPath(dep, "/workspace/move"), viewer, map[string]any{"type": "WORKBOOK", "id": wb, "folderId": nil})
		ev := last(t, r, "workspace.items.move")
		wantOutcome(t, ev, audit.Failed(403, "forbidden"))
		if !reflect.DeepEqual(movedItems(t, ev), []map[string]any{item("WORKBOOK", wb, "-", 403, "forbidden")}) {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("bulk-move-one-event-listing-each-distinct-item", func(t *testing.T) {
		r := e.do(t, "POST", depPath(dep, "/workspace/bulk-move"), admin, map[string]any{"folderId": nil,
			"items": []any{ref("WORKBOOK", wb), ref("REPORT", rep), ref("WORKBOOK", wb), ref("FOLDER", 999999)}})
		if r.Status != 200 {
			t.Fatalf("bulk move: %d %s", r.Status, r.Body)
		}
		ev := last(t, r, "workspace.items.move")
		wantOutcome(t, ev, audit.Succeeded(200))
		want := []map[string]any{item("WORKBOOK", wb, sub, 200, ""), item("REPORT", rep, nil, 200, ""), item("FOLDER", 999999, "-", 404, "not_found")}
		if ev.Target != (audit.Target{Type: "folder"}) || ev.Details["to"] != nil || ev.Details["bulk"] != true ||
			ev.Details["moved"] != 2 || ev.Details["failed"] != 1 || !reflect.DeepEqual(movedItems(t, ev), want) {
			t.Fatalf("event %+v, want items %v", ev, want)
		}
	})
	t.Run("bulk-move-refused-items-in-one-event", func(t *testing.T) {
		r := e.do(t, "POST", depPath(dep, "/workspace/bulk-move"), admin, map[string]any{"folderId": 999999,
			"items": []any{ref("WORKBOOK", wb), ref("REPORT", rep)}})
		ev := last(t, r, "workspace.items.move")
		items := movedItems(t, ev)
		if r.Status != 200 || len(items) != 2 || ev.Details["failed"] != 2 || ev.Target != (audit.Target{Type: "folder", ID: "999999"}) {
			t.Fatalf("status %d: event %+v", r.Status, ev)
		}
		for _, it := range items {
			if it["status"] != 404 || it["code"] != "not_found" {
				t.Errorf("item %v: want a 404", it)
			}
		}
	})
	t.Run("rename-workbook", func(t *testing.T) {
		r := e.do(t, "PATCH", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), admin, map[string]any{"name": "Revenue 2"})
		ev := last(t, r, "workspace.workbook.update")
		if ch, _ := ev.Details["changed"].([]string); len(ch) != 1 || ch[0] != "name" || ev.Details["name"] != "Revenue 2" {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("publish-and-unpublish", func(t *testing.T) {
		draft := map[string]any{"dashboardDraft": map[string]any{"title": "T"}}
		if r := e.do(t, "PATCH", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), admin, draft); r.Status != 200 {
			t.Fatalf("draft: %d %s", r.Status, r.Body)
		}
		e.audit.Reset()
		r := e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/publish", wb)), admin, map[string]any{})
		if r.Status != 200 {
			t.Fatalf("publish: %d %s", r.Status, r.Body)
		}
		ev := last(t, r, "workspace.workbook.publish")
		if ev.Details["versionNumber"] != int64(1) || ev.Details["allowEmbed"] != true {
			t.Fatalf("event %+v", ev)
		}
		r = e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/unpublish", wb)), admin, nil)
		wantOutcome(t, last(t, r, "workspace.workbook.unpublish"), audit.Succeeded(200))
	})
	t.Run("favorite-add-and-remove", func(t *testing.T) {
		r := e.do(t, "PUT", depPath(dep, fmt.Sprintf("/workspace/favorites/REPORT/%d", rep)), admin, nil)
		if ev := last(t, r, "workspace.favorite.add"); ev.Target != (audit.Target{Type: "report", ID: id(rep)}) {
			t.Fatalf("event %+v", ev)
		}
		r = e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/workspace/favorites/REPORT/%d", rep)), admin, nil)
		wantOutcome(t, last(t, r, "workspace.favorite.remove"), audit.Succeeded(204))
	})
	t.Run("delete-report-and-folder", func(t *testing.T) {
		r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/reports/%d", rep)), admin, nil)
		wantOutcome(t, last(t, r, "workspace.report.delete"), audit.Succeeded(204))
		r = e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/folders/%d", folder)), admin, nil)
		ev := last(t, r, "workspace.folder.delete")
		wantOutcome(t, ev, audit.Failed(409, "folder_not_empty"))
	})
	t.Run("reads-record-nothing", func(t *testing.T) {
		e.do(t, "GET", depPath(dep, "/workspace"), admin, nil)
		e.do(t, "GET", depPath(dep, fmt.Sprintf("/folders/%d", folder)), admin, nil)
		e.do(t, "GET", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), admin, nil)
		if evs := e.audit.Events(); len(evs) != 0 {
			t.Fatalf("reads recorded %+v", evs)
		}
	})
}
