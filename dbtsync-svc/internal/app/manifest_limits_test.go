package app_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/app"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
)

// The manifest read limits as configured (DBT_SYNC_MANIFEST_MAX_MEMBER_BYTES and
// DBT_SYNC_MANIFEST_MAX_NAMES reach app.Deps.Git) bound every read, through the real API
// and worker: an upload with more names open at once than the limit is 413 naming it and
// queues nothing; a node's read members over the byte limit fail the job with
// work_limit, naming the value set; a manifest within both is converted. No message
// names the setting.
func TestLoweredManifestLimitsAreHonouredByTheAPIAndTheWorker(t *testing.T) {
	const memberBytes, names = 4096, 64
	h := newHarnessWith(t, func(d *app.Deps) {
		d.Git.MaxManifestMemberBytes, d.Git.MaxManifestNames = memberBytes, names
	})
	h.worker(worker.Options{})

	models := make([]string, names+10)
	for i := range models {
		models[i] = fmt.Sprintf("m%03d", i)
	}
	code, body := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", models...), "branchName": "dbt/names"})
	msg := fmt.Sprint(body["message"])
	if code != 413 || body["code"] != "too_large" || !strings.Contains(msg, fmt.Sprintf("over its limit of %d member names", names)) || strings.Contains(msg, "DBT_SYNC_") {
		t.Fatalf("an upload over the names limit: %d %v, want 413 naming the limit of %d names", code, body, names)
	}
	if _, jobs := h.do("GET", h.syncPath()+"?first=10", h.dev, nil); len(jobs["items"].([]any)) != 0 {
		t.Fatalf("the refused upload queued a job: %v", jobs)
	}

	wide := smallManifest("v12", "wide")
	wide["nodes"].(map[string]any)["model.p.wide"].(map[string]any)["description"] = strings.Repeat("d", 2*memberBytes)
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": wide, "branchName": "dbt/wide"})
	if code != 202 {
		t.Fatalf("an upload within the names limit: %d %v", code, acc)
	}
	job := h.waitJob(acc["syncJobId"].(string))
	msg = fmt.Sprint(job["error"])
	if job["status"] != "failed" || job["errorCode"] != "work_limit" || !strings.Contains(msg, fmt.Sprintf("over its limit of %d bytes", memberBytes)) || strings.Contains(msg, "DBT_SYNC_") {
		t.Fatalf("a node over the member bytes limit: %v, want work_limit naming the limit of %d bytes", job, memberBytes)
	}

	code, acc = h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a", "b"), "branchName": "dbt/small"})
	if code != 202 {
		t.Fatalf("an upload within both limits: %d %v", code, acc)
	}
	if job := h.waitJob(acc["syncJobId"].(string)); job["status"] != "succeeded" {
		t.Fatalf("a manifest within both limits: %v", job)
	}
}
