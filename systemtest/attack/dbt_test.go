package attack_test

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

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// hostileRepo commits files (path -> content) and symbolic links (path -> target) to a
// new repository on branch main and returns its directory.
func hostileRepo(t *testing.T, files, links map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	for p, content := range files {
		full := filepath.Join(dir, p)
		_ = os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(dir, p)
		_ = os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Commit("hostile", &git.CommitOptions{Author: &object.Signature{Name: "a", Email: "a@example.test", When: time.Unix(1700000000, 0)}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDbtAttacks: repositories are hostile: their URLs aim at the worker's network and
// their symbolic links lead outside the clone.
func TestDbtAttacks(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: []string{"DBT_SYNC_MAX_FILE_BYTES=65536"}})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	admin, dev := apitest.Bearer(acme.Users["admin"].Bearer), apitest.Bearer(acme.Users["developer"].Bearer)
	dep := acme.Deployments[0].ID
	integration := fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", dep)
	syncs := fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep)

	// A repoUrl must not reach the worker's network: loopback, metadata and private
	// addresses are refused before anything saves or dials them.
	t.Run("RepoURLToInternalAddressesIs400", func(t *testing.T) {
		for _, u := range []string{"https://127.0.0.1:9/x.git", "https://169.254.169.254/latest/meta-data", "https://10.0.0.1/x.git",
			"https://[::1]/x.git", "https://localhost/x.git", "https://100.64.0.1/x.git", "http://example.com/x.git", "git@github.com:a/b.git"} {
			r := a.call("PUT", integration, admin, map[string]any{"repoUrl": u, "branch": "main", "projectPath": "."})
			if r.status != 400 || !strings.Contains(r.message(), "repoUrl") {
				t.Errorf("%s: want 400 about repoUrl, got %s", u, r)
			}
		}
		if r := a.call("GET", integration, admin, nil); r.status == 200 && strings.Contains(r.raw, "169.254") {
			t.Errorf("a refused repoUrl was saved: %s", r)
		}
	})

	// Symbolic links in a clone that lead outside it (other tenants' clones, the worker's
	// file system, /dev/zero): each job fails naming the file; no content leaks.
	project := map[string]string{"dbt_project.yml": "name: shop\nmodel-paths: [models]\n", "models/orders.sql": "select 1 as id\n"}
	secretDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(secretDir, "secret.yml"), []byte("version: 2\nmodels:\n  - name: orders\n    description: TOP-SECRET-OTHER-TENANT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, manifestPath string
		files, links             map[string]string
	}{
		{"ModelsDirLinkedOutOfTheClone", "models", "", map[string]string{"dbt_project.yml": "name: shop\nmodel-paths: [models]\n"},
			map[string]string{"models": "../../../../../../../../" + strings.TrimPrefix(secretDir, "/")}},
		{"SchemaFileLinkedToAnotherDirectory", "models/schema.yml", "", project,
			map[string]string{"models/schema.yml": "../../../../../../../../" + strings.TrimPrefix(filepath.Join(secretDir, "secret.yml"), "/")}},
		{"ManifestLinkedToDevZero", "target/manifest.json", "target/manifest.json", project,
			map[string]string{"target/manifest.json": "../../../../../../../../../dev/zero"}},
		{"ProjectFileLinkedToDevZero", "dbt_project.yml", "", map[string]string{"models/orders.sql": "select 1\n"},
			map[string]string{"dbt_project.yml": "../../../../../../../../dev/zero"}},
		{"OversizedSchemaFile", "models/big.yml", "", map[string]string{"dbt_project.yml": "name: shop\nmodel-paths: [models]\n",
			"models/orders.sql": "select 1\n", "models/big.yml": "# " + strings.Repeat("x", 70000) + "\n"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			repo := hostileRepo(t, c.files, c.links)
			body := map[string]any{"repoUrl": "file://" + repo, "branch": "main", "projectPath": "."}
			if c.manifestPath != "" {
				body["manifestPath"] = c.manifestPath
			}
			if r := a.call("PUT", integration, admin, body); r.status != 200 {
				t.Fatalf("integration: %s", r)
			}
			r := a.call("POST", syncs, dev, map[string]any{"source": "git", "output": "files", "branchName": "attack-" + strings.ToLower(c.name[len(c.name)-8:])})
			if r.status != 202 {
				t.Fatalf("sync: %s", r)
			}
			id := r.body["syncJobId"].(string)
			var job reply
			apitest.Eventually(t, 60*time.Second, "the job ends", func() (bool, string) {
				job = a.call("GET", syncs+"/"+id, dev, nil)
				st, _ := job.body["status"].(string)
				return st == "failed" || st == "succeeded", job.String()
			})
			msg := fmt.Sprint(job.body["error"])
			if job.body["status"] != "failed" || !strings.Contains(msg, c.file) {
				t.Fatalf("want a failed job naming %s, got %s", c.file, job)
			}
			if strings.Contains(job.raw, "TOP-SECRET") || strings.Contains(job.raw, "\\u0000") {
				t.Fatalf("the job carries content from outside the clone: %s", job)
			}
		})
	}
	// The worker survived every attack and still converts a plain repository.
	t.Run("worker-still-converts", func(t *testing.T) {
		repo := hostileRepo(t, project, nil)
		if r := a.call("PUT", integration, admin, map[string]any{"repoUrl": "file://" + repo, "branch": "main", "projectPath": "."}); r.status != 200 {
			t.Fatalf("integration: %s", r)
		}
		r := a.call("POST", syncs, dev, map[string]any{"source": "git", "output": "files", "branchName": "attack-plain"})
		id, _ := r.body["syncJobId"].(string)
		apitest.Eventually(t, 60*time.Second, "the plain job succeeds", func() (bool, string) {
			job := a.call("GET", syncs+"/"+id, dev, nil)
			return job.body["status"] == "succeeded", job.String()
		})
	})
}
