package app_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/libs/audit"
)

// TestAuditTrail: a sync's start, cancel, retry and end, the git integration and the
// branch operations each record one event, with the caller and the outcome answered; the
// worker's event of a job's end names who started it and the request that queued it.
func TestAuditTrail(t *testing.T) {
	h := newHarness(t)
	acme := h.stack.Seed.Accounts["acme"]
	devID, adminID := acme.Users["developer"].ID, acme.Users["admin"].ID
	// only is the one event of action that is not a 403 (the refusals have subtests of
	// their own, which may run before).
	only := func(t *testing.T, action string) audit.Event {
		t.Helper()
		var found []audit.Event
		for _, ev := range h.audit.Events() {
			if ev.Action == action && ev.Outcome.Status != 403 {
				found = append(found, ev)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d %s events, want 1: %+v", len(found), action, h.audit.Events())
		}
		ev := found[0]
		if ev.AccountID != acme.ID || ev.DeploymentID != h.dep || !audit.ValidID(ev.ID) {
			t.Fatalf("event %+v", ev)
		}
		return ev
	}
	// One sync, started and run to its end before the subtests read its trail, so that
	// each of them passes alone.
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "dbt/audit"})
	if code != 202 {
		t.Fatalf("start: %d %v", code, acc)
	}
	jobID := acc["syncJobId"].(string)
	h.worker(worker.Options{})
	if job := h.waitJob(jobID); job["status"] != "succeeded" {
		t.Fatalf("job %v", job)
	}
	t.Run("start", func(t *testing.T) {
		ev := only(t, dbtsync.ActionSyncStart)
		if ev.Target != (audit.Target{Type: "sync_job", ID: jobID}) || ev.Outcome != audit.Succeeded(202) || ev.Actor.UserID != devID ||
			ev.Details["source"] != "manifest" || ev.Details["branchName"] != "dbt/audit" || ev.RequestID == "" {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("start-refused-by-the-service-is-recorded", func(t *testing.T) {
		code, _ := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": h.prod})
		if code != 403 {
			t.Fatalf("a developer's sync into production: %d", code)
		}
		var refused []audit.Event
		for _, ev := range h.audit.Events() {
			if ev.Action == dbtsync.ActionSyncStart && ev.Outcome.Result == audit.Failure && ev.Details["branchName"] == h.prod {
				refused = append(refused, ev)
			}
		}
		if len(refused) != 1 || refused[0].Outcome != audit.Failed(403, "forbidden") || refused[0].Target.ID != "" {
			t.Fatalf("refused start events %+v", refused)
		}
	})
	t.Run("a-caller-below-the-role-is-recorded", func(t *testing.T) {
		if code, _ := h.do("POST", h.syncPath(), h.viewer, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a")}); code != 403 {
			t.Fatalf("a viewer's sync: %d", code)
		}
		if code, _ := h.do("PUT", fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", h.dep), h.dev,
			map[string]any{"repoUrl": "https://example.test/acme/dbt.git", "branch": "main", "projectPath": "."}); code != 403 {
			t.Fatalf("a developer's integration: %d", code)
		}
		var viewerStart, devIntegration int
		for _, ev := range h.audit.Events() {
			refused := ev.Outcome == audit.Failed(403, "forbidden")
			switch {
			case ev.Action == dbtsync.ActionSyncStart && ev.Actor.UserID == acme.Users["viewer"].ID && refused:
				viewerStart++
			case ev.Action == dbtsync.ActionIntegrationUpdate && ev.Actor.UserID == devID && refused:
				devIntegration++
			}
		}
		if viewerStart != 1 || devIntegration != 1 {
			t.Errorf("refusals for the caller's role recorded: viewer's start %d, developer's integration %d; want 1 each", viewerStart, devIntegration)
		}
	})
	t.Run("finish-names-the-starter-and-the-request", func(t *testing.T) {
		var start audit.Event
		for _, ev := range h.audit.Events() {
			if ev.Action == dbtsync.ActionSyncStart && ev.Target.ID == jobID {
				start = ev
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		var fin []audit.Event
		for time.Now().Before(deadline) {
			fin = nil
			for _, ev := range h.audit.Events() {
				if ev.Action == dbtsync.ActionSyncFinish && ev.Target.ID == jobID {
					fin = append(fin, ev)
				}
			}
			if len(fin) > 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(fin) != 1 {
			t.Fatalf("%d finish events for %s", len(fin), jobID)
		}
		ev := fin[0]
		if ev.Actor.Type != audit.ActorSystem || ev.Outcome.Result != audit.Success || ev.Outcome.Status != 0 || ev.Details["status"] != "succeeded" ||
			ev.Details["startedBy"] != devID || ev.RequestID != start.RequestID || ev.Details["version"] != int64(1) || ev.Details["changed"] != true {
			t.Fatalf("finish event %+v (start %+v)", ev, start)
		}
	})
	t.Run("cancel-and-retry", func(t *testing.T) {
		code, _ := h.do("POST", h.syncPath()+"/"+jobID+"/cancel", h.dev, nil)
		if code != 409 {
			t.Fatalf("cancel of a finished job: %d", code)
		}
		if ev := only(t, dbtsync.ActionSyncCancel); ev.Outcome != audit.Failed(409, "conflict") || ev.Target.ID != jobID {
			t.Fatalf("event %+v", ev)
		}
		// A succeeded upload's manifest is gone: the retry is refused, and recorded so.
		code, acc := h.do("POST", h.syncPath()+"/"+jobID+"/retry", h.dev, nil)
		if code != 409 {
			t.Fatalf("retry: %d %v", code, acc)
		}
		ev := only(t, dbtsync.ActionSyncRetry)
		if ev.Target != (audit.Target{Type: "sync_job"}) || ev.Details["retryOf"] != jobID || ev.Outcome != audit.Failed(409, "conflict") {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("integration-change-never-records-credentials", func(t *testing.T) {
		code, body := h.do("PUT", fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", h.dep), h.admin,
			map[string]any{"repoUrl": "https://example.test/acme/dbt.git", "branch": "main", "projectPath": ".", "credentials": map[string]any{"token": "s3cret-token"}})
		if code != 200 {
			t.Fatalf("put integration: %d %v", code, body)
		}
		ev := only(t, dbtsync.ActionIntegrationUpdate)
		if ev.Actor.UserID != adminID || ev.Details["repoUrl"] != "https://example.test/acme/dbt.git" || ev.Details["hasCredentials"] != true ||
			ev.Target != (audit.Target{Type: "dbt_git_integration", ID: fmt.Sprint(h.dep)}) {
			t.Fatalf("event %+v", ev)
		}
		if s := fmt.Sprintf("%+v", h.audit.Events()); strings.Contains(s, "s3cret-token") {
			t.Fatal("a credential reached the audit trail")
		}
	})
	t.Run("branch-open-and-staging", func(t *testing.T) {
		name := url.PathEscape("dbt/audit")
		if code, body := h.do("POST", h.buildPath("/"+name+"/open"), h.dev, nil); code != 200 {
			t.Fatalf("open: %d %v", code, body)
		}
		if ev := only(t, dbtsync.ActionBranchOpen); ev.Target != (audit.Target{Type: "branch", ID: "dbt/audit"}) || ev.Details["leaseExpiresAt"] == nil {
			t.Fatalf("event %+v", ev)
		}
		if code, body := h.do("PUT", h.buildPath("/"+name+"/staging"), h.admin, map[string]any{"enabled": true}); code != 200 {
			t.Fatalf("staging: %d %v", code, body)
		}
		if ev := only(t, dbtsync.ActionBranchStaging); ev.Details["enabled"] != true {
			t.Fatalf("event %+v", ev)
		}
	})
}
