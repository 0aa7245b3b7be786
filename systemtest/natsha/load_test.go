package natsha_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
)

// requestTimeout is the clients' patience: longer than the services' JetStream retry
// budget (DBT_SYNC_JETSTREAM_RETRY_TIMEOUT, 12 s), so a request carried across an
// election is answered, never cut by the client.
const requestTimeout = 20 * time.Second

// clients send the load through every gateway in turn.
type clients struct {
	gateways []*apitest.Client
	mu       sync.Mutex
	next     int
}

func (c *clients) do(method, path, authz string, body any) apitest.Response {
	c.mu.Lock()
	g := c.gateways[c.next%len(c.gateways)]
	c.next++
	c.mu.Unlock()
	return g.Do(method, path, authz, body)
}

// object is the reply's JSON object (nil when it is none).
func object(r apitest.Response) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// outage is a request the platform did not serve: it must be a 503 with Retry-After and
// the error body, nothing else.
type outage struct {
	load string
	at   time.Time
	r    apitest.Response
}

func (o outage) acceptable() bool {
	if o.r.Err != nil || o.r.Status != 503 || o.r.Header.Get("Retry-After") == "" {
		return false
	}
	body := object(o.r)
	st, _ := body["status"].(float64)
	msg, _ := body["message"].(string)
	return int(st) == 503 && strings.TrimSpace(msg) != ""
}

// ledger is what the load was told: the accepted jobs, the acknowledged requests whose
// audit events must be in the trail, the outages, and when each load last succeeded
// (for the downtime of each election).
type ledger struct {
	mu        sync.Mutex
	jobs      map[string]syncJob           // by job id
	events    map[string]map[string]string // by action: the request's X-Request-Id -> load
	outages   []outage
	successes map[string][]time.Time // by load
}

type syncJob struct {
	branch, model, output string
}

func newLedger() *ledger {
	return &ledger{jobs: map[string]syncJob{}, events: map[string]map[string]string{}, successes: map[string][]time.Time{}}
}

func (l *ledger) ok(load string, at time.Time) {
	l.mu.Lock()
	l.successes[load] = append(l.successes[load], at)
	l.mu.Unlock()
}

func (l *ledger) failed(load string, at time.Time, r apitest.Response) {
	l.mu.Lock()
	l.outages = append(l.outages, outage{load, at, r})
	l.mu.Unlock()
}

func (l *ledger) event(action, target, load string) {
	l.mu.Lock()
	if l.events[action] == nil {
		l.events[action] = map[string]string{}
	}
	l.events[action][target] = load
	l.mu.Unlock()
}

func (l *ledger) count(load string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.successes[load])
}

// loads are the kinds of request the suite sends.
var loads = []string{"dbt sync", "audited request", "identity lookup"}

// served waits until every load has been answered 5 more times.
func (l *ledger) served(t *testing.T, what string) {
	t.Helper()
	before := map[string]int{}
	for _, load := range loads {
		before[load] = l.count(load)
	}
	apitest.Eventually(t, 60*time.Second, what, func() (bool, string) {
		for load, n := range before {
			if l.count(load) < n+5 {
				return false, load + " has not answered 5 more requests"
			}
		}
		return true, ""
	})
}

// checkOutages: every request not served was a 503 with Retry-After and the error body;
// it logs the load's counts. The caller holds l.mu.
func (l *ledger) checkOutages(t *testing.T) {
	t.Helper()
	unavailable := map[string]int{}
	for _, o := range l.outages {
		unavailable[o.load]++
		if !o.acceptable() {
			t.Errorf("%s at %s: want success or 503 with Retry-After and the error body, got %s", o.load, o.at.Format(time.StampMilli), o.r)
		}
	}
	t.Logf("requests answered: %d dbt syncs accepted, %d audited requests, %d identity lookups; not served (503): %v",
		len(l.successes["dbt sync"]), len(l.successes["audited request"]), len(l.successes["identity lookup"]), unavailable)
}

// longestGap is the longest time between two answered requests of load (or between
// from and the first) in [from, to]: what a client of that load saw of an election.
func (l *ledger) longestGap(load string, from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var gap time.Duration
	last := from
	for _, at := range l.successes[load] {
		if at.Before(from) || at.After(to) {
			continue
		}
		gap = max(gap, at.Sub(last))
		last = at
	}
	return max(gap, to.Sub(last))
}

// manifest is a dbt manifest of one table model.
func manifest(model string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"},
		"nodes": map[string]any{"model.natsha." + model: map[string]any{"resource_type": "model", "name": model, "alias": model,
			"database": "db", "schema": "s", "config": map[string]any{"materialized": "table"},
			"columns": map[string]any{"id": map[string]any{"name": "id", "data_type": "integer"}}}},
	}
}

// tenant is the account the load acts in.
type tenant struct {
	c         *clients
	dep       int64
	developer string // authorization of a developer (dbt syncs)
	admin     string // of an admin (folders, the trail)
	apiKey    string // an admin's API key (embed sessions: identity lookups)
}

