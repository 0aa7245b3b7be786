package app_test

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
)

// Through the gateway, on FerretDB and JetStream: the integration stores its selector
// (kept by a PUT that leaves it out), a selector that cannot apply is 400 with its code,
// and a manifest sync of a real fixture with a selector writes only the selected models'
// cubes and reports what it kept and dropped.
func TestModelSelectorThroughTheGateway(t *testing.T) {
	h := newHarness(t)
	h.worker(worker.Options{})
	p := fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", h.dep)
	base := func(extra map[string]any) map[string]any {
		b := map[string]any{"repoUrl": "https://example.test/repo.git", "branch": "main", "projectPath": "."}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	if code, body := h.do("PUT", p, h.admin, base(map[string]any{"select": "+customers"})); code != 400 || body["code"] != "selector_needs_manifest" {
		t.Fatalf("graph operators without manifestPath: %d %v", code, body)
	}
	if code, body := h.do("PUT", p, h.admin, base(map[string]any{"select": "tag:lightdash", "exclude": "orders"})); code != 200 || body["select"] != "tag:lightdash" || body["exclude"] != "orders" {
		t.Fatalf("put: %d %v", code, body)
	}
	if code, body := h.do("PUT", p, h.admin, base(map[string]any{"branch": "dev", "exclude": nil})); code != 200 || body["select"] != "tag:lightdash" || body["exclude"] != nil {
		t.Fatalf("put keeping select, clearing exclude: %d %v", code, body)
	}
	if code, body := h.do("GET", p, h.admin, nil); code != 200 || body["select"] != "tag:lightdash" || body["branch"] != "dev" {
		t.Fatalf("get: %d %v", code, body)
	}
	manifest := fixture(t, "manifest-v12-dbt-1.8.json")
	if code, body := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": manifest, "select": "config.materialized:table"}); code != 400 || body["code"] != "invalid_selector" {
		t.Fatalf("an unsupported method: %d %v", code, body)
	}
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": manifest, "branchName": "dbt/sel",
		"select": "+customers", "exclude": "stg_payments"})
	if code != 202 {
		t.Fatalf("start: %d %v", code, acc)
	}
	job := h.waitJob(acc["syncJobId"].(string))
	if job["status"] != "succeeded" || job["select"] != "+customers" || job["exclude"] != "stg_payments" {
		t.Fatalf("job: %v", job)
	}
	sel := job["selection"].(map[string]any)
	if sel["modelsTotal"].(float64) != 36 || sel["modelsKept"].(float64) != 3 || sel["modelsDropped"].(float64) != 33 || sel["truncated"] != false {
		t.Fatalf("selection: %v", sel)
	}
	if kept := fmt.Sprint(sel["kept"]); kept != "[model.jaffle_shop.customers model.jaffle_shop.stg_customers model.jaffle_shop.stg_orders]" {
		t.Errorf("kept %s", kept)
	}
	code, files := h.do("GET", h.buildPath("/"+url.PathEscape("dbt/sel")+"/files"), h.dev, nil)
	if code != 200 {
		t.Fatalf("files: %d %v", code, files)
	}
	var paths []string
	for _, f := range files["files"].([]any) {
		paths = append(paths, f.(map[string]any)["path"].(string))
	}
	sort.Strings(paths)
	if got := strings.Join(paths, " "); got != "model/cubes/customers.yml model/cubes/stg_customers.yml model/cubes/stg_orders.yml" {
		t.Errorf("files %s", got)
	}
}
