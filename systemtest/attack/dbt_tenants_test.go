package attack_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/gitrepo"
	"github.com/analyticsco/platform/devstack/neighbour"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// One tenant of dbt sync must not take what the others share: the workers' memory, the
// job queue, the object store; nor read another's secrets or the platform's insides in a
// job's error. Each case attacks the real stack through the gateway.
func TestDbtTenantsCannotTakeEachOthersShare(t *testing.T) {
	const quota = 10 << 20
	s := stacktest.Start(t, stacktest.Options{Env: append(slices.Clone(noRateLimits),
		"DBT_SYNC_WORKER_CONCURRENCY=1", "DBT_SYNC_MAX_ATTEMPTS=2", "DBT_SYNC_MAX_QUEUED_JOBS=20",
		// The quota is what is under test: the in-flight bound is off.
		"DBT_SYNC_MAX_INFLIGHT_PER_ACCOUNT=0",
		"DBT_SYNC_MAX_DEPLOYMENT_UPLOAD_BYTES="+strconv.Itoa(quota))})
	a := newAPI(s)
	acme, globex := s.Seed.Accounts["acme"], s.Seed.Accounts["globex"]
	admin, dev := apitest.Bearer(acme.Users["admin"].Bearer), apitest.Bearer(acme.Users["developer"].Bearer)
	gadmin := apitest.Bearer(globex.Users["admin"].Bearer)
	syncs := func(dep int64) string { return fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep) }
	integration := func(dep int64) string { return fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", dep) }
	waitJob := func(t *testing.T, dep int64, id, authz string) reply {
		t.Helper()
		var job reply
		apitest.Eventually(t, 90*time.Second, "job "+id+" ends", func() (bool, string) {
			job = a.call("GET", syncs(dep)+"/"+id, authz, nil)
			st, _ := job.body["status"].(string)
			return st == "failed" || st == "succeeded" || st == "canceled", job.String()
		})
		return job
	}

	// A compressed bomb: a blob of 1.5 GiB of zeros is a few MB packed, and inflated in
	// memory before any limit it takes gigabytes. It is refused from its header, the job
	// fails naming the limit, and the worker's peak RSS stays small.
	t.Run("a-compressed-bomb-fails-naming-the-limit-with-bounded-worker-memory", func(t *testing.T) {
		dep := acme.Deployments[0].ID
		repo := zeroBlobRepo(t, 1536<<20)
		if r := a.call("PUT", integration(dep), admin, map[string]any{"repoUrl": "file://" + repo, "branch": "main", "projectPath": ""}); r.status != 200 {
			t.Fatalf("integration: %s", r)
		}
		r := a.call("POST", syncs(dep), dev, map[string]any{"source": "git", "branchName": "bomb"})
		if r.status != 202 {
			t.Fatalf("sync: %s", r)
		}
		job := waitJob(t, dep, r.body["syncJobId"].(string), dev)
		if msg := fmt.Sprint(job.body["error"]); job.body["status"] != "failed" || job.body["errorCode"] != "repository_limit" ||
			!strings.Contains(msg, "536870912 bytes") || strings.Contains(msg, "DBT_SYNC_") {
			t.Fatalf("want the job failed naming the limit of 536870912 bytes (never the setting), got %s", job)
		}
		peak := peakRSS(t, s.Process("dbtsync-worker-1").Pid())
		t.Logf("worker peak RSS after the 1.5 GiB zero blob: %d MiB", peak>>20)
		if peak > 256<<20 {
			t.Errorf("the worker's peak RSS reached %d MiB", peak>>20)
		}
	})

	// 20 uploads of 5 MB at once against a 10 MiB quota: each fits what is stored when it
	// starts, but the charge is atomic, so they cannot all pass.
	t.Run("concurrent-uploads-never-pass-the-deployment-quota", func(t *testing.T) {
		dep := acme.Deployments[1].ID
		body := neighbour.UploadSync("quota", 5_000_000)
		var mu sync.Mutex
		answers := map[int]int{}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				r := a.call("POST", syncs(dep), dev, body)
				if r.status != 202 && (r.status != 413 || r.body["code"] != "storage_quota" || !strings.Contains(r.message(), fmt.Sprintf("its limit of %d bytes", quota)) || strings.Contains(r.message(), "DBT_SYNC_")) {
					t.Errorf("an upload: %s", r)
				}
				mu.Lock()
				answers[r.status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if answers[202] < 1 || answers[202] > quota/5_000_000 || answers[202]+answers[413] != 20 {
			t.Errorf("answers %v: want at most %d accepted and the rest 413", answers, quota/5_000_000)
		}
	})

	// One deployment floods its queue; past DBT_SYNC_MAX_QUEUED_JOBS it is 429 naming
	// the limit, and another account's job, queued last, is not served after the whole
	// flood (a FIFO) but second at most: the workers serve the accounts in turn.
	t.Run("a-flooded-queue-is-429-and-another-accounts-job-is-served-in-turn", func(t *testing.T) {
		flooder, victim := acme.Deployments[0].ID, globex.Deployments[0].ID
		s.Kill("dbtsync-worker-1") // the flood and the victim's job wait together
		var flood []string
		for i := range 20 {
			r := a.call("POST", syncs(flooder), dev, neighbour.UploadSync(fmt.Sprintf("flood/%d", i), 0))
			if r.status != 202 {
				t.Fatalf("flood job %d: %s", i, r)
			}
			flood = append(flood, r.body["syncJobId"].(string))
		}
		r := a.call("POST", syncs(flooder), dev, neighbour.UploadSync("flood/over", 0))
		if r.status != 429 || r.body["code"] != "job_limit" || !strings.Contains(r.message(), "has 20 sync jobs queued or running, the most it may have") || strings.Contains(r.message(), "DBT_SYNC_") {
			t.Fatalf("a job past the deployment's limit: %s", r)
		}
		r = a.call("POST", syncs(victim), gadmin, neighbour.UploadSync("victim", 0))
		if r.status != 202 {
			t.Fatalf("the other account's job: %s", r)
		}
		victimJob := r.body["syncJobId"].(string)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		s.Restart(ctx, "dbtsync-worker-1")
		started := map[string]time.Time{}
		vj := waitJob(t, victim, victimJob, gadmin)
		started[victimJob] = startedAt(t, vj)
		for _, id := range flood {
			started[id] = startedAt(t, waitJob(t, flooder, id, dev))
		}
		order := make([]string, 0, len(started))
		for id := range started {
			order = append(order, id)
		}
		slices.SortFunc(order, func(x, y string) int { return started[x].Compare(started[y]) })
		if pos := slices.Index(order, victimJob); pos > 1 {
			t.Errorf("the other account's job started %d-th of %d, after the flood", pos+1, len(order))
		}
	})

	// A token pasted into repoUrl is refused (400), and the refused request's audit
	// event and every log line keep the URL without it.
	t.Run("credentials-in-a-repo-url-appear-in-no-audit-event-and-no-log", func(t *testing.T) {
		dep := acme.Deployments[0].ID
		const secret = "ghp_SECRETx9Q2"
		r := a.call("PUT", integration(dep), admin, map[string]any{"repoUrl": "https://bob:" + secret + "@github.com/acme/dbt.git", "branch": "main", "projectPath": ""})
		if r.status != 400 || strings.Contains(r.raw, secret) {
			t.Fatalf("want 400 without the secret, got %s", r)
		}
		q := url.Values{"action": {"dbtsync.integration.update"}, "first": {"50"}}
		apitest.Eventually(t, 30*time.Second, "the refused update's audit event", func() (bool, string) {
			ev := a.call("GET", "/api/v1/audit?"+q.Encode(), admin, nil)
			return strings.Contains(ev.raw, "https://github.com/acme/dbt.git"), ev.String()
		})
		if ev := a.call("GET", "/api/v1/audit?"+q.Encode(), admin, nil); strings.Contains(ev.raw, secret) {
			t.Errorf("the audit trail holds the secret: %s", ev)
		}
		if strings.Contains(s.Logs(), secret) {
			t.Errorf("a log line holds the secret")
		}
	})

	// A job the platform fails (here the worker's clone directory is not a
	// directory any more) shows the tenant a code and a generic message; the path is in the
	// worker's log only.
	t.Run("a-job-failed-by-the-platform-shows-a-code-and-a-generic-message", func(t *testing.T) {
		dep := acme.Deployments[0].ID
		repo := hostileRepo(t, map[string]string{"dbt_project.yml": "name: shop\n", "models/a.sql": "select 1\n"}, nil)
		if r := a.call("PUT", integration(dep), admin, map[string]any{"repoUrl": "file://" + repo, "branch": "main", "projectPath": ""}); r.status != 200 {
			t.Fatalf("integration: %s", r)
		}
		root := cloneRoot(t, s.Process("dbtsync-worker-1").Pid())
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(root); _ = os.Mkdir(root, 0o700) })
		r := a.call("POST", syncs(dep), dev, map[string]any{"source": "git", "branchName": "disk"})
		if r.status != 202 {
			t.Fatalf("sync: %s", r)
		}
		id := r.body["syncJobId"].(string)
		job := waitJob(t, dep, id, dev)
		if job.body["status"] != "failed" || job.body["errorCode"] != "internal_error" || strings.Contains(job.raw, root) || strings.Contains(job.raw, "not a directory") {
			t.Fatalf("want internal_error with a generic message, got %s", job)
		}
		q := url.Values{"action": {"dbtsync.sync.finish"}, "targetId": {id}}
		apitest.Eventually(t, 30*time.Second, "the job's finish event", func() (bool, string) {
			ev := a.call("GET", "/api/v1/audit?"+q.Encode(), admin, nil)
			return strings.Contains(ev.raw, "internal_error"), ev.String()
		})
		if ev := a.call("GET", "/api/v1/audit?"+q.Encode(), admin, nil); strings.Contains(ev.raw, root) {
			t.Errorf("the audit event names the worker's path: %s", ev)
		}
		if logs := s.Logs(); !strings.Contains(logs, id) || !strings.Contains(logs, root) {
			t.Errorf("the worker's log lacks the failure's detail")
		}
	})
}

// zeroBlobRepo commits a dbt project whose one model is size bytes of zeros.
func zeroBlobRepo(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := gitrepo.WriteZeroModel(dir, size); err != nil {
		t.Fatal(err)
	}
	return dir
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// cloneRoot is the directory the worker process clones under: the one whose lock it holds.
func cloneRoot(t *testing.T, pid int) string {
	t.Helper()
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasSuffix(target, ".lock") && strings.Contains(target, "dbtsync-clones-") {
			return filepath.Dir(target)
		}
	}
	t.Fatal("the worker holds no clone directory lock")
	return ""
}

func startedAt(t *testing.T, job reply) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(job.body["startedAt"]))
	if err != nil {
		t.Fatalf("startedAt of %s: %v", job, err)
	}
	return at
}
