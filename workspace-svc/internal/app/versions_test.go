package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestDashboardVersions: over FerretDB and the gateway, each publish is a kept version,
// listed newest first and paged; restoring version 1 publishes version 4 equal to it
// under the same public id (audited with both numbers); past the retention the oldest
// go; racing publishes keep one record per number and no record of a lost race.
func TestDashboardVersions(t *testing.T) {
	e := newEnvWithLimits(t, 1, workspace.Limits{DashboardVersionsKept: 5})
	dep := e.dep("acme", 0)
	admin, viewer := e.bearer("acme", "admin"), e.bearer("acme", "viewer")
	rep := e.mkItem(t, dep, admin, "reports", "revenue", 0)
	wb := e.mkItem(t, dep, admin, "workbooks", "board", 0)
	versions := func(wb int64) string { return depPath(dep, fmt.Sprintf("/workbooks/%d/dashboard/versions", wb)) }
	publish := func(t *testing.T, wb int64, title string, allowEmbed bool) map[string]any {
		t.Helper()
		draft := map[string]any{"kind": "CLASSIC", "title": title, "widgets": []any{map[string]any{"id": "w1", "type": "CHART",
			"position": map[string]any{"x": 0, "y": 0, "w": 4, "h": 4}, "config": map[string]any{"reportId": rep}}}}
		if r := e.do(t, "PATCH", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), admin, map[string]any{"dashboardDraft": draft}); r.Status != 200 {
			t.Fatalf("draft: %d %s", r.Status, r.Body)
		}
		r := e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/publish", wb)), admin, map[string]any{"allowEmbed": allowEmbed})
		if r.Status != 200 {
			t.Fatalf("publish: %d %s", r.Status, r.Body)
		}
		return r.Object(t)["publishedDashboard"].(map[string]any)
	}
	// list pages through the versions, first at a time, and answers their numbers.
	list := func(t *testing.T, wb int64, bearer string, first int) ([]float64, []map[string]any) {
		t.Helper()
		var nums []float64
		var all []map[string]any
		after := ""
		for {
			path := fmt.Sprintf("%s?first=%d", versions(wb), first)
			if after != "" {
				path += "&after=" + after
			}
			r := e.do(t, "GET", path, bearer, nil)
			if r.Status != 200 {
				t.Fatalf("list versions: %d %s", r.Status, r.Body)
			}
			var pg struct {
				Items    []map[string]any `json:"items"`
				PageInfo struct {
					HasNextPage bool    `json:"hasNextPage"`
					EndCursor   *string `json:"endCursor"`
				} `json:"pageInfo"`
			}
			r.Decode(t, &pg)
			for _, it := range pg.Items {
				if _, heavy := it["config"]; heavy {
					t.Fatalf("a listed version carries its config: %v", it)
				}
				nums = append(nums, it["versionNumber"].(float64))
				all = append(all, it)
			}
			if !pg.PageInfo.HasNextPage {
				return nums, all
			}
			after = *pg.PageInfo.EndCursor
		}
	}
	same := func(a, b any) bool {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return string(x) == string(y)
	}

	v1 := publish(t, wb, "one", true)
	publish(t, wb, "two", false)
	publish(t, wb, "three", false)
	if got, items := list(t, wb, viewer, 2); !reflect.DeepEqual(got, []float64{3, 2, 1}) || items[2]["title"] != "one" || items[2]["allowEmbed"] != true {
		t.Fatalf("versions %v %v, want 3 2 1", got, items)
	}
	r := e.do(t, "GET", versions(wb)+"/1", viewer, nil)
	if r.Status != 200 {
		t.Fatalf("get v1: %d %s", r.Status, r.Body)
	}
	full := r.Object(t)
	if !same(full["config"], v1["config"]) || !same(full["reportSnapshots"], v1["reportSnapshots"]) || full["versionId"] != v1["versionId"] {
		t.Fatalf("v1 read %v, published %v", full, v1)
	}
	if r := e.do(t, "POST", versions(wb)+"/1/restore", viewer, nil); r.Status != 403 {
		t.Fatalf("a viewer restores: %d %s", r.Status, r.Body)
	}
	e.audit.Reset()
	r = e.do(t, "POST", versions(wb)+"/1/restore", admin, nil)
	if r.Status != 200 {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	v4 := r.Object(t)["publishedDashboard"].(map[string]any)
	if v4["versionNumber"] != float64(4) || v4["publicId"] != v1["publicId"] || v4["allowEmbed"] != true ||
		!same(v4["config"], v1["config"]) || !same(v4["reportSnapshots"], v1["reportSnapshots"]) {
		t.Fatalf("restored %v\nfrom %v", v4, v1)
	}
	var restored bool
	for _, ev := range e.audit.Events() {
		if ev.Action == "workspace.workbook.dashboard_restore" && ev.Details["restoredVersion"] == int64(1) && ev.Details["versionNumber"] == int64(4) {
			restored = true
		}
	}
	if !restored {
		t.Fatalf("no restore event naming versions 1 and 4: %+v", e.audit.Events())
	}
	if got, items := list(t, wb, admin, 50); !reflect.DeepEqual(got, []float64{4, 3, 2, 1}) || items[0]["restoredFrom"] != float64(1) {
		t.Fatalf("versions %v %v, want 4 3 2 1", got, items)
	}

	// Retention: five kept, the publish past them removes the oldest.
	publish(t, wb, "five", true)
	publish(t, wb, "six", true)
	if got, _ := list(t, wb, admin, 50); !reflect.DeepEqual(got, []float64{6, 5, 4, 3, 2}) {
		t.Fatalf("kept %v, want 6..2", got)
	}
	if r := e.do(t, "GET", versions(wb)+"/1", admin, nil); r.Status != 404 {
		t.Fatalf("a version past the retention: %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "POST", versions(wb)+"/1/restore", admin, nil); r.Status != 404 {
		t.Fatalf("restore past the retention: %d %s", r.Status, r.Body)
	}

	// Racing publishes of one workbook: one record per number, none of a lost race.
	race := e.mkItem(t, dep, admin, "workbooks", "race", 0)
	publish(t, race, "base", true)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/publish", race)), admin, nil)
			if r.Status != 200 {
				t.Errorf("racing publish: %d %s", r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	if got, _ := list(t, race, admin, 50); !reflect.DeepEqual(got, []float64{5, 4, 3, 2, 1}) {
		t.Fatalf("after racing publishes %v, want 5..1", got)
	}
	client, err := mongox.Connect(context.Background(), e.mongoURI, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	cur, err := client.Database(e.database).Collection("dashboard_versions").Find(context.Background(),
		bson.D{{Key: "dep", Value: dep}, {Key: "wb", Value: race}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		Number    int64 `bson:"number"`
		Committed bool  `bson:"committed"`
	}
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, d := range docs {
		if !d.Committed {
			t.Errorf("a pending record numbered %d is left", d.Number)
		}
		seen[d.Number]++
	}
	if len(seen) != 5 || len(docs) != 5 {
		t.Fatalf("records by number %v, want one each of 1..5", seen)
	}

	// Another deployment's workbook and a deleted one: 404.
	other := e.dep("acme", 1)
	if r := e.do(t, "GET", depPath(other, fmt.Sprintf("/workbooks/%d/dashboard/versions", wb)), admin, nil); r.Status != 404 {
		t.Fatalf("another deployment's workbook: %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), admin, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "GET", versions(wb), admin, nil); r.Status != 404 {
		t.Fatalf("a deleted workbook's versions: %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "POST", versions(wb)+"/2/restore", admin, nil); r.Status != 404 {
		t.Fatalf("restore on a deleted workbook: %d %s", r.Status, r.Body)
	}
}
