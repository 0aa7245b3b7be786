package app_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
)

// dbtRepo builds a local repository with a small dbt project: branch main has orders and
// customers; tag v1.0 (an older commit) has only orders.
func dbtRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	write := func(path, content string) {
		full := filepath.Join(dir, "analytics", path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(msg string) plumbing.Hash {
		if _, err := wt.Add("analytics"); err != nil {
			t.Fatal(err)
		}
		h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.test", When: time.Unix(1700000000, 0)}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	write("dbt_project.yml", "name: shop\nversion: '1.0'\nmodel-paths: [models]\nmodels:\n  shop:\n    +materialized: table\n    +schema: marts\n")
	write("models/orders.sql", "select 1 as order_id, 2 as customer_id\n")
	write("models/helper.sql", "{{ config(materialized='ephemeral') }}\nselect 1\n")
	write("models/schema.yml", `version: 2
models:
  - name: orders
    description: One row per order.
    columns:
      - name: order_id
        data_type: integer
        tests: [unique, not_null]
      - name: customer_id
        data_type: integer
`)
	first := commit("orders")
	// A date tag: only hex digits, like a short commit SHA, and a legal tag name.
	for _, tag := range []string{"v1.0", "20240601"} {
		if _, err := repo.CreateTag(tag, first, nil); err != nil {
			t.Fatal(err)
		}
	}
	write("models/customers.sql", "select 2 as customer_id\n")
	write("models/schema.yml", `version: 2
models:
  - name: orders
    description: One row per order.
    columns:
      - name: order_id
        data_type: integer
        data_tests: [unique, not_null]
      - name: customer_id
        data_type: integer
        data_tests:
          - relationships:
              arguments:
                to: ref('customers')
                field: customer_id
  - name: customers
    config:
      meta:
        primary_key: customer_id
    columns:
      - name: customer_id
        data_type: bigint
`)
	head := commit("customers")
	// A branch whose name is hex digits.
	if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("deadbeef"), head)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestGitSourceAtBranchAndTag(t *testing.T) {
	h := newHarness(t)
	// The production image has no git binary: the file:// clone must not need one (set
	// once the harness has built the gateway, so the test passes alone too).
	t.Setenv("PATH", t.TempDir())
	h.worker(worker.Options{})
	repo := dbtRepo(t)
	p := fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", h.dep)
	if code, body := h.do("PUT", p, h.admin, map[string]any{"repoUrl": "file://" + repo, "branch": "main", "projectPath": "analytics", "manifestPath": "analytics/target/manifest.json"}); code != 200 {
		t.Fatal(code, body)
	}
	cases := []struct {
		name   string
		body   map[string]any
		branch string
		files  []string
	}{
		{"git-branch-default", map[string]any{}, "dbt/main", []string{"model/cubes/customers.yml", "model/cubes/orders.yml"}},
		{"git-tag", map[string]any{"ref": "v1.0"}, "dbt/v1.0", []string{"model/cubes/orders.yml"}},
		// Refs made of 7-40 hex digits are tried as a branch, then a tag.
		{"git-hex-date-tag", map[string]any{"ref": "20240601"}, "dbt/20240601", []string{"model/cubes/orders.yml"}},
		{"git-hex-branch", map[string]any{"ref": "deadbeef"}, "dbt/deadbeef", []string{"model/cubes/customers.yml", "model/cubes/orders.yml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["output"] = "files"
			code, acc := h.do("POST", h.syncPath(), h.dev, tc.body)
			if code != 202 || acc["branchName"] != tc.branch {
				t.Fatalf("start: %d %v", code, acc)
			}
			job := h.waitJob(acc["syncJobId"].(string))
			if job["status"] != "succeeded" {
				t.Fatalf("job: %v", job)
			}
			var paths []string
			contents := map[string]string{}
			for _, f := range job["files"].([]any) {
				m := f.(map[string]any)
				paths = append(paths, m["path"].(string))
				contents[m["path"].(string)] = m["content"].(string)
			}
			if strings.Join(paths, ",") != strings.Join(tc.files, ",") {
				t.Errorf("files = %v, want %v", paths, tc.files)
			}
			orders := contents["model/cubes/orders.yml"]
			if !strings.Contains(orders, `sql_table: "marts.orders"`) || !strings.Contains(orders, "primary_key: true") {
				t.Errorf("orders.yml:\n%s", orders)
			}
			if tc.name == "git-branch-default" && !strings.Contains(orders, `sql: "{CUBE}.customer_id = {customers}.customer_id"`) {
				t.Errorf("no join from the relationships test:\n%s", orders)
			}
		})
	}
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"ref": "no-such-ref"})
	if code != 202 {
		t.Fatal(code, acc)
	}
	if job := h.waitJob(acc["syncJobId"].(string)); job["status"] != "failed" || !strings.Contains(fmt.Sprint(job["error"]), "no-such-ref") {
		t.Errorf("unknown ref job: %v", job)
	}
}

// A hex-only ref that is neither a branch nor a tag of the repository (so, for the API, a
// commit SHA) is 400 at once and queues nothing; so is such an integration branch.
func TestHexRefThatIsNoBranchOrTagIs400(t *testing.T) {
	h := newHarness(t)
	t.Setenv("PATH", t.TempDir())
	repo := dbtRepo(t)
	p := fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", h.dep)
	if code, body := h.do("PUT", p, h.admin, map[string]any{"repoUrl": "file://" + repo, "branch": "main", "projectPath": "analytics"}); code != 200 {
		t.Fatal(code, body)
	}
	for _, ref := range []string{"abc1234", strings.Repeat("0123456789", 4)} {
		code, body := h.do("POST", h.syncPath(), h.dev, map[string]any{"ref": ref})
		if msg := fmt.Sprint(body["message"]); code != 400 || !strings.Contains(msg, "neither a branch nor a tag") || !strings.Contains(msg, ref) {
			t.Errorf("ref %s: %d %v", ref, code, body)
		}
	}
	if code, body := h.do("GET", h.syncPath(), h.dev, nil); code != 200 || len(body["items"].([]any)) != 0 {
		t.Errorf("a refused ref queued a job: %d %v", code, body)
	}
	// With source "manifest" the ref only names the branch: no repository is asked.
	if code, body := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "ref": "abc1234"}); code != 202 || body["branchName"] != "dbt/abc1234" {
		t.Errorf("manifest sync with a hex ref: %d %v", code, body)
	}
	// The integration's branch follows the same rule.
	if code, body := h.do("PUT", p, h.admin, map[string]any{"repoUrl": "file://" + repo, "branch": "cafe1234", "projectPath": "analytics"}); code != 400 || !strings.Contains(fmt.Sprint(body["message"]), "neither a branch nor a tag") {
		t.Errorf("integration branch cafe1234: %d %v", code, body)
	}
	if code, body := h.do("PUT", p, h.admin, map[string]any{"repoUrl": "file://" + repo, "branch": "deadbeef", "projectPath": "analytics"}); code != 200 {
		t.Errorf("integration branch deadbeef (a branch): %d %v", code, body)
	}
}
