package workspace_test

import (
	"encoding/json"
	"testing"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestBulkMoveRecordsOneBoundedEvent: a bulk move of the most items a request holds
// records one audit event, whatever its items' outcomes; it lists as many items as fit in
// the details' limit, in request order, counts the rest, and its counts cover them all.
func TestBulkMoveRecordsOneBoundedEvent(t *testing.T) {
	f := newFixture(t)
	rec := &audit.Memory{Service: "workspace-svc"}
	f.svc = workspace.AuditingMiddleware(rec)(f.svc)
	dest := f.folder(admin, "dest", 0)
	var refs []workspace.ItemRef
	for range 40 {
		refs = append(refs, ref(workspace.TypeWorkbook, f.item(admin, workspace.TypeWorkbook, "wb", 0)))
	}
	for i := range workspace.MaxBulkItems - len(refs) {
		refs = append(refs, ref(workspace.TypeReport, 9_000_000_000_000_000_000+int64(i))) // missing: 404 each
	}
	rec.Reset()
	for _, p := range []struct {
		name       string
		who        *identity.Principal
		moved      int
		firstState int
	}{{"admin", admin, 40, 200}, {"viewer", viewer, 0, 403}} {
		res := f.bulk(p.who, dest, refs...)
		evs := rec.Events()
		rec.Reset()
		if len(evs) != 1 {
			t.Fatalf("%s: %d events for one bulk move of %d items, want 1", p.name, len(evs), len(refs))
		}
		ev := evs[0]
		raw, _ := json.Marshal(ev.Details)
		items, _ := ev.Details["items"].([]map[string]any)
		unlisted, _ := ev.Details["unlisted"].(int)
		if ev.Action != workspace.ActionItemsMove || len(raw) > audit.MaxDetailsBytes || len(items) == 0 || len(items)+unlisted != len(refs) {
			t.Fatalf("%s: event %s (%d bytes), want %d items listed or counted", p.name, raw, len(raw), len(refs))
		}
		if ev.Details["moved"] != p.moved || ev.Details["moved"] != len(res.Moved) || ev.Details["failed"] != len(refs)-p.moved {
			t.Fatalf("%s: counts %v/%v, answered %d moved", p.name, ev.Details["moved"], ev.Details["failed"], len(res.Moved))
		}
		for i, it := range items {
			if it["id"] != refs[i].ID || it["type"] != string(refs[i].Type) {
				t.Fatalf("%s: item %d listed as %v, want %v (request order)", p.name, i, it, refs[i])
			}
		}
		if items[0]["status"] != p.firstState {
			t.Fatalf("%s: first item %v, want status %d", p.name, items[0], p.firstState)
		}
	}
}
