package app_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// seedDeployments answers whose a deployment is from the gateway's seed, as the
// gateway's identity lookup answers over NATS in the stack.
type seedDeployments struct{ e *env }

func (d seedDeployments) Deployment(_ context.Context, id int64) (workspace.DeploymentInfo, error) {
	for _, a := range d.e.stack.Seed.Accounts {
		for _, dep := range a.Deployments {
			if dep.ID == id {
				return workspace.DeploymentInfo{ID: id, AccountID: a.ID}, nil
			}
		}
	}
	return workspace.DeploymentInfo{}, workspace.ErrNoSuchDeployment
}

// TestPromotionThroughTheGateway: a published workbook promoted into the account's other
// deployment; a retry with the same Idempotency-Key is applied once (one promotion in the
// history, one event per deployment); the target's publicId survives a second
// promotion; a source changed after its preview is 409 source_changed; another
// account's deployment and an unknown one are the same 404.
func TestPromotionThroughTheGateway(t *testing.T) {
	e := newEnv(t, 1)
	src, dst := e.dep("acme", 0), e.dep("acme", 1)
	admin := e.bearer("acme", "admin")
	rep := e.mkItem(t, src, admin, "reports", "Revenue", 0)
	wb := e.mkItem(t, src, admin, "workbooks", "Board", 0)
	draft := map[string]any{"widgets": []any{map[string]any{"id": "w1", "type": "CHART", "position": map[string]any{"x": 0, "y": 0, "w": 4, "h": 4},
		"config": map[string]any{"reportId": rep}}}}
	if r := e.do(t, "PATCH", depPath(src, fmt.Sprintf("/workbooks/%d", wb)), admin, map[string]any{"dashboardDraft": draft}); r.Status != 200 {
		t.Fatalf("draft: %d %s", r.Status, r.Body)
	}
	publish := func() {
		t.Helper()
		if r := e.do(t, "POST", depPath(src, fmt.Sprintf("/workbooks/%d/publish", wb)), admin, nil); r.Status != 200 {
			t.Fatalf("publish: %d %s", r.Status, r.Body)
		}
	}
	publish()
	previews, promotions := depPath(src, fmt.Sprintf("/workbooks/%d/promotion-previews", wb)), depPath(src, fmt.Sprintf("/workbooks/%d/promotions", wb))
	preview := func() map[string]any {
		t.Helper()
		r := e.do(t, "POST", previews, admin, map[string]any{"targetDeploymentId": dst})
		if r.Status != 200 {
			t.Fatalf("preview: %d %s", r.Status, r.Body)
		}
		return r.Object(t)
	}
	pv := preview()
	if pv["targetHash"] != nil || pv["workbook"].(map[string]any)["action"] != "create" || pv["publish"] != true {
		t.Fatalf("first preview %v", pv)
	}
	body := map[string]any{"targetDeploymentId": dst, "sourceHash": pv["sourceHash"]}
	var first map[string]any
	for i := range 3 {
		r := e.postWithKey(t, promotions, admin, "promote-once", body)
		if r.Status != 200 {
			t.Fatalf("promotion %d: %d %s", i, r.Status, r.Body)
		}
		if i == 0 {
			first = r.Object(t)
		} else if r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry %d not replayed: %v", i, r.Header)
		}
	}
	target := first["workbook"].(map[string]any)
	publicID := target["publishedDashboard"].(map[string]any)["publicId"]
	hist := e.do(t, "GET", promotions, admin, nil)
	if hist.Status != 200 || len(hist.Object(t)["items"].([]any)) != 1 {
		t.Fatalf("history after a retried promotion: %d %s, want one promotion", hist.Status, hist.Body)
	}
	if n := e.countEvents(workspace.ActionWorkbookPromote); n != 2 {
		t.Fatalf("%d promote events after a retried promotion, want 2 (one per deployment)", n)
	}

	// A change after the preview: 409; a fresh preview and a second promotion keep the
	// target's id and publicId.
	pv = preview()
	if r := e.do(t, "PATCH", depPath(src, fmt.Sprintf("/reports/%d", rep)), admin, map[string]any{"meta": map[string]any{"sql": "select 2"}}); r.Status != 200 {
		t.Fatalf("report change: %d %s", r.Status, r.Body)
	}
	r := e.do(t, "POST", promotions, admin, map[string]any{"targetDeploymentId": dst, "sourceHash": pv["sourceHash"]})
	if r.Status != 409 || r.Error(t).Code != "source_changed" {
		t.Fatalf("a promotion of a changed source: %d %s, want 409 source_changed", r.Status, r.Body)
	}
	publish()
	pv = preview()
	r = e.do(t, "POST", promotions, admin, map[string]any{"targetDeploymentId": dst, "sourceHash": pv["sourceHash"]})
	if r.Status != 200 {
		t.Fatalf("second promotion: %d %s", r.Status, r.Body)
	}
	second := r.Object(t)["workbook"].(map[string]any)
	if second["id"] != target["id"] || second["slug"] != target["slug"] || second["publishedDashboard"].(map[string]any)["publicId"] != publicID {
		t.Fatalf("second promotion: workbook %v slug %v publicId %v, want %v %v %v", second["id"], second["slug"],
			second["publishedDashboard"].(map[string]any)["publicId"], target["id"], target["slug"], publicID)
	}
	got := e.do(t, "GET", depPath(dst, fmt.Sprintf("/workbooks/%v", target["id"])), admin, nil)
	if got.Status != 200 {
		t.Fatalf("target workbook: %d %s", got.Status, got.Body)
	}

	// Another account's deployment and an unknown one: the same 404.
	var msgs []string
	for _, dep := range []int64{e.dep("globex", 0), 987654321} {
		r := e.do(t, "POST", previews, admin, map[string]any{"targetDeploymentId": dep})
		if r.Status != 404 {
			t.Fatalf("preview into %d: %d %s, want 404", dep, r.Status, r.Body)
		}
		msgs = append(msgs, fmt.Sprintf("%s|%s", r.Error(t).Code, r.Error(t).Message[:len("deployment ")]))
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("another account's deployment answers %q, an unknown one %q", msgs[0], msgs[1])
	}
}

