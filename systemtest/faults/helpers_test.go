package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// noRateLimits: these tests mint many sessions; the limits have their own suite.
var noRateLimits = []string{"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "RATE_LIMIT_PLAN_FREE=0", "RATE_LIMIT_PLAN_PREMIUM=0", "RATE_LIMIT_PLAN_ENTERPRISE=0"}

// requestTimeout is the client's patience: a fault must be answered, never hang. The
// services give up on MongoDB's replica set after 15 s of server selection (an
// election's length, mongox.ServerSelectionTimeout); above the gateway's
// UPSTREAM_TIMEOUT (30 s), a service too slow to answer shows as the gateway's 504.
const requestTimeout = 35 * time.Second

// reply is one answered (or unanswered) request.
type reply struct {
	status int
	body   map[string]any
	raw    string
	err    error // transport error: no answer within requestTimeout, refused, reset
}

// errorBody reports whether the reply carries the platform's error body
// {"status": <the HTTP status>, "message": "<non-empty>"}.
func (r reply) errorBody() bool {
	st, _ := r.body["status"].(float64)
	msg, _ := r.body["message"].(string)
	return int(st) == r.status && strings.TrimSpace(msg) != ""
}

func (r reply) String() string {
	if r.err != nil {
		return "no answer: " + r.err.Error()
	}
	raw := r.raw
	if len(raw) > 300 {
		raw = raw[:300] + "..."
	}
	return fmt.Sprintf("%d %s", r.status, raw)
}

// api talks to the stack's gateway as a client does.
type api struct{ c *apitest.Client }

func newAPI(s *stacktest.Stack) *api {
	c := apitest.New(s.Gateway)
	c.HTTP.Timeout = requestTimeout
	return &api{c: c}
}

// call sends body (JSON-encoded unless it is a []byte or string) with the Authorization
// header authz (empty: none). It never fails the test, so goroutines can use it; the
// transport error is in the reply.
func (a *api) call(method, path, authz string, body any) reply {
	r := a.c.Do(method, path, authz, body)
	out := reply{status: r.Status, raw: string(r.Body), err: r.Err}
	_ = json.Unmarshal(r.Body, &out.body)
	return out
}

func contextFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ---------------------------------------------------------------- workspace

// workspace drives one deployment's tree as one user.
type workspace struct {
	api   *api
	dep   int64
	authz string
}

func (w *workspace) path(rest string) string {
	return fmt.Sprintf("/api/v1/deployments/%d%s", w.dep, rest)
}

func (w *workspace) createFolder(name string, parent int64) reply {
	body := map[string]any{"name": name}
	if parent != 0 {
		body["parentId"] = parent
	}
	return w.api.call("POST", w.path("/folders"), w.authz, body)
}

func (w *workspace) createWorkbook(name string, folder int64) reply {
	body := map[string]any{"name": name}
	if folder != 0 {
		body["folderId"] = folder
	}
	return w.api.call("POST", w.path("/workbooks"), w.authz, body)
}

// move moves one item; dest 0 is the workspace root.
func (w *workspace) move(typ string, id, dest int64) reply {
	var folderID any
	if dest != 0 {
		folderID = dest
	}
	return w.api.call("POST", w.path("/workspace/move"), w.authz, map[string]any{"type": typ, "id": id, "folderId": folderID})
}

func (w *workspace) bulkMove(items []item, dest int64) reply {
	refs := make([]map[string]any, len(items))
	for i, it := range items {
		refs[i] = map[string]any{"type": it.typ, "id": it.id}
	}
	var folderID any
	if dest != 0 {
		folderID = dest
	}
	return w.api.call("POST", w.path("/workspace/bulk-move"), w.authz, map[string]any{"items": refs, "folderId": folderID})
}

// item is a workspace item by type and id.
type item struct {
	typ string
	id  int64
}

func (i item) String() string { return fmt.Sprintf("%s %d", i.typ, i.id) }

func idOf(t *testing.T, r reply) int64 {
	t.Helper()
	id, ok := r.body["id"].(float64)
	if r.status != 200 || !ok || id <= 0 {
		t.Fatalf("want 200 with an id, got %s", r)
	}
	return int64(id)
}

// placement is where an item was found in the tree: its parent (0 = root) and level
// (1 = directly under the root).
type placement struct {
	parent int64
	level  int
}

// tree walks the whole workspace from the root through the listing route and returns
// where every item is. It fails the test when an item is listed twice (the tree is not
// a tree) or a folder sits deeper than 8 levels; an item on a cycle is never reached
// from the root, so callers find it missing.
func (w *workspace) tree(t *testing.T) map[item]placement {
	t.Helper()
	found := map[item]placement{}
	type pending struct {
		folder int64
		level  int
	}
	queue := []pending{{0, 0}}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		after := ""
		for {
			q := url.Values{"first": {"200"}}
			if p.folder != 0 {
				q.Set("folderId", fmt.Sprint(p.folder))
			}
			if after != "" {
				q.Set("after", after)
			}
			r := w.api.call("GET", w.path("/workspace?"+q.Encode()), w.authz, nil)
			if r.status != 200 {
				t.Fatalf("list folder %d: %s", p.folder, r)
			}
			items, _ := r.body["items"].([]any)
			for _, raw := range items {
				m, _ := raw.(map[string]any)
				typ, _ := m["type"].(string)
				id, _ := m["id"].(float64)
				it := item{typ, int64(id)}
				if prev, dup := found[it]; dup {
					t.Fatalf("%s is listed twice: under folder %d and under folder %d", it, prev.parent, p.folder)
				}
				found[it] = placement{parent: p.folder, level: p.level + 1}
				if typ == "FOLDER" {
					if p.level+1 > 8 {
						t.Fatalf("folder %d is at level %d, deeper than the maximum of 8", it.id, p.level+1)
					}
					queue = append(queue, pending{it.id, p.level + 1})
				}
			}
			info, _ := r.body["pageInfo"].(map[string]any)
			if more, _ := info["hasNextPage"].(bool); !more {
				break
			}
			after, _ = info["endCursor"].(string)
		}
	}
	return found
}

