package faults_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// stepdownWindow is how long the primary is gone: longer than a real election (an
// election timeout of 10 s and the vote), shorter than the services' server selection
// (15 s on a replica set), so a request waiting for the new primary is answered by it.
const stepdownWindow = 12 * time.Second

// stepdownPatience is the client's: above the gateway's UPSTREAM_TIMEOUT (30 s), so a
// request the gateway gives up on shows as its 504, not as the client's timeout.
const stepdownPatience = 40 * time.Second

// loadResult is one answered (or unanswered) request of the load.
type loadResult struct {
	route      string
	status     int
	retryAfter string
	took       time.Duration
	r          reply
}

// loadLog collects the load's answers.
type loadLog struct {
	mu      sync.Mutex
	results []loadResult
}

func (l *loadLog) add(route string, started time.Time, r apitest.Response) reply {
	out := reply{status: r.Status, raw: string(r.Body), err: r.Err}
	_ = json.Unmarshal(r.Body, &out.body)
	res := loadResult{route: route, status: r.Status, took: time.Since(started), r: out}
	if r.Header != nil {
		res.retryAfter = r.Header.Get("Retry-After")
	}
	l.mu.Lock()
	l.results = append(l.results, res)
	l.mu.Unlock()
	return out
}

// TestStepdownUnderLoad: every service under steady load (workspace folder creates,
// single and bulk moves and listings; embed mints and exchanges and group reads through
// API keys the gateway looks up again every second; dbt sync job creates and listings)
// while MongoDB's primary steps down for stepdownWindow, and then while retryable
// writes lose their replies after they applied. Nothing answers 500 or 504 and nothing
// goes unanswered; every other non-2xx is a 503 with Retry-After and the error body; a
// bulk move answers 200 with every failed item a 503 not_applied; every folder whose
// create was acknowledged exists exactly once afterwards, and none of the others twice.
func TestStepdownUnderLoad(t *testing.T) {
	testStarted := time.Now()
	s := stacktest.Start(t, stacktest.Options{Env: append([]string{"AUTH_CACHE_TTL=1s"}, noRateLimits...)})
	c := apitest.New(s.Gateway)
	c.HTTP.Timeout = stepdownPatience
	a := &api{c: c}
	acme := s.Seed.Accounts["acme"]
	dep := acme.Deployments[0].ID
	admin := apitest.Bearer(acme.Users["admin"].Bearer)
	developer := apitest.Bearer(acme.Users["developer"].Bearer)
	key := acme.APIKeys["admin"]
	ws := &workspace{api: a, dep: dep, authz: admin}

	// The creates go into a folder of their own, so the check lists only them.
	createsIn := idOf(t, ws.createFolder("stepdown-creates", 0))
	var dests []int64
	for i := range 3 {
		dests = append(dests, idOf(t, ws.createFolder(fmt.Sprintf("stepdown-dest-%d", i), 0)))
	}
	var singles, bulks []item
	for i := range 6 {
		singles = append(singles, item{"WORKBOOK", idOf(t, ws.createWorkbook(fmt.Sprintf("stepdown-single-%d", i), 0))})
		bulks = append(bulks, item{"WORKBOOK", idOf(t, ws.createWorkbook(fmt.Sprintf("stepdown-bulk-%d", i), 0))})
	}

	log := &loadLog{}
	var (
		createdMu sync.Mutex
		acked     = map[string]bool{} // folder names whose create answered 200
		unacked   = map[string]bool{} // whose create answered otherwise
	)
	do := func(route, method, path, authz string, body any) reply {
		started := time.Now()
		return log.add(route, started, a.c.Do(method, path, authz, body))
	}
	workers := map[string]func(n int){
		"create-folder": func(n int) {
			name := fmt.Sprintf("sd-%d", n)
			r := do("create-folder", "POST", ws.path("/folders"), admin, map[string]any{"name": name, "parentId": createsIn})
			createdMu.Lock()
			if r.err == nil && r.status == 200 {
				acked[name] = true
			} else {
				unacked[name] = true
			}
			createdMu.Unlock()
		},
		"create-folder-2": func(n int) {
			name := fmt.Sprintf("sd-b-%d", n)
			r := do("create-folder", "POST", ws.path("/folders"), admin, map[string]any{"name": name, "parentId": createsIn})
			createdMu.Lock()
			if r.err == nil && r.status == 200 {
				acked[name] = true
			} else {
				unacked[name] = true
			}
			createdMu.Unlock()
		},
		"move": func(n int) {
			it := singles[n%len(singles)]
			do("move", "POST", ws.path("/workspace/move"), admin, map[string]any{"type": it.typ, "id": it.id, "folderId": dests[n%len(dests)]})
		},
		"bulk-move": func(n int) {
			refs := make([]map[string]any, len(bulks))
			for i, it := range bulks {
				refs[i] = map[string]any{"type": it.typ, "id": it.id}
			}
			do("bulk-move", "POST", ws.path("/workspace/bulk-move"), admin, map[string]any{"items": refs, "folderId": dests[n%len(dests)]})
		},
		"list": func(int) {
			do("list", "GET", ws.path("/workspace?first=50"), admin, nil)
		},
		"mint-exchange": func(n int) {
			r := do("generate-session", "POST", "/api/v1/embed/generate-session", apitest.APIKey(key),
				map[string]any{"deploymentId": dep, "externalId": fmt.Sprintf("stepdown-viewer-%d", n%20)})
			if id, _ := r.body["sessionId"].(string); r.status == 200 && id != "" {
				do("exchange", "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": id})
			}
		},
		"groups-api-key": func(int) {
			do("groups-api-key", "GET", "/api/v1/groups", apitest.APIKey(key), nil)
		},
		"dbt-sync": func(n int) {
			if n%4 == 0 {
				do("dbt-sync-create", "POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), developer,
					map[string]any{"source": "manifest", "manifest": manifest("orders"), "branchName": fmt.Sprintf("stepdown/%d", n)})
				return
			}
			do("dbt-sync-list", "GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), developer, nil)
		},
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for name, work := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				work(n)
				if name == "dbt-sync" || name == "groups-api-key" {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}

	loadStarted := time.Now()
	t.Logf("the stack and the data took %s", loadStarted.Sub(testStarted).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	stepdownAt := time.Now()
	if err := s.Mongo.Stepdown(stepdownWindow); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stepdownWindow + 3*time.Second)
	// Then the failure retryable writes are for: writes that applied and lost their
	// reply, retried by the driver and answered from the proxy's record.
	if err := s.Mongo.LoseWriteReplies(25); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	loadTook := time.Since(loadStarted)

	// Every answer.
	type routeFigures struct {
		requests, ok, unavailable int
		longest                   time.Duration
	}
	figures := map[string]*routeFigures{}
	var longest loadResult
	for _, res := range log.results {
		f := figures[res.route]
		if f == nil {
			f = &routeFigures{}
			figures[res.route] = f
		}
		f.requests++
		f.longest = max(f.longest, res.took)
		if res.took > longest.took {
			longest = res
		}
		r := res.r
		switch {
		case r.err != nil:
			t.Errorf("%s: no answer after %s: %v", res.route, res.took.Round(time.Millisecond), r.err)
		case r.status >= 200 && r.status < 300:
			f.ok++
			if res.route == "bulk-move" {
				_, failed := bulkOutcome(r)
				for _, it := range failed {
					e, _ := it["error"].(map[string]any)
					if e["status"] != float64(503) || e["code"] != "not_applied" {
						t.Errorf("bulk-move: a failed item %v, want a 503 not_applied", it)
					}
				}
			}
		case r.status == 503 && res.retryAfter != "" && r.errorBody():
			f.unavailable++
		default:
			t.Errorf("%s: %s after %s (Retry-After %q); want 2xx, or 503 with Retry-After and the error body",
				res.route, r, res.took.Round(time.Millisecond), res.retryAfter)
		}
	}
	if longest.took >= 30*time.Second {
		t.Errorf("the longest request (%s) took %s: not under the gateway's UPSTREAM_TIMEOUT of 30 s", longest.route, longest.took)
	}
	for _, r := range slices.Sorted(maps.Keys(figures)) {
		f := figures[r]
		t.Logf("%-18s %4d requests, %4d 2xx, %3d 503, longest %s", r, f.requests, f.ok, f.unavailable, f.longest.Round(time.Millisecond))
		if f.ok == 0 {
			t.Errorf("%s: no request answered 2xx: the route was not loaded", r)
		}
	}
	for _, must := range []string{"create-folder", "move", "bulk-move", "list", "generate-session", "exchange", "groups-api-key", "dbt-sync-create", "dbt-sync-list"} {
		if figures[must] == nil {
			t.Errorf("no %s request was made", must)
		}
	}

	// Every acknowledged create exactly once, every other at most once.
	count := map[string]int{}
	after := ""
	for {
		q := url.Values{"first": {"200"}, "folderId": {fmt.Sprint(createsIn)}}
		if after != "" {
			q.Set("after", after)
		}
		r := a.call("GET", ws.path("/workspace?"+q.Encode()), admin, nil)
		if r.status != 200 {
			t.Fatalf("list the created folders: %s", r)
		}
		for _, raw := range asList(r.body["items"]) {
			name, _ := raw["name"].(string)
			count[name]++
		}
		info, _ := r.body["pageInfo"].(map[string]any)
		if more, _ := info["hasNextPage"].(bool); !more {
			break
		}
		after, _ = info["endCursor"].(string)
	}
	var missing, twice []string
	for name := range acked {
		if count[name] != 1 {
			missing = append(missing, fmt.Sprintf("%s ×%d", name, count[name]))
		}
	}
	for name, n := range count {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ×%d", name, n))
		}
		if !acked[name] && !unacked[name] {
			t.Errorf("folder %q exists and was never created", name)
		}
	}
	sort.Strings(missing)
	sort.Strings(twice)
	if len(missing) > 0 {
		t.Errorf("acknowledged creates not present exactly once: %s", strings.Join(missing, ", "))
	}
	if len(twice) > 0 {
		t.Errorf("folders present more than once: %s", strings.Join(twice, ", "))
	}
	landed := 0
	for name := range unacked {
		landed += count[name]
	}

	rs := s.Mongo.ReplicaSetCounts()
	t.Logf("load %s: %d requests; stepdown of %s at +%s; the longest request %s (%s)", loadTook.Round(time.Millisecond), len(log.results),
		stepdownWindow, stepdownAt.Sub(loadStarted).Round(time.Millisecond), longest.took.Round(time.Millisecond), longest.route)
	t.Logf("writes checked: %d acknowledged folder creates, each present once; %d not acknowledged, of which %d landed", len(acked), len(unacked), landed)
	t.Logf("replica set: %d commands refused during the stepdown, %d replies lost after the write applied, %d retries answered from the record",
		rs.Refused, rs.LostReplies, rs.Retries)
	if rs.Refused == 0 {
		t.Error("no command was refused during the stepdown: the load did not meet it")
	}
	// A write whose retry is also lost, or whose caller gave up, is not retried: the
	// count of retries may fall short of the replies lost, never to zero.
	if rs.LostReplies == 0 || rs.Retries == 0 {
		t.Errorf("replies lost %d, retries answered from the record %d: want lost replies and their writes retried", rs.LostReplies, rs.Retries)
	}
}
