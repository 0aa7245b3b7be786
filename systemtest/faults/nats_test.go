package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// TestNATSStoppedWithJobsQueued: sync jobs accepted while no worker runs stay queued
// through a NATS stop and restart; once a worker is back each finishes succeeded
// exactly once (one version on its own branch, written by that job). While NATS is
// down, starting a sync is refused with 503 rather than accepted and lost.
func TestNATSStoppedWithJobsQueued(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	acme := s.Seed.Accounts["acme"]
	d := &dbtSync{api: newAPI(s), dep: acme.Deployments[0].ID, authz: apitest.Bearer(acme.Users["developer"].Bearer)}

	s.Kill("dbtsync-worker-1")
	jobBranch := map[string]string{}
	var ids []string
	for i := range 4 {
		branch := fmt.Sprintf("nats-outage-%d", i)
		r := d.start(branch, "orders", fmt.Sprintf("model_%d", i))
		id, _ := r.body["syncJobId"].(string)
		if r.status != 202 || id == "" || r.body["branchName"] != branch {
			t.Fatalf("start sync to %s: want 202 with a syncJobId, got %s", branch, r)
		}
		jobBranch[id], ids = branch, append(ids, id)
	}
	for _, id := range ids {
		if r := d.job(id); r.status != 200 || r.body["status"] != "queued" {
			t.Fatalf("job %s with no worker running: want queued, got %s", id, r)
		}
	}

	s.NATS.Stop()
	r := d.start("nats-down", "orders")
	if r.err != nil || r.status != 503 || !r.errorBody() {
		t.Errorf("dbt-sync-503-nats-down: want 503 with {status, message} within %s, got %s", requestTimeout, r)
	}
	if err := s.NATS.Restart(contextFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	s.WaitReady(contextFor(t, 60*time.Second), "dbtsync-svc-1")
	s.Restart(contextFor(t, 60*time.Second), "dbtsync-worker-1")

	jobs := d.waitFinished(t, ids, 90*time.Second)
	d.checkOnceEach(t, jobBranch, jobs)
	// The start refused during the outage left no job and no branch behind.
	if r := d.versions("nats-down"); r.status != 404 {
		t.Errorf("branch of the sync refused during the outage: want 404, got %s", r)
	}
	list := d.api.call("GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync?first=200", d.dep), d.authz, nil)
	if items, _ := list.body["items"].([]any); list.status != 200 || len(items) != len(ids) {
		t.Errorf("jobs of the deployment: want the %d accepted, got %s", len(ids), list)
	}
}