// ---------------------------------------------------------------- embed

// mint asks for a session for an external user of acme's first deployment.
func mint(a *api, key string, dep int64, body map[string]any) reply {
	req := map[string]any{"deploymentId": dep}
	for k, v := range body {
		req[k] = v
	}
	return a.call("POST", "/api/v1/embed/generate-session", apitest.APIKey(key), req)
}

func sessionIDOf(t *testing.T, r reply) string {
	t.Helper()
	id, _ := r.body["sessionId"].(string)
	if r.status != 200 || id == "" {
		t.Fatalf("generate-session: want 200 with a sessionId, got %s", r)
	}
	return id
}

func exchange(a *api, sessionID string) reply {
	return a.call("POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": sessionID})
}

func tokenOf(t *testing.T, r reply) string {
	t.Helper()
	tok, _ := r.body["token"].(string)
	if r.status != 200 || tok == "" {
		t.Fatalf("exchange: want 200 with a token, got %s", r)
	}
	return tok
}

func revoke(a *api, key, sessionID string) reply {
	return a.call("POST", "/api/v1/embed/session/revoke", apitest.APIKey(key), map[string]any{"sessionId": sessionID})
}

func sessionInfo(a *api, token string) reply {
	return a.call("GET", "/api/v1/embed/session", apitest.Bearer(token), nil)
}

// ---------------------------------------------------------------- dbt sync

// manifest is the smallest dbt manifest the sync accepts: schema v12, one table model
// per name.
func manifest(models ...string) map[string]any {
	nodes := map[string]any{}
	for _, m := range models {
		nodes["model.faults."+m] = map[string]any{"resource_type": "model", "name": m, "alias": m, "database": "db", "schema": "s",
			"columns": map[string]any{"id": map[string]any{"name": "id", "data_type": "integer"}}, "config": map[string]any{"materialized": "table"}}
	}
	return map[string]any{"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"}, "nodes": nodes}
}

type dbtSync struct {
	api   *api
	dep   int64
	authz string
}

func (d *dbtSync) start(branch string, models ...string) reply {
	return d.api.call("POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", d.dep), d.authz,
		map[string]any{"source": "manifest", "manifest": manifest(models...), "branchName": branch})
}

func (d *dbtSync) job(id string) reply {
	return d.api.call("GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync/%s", d.dep, id), d.authz, nil)
}

