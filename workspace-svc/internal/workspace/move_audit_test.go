package workspace_test

import (
	"encoding/json"
	"testing"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestMoveRecordsOneEventOfItsItem: a single move records one event as a bulk move of
// its item would (bulk false), whether it moved, was refused, or found nothing; where
// the item was is listed when the move read it.
func TestMoveRecordsOneEventOfItsItem(t *testing.T) {
	f := newFixture(t)
	rec := &audit.Memory{Service: "workspace-svc"}
	f.svc = workspace.AuditingMiddleware(rec)(f.svc)
	src := f.folder(admin, "src", 0)
	dest := f.folder(admin, "dest", 0)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", src)
	for _, c := range []struct {
		name string
		who  *identity.Principal
		ref  workspace.ItemRef
		dest int64
		want string // the event's outcome and details, as JSON
	}{
		{"moved", admin, ref(workspace.TypeWorkbook, wb), dest, `{"action":"workspace.items.move","details":{"bulk":false,"failed":0,"items":[{"from":1,"id":3,"status":200,"type":"WORKBOOK"}],"moved":1,"to":2},"outcome":{"result":"success","status":200},"target":{"type":"folder","id":"2"}}`},
		{"moved to the root", admin, ref(workspace.TypeWorkbook, wb), 0, `{"action":"workspace.items.move","details":{"bulk":false,"failed":0,"items":[{"from":2,"id":3,"status":200,"type":"WORKBOOK"}],"moved":1,"to":null},"outcome":{"result":"success","status":200},"target":{"type":"folder"}}`},
		{"a viewer", viewer, ref(workspace.TypeWorkbook, wb), dest, `{"action":"workspace.items.move","details":{"bulk":false,"failed":1,"items":[{"code":"forbidden","id":3,"status":403,"type":"WORKBOOK"}],"moved":0,"to":2},"outcome":{"result":"failure","status":403,"code":"forbidden"},"target":{"type":"folder","id":"2"}}`},
		{"not found", admin, ref(workspace.TypeReport, 9_000_000_000), dest, `{"action":"workspace.items.move","details":{"bulk":false,"failed":1,"items":[{"code":"not_found","id":9000000000,"status":404,"type":"REPORT"}],"moved":0,"to":2},"outcome":{"result":"failure","status":404,"code":"not_found"},"target":{"type":"folder","id":"2"}}`},
		{"another type", admin, ref(workspace.TypeReport, wb), dest, `{"action":"workspace.items.move","details":{"bulk":false,"failed":1,"items":[{"code":"not_found","id":3,"status":404,"type":"REPORT"}],"moved":0,"to":2},"outcome":{"result":"failure","status":404,"code":"not_found"},"target":{"type":"folder","id":"2"}}`},
		{"into itself", admin, ref(workspace.TypeFolder, dest), dest, `{"action":"workspace.items.move","details":{"bulk":false,"failed":1,"items":[{"code":"folder_cycle","from":null,"id":2,"status":400,"type":"FOLDER"}],"moved":0,"to":2},"outcome":{"result":"failure","status":400,"code":"folder_cycle"},"target":{"type":"folder","id":"2"}}`},
		{"no user", &identity.Principal{Credential: identity.CredentialAPIKey, Account: identity.Account{ID: 100}}, ref(workspace.TypeWorkbook, wb), dest, `{"action":"workspace.items.move","details":{"bulk":false,"failed":1,"items":[{"code":"forbidden","id":3,"status":403,"type":"WORKBOOK"}],"moved":0,"to":2},"outcome":{"result":"failure","status":403,"code":"forbidden"},"target":{"type":"folder","id":"2"}}`},
	} {
		rec.Reset()
		_, _ = f.svc.Move(f.ctx, c.who, f.dep, c.ref, c.dest)
		evs := rec.Events()
		if len(evs) != 1 {
			t.Fatalf("%s: %d events, want 1", c.name, len(evs))
		}
		got, err := json.Marshal(map[string]any{"action": evs[0].Action, "target": evs[0].Target, "outcome": evs[0].Outcome, "details": evs[0].Details})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%s: event\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}
