package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
)

var (
	manifestOnce sync.Once
	manifestRaw  json.RawMessage
)

// manifest is a real dbt manifest (schema v8, dbt 1.4) from the shared fixtures.
func manifest(t *testing.T) json.RawMessage {
	t.Helper()
	manifestOnce.Do(func() {
		raw, err := os.ReadFile(filepath.Join(devstack.RepoRoot(t), "..", "shared", "fixtures", "dbt", "manifest-v8-dbt-1.4.json"))
		if err == nil {
			manifestRaw = raw
		}
	})
	if manifestRaw == nil {
		t.Fatal("the dbt fixture ../shared/fixtures/dbt/manifest-v8-dbt-1.4.json is missing")
	}
	return manifestRaw
}

func (p *platform) branch(name, rest string) string {
	return fmt.Sprintf("/build/api/v1/deployments/%d/branches/%s%s", p.dep1, url.PathEscape(name), rest)
}

type accepted struct {
	BranchName string `json:"branchName"`
	SyncJobID  string `json:"syncJobId"`
	WorkflowID string `json:"workflowId"`
}

func (p *platform) startSync(t *testing.T, body map[string]any) accepted {
	t.Helper()
	var a accepted
	p.call(t, "POST", p.ws(p.dep1, "/dbt-sync"), bearer(p.acme.Users["developer"]), body).want(t, 202).decode(t, &a)
	if a.BranchName == "" || a.SyncJobID == "" || a.WorkflowID == "" {
		t.Fatalf("202 body %+v: every field must be set", a)
	}
	return a
}

// waitJob polls the job until it ends and returns its final state.
func (p *platform) waitJob(t *testing.T, jobID string) map[string]any {
	t.Helper()
	var job map[string]any
	eventually(t, 90*time.Second, "sync job "+jobID+" ends", func() bool {
		job = p.call(t, "GET", p.ws(p.dep1, "/dbt-sync/"+jobID), bearer(p.acme.Users["developer"]), nil).want(t, 200).obj(t)
		return job["status"] == "succeeded" || job["status"] == "failed" || job["status"] == "canceled"
	})
	return job
}

// syncedBranch syncs the fixture manifest into a new branch and waits until it is written.
func (p *platform) syncedBranch(t *testing.T) string {
	t.Helper()
	name := "feature/" + p.unique("e2e")
	a := p.startSync(t, map[string]any{"source": "manifest", "manifest": manifest(t), "branchName": name})
	if job := p.waitJob(t, a.SyncJobID); job["status"] != "succeeded" {
		t.Fatalf("sync job: %v", job)
	}
	return name
}

