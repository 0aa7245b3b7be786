package attack_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// Workspace attacks (a publish that leaks a private report, a huge folder, oversized
// items) and the workspace caps, against the real stack through the gateway. Small caps
// keep the attacks cheap; the defaults are the same code with larger numbers.
func TestWorkspaceAttacks(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: []string{
		"WORKSPACE_MAX_ITEMS_PER_DEPLOYMENT=40", "WORKSPACE_MAX_META_BYTES=4096",
		"WORKSPACE_MAX_CALCULATED_FIELDS_BYTES=2048", "WORKSPACE_MAX_DRAFT_BYTES=3000",
	}})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	admin, ai := apitest.Bearer(acme.Users["admin"].Bearer), apitest.Bearer(acme.Users["aiBiUser"].Bearer)
	ws := func(dep int64, rest string) string { return fmt.Sprintf("/api/v1/deployments/%d%s", dep, rest) }
	dep := acme.Deployments[0].ID

	// A developer publishing a workbook whose widget names an admin's private report
	// must not get that report's name or meta in the published dashboard.
	t.Run("PublishLeavesOutReportsThePublisherCannotView", func(t *testing.T) {
		private := a.call("POST", ws(dep, "/folders"), admin, map[string]any{"name": "private"})
		if private.status != 200 {
			t.Fatalf("create folder: %s", private)
		}
		folder := int64(private.body["id"].(float64))
		secret := a.call("POST", ws(dep, "/reports"), admin, map[string]any{"name": "secret-report", "folderId": folder, "meta": map[string]any{"q": "SELECT salary"}})
		visible := a.call("POST", ws(dep, "/reports"), ai, map[string]any{"name": "my-report"})
		if secret.status != 200 || visible.status != 200 {
			t.Fatalf("create reports: %s / %s", secret, visible)
		}
		if r := a.call("GET", ws(dep, fmt.Sprintf("/reports/%v", secret.body["id"])), ai, nil); r.status != 403 && r.status != 404 {
			t.Fatalf("precondition: the ai_bi_user must not see the private report: %s", r)
		}
		widget := func(id, rid any) map[string]any {
			return map[string]any{"id": id, "type": "CHART", "position": map[string]any{"x": 0, "y": 0, "w": 1, "h": 1}, "config": map[string]any{"reportId": rid}}
		}
		wb := a.call("POST", ws(dep, "/workbooks"), ai, map[string]any{"name": "thief",
			"dashboardDraft": map[string]any{"widgets": []any{widget("a", secret.body["id"]), widget("b", visible.body["id"])}}})
		if wb.status != 200 {
			t.Fatalf("create workbook: %s", wb)
		}
		pub := a.call("POST", ws(dep, fmt.Sprintf("/workbooks/%v/publish", wb.body["id"])), ai, nil)
		if pub.status != 200 {
			t.Fatalf("publish: %s", pub)
		}
		if strings.Contains(pub.raw, "secret-report") || strings.Contains(pub.raw, "SELECT salary") {
			t.Fatalf("the published dashboard carries the private report: %s", pub.raw)
		}
		snaps, _ := pub.body["publishedDashboard"].(map[string]any)["reportSnapshots"].([]any)
		if len(snaps) != 1 || snaps[0].(map[string]any)["reportId"] != visible.body["id"] {
			t.Fatalf("want exactly the caller's own report in the snapshot, got %v", snaps)
		}
	})

	// A listing reads only the page. The bytes it reads are measured in
	// workspace-svc/internal/app TestListReadsOnlyThePage; here a hostile folder of
	// maximal items must list page by page.
	t.Run("ListingAHugeFolderAnswersThePage", func(t *testing.T) {
		folder := a.call("POST", ws(dep, "/folders"), ai, map[string]any{"name": "heavy"})
		fid := folder.body["id"]
		meta := map[string]any{"blob": strings.Repeat("x", 3000)}
		for i := 0; i < 12; i++ {
			if r := a.call("POST", ws(dep, "/workbooks"), ai, map[string]any{"name": fmt.Sprintf("w%02d", i), "folderId": fid, "meta": meta}); r.status != 200 {
				t.Fatalf("create: %s", r)
			}
		}
		r := a.call("GET", ws(dep, fmt.Sprintf("/workspace?folderId=%v&first=2", fid)), ai, nil)
		if r.status != 200 || len(r.body["items"].([]any)) != 2 || r.body["pageInfo"].(map[string]any)["hasNextPage"] != true {
			t.Fatalf("want a page of 2 with more to come: %s", r)
		}
	})

	t.Run("TestCap_ItemMetaCalculatedFieldsAndDraftSizes", func(t *testing.T) {
		cases := []struct {
			name, limit string
			body        map[string]any
		}{
			{"meta", "over the limit of 4096 bytes", map[string]any{"name": "m", "meta": map[string]any{"b": strings.Repeat("x", 5000)}}},
			{"calculatedFields", "over the limit of 2048 bytes", map[string]any{"name": "c", "calculatedFields": map[string]any{"b": strings.Repeat("x", 3000)}}},
			{"dashboardDraft", "over the limit of 3000 bytes", map[string]any{"name": "d", "dashboardDraft": map[string]any{"title": strings.Repeat("x", 4000)}}},
		}
		for _, c := range cases {
			r := a.call("POST", ws(dep, "/workbooks"), ai, c.body)
			if r.status != 413 || !strings.Contains(r.message(), c.name) || !strings.Contains(r.message(), c.limit) || strings.Contains(r.message(), "WORKSPACE_") {
				t.Fatalf("%s over its limit: want 413 naming %s and %q (never the setting), got %s", c.name, c.name, c.limit, r)
			}
		}
		if r := a.call("POST", ws(dep, "/workbooks"), ai, map[string]any{"name": "fits", "meta": map[string]any{"b": strings.Repeat("x", 3000)}}); r.status != 200 {
			t.Fatalf("an item within the limits: %s", r)
		}
	})

	t.Run("TestCap_ItemsPerDeployment", func(t *testing.T) {
		dep := acme.Deployments[1].ID
		for i := 0; i < 40; i++ {
			r := a.call("POST", ws(dep, "/workbooks"), ai, map[string]any{"name": fmt.Sprintf("n%d", i)})
			if r.status != 200 {
				t.Fatalf("item %d of 40: %s", i+1, r)
			}
		}
		for _, path := range []string{"/workbooks", "/reports", "/folders"} {
			r := a.call("POST", ws(dep, path), ai, map[string]any{"name": "one-too-many"})
			if r.status != 400 || !strings.Contains(r.message(), "holds 40 items (folders, workbooks and reports), the limit") || strings.Contains(r.message(), "WORKSPACE_") {
				t.Fatalf("POST %s past the limit: want 400 naming the limit of 40 items, got %s", path, r)
			}
		}
		// Another deployment is not affected.
		if r := a.call("POST", ws(acme.Deployments[0].ID, "/workbooks"), ai, map[string]any{"name": "elsewhere"}); r.status != 200 {
			t.Fatalf("another deployment: %s", r)
		}
	})
}