func (d *dbtSync) versions(branch string) reply {
	return d.api.call("GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches/%s/versions", d.dep, url.PathEscape(branch)), d.authz, nil)
}

// waitFinished polls every job until it is succeeded or failed and returns the jobs.
func (d *dbtSync) waitFinished(t *testing.T, ids []string, timeout time.Duration) map[string]map[string]any {
	t.Helper()
	jobs := map[string]map[string]any{}
	apitest.Eventually(t, timeout, "every sync job finished", func() (bool, string) {
		for _, id := range ids {
			if j, ok := jobs[id]; ok && (j["status"] == "succeeded" || j["status"] == "failed") {
				continue
			}
			r := d.job(id)
			if r.status != 200 {
				return false, fmt.Sprintf("job %s: %s", id, r)
			}
			jobs[id] = r.body
			if s := r.body["status"]; s != "succeeded" && s != "failed" {
				return false, fmt.Sprintf("job %s: %s", id, r)
			}
		}
		return true, ""
	})
	return jobs
}

// checkOnceEach: every job succeeded and its branch holds exactly one version, written
// by that job (each job targets its own branch).
func (d *dbtSync) checkOnceEach(t *testing.T, jobBranch map[string]string, jobs map[string]map[string]any) {
	t.Helper()
	for id, branch := range jobBranch {
		if jobs[id]["status"] != "succeeded" || jobs[id]["error"] != nil {
			t.Errorf("job %s to branch %s: want succeeded without error, got %v", id, branch, jobs[id])
			continue
		}
		r := d.versions(branch)
		items, _ := r.body["items"].([]any)
		if r.status != 200 || len(items) != 1 {
			t.Errorf("branch %s: want exactly one version (one per job), got %s", branch, r)
			continue
		}
		v, _ := items[0].(map[string]any)
		if v["syncJobId"] != id || v["version"] != float64(1) {
			t.Errorf("branch %s: want version 1 written by job %s, got %v", branch, id, v)
		}
	}
}

// ---------------------------------------------------------------- MongoDB, white-box

// storeSnapshot reads every document of the named collections, for before/after
// comparisons of what a failed request left behind.
func storeSnapshot(t *testing.T, uri, db string, collections ...string) map[string][]string {
	t.Helper()
	ctx := contextFor(t, 30*time.Second)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	out := map[string][]string{}
	for _, c := range collections {
		cur, err := client.Database(db).Collection(c).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatalf("read %s.%s: %v", db, c, err)
		}
		// bson.D keeps the stored field order, so equal documents print equally.
		var docs []bson.D
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatalf("read %s.%s: %v", db, c, err)
		}
		out[c] = []string{}
		for _, d := range docs {
			raw, _ := bson.MarshalExtJSON(d, false, false)
			out[c] = append(out[c], string(raw))
		}
	}
	return out
}

// countDocs counts the documents of db.collection matching filter.
func countDocs(t *testing.T, uri, db, collection string, filter bson.D) int64 {
	t.Helper()
	ctx := contextFor(t, 30*time.Second)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	n, err := client.Database(db).Collection(collection).CountDocuments(ctx, filter)
	if err != nil {
		t.Fatalf("count %s.%s: %v", db, collection, err)
	}
	return n
}

func bsonFilter(field string, value any) bson.D { return bson.D{{Key: field, Value: value}} }

// newDocs lists the documents of after that are not in before (new or changed), and
// of before that are gone.
func newDocs(before, after []string) []string {
	had := map[string]int{}
	for _, d := range before {
		had[d]++
	}
	var out []string
	for _, d := range after {
		if had[d] > 0 {
			had[d]--
			continue
		}
		out = append(out, d)
	}
	for d, n := range had {
		for ; n > 0; n-- {
			out = append(out, "removed "+d)
		}
	}
	return out
}

// bulkOutcome splits a bulk move's answer into its moved and failed entries.
func bulkOutcome(r reply) (moved, failed []map[string]any) {
	return asList(r.body["moved"]), asList(r.body["failed"])
}

func asList(v any) []map[string]any {
	arr, _ := v.([]any)
	out := make([]map[string]any, 0, len(arr))
	for _, e := range arr {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