var dbtSyncRules = []rule{
	{"start-202-and-job-finishes", func(t *testing.T, p *platform) {
		name := "dbt/" + p.unique("e2e")
		a := p.startSync(t, map[string]any{"source": "manifest", "manifest": manifest(t), "branchName": name})
		if a.BranchName != name {
			t.Errorf("branchName %q, want the requested %q", a.BranchName, name)
		}
		job := p.waitJob(t, a.SyncJobID)
		if job["status"] != "succeeded" || job["error"] != nil || job["workflowId"] != a.WorkflowID {
			t.Fatalf("job %v", job)
		}
		var files struct {
			Files []struct {
				Path string
				Size int64
			}
		}
		p.call(t, "GET", p.branch(name, "/files"), bearer(p.acme.Users["developer"]), nil).want(t, 200).decode(t, &files)
		if len(files.Files) == 0 {
			t.Fatal("the branch has no files")
		}
		// The file route takes the rest of the path, slashes included.
		f := files.Files[0]
		var file struct{ Path, Content string }
		p.call(t, "GET", p.branch(name, "/files/"+f.Path), bearer(p.acme.Users["developer"]), nil).want(t, 200).decode(t, &file)
		if file.Path != f.Path || int64(len(file.Content)) != f.Size || !strings.Contains(file.Content, "cubes:") {
			t.Errorf("file %s: %d bytes, listed as %d", file.Path, len(file.Content), f.Size)
		}
		p.call(t, "GET", p.branch(name, "/versions"), bearer(p.acme.Users["developer"]), nil).want(t, 200)
		p.call(t, "GET", p.ws(p.dep1, "/dbt-sync?first=5"), bearer(p.acme.Users["developer"]), nil).want(t, 200)
	}},
	{"manifest-required-for-manifest-source", func(t *testing.T, p *platform) {
		p.call(t, "POST", p.ws(p.dep1, "/dbt-sync"), bearer(p.acme.Users["developer"]), map[string]any{"source": "manifest"}).want(t, 400)
	}},
	{"manifest-converted-exactly", func(t *testing.T, p *platform) {
		// output files: the job returns what it generated from exactly this manifest.
		a := p.startSync(t, map[string]any{"source": "manifest", "manifest": manifest(t), "output": "files", "branchName": "files/" + p.unique("x")})
		job := p.waitJob(t, a.SyncJobID)
		files, _ := job["files"].([]any)
		if job["status"] != "succeeded" || len(files) == 0 {
			t.Fatalf("job %v", job)
		}
		p.call(t, "GET", p.branch(a.BranchName, ""), bearer(p.acme.Users["developer"]), nil).want(t, 404)
	}},
	{"hex-ref-is-not-refused-for-its-shape", func(t *testing.T, p *platform) {
		// A ref of 7-40 hex digits may be a date tag or a build number: it is asked of the
		// repository (dbtsync-svc's git tests cover a real one), never refused for its
		// shape. Here no git integration is saved, and that is what the 400 says.
		for _, ref := range []string{"20240601", "0123456789abcdef0123456789abcdef01234567"} {
			r := p.call(t, "POST", p.ws(p.dep1, "/dbt-sync"), bearer(p.acme.Users["developer"]), map[string]any{"source": "git", "ref": ref}).want(t, 400)
			if msg := r.message(t); !strings.Contains(msg, "dbt git integration") {
				t.Errorf("ref %q: message %q", ref, msg)
			}
		}
		// With a manifest the hex ref only names the generated branch.
		a := p.startSync(t, map[string]any{"source": "manifest", "manifest": manifest(t), "ref": "20240601"})
		if a.BranchName != "dbt/20240601" {
			t.Errorf("branchName %q, want dbt/20240601", a.BranchName)
		}
		p.waitJob(t, a.SyncJobID)
	}},
	{"retry-and-cancel", func(t *testing.T, p *platform) {
		// A failed manifest job (no nodes) is retried from its kept upload; a finished job
		// cannot be canceled; an identical resync of a branch writes no version.
		noNodes := map[string]any{"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"}}
		failed := p.startSync(t, map[string]any{"source": "manifest", "manifest": noNodes, "output": "files"})
		if job := p.waitJob(t, failed.SyncJobID); job["status"] != "failed" {
			t.Fatalf("job %v", job)
		}
		var again accepted
		p.call(t, "POST", p.ws(p.dep1, "/dbt-sync/"+failed.SyncJobID+"/retry"), bearer(p.acme.Users["developer"]), nil).want(t, 202).decode(t, &again)
		if job := p.waitJob(t, again.SyncJobID); job["status"] != "failed" || job["retryOf"] != failed.SyncJobID {
			t.Fatalf("retried job %v", job)
		}
		p.call(t, "POST", p.ws(p.dep1, "/dbt-sync/"+failed.SyncJobID+"/cancel"), bearer(p.acme.Users["developer"]), nil).want(t, 409)
		p.call(t, "POST", p.ws(p.dep1, "/dbt-sync/"+failed.SyncJobID+"/retry"), bearer(p.acme.Users["viewer"]), nil).want(t, 403)
		name := p.syncedBranch(t)
		a := p.startSync(t, map[string]any{"source": "manifest", "manifest": manifest(t), "branchName": name})
		if job := p.waitJob(t, a.SyncJobID); job["status"] != "succeeded" || job["changed"] != false {
			t.Fatalf("identical resync %v", job)
		}
	}},
	{"ref-names-the-branch", func(t *testing.T, p *platform) {
		// With a manifest the ref only names the generated branch.
		ref := p.unique("rel")
		a := p.startSync(t, map[string]any{"source": "manifest", "manifest": manifest(t), "ref": ref})
		if a.BranchName != "dbt/"+ref {
			t.Errorf("branchName %q, want dbt/%s", a.BranchName, ref)
		}
		p.waitJob(t, a.SyncJobID)
	}},
	{"unsupported-schema-version-400", func(t *testing.T, p *platform) {
		bad := `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v3.json"},"nodes":{}}`
		r := p.call(t, "POST", p.ws(p.dep1, "/dbt-sync"), bearer(p.acme.Users["developer"]),
			`{"source":"manifest","manifest":`+bad+`}`).want(t, 400)
		if msg := r.message(t); !strings.Contains(msg, "v3") {
			t.Errorf("message %q does not name the version found", msg)
		}
	}},
	{"production-branch-needs-admin", func(t *testing.T, p *platform) {
		body := map[string]any{"source": "manifest", "manifest": manifest(t), "branchName": p.acme.Deployments[0].ProductionBranch}
		p.call(t, "POST", p.ws(p.dep1, "/dbt-sync"), bearer(p.acme.Users["developer"]), body).want(t, 403)
	}},
	{"requires-developer", func(t *testing.T, p *platform) {
		for _, role := range []string{"viewer", "aiBiUser"} {
			p.call(t, "POST", p.ws(p.dep1, "/dbt-sync"), bearer(p.acme.Users[role]), map[string]any{"source": "manifest", "manifest": manifest(t)}).want(t, 403)
		}
	}},
}
