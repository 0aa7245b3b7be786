package attack_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/gitrepo"
	"github.com/analyticsco/platform/devstack/neighbour"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// A repository of five links, each naming the previous one 1,300 times, must not hold a
// worker slot and a core past cancel and the job timeout, nor six bytes of YAML panic the
// worker (every job on it lost). A job's input is read and converted in a child process
// the worker kills: the hostile jobs fail while another account's manifest sync on
// the same worker succeeds within twice its quiet time plus the kill latency, the worker
// stays up, and a cancel of a hostile job in progress ends it within seconds.
func TestDbtLinkBombAndYAMLFailBesideAnotherAccountsSync(t *testing.T) {
	const cpuLimit = time.Second // the child's CPU limit: the longest a hostile job holds a slot, in CPU time
	s := stacktest.Start(t, stacktest.Options{Env: append(slices.Clone(noRateLimits), "DBT_SYNC_CHILD_CPU_LIMIT="+cpuLimit.String())})
	a := newAPI(s)
	acme, globex := s.Seed.Accounts["acme"], s.Seed.Accounts["globex"]
	admin, dev := apitest.Bearer(acme.Users["admin"].Bearer), apitest.Bearer(acme.Users["developer"].Bearer)
	gadmin := apitest.Bearer(globex.Users["admin"].Bearer)
	syncs := func(dep int64) string { return fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep) }
	integration := func(dep int64) string { return fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", dep) }
	start := func(dep int64, authz string, body map[string]any) string {
		t.Helper()
		r := a.call("POST", syncs(dep), authz, body)
		if r.status != 202 {
			t.Fatalf("sync: %s", r)
		}
		return r.body["syncJobId"].(string)
	}
	waitJob := func(dep int64, id, authz string) reply {
		t.Helper()
		var job reply
		apitest.Eventually(t, 3*time.Minute, "job "+id+" ends", func() (bool, string) {
			job = a.call("GET", syncs(dep)+"/"+id, authz, nil)
			st, _ := job.body["status"].(string)
			return st == "failed" || st == "succeeded" || st == "canceled", job.String()
		})
		return job
	}
	setRepo := func(dep int64, repo string) {
		t.Helper()
		if r := a.call("PUT", integration(dep), admin, map[string]any{"repoUrl": "file://" + repo, "branch": "main", "projectPath": ""}); r.status != 200 {
			t.Fatalf("integration: %s", r)
		}
	}
	worker := s.Process("dbtsync-worker-1")
	workerPid := worker.Pid()
	gdep := globex.Deployments[0].ID

	// The other account's manifest sync alone: its quiet time.
	t0 := time.Now()
	if job := waitJob(gdep, start(gdep, gadmin, neighbour.UploadSync("quiet", 0)), gadmin); job.body["status"] != "succeeded" {
		t.Fatalf("the quiet sync: %s", job)
	}
	quiet := time.Since(t0)

	bombDep, yamlDep := acme.Deployments[0].ID, acme.Deployments[1].ID
	setRepo(bombDep, linkBombRepo(t))
	setRepo(yamlDep, hostileRepo(t, map[string]string{"dbt_project.yml": "<<:\n? -", "models/orders.sql": "select 1 as id\n"}, nil))
	bomb := start(bombDep, dev, map[string]any{"source": "git", "branchName": "lb/1"})
	yaml := start(yamlDep, dev, map[string]any{"source": "git", "branchName": "yaml/1"})
	t1 := time.Now()
	beside := start(gdep, gadmin, neighbour.UploadSync("beside", 0))
	job := waitJob(gdep, beside, gadmin)
	took := time.Since(t1)
	// The kill latency: a hostile child holds its slot until its CPU limit at most; on a
	// shared machine that CPU time takes up to twice as long in wall time.
	bound := 2*quiet + 2*cpuLimit
	t.Logf("the other account's sync: %s quiet, %s beside the link bomb and the YAML (bound %s)", quiet.Round(time.Millisecond), took.Round(time.Millisecond), bound.Round(time.Millisecond))
	if job.body["status"] != "succeeded" || took > bound {
		t.Errorf("the other account's sync beside the hostile jobs: %s after %s, want succeeded within %s", job, took, bound)
	}

	t.Run("LinkBombFailsOnItsBudget", func(t *testing.T) {
		job := waitJob(bombDep, bomb, dev)
		t.Logf("the link bomb: %s", job)
		msg := fmt.Sprint(job.body["error"])
		if job.body["status"] != "failed" || (job.body["errorCode"] != "work_limit" && job.body["errorCode"] != "repository_limit") || strings.Contains(msg, "DBT_SYNC_") {
			t.Errorf("the link bomb: %s, want failed work_limit naming the limit (never the setting)", job)
		}
	})
	t.Run("CraftedYAMLFailsNamingTheFile", func(t *testing.T) {
		job := waitJob(yamlDep, yaml, dev)
		t.Logf("the crafted YAML: %s", job)
		if job.body["status"] != "failed" || job.body["errorCode"] != "invalid_project" || !strings.Contains(fmt.Sprint(job.body["error"]), "dbt_project.yml") {
			t.Errorf("the crafted dbt_project.yml: %s, want failed invalid_project naming the file", job)
		}
	})
	t.Run("WorkerStaysUp", func(t *testing.T) {
		if gone, how := worker.Exited(); gone || worker.Pid() != workerPid {
			t.Fatalf("the worker exited (%s) or was replaced (pid %d, was %d)", how, worker.Pid(), workerPid)
		}
		if job := waitJob(gdep, start(gdep, gadmin, neighbour.UploadSync("after", 0)), gadmin); job.body["status"] != "succeeded" {
			t.Errorf("a sync after the hostile jobs: %s", job)
		}
	})

	// A clone that inflates 500 MiB costs its child seconds of CPU: past the child's CPU
	// limit the kernel kills it, and the job fails work_limit naming the limit.
	slowRepo := t.TempDir()
	if err := gitrepo.WriteZeroModel(slowRepo, 500<<20); err != nil {
		t.Fatal(err)
	}
	t.Run("ACloneOverTheChildsCPULimitFailsWorkLimit", func(t *testing.T) {
		setRepo(yamlDep, slowRepo)
		job := waitJob(yamlDep, start(yamlDep, dev, map[string]any{"source": "git", "branchName": "slow/cpu"}), dev)
		t.Logf("the 500 MiB clone with %s of CPU: %s", cpuLimit, job)
		msg := fmt.Sprint(job.body["error"])
		if job.body["status"] != "failed" || job.body["errorCode"] != "work_limit" || !strings.Contains(msg, "used more than 1s of CPU time, its limit") ||
			strings.Contains(msg, "DBT_SYNC_") || job.body["attempts"] != float64(1) {
			t.Errorf("want failed work_limit after one attempt, naming the CPU limit of 1s (never the setting), got %s", job)
		}
		if gone, how := worker.Exited(); gone || worker.Pid() != workerPid {
			t.Errorf("the worker exited (%s) or was replaced", how)
		}
	})

	// The same clone canceled while it runs: the child is killed, and the job ends
	// canceled within seconds.
	t.Run("CancelOfAHostileJobInProgressEndsItWithinSeconds", func(t *testing.T) {
		setRepo(bombDep, slowRepo)
		id := start(bombDep, dev, map[string]any{"source": "git", "branchName": "slow/1"})
		apitest.Eventually(t, time.Minute, "the job runs", func() (bool, string) {
			job := a.call("GET", syncs(bombDep)+"/"+id, dev, nil)
			return job.body["status"] == "running", job.String()
		})
		asked := time.Now()
		if r := a.call("POST", syncs(bombDep)+"/"+id+"/cancel", dev, nil); r.status != 200 && r.status != 202 {
			t.Fatalf("cancel: %s", r)
		}
		var job reply
		apitest.Eventually(t, 30*time.Second, "the job ends", func() (bool, string) {
			job = a.call("GET", syncs(bombDep)+"/"+id, dev, nil)
			st, _ := job.body["status"].(string)
			return st == "failed" || st == "succeeded" || st == "canceled", job.String()
		})
		took := time.Since(asked)
		t.Logf("canceled after %s", took.Round(time.Millisecond))
		if job.body["status"] != "canceled" || took > 5*time.Second {
			t.Errorf("a cancel of a running job: %s after %s, want canceled within 5s", job, took)
		}
		if kids := children(workerPid); len(kids) > 0 {
			t.Errorf("the worker still has children after the cancel: %v", kids)
		}
	})
}

// linkBombRepo is a link bomb: a0 links to ".", and each of a1..a5 names the
// one before it 1,300 times (about 20 KB in all).
func linkBombRepo(t *testing.T) string {
	links := map[string]string{"a0": "."}
	for i := 1; i <= 5; i++ {
		links[fmt.Sprintf("a%d", i)] = strings.Repeat(fmt.Sprintf("a%d/", i-1), 1300)
	}
	return hostileRepo(t, map[string]string{"dbt_project.yml": "name: lb\nversion: \"1\"\n"}, links)
}

// children are the processes whose parent is pid.
func children(pid int) []string {
	var out []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its last ')'.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, filepath.Base(filepath.Dir(f))+" "+string(b[:strings.IndexByte(string(b), ')')+1]))
		}
	}
	return out
}