// syncs starts a dbt sync of its own model to a branch of its own at every tick, half
// of them with output files; each accepted job goes into the ledger.
func (tn *tenant) syncs(l *ledger, n int) {
	output := "branch"
	if n%2 == 1 {
		output = "files"
	}
	model := "model_" + strconv.Itoa(n)
	branch := "ha/" + model
	r := tn.c.do("POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", tn.dep), tn.developer,
		map[string]any{"source": "manifest", "manifest": manifest(model), "branchName": branch, "output": output})
	id, _ := object(r)["syncJobId"].(string)
	if r.Status != 202 || id == "" {
		l.failed("dbt sync", time.Now(), r)
		return
	}
	l.mu.Lock()
	l.jobs[id] = syncJob{branch: branch, model: model, output: output}
	l.mu.Unlock()
	l.ok("dbt sync", time.Now())
}

// folders creates a folder: workspace-svc records workspace.folder.create.
func (tn *tenant) folders(l *ledger, n int) {
	r := tn.c.do("POST", fmt.Sprintf("/api/v1/deployments/%d/folders", tn.dep), tn.admin, map[string]any{"name": "ha-" + strconv.Itoa(n)})
	id, _ := object(r)["id"].(float64)
	if r.Status != 200 || id == 0 {
		l.failed("audited request", time.Now(), r)
		return
	}
	l.event("workspace.folder.create", r.Header.Get("X-Request-Id"), "audited request")
	l.ok("audited request", time.Now())
}

// sessions mints an embed session: embed-svc asks the gateway for the deployment over
// NATS (an identity lookup) and records embed.session.generate.
func (tn *tenant) sessions(l *ledger, n int) {
	r := tn.c.do("POST", "/api/v1/embed/generate-session", tn.apiKey,
		map[string]any{"deploymentId": tn.dep, "externalId": "ha-user-" + strconv.Itoa(n%20)})
	id, _ := object(r)["sessionId"].(string)
	if r.Status != 200 || id == "" {
		l.failed("identity lookup", time.Now(), r)
		return
	}
	l.event("embed.session.generate", r.Header.Get("X-Request-Id"), "identity lookup")
	l.ok("identity lookup", time.Now())
}

// run calls step with 0, 1, 2... every interval until stop closes.
func run(wg *sync.WaitGroup, stop <-chan struct{}, interval time.Duration, step func(n int)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			step(n)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
}

// waitFinished polls every accepted job until it ended and returns the jobs.
func (tn *tenant) waitFinished(t *testing.T, ids []string, within time.Duration) map[string]map[string]any {
	t.Helper()
	jobs := map[string]map[string]any{}
	apitest.Eventually(t, within, "every accepted sync job finished", func() (bool, string) {
		left, last := 0, ""
		for _, id := range ids {
			if j := jobs[id]; j != nil && (j["status"] == "succeeded" || j["status"] == "failed") {
				continue
			}
			r := tn.c.do("GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync/%s", tn.dep, id), tn.developer, nil)
			if r.Status == 200 {
				jobs[id] = object(r)
			}
			if s := jobs[id]["status"]; s != "succeeded" && s != "failed" {
				left++
				last = fmt.Sprintf("%s: %v", id, jobs[id])
			}
		}
		return left == 0, fmt.Sprintf("%d of %d jobs not finished (%s)", left, len(ids), last)
	})
	return jobs
}

// checkJob: the job succeeded, once: a branch job wrote exactly one version (its own) of
// a branch holding its model's cube; a files job returned its model's cube.
func (tn *tenant) checkJob(t *testing.T, id string, want syncJob, job map[string]any) {
	t.Helper()
	if job["status"] != "succeeded" || job["error"] != nil {
		t.Errorf("job %s (%s): want succeeded without error, got %v", id, want.branch, job)
		return
	}
	var files []any
	if want.output == "files" {
		files, _ = job["files"].([]any)
	} else {
		branch := fmt.Sprintf("/build/api/v1/deployments/%d/branches/%s", tn.dep, url.PathEscape(want.branch))
		r := tn.c.do("GET", branch+"/versions", tn.developer, nil)
		items, _ := object(r)["items"].([]any)
		if r.Status != 200 || len(items) != 1 {
			t.Errorf("branch %s: want exactly one version (its job's), got %s", want.branch, r)
			return
		}
		if v, _ := items[0].(map[string]any); v["syncJobId"] != id || v["version"] != float64(1) {
			t.Errorf("branch %s: want version 1 written by job %s, got %v", want.branch, id, v)
		}
		r = tn.c.do("GET", branch+"/files", tn.developer, nil)
		files, _ = object(r)["files"].([]any)
	}
	for _, f := range files {
		if p, _ := f.(map[string]any)["path"].(string); strings.Contains(p, want.model) {
			return
		}
	}
	t.Errorf("job %s (%s, output %s): no file of model %s among %v", id, want.branch, want.output, want.model, files)
}

// trail reads every event of action in the trail (as the admin) and counts them by
// the id of the request that recorded them.
func (tn *tenant) trail(t *testing.T, action string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	after := ""
	for {
		q := url.Values{"action": {action}, "first": {"200"}}
		if after != "" {
			q.Set("after", after)
		}
		r := tn.c.do("GET", "/api/v1/audit?"+q.Encode(), tn.admin, nil)
		if r.Status != 200 {
			t.Fatalf("the audit trail: %s", r)
		}
		body := object(r)
		items, _ := body["items"].([]any)
		for _, it := range items {
			ev, _ := it.(map[string]any)
			id, _ := ev["requestId"].(string)
			counts[id]++
		}
		info, _ := body["pageInfo"].(map[string]any)
		if next, _ := info["hasNextPage"].(bool); !next {
			return counts
		}
		after, _ = info["endCursor"].(string)
	}
}