// countEvents counts the events recorded with action.
func (e *env) countEvents(action string) int {
	n := 0
	for _, ev := range e.audit.Events() {
		if ev.Action == action && ev.Outcome.Result == audit.Success {
			n++
		}
	}
	return n
}

// TestDuplicatesThroughTheGateway: a deep workbook duplicate and a folder duplicate,
// each its own route.
func TestDuplicatesThroughTheGateway(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	ai := e.bearer("acme", "aiBiUser")
	folder := e.mkFolder(t, dep, ai, "Src", 0)
	rep := e.mkItem(t, dep, ai, "reports", "R", folder)
	wb := e.mkItem(t, dep, ai, "workbooks", "W", folder)
	draft := map[string]any{"widgets": []any{map[string]any{"id": "w1", "type": "CHART", "position": map[string]any{"x": 0, "y": 0, "w": 4, "h": 4},
		"config": map[string]any{"reportId": rep}}}}
	if r := e.do(t, "PATCH", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), ai, map[string]any{"dashboardDraft": draft}); r.Status != 200 {
		t.Fatalf("draft: %d %s", r.Status, r.Body)
	}
	r := e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/duplicate", wb)), ai, map[string]any{"deep": true, "folderId": nil})
	if r.Status != 200 {
		t.Fatalf("duplicate workbook: %d %s", r.Status, r.Body)
	}
	d := r.Object(t)
	copyRep := d["reports"].([]any)[0].(map[string]any)["id"]
	w := d["workbook"].(map[string]any)
	if w["folderId"] != nil || w["dashboardDraft"].(map[string]any)["widgets"].([]any)[0].(map[string]any)["config"].(map[string]any)["reportId"] != copyRep {
		t.Fatalf("deep duplicate %s", r.Body)
	}
	r = e.do(t, "POST", depPath(dep, fmt.Sprintf("/folders/%d/duplicate", folder)), ai, nil)
	if r.Status != 200 {
		t.Fatalf("duplicate folder: %d %s", r.Status, r.Body)
	}
	if c := r.Object(t)["created"].(map[string]any); c["folders"] != 1.0 || c["workbooks"] != 1.0 || c["reports"] != 1.0 {
		t.Fatalf("folder duplicate created %v", c)
	}
}
