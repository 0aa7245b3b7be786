package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/dbtsync-svc/client"
	"github.com/analyticsco/platform/dbtsync-svc/internal/app"
	"github.com/analyticsco/platform/dbtsync-svc/internal/credentials"
	"github.com/analyticsco/platform/dbtsync-svc/internal/gitsource"
	jsqueue "github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker/workertest"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/gatewaytest"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
)

type harness struct {
	audit  *audit.Memory // what the API and the workers recorded
	t      *testing.T
	stack  *gatewaytest.Stack
	api    *apitest.Client // the gateway's
	nats   *devstack.NATS
	deps   app.Deps
	dep    int64
	prod   string
	admin  string
	dev    string
	viewer string
}

func credentialsKey() string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
}

// resealRead is step 2 of a DBT_CREDENTIALS_KEY rotation, allowed: once per start, in
// the background, it must look at every saved credential (one per deployment that saved
// one: ids and credentials only, in batches of 200) to find those sealed under an older key.
var resealRead = mongoplan.Allowance{Func: "mongostore.(*Store).ResealCredentials", Collection: "dbt_git_integrations",
	Reason: "a key rotation's re-seal reads every saved credential once per start, in the background"}

func newHarness(t *testing.T) *harness { t.Helper(); return newHarnessWith(t, nil) }

// newHarnessWith is newHarness with deps adjusted by tune before the API starts.
func newHarnessWith(t *testing.T, tune func(*app.Deps)) *harness {
	t.Helper()
	mongo := devstack.MongoForTest(t)
	ns := devstack.NATSForTest(t)
	plan := mongoplan.NewRecorder() // every query of the API, checked once it has stopped
	client, err := mongox.ConnectWith(context.Background(), mongo.URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	database := devstack.UniqueName(t, "dbtsync")
	t.Cleanup(func() {
		plan.Await("ResealCredentials", 10*time.Second) // sent in the background at start
		plan.Check(t, client.Database(database), resealRead)
		plan.CheckAllowancesUsed(t, resealRead)
	})
	nc, err := nats.Connect(ns.URL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	key := gatewaytest.NewSigningKey()
	signer, err := identity.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	rec := &audit.Memory{Service: "dbtsync-svc"}
	deps := app.Deps{Audit: rec, Mongo: client.Database(database), NATS: nc, Signer: signer, CredentialsKey: credentialsKey(),
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		Git: gitsource.Limits{Policy: gitsource.Policy{AllowFile: true, AllowedHosts: []string{"127.0.0.1"},
			// example.test stands for a public git host; nothing dials it. Its address is a
			// public one: the documentation ranges (203.0.113.0/24 and the like) are
			// reserved, and the outbound-address check refuses them.
			Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
				if host == "example.test" {
					return []netip.Addr{netip.MustParseAddr("140.82.112.3")}, nil
				}
				return net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
			}}}}
	if tune != nil {
		tune(&deps)
	}
	api, err := app.NewAPI(context.Background(), deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	// Served as main serves it (server spans, request ids), so traces start where they do in production.
	srv := httptest.NewServer(api.Handler)
	t.Cleanup(srv.Close)
	stack := gatewaytest.Start(t, gatewaytest.Options{MongoURI: mongo.URI, Upstreams: map[string]string{"dbtsync-svc": srv.URL}, SigningKey: key})
	acme := stack.Seed.Accounts["acme"]
	return &harness{audit: rec, t: t, stack: stack, api: apitest.New(stack.URL), nats: ns, deps: deps, dep: acme.Deployments[0].ID, prod: acme.Deployments[0].ProductionBranch,
		admin: acme.Users["admin"].Bearer, dev: acme.Users["developer"].Bearer, viewer: acme.Users["viewer"].Bearer}
}

// worker starts an in-process worker (as `dbtsync-svc worker` builds it) until stop is called.
func (h *harness) worker(opts worker.Options) (stop func()) {
	h.t.Helper()
	if opts.AckWait == 0 {
		opts.AckWait = 2 * time.Second
	}
	if opts.BlockedDelay == 0 {
		opts.BlockedDelay = 100 * time.Millisecond
	}
	if opts.Backoff == nil {
		opts.Backoff = func(int) time.Duration { return 50 * time.Millisecond }
	}
	deps := h.deps
	deps.Registry = prometheus.NewRegistry()
	w, err := app.NewWorker(context.Background(), deps, opts, h.t.TempDir())
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	h.t.Cleanup(stop)
	return stop
}

// do sends a request through the gateway with devstack/apitest, the one HTTP client of
// the tests, and returns its status and JSON object body (nil when it has none).
func (h *harness) do(method, path, token string, body any) (int, map[string]any) {
	h.t.Helper()
	r := h.api.Call(h.t, method, path, apitest.Bearer(token), body)
	var out map[string]any
	_ = json.Unmarshal(r.Body, &out)
	return r.Status, out
}

func (h *harness) syncPath() string { return fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", h.dep) }
func (h *harness) buildPath(rest string) string {
	return fmt.Sprintf("/build/api/v1/deployments/%d/branches%s", h.dep, rest)
}

func fixture(t *testing.T, name string) map[string]any {
	t.Helper()
	path := filepath.Join(devstack.RepoRoot(t), "..", "shared", "fixtures", "dbt", name)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("dbt fixture missing (clone ../shared beside the repository): %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func smallManifest(version string, models ...string) map[string]any {
	nodes := map[string]any{}
	for _, m := range models {
		nodes["model.p."+m] = map[string]any{"resource_type": "model", "name": m, "alias": m, "database": "db", "schema": "s",
			"columns": map[string]any{"id": map[string]any{"name": "id", "data_type": "integer"}}, "config": map[string]any{"materialized": "table"}}
	}
	return map[string]any{"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/" + version + ".json"}, "nodes": nodes}
}

// waitJob polls the job until it is finished.
func (h *harness) waitJob(id string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, job := h.do("GET", h.syncPath()+"/"+id, h.dev, nil)
		if code != 200 {
			h.t.Fatalf("get job: %d %v", code, job)
		}
		if s := job["status"]; s == "succeeded" || s == "failed" || s == "canceled" {
			return job
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("job %s did not finish: %v", id, job)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStartSyncValidation(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name   string
		token  string
		body   any
		status int
		msg    string
	}{
		{"dbt-sync-400-manifest-source-without-manifest", h.dev, map[string]any{"source": "manifest"}, 400, `"manifest" is required`},
		{"dbt-sync-400-unsupported-version", h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v6", "a")}, 400, "v6"},
		{"dbt-sync-400-v13", h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v13", "a")}, 400, "v13"},
		{"dbt-sync-400-no-schema-version", h.dev, map[string]any{"source": "manifest", "manifest": map[string]any{"nodes": map[string]any{}}}, 400, "dbt_schema_version"},
		// A hex-only ref is not refused for its shape: here the missing integration is.
		{"dbt-sync-400-hex-ref-needs-the-repository", h.dev, map[string]any{"ref": strings.Repeat("a1", 20)}, 400, "dbt git integration"},
		{"dbt-sync-400-git-without-integration", h.dev, map[string]any{"source": "git"}, 400, "dbt git integration"},
		{"dbt-sync-400-git-default-without-integration", h.dev, map[string]any{}, 400, "dbt git integration"},
		{"dbt-sync-400-unknown-field", h.dev, map[string]any{"source": "manifest", "bogus": 1}, 400, `unknown field "bogus"`},
		{"dbt-sync-400-source-wrong-type", h.dev, map[string]any{"source": 3}, 400, `"source" must be a string`},
		{"dbt-sync-400-source-bad-enum", h.dev, map[string]any{"source": "svn"}, 400, `"source"`},
		{"dbt-sync-400-output-bad-enum", h.dev, map[string]any{"output": "zip"}, 400, `"output"`},
		{"dbt-sync-400-manifest-wrong-type", h.dev, map[string]any{"source": "manifest", "manifest": "x"}, 400, `"manifest" must be an object`},
		{"dbt-sync-400-branch-name-wrong-type", h.dev, map[string]any{"branchName": true}, 400, `"branchName" must be a string`},
		{"dbt-sync-400-branch-name-invalid", h.dev, map[string]any{"branchName": "../x"}, 400, `"branchName"`},
		{"dbt-sync-400-malformed", h.dev, `{"source": `, 400, "malformed JSON"},
		{"dbt-sync-400-trailing", h.dev, `{} {}`, 400, "single JSON object"},
		{"dbt-sync-400-not-object", h.dev, `[1]`, 400, "JSON object"},
		{"dbt-sync-403-viewer", h.viewer, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a")}, 403, "developer"},
		{"dbt-sync-403-production-branch-developer", h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "main"}, 403, "production"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := h.do("POST", h.syncPath(), tc.token, tc.body)
			if code != tc.status || !strings.Contains(fmt.Sprint(body["message"]), tc.msg) {
				t.Errorf("got %d %v, want %d with %q", code, body, tc.status, tc.msg)
			}
		})
	}
	// Nothing was queued by any rejected request.
	code, list := h.do("GET", h.syncPath(), h.dev, nil)
	if code != 200 || len(list["items"].([]any)) != 0 {
		t.Errorf("rejected requests left jobs: %d %v", code, list)
	}
}

func TestManifestSyncWritesBranchAndServesIt(t *testing.T) {
	h := newHarness(t)
	h.worker(worker.Options{})
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": fixture(t, "manifest-v12-dbt-1.10.json"), "ref": "feature-x"})
	if code != 202 {
		t.Fatalf("start: %d %v", code, acc)
	}
	if acc["branchName"] != "dbt/feature-x" || acc["syncJobId"] == "" || acc["workflowId"] == "" {
		t.Fatalf("accepted body: %v", acc)
	}
	job := h.waitJob(acc["syncJobId"].(string))
	if job["status"] != "succeeded" || job["error"] != nil {
		t.Fatalf("job: %v", job)
	}
	if p := job["progress"].(map[string]any); p["modelsTotal"].(float64) != 13 || p["modelsDone"].(float64) != 13 {
		t.Errorf("progress: %v", p)
	}
	if len(job["warnings"].([]any)) == 0 {
		t.Error("no warnings for the renamed measures")
	}
	branch := url.PathEscape("dbt/feature-x")
	code, files := h.do("GET", h.buildPath("/"+branch+"/files"), h.dev, nil)
	if code != 200 || files["version"].(float64) != 1 || len(files["files"].([]any)) != 16 { // 13 cubes, 3 views of saved queries
		t.Fatalf("files: %d %v", code, files)
	}
	code, file := h.do("GET", h.buildPath("/"+branch+"/files/model/cubes/orders.yml"), h.dev, nil)
	if code != 200 || !strings.Contains(file["content"].(string), "name: food_orders") {
		t.Fatalf("file: %d %v", code, file)
	}
	code, _ = h.do("GET", h.buildPath("/"+branch+"/files/model/../x.yml"), h.dev, nil)
	if code != 400 && code != 404 {
		t.Errorf("dot-dot path: %d", code)
	}
	// Branch served state and the resolver for embed-svc.
	resolve := func(name string) client.ResolveReply {
		b, _ := json.Marshal(client.ResolveRequest{DeploymentID: h.dep, BranchName: name, ProductionBranch: h.prod})
		msg, err := h.deps.NATS.Request(client.ResolveSubject, b, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r client.ResolveReply
		_ = json.Unmarshal(msg.Data, &r)
		return r
	}
	if r := resolve("dbt/feature-x"); !r.Exists || r.Served || r.Production {
		t.Errorf("resolve before open: %+v", r)
	}
	if r := resolve(h.prod); !r.Exists || !r.Served || !r.Production {
		t.Errorf("resolve production: %+v", r)
	}
	if r := resolve("nope"); r.Exists {
		t.Errorf("resolve unknown: %+v", r)
	}
	code, b := h.do("POST", h.buildPath("/"+branch+"/open"), h.dev, nil)
	if code != 200 || b["served"] != true || b["leaseExpiresAt"] == nil {
		t.Fatalf("open: %d %v", code, b)
	}
	if r := resolve("dbt/feature-x"); !r.Served {
		t.Errorf("resolve after open: %+v", r)
	}
	code, b = h.do("PUT", h.buildPath("/"+branch+"/staging"), h.dev, map[string]any{"enabled": true})
	if code != 200 || b["stagingEnabled"] != true {
		t.Fatalf("staging: %d %v", code, b)
	}
	code, _ = h.do("PUT", h.buildPath("/main/staging"), h.dev, map[string]any{"enabled": true})
	if code != 400 {
		t.Errorf("staging on production: %d", code)
	}
	code, _ = h.do("POST", h.buildPath("/nope/open"), h.dev, nil)
	if code != 404 {
		t.Errorf("open unknown: %d", code)
	}
	code, list := h.do("GET", h.buildPath(""), h.dev, nil)
	items := list["items"].([]any)
	if code != 200 || len(items) != 2 || items[0].(map[string]any)["name"] != "main" || items[1].(map[string]any)["name"] != "dbt/feature-x" {
		t.Errorf("branches: %d %v", code, list)
	}
	// Another account's deployment is 404.
	globex := h.stack.Seed.Accounts["globex"]
	code, _ = h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync/%s", globex.Deployments[0].ID, acc["syncJobId"]), h.dev, nil)
	if code != 404 {
		t.Errorf("other account's deployment: %d", code)
	}
	// A resync of the same input is deterministic: byte-identical files, so no version 2.
	code, acc2 := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": fixture(t, "manifest-v12-dbt-1.10.json"), "ref": "feature-x"})
	if code != 202 {
		t.Fatal(code)
	}
	if job := h.waitJob(acc2["syncJobId"].(string)); job["status"] != "succeeded" || job["changed"] != false {
		t.Errorf("identical resync: %v", job)
	}
	_, files2 := h.do("GET", h.buildPath("/"+branch+"/files"), h.dev, nil)
	if files2["version"].(float64) != 1 {
		t.Errorf("identical resync wrote version %v", files2["version"])
	}
}

func TestOutputFilesAndFailedJob(t *testing.T) {
	h := newHarness(t)
	h.worker(worker.Options{})
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v7", "a", "b"), "output": "files"})
	if code != 202 {
		t.Fatal(code, acc)
	}
	job := h.waitJob(acc["syncJobId"].(string))
	files, _ := job["files"].([]any)
	if job["status"] != "succeeded" || len(files) != 2 || files[0].(map[string]any)["path"] != "model/cubes/a.yml" {
		t.Fatalf("files job: %v", job)
	}
	if code, _ := h.do("GET", h.buildPath("/dbt%2Fmanifest"), h.dev, nil); code != 404 {
		t.Errorf("output files created a branch: %d", code)
	}
	code, acc = h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": map[string]any{"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"}}})
	if code != 202 {
		t.Fatal(code, acc)
	}
	job = h.waitJob(acc["syncJobId"].(string))
	if job["status"] != "failed" || !strings.Contains(fmt.Sprint(job["error"]), "no nodes") {
		t.Fatalf("no-nodes job: %v", job)
	}
}

func TestWorkerKilledMidJobFinishesOnce(t *testing.T) {
	h := newHarness(t)
	reached := make(chan struct{})
	var once sync.Once
	stop := h.worker(worker.Options{Phase: func(ctx context.Context, id, phase string) {
		if phase == "committed" {
			once.Do(func() { close(reached) })
			<-ctx.Done() // killed right after writing the version, before recording success
		}
	}})
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "kill"})
	if code != 202 {
		t.Fatal(code)
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatal("worker never reached the commit")
	}
	stop()
	h.worker(worker.Options{})
	job := h.waitJob(acc["syncJobId"].(string))
	if job["status"] != "succeeded" {
		t.Fatalf("job: %v", job)
	}
	_, vs := h.do("GET", h.buildPath("/kill/versions"), h.dev, nil)
	if items := vs["items"].([]any); len(items) != 1 {
		t.Errorf("versions after redelivery = %v, want exactly one", vs)
	}
}

func TestTwoSyncsToOneBranchAreSerialized(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	waiting := make(chan string, 100)
	var first string
	var mu sync.Mutex
	h.worker(worker.Options{Concurrency: 4, Phase: func(ctx context.Context, id, phase string) {
		mu.Lock()
		f := first
		mu.Unlock()
		switch {
		case phase == "converting" && id == f:
			<-release
		case phase == "waiting":
			waiting <- id
		}
	}})
	_, a1 := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "serial"})
	mu.Lock()
	first = a1["syncJobId"].(string)
	mu.Unlock()
	_, a2 := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a", "b"), "branchName": "serial"})
	second := a2["syncJobId"].(string)
	deadline := time.After(60 * time.Second)
	for got := ""; got != second; {
		select {
		case got = <-waiting:
		case <-deadline:
			t.Fatal("second job never waited")
		}
	}
	if _, j2 := h.do("GET", h.syncPath()+"/"+second, h.dev, nil); j2["status"] != "queued" {
		t.Errorf("second job ran while the first held the branch: %v", j2)
	}
	close(release)
	j1, j2 := h.waitJob(first), h.waitJob(second)
	if j1["status"] != "succeeded" || j2["status"] != "succeeded" {
		t.Fatalf("jobs: %v %v", j1, j2)
	}
	t1, _ := time.Parse(time.RFC3339Nano, j1["finishedAt"].(string))
	t2, _ := time.Parse(time.RFC3339Nano, j2["startedAt"].(string))
	if t2.Before(t1) {
		t.Errorf("second started %v before the first finished %v", t2, t1)
	}
	_, vs := h.do("GET", h.buildPath("/serial/versions"), h.dev, nil)
	items := vs["items"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["syncJobId"] != second || items[1].(map[string]any)["syncJobId"] != first {
		t.Errorf("versions: %v", vs)
	}
}

func TestQueueSurvivesNATSRestart(t *testing.T) {
	h := newHarness(t)
	var ids []string
	for i := 0; i < 3; i++ {
		code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": fmt.Sprintf("restart-%d", i)})
		if code != 202 {
			t.Fatal(code, acc)
		}
		ids = append(ids, acc["syncJobId"].(string))
	}
	if err := h.nats.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.worker(worker.Options{})
	for _, id := range ids {
		if job := h.waitJob(id); job["status"] != "succeeded" {
			t.Errorf("job %s: %v", id, job)
		}
	}
}

func TestGitIntegration(t *testing.T) {
	h := newHarness(t)
	p := fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", h.dep)
	if code, _ := h.do("GET", p, h.admin, nil); code != 404 {
		t.Errorf("get before put: %d", code)
	}
	body := map[string]any{"repoUrl": "https://example.test/repo.git", "branch": "main", "projectPath": ".", "credentials": map[string]any{"token": "s3cret-token"}}
	if code, _ := h.do("PUT", p, h.dev, body); code != 403 {
		t.Errorf("developer put: %d", code)
	}
	for name, bad := range map[string]any{
		"integration-400-missing-repo":   map[string]any{"branch": "main", "projectPath": "."},
		"integration-400-ssh-url":        map[string]any{"repoUrl": "git@x:y.git", "branch": "main", "projectPath": "."},
		"integration-400-url-with-token": map[string]any{"repoUrl": "https://tok@example.test/r.git", "branch": "main", "projectPath": "."},
		"integration-400-unknown-field":  map[string]any{"repoUrl": "https://example.test/r.git", "branch": "main", "projectPath": ".", "x": 1},
		"integration-400-empty-token":    map[string]any{"repoUrl": "https://example.test/r.git", "branch": "main", "projectPath": ".", "credentials": map[string]any{"token": ""}},
	} {
		if code, _ := h.do("PUT", p, h.admin, bad); code != 400 {
			t.Errorf("%s: %d", name, code)
		}
	}
	code, got := h.do("PUT", p, h.admin, body)
	if code != 200 || got["hasCredentials"] != true || strings.Contains(fmt.Sprint(got), "s3cret") {
		t.Fatalf("put: %d %v", code, got)
	}
	code, got = h.do("GET", p, h.admin, nil)
	if code != 200 || got["repoUrl"] != "https://example.test/repo.git" || strings.Contains(fmt.Sprint(got), "s3cret") {
		t.Fatalf("get: %d %v", code, got)
	}
	raw, err := h.deps.Mongo.Collection("dbt_git_integrations").FindOne(context.Background(), map[string]any{}).Raw()
	if err != nil || bytes.Contains(raw, []byte("s3cret")) {
		t.Errorf("credentials stored in clear (err %v)", err)
	}
}

// A job whose input takes its worker down (here: the worker is stopped whenever it
// converts that job) was redelivered for ever, and each crash counted against the jobs
// beside it too, which ended failed although they were sound. The first crash counts
// against nobody; from then on the job runs alone on its worker, so each crash is pinned
// on it: it fails after MaxAttempts runs alone, saying so, while the job that ran beside
// it succeeds with that run not counted, and other jobs keep flowing.
func TestJobThatKillsItsWorkerRunsAloneAndItsNeighbourSucceeds(t *testing.T) {
	h := newHarness(t)
	const maxAttempts = 2
	poison, innocent := h.start("poison", "a"), h.start("innocent", "b")
	crash := workertest.NewCrash(poison, innocent)
	opts := worker.Options{Concurrency: 2, MaxAttempts: maxAttempts, AckWait: time.Second, Phase: crash.Phase}
	crash.Rounds(t, maxAttempts, func() func() { return h.worker(opts) }, func() bool {
		_, job := h.do("GET", h.syncPath()+"/"+poison, h.dev, nil)
		return job["status"] == "failed"
	})
	if job := h.waitJob(innocent); job["status"] != "succeeded" || job["attempts"] != float64(1) {
		t.Errorf("the job beside the poisoned one: %v, want succeeded with 1 attempt", job)
	}
	job := h.waitJob(poison)
	if job["status"] != "failed" || job["attempts"] != float64(maxAttempts) || job["errorCode"] != "worker_stopped" || !strings.Contains(fmt.Sprint(job["error"]), "stopped each time") {
		t.Fatalf("job = %v, want failed after %d interrupted runs alone, saying so", job, maxAttempts)
	}
	if job := h.waitJob(h.start("healthy", "c")); job["status"] != "succeeded" {
		t.Fatalf("another job after the poisoned one: %v", job)
	}
}

// start queues a manifest sync of one model into branch and returns its job id.
func (h *harness) start(branch, model string) string {
	h.t.Helper()
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", model), "branchName": branch})
	if code != 202 {
		h.t.Fatal(code, acc)
	}
	return acc["syncJobId"].(string)
}

// One deployment's uploads must not fill the object store every tenant shares. The
// manifests of a deployment waiting to be converted are bounded: an upload past
// DBT_SYNC_MAX_DEPLOYMENT_UPLOAD_BYTES is 413 naming the limit and its value (never the
// setting), and queues nothing.
func TestManifestUploadsPerDeploymentAreBounded(t *testing.T) {
	small, _ := json.Marshal(smallManifest("v12", "a"))
	h := newHarnessWith(t, func(d *app.Deps) { d.Quotas.Deployment = int64(len(small))*2 + 100 })
	for i := 0; i < 2; i++ { // no worker runs: the manifests wait in the store
		if code, body := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": fmt.Sprintf("q%d", i)}); code != 202 {
			t.Fatalf("upload %d: %d %v", i+1, code, body)
		}
	}
	code, body := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "q3"})
	if msg := fmt.Sprint(body["message"]); code != 413 || !strings.Contains(msg, fmt.Sprintf("would pass its limit of %d bytes", len(small)*2+100)) || strings.Contains(msg, "DBT_SYNC_") {
		t.Fatalf("third upload: want 413 naming the limit, got %d %v", code, body)
	}
	_, jobs := h.do("GET", h.syncPath()+"?first=10", h.dev, nil)
	items, _ := jobs["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("jobs after the refused upload: %v, want the two accepted", jobs)
	}
	// Converted, the manifests are removed and their charges freed: the quota has room again.
	h.worker(worker.Options{})
	for _, it := range items {
		if job := h.waitJob(it.(map[string]any)["syncJobId"].(string)); job["status"] != "succeeded" {
			t.Fatalf("job %v", job)
		}
	}
	if code, body := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "q3"}); code != 202 {
		t.Errorf("an upload once the others were converted: %d %v", code, body)
	}
}

// DBT_CREDENTIALS_KEY rotates without downtime: with the new key listed first, an API
// start re-seals saved credentials under it, and a process holding only the new key
// opens them afterwards.
func TestCredentialsKeyRotation(t *testing.T) {
	h := newHarness(t)
	p := fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", h.dep)
	body := map[string]any{"repoUrl": "https://example.test/repo.git", "branch": "main", "projectPath": ".", "credentials": map[string]any{"token": "s3cret-token"}}
	if code, got := h.do("PUT", p, h.admin, body); code != 200 {
		t.Fatalf("put: %d %v", code, got)
	}
	stored := func() []byte {
		var d struct {
			Credentials []byte `bson:"credentials"`
		}
		if err := h.deps.Mongo.Collection("dbt_git_integrations").FindOne(context.Background(), bson.D{{Key: "_id", Value: h.dep}}).Decode(&d); err != nil {
			t.Fatal(err)
		}
		return d.Credentials
	}
	newKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	onlyNew, err := credentials.NewSealer(newKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onlyNew.Open(stored(), h.dep); err == nil {
		t.Fatal("the new key opened credentials sealed before it existed")
	}
	deps := h.deps
	deps.CredentialsKey = newKey + "," + credentialsKey()
	deps.Registry = prometheus.NewRegistry()
	api, err := app.NewAPI(context.Background(), deps)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		plain, err := onlyNew.Open(stored(), h.dep)
		if err == nil {
			if !strings.Contains(string(plain), "s3cret-token") {
				t.Fatalf("re-sealed credentials: %s", plain)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("credentials were not re-sealed under the new first key")
		}
		time.Sleep(50 * time.Millisecond)
	}
	onlyOld, _ := credentials.NewSealer(credentialsKey())
	if _, err := onlyOld.Open(stored(), h.dep); err == nil {
		t.Fatal("the old key still opens the re-sealed credentials")
	}
	// Another deployment's id does not open them (the id is authenticated data).
	if _, err := onlyNew.Open(stored(), h.dep+1); err == nil {
		t.Fatal("credentials opened for another deployment")
	}
}

// Re-syncing a byte-identical output writes no new version: the job succeeds with
// "changed": false and the branch keeps its latest version; a different output is a new
// version with "changed": true. Files output has no "changed".
func TestIdenticalResyncWritesNoVersion(t *testing.T) {
	h := newHarness(t)
	h.worker(worker.Options{})
	branch := "dbt/same"
	sync := func(models ...string) map[string]any {
		t.Helper()
		code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", models...), "branchName": branch})
		if code != 202 {
			t.Fatalf("start: %d %v", code, acc)
		}
		job := h.waitJob(acc["syncJobId"].(string))
		if job["status"] != "succeeded" {
			t.Fatalf("job: %v", job)
		}
		return job
	}
	versions := func() int {
		code, body := h.do("GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches/%s/versions", h.dep, url.PathEscape(branch)), h.dev, nil)
		if code != 200 {
			t.Fatalf("versions: %d %v", code, body)
		}
		return len(body["items"].([]any))
	}
	if job := sync("a", "b"); job["changed"] != true {
		t.Fatalf("first sync changed = %v, want true", job["changed"])
	}
	if job := sync("a", "b"); job["changed"] != false {
		t.Fatalf("identical re-sync changed = %v, want false", job["changed"])
	}
	if n := versions(); n != 1 {
		t.Fatalf("%d versions after an identical re-sync, want 1", n)
	}
	if job := sync("a", "c"); job["changed"] != true {
		t.Fatalf("different sync changed = %v, want true", job["changed"])
	}
	if n := versions(); n != 2 {
		t.Fatalf("%d versions, want 2", n)
	}
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "output": "files"})
	if code != 202 {
		t.Fatal(code, acc)
	}
	if job := h.waitJob(acc["syncJobId"].(string)); job["changed"] != nil {
		t.Fatalf("files output changed = %v, want null", job["changed"])
	}
}

// Jobs can be canceled (a queued one never runs, a running one stops before its next
// model) and retried (a new job from the same input).
func TestCancelAndRetry(t *testing.T) {
	h := newHarness(t)
	start := func(body map[string]any) string {
		t.Helper()
		code, acc := h.do("POST", h.syncPath(), h.dev, body)
		if code != 202 {
			t.Fatalf("start: %d %v", code, acc)
		}
		return acc["syncJobId"].(string)
	}
	manifestBody := func(branch string, models ...string) map[string]any {
		return map[string]any{"source": "manifest", "manifest": smallManifest("v12", models...), "branchName": branch}
	}
	// Queued (no worker yet): canceled at once; the same branch's next job is not held up.
	queued := start(manifestBody("dbt/cancel", "a"))
	next := start(manifestBody("dbt/cancel", "b"))
	code, job := h.do("POST", h.syncPath()+"/"+queued+"/cancel", h.dev, nil)
	if code != 200 || job["status"] != "canceled" || job["finishedAt"] == nil {
		t.Fatalf("cancel queued: %d %v", code, job)
	}
	if code, body := h.do("POST", h.syncPath()+"/"+next+"/retry", h.dev, nil); code != 409 || !strings.Contains(fmt.Sprint(body["message"]), "still queued") {
		t.Fatalf("retry of a queued job: %d %v", code, body)
	}
	// Running: the Phase hook cancels it while it converts, and it ends canceled. The hook
	// is armed before the job starts (the worker may reach the phase before start returns),
	// once the jobs before it are done, so the job it cancels is that one.
	var armed atomic.Bool
	var canceled atomic.Value
	canceled.Store("")
	h.worker(worker.Options{Phase: func(ctx context.Context, id, phase string) {
		if phase != "converting" || !armed.Load() {
			return
		}
		canceled.Store(id)
		if code, job := h.do("POST", h.syncPath()+"/"+id+"/cancel", h.dev, nil); code != 200 || job["cancelRequested"] != true || job["status"] != "running" {
			t.Errorf("cancel running: %d %v", code, job)
		}
		select { // the worker's watch ends the run's context
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("the running job's context did not end after the cancel")
		}
	}})
	if job := h.waitJob(queued); job["status"] != "canceled" || job["attempts"] != float64(0) {
		t.Fatalf("canceled job after a worker started: %v", job)
	}
	if job := h.waitJob(next); job["status"] != "succeeded" {
		t.Fatalf("the next job of the branch: %v", job)
	}
	armed.Store(true)
	runningID := start(manifestBody("dbt/cancel-running", "c"))
	job = h.waitJob(runningID)
	if job["status"] != "canceled" || job["cancelRequested"] != false || canceled.Load() != runningID {
		t.Fatalf("job canceled while running (the hook canceled %q): %v", canceled.Load(), job)
	}
	armed.Store(false)
	if code, body := h.do("GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches/%s", h.dep, url.PathEscape("dbt/cancel-running")), h.dev, nil); code != 404 {
		t.Fatalf("a canceled run wrote its branch: %d %v", code, body)
	}
	if code, body := h.do("POST", h.syncPath()+"/"+runningID+"/cancel", h.dev, nil); code != 409 || !strings.Contains(fmt.Sprint(body["message"]), "already canceled") {
		t.Fatalf("cancel of a canceled job: %d %v", code, body)
	}
	// Retry of the canceled job reuses its kept manifest and succeeds.
	code, acc := h.do("POST", h.syncPath()+"/"+runningID+"/retry", h.dev, nil)
	if code != 202 || acc["branchName"] != "dbt/cancel-running" || acc["syncJobId"] == runningID {
		t.Fatalf("retry: %d %v", code, acc)
	}
	retried := h.waitJob(acc["syncJobId"].(string))
	if retried["status"] != "succeeded" || retried["retryOf"] != runningID || retried["changed"] != true {
		t.Fatalf("retried job: %v", retried)
	}
	// A succeeded manifest job's upload is gone: 409 naming why.
	if code, body := h.do("POST", h.syncPath()+"/"+next+"/retry", h.dev, nil); code != 409 || !strings.Contains(fmt.Sprint(body["message"]), "no longer stored") {
		t.Fatalf("retry of a succeeded manifest job: %d %v", code, body)
	}
	// A failed job retried fails the same way; viewers and other ids are refused.
	failed := start(map[string]any{"source": "manifest", "manifest": map[string]any{"metadata": smallManifest("v12")["metadata"]}, "output": "files"})
	if job := h.waitJob(failed); job["status"] != "failed" {
		t.Fatalf("no-nodes job: %v", job)
	}
	code, acc = h.do("POST", h.syncPath()+"/"+failed+"/retry", h.dev, nil)
	if code != 202 {
		t.Fatalf("retry failed job: %d %v", code, acc)
	}
	if job := h.waitJob(acc["syncJobId"].(string)); job["status"] != "failed" || job["retryOf"] != failed {
		t.Fatalf("retry of the failed job: %v", job)
	}
	if code, _ := h.do("POST", h.syncPath()+"/"+failed+"/retry", h.viewer, nil); code != 403 {
		t.Fatalf("viewer retry: %d", code)
	}
	if code, _ := h.do("POST", h.syncPath()+"/sj0000000000000000000000000000/cancel", h.dev, nil); code != 404 {
		t.Fatalf("cancel of an unknown job: %d", code)
	}
}

// TestJobRecordsAndUploadsExpire: what sync jobs leave in JetStream is bounded
// by configuration: job records (and branch lines) by DBT_SYNC_JOB_RETENTION, uploaded
// manifests and results by DBT_SYNC_OBJECT_MAX_AGE and DBT_SYNC_OBJECT_MAX_BYTES.
func TestJobRecordsAndUploadsExpire(t *testing.T) {
	h := newHarnessWith(t, func(d *app.Deps) {
		d.Storage = jsqueue.Limits{JobRetention: 90 * time.Minute, ObjectMaxAge: 3 * time.Hour, ObjectMaxBytes: 512 << 20}
	})
	js, err := jetstream.New(h.deps.NATS)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, jsqueue.JobsKV)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil || st.TTL() != 90*time.Minute {
		t.Fatalf("job records bucket TTL = %v (%v), want 90m", st.TTL(), err)
	}
	obj, err := js.ObjectStore(ctx, jsqueue.ManifestStore)
	if err != nil {
		t.Fatal(err)
	}
	ost, err := obj.Status(ctx)
	if err != nil || ost.TTL() != 3*time.Hour {
		t.Fatalf("manifest store TTL = %v (%v), want 3h", ost.TTL(), err)
	}
	stream, err := js.Stream(ctx, "OBJ_"+jsqueue.ManifestStore)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(ctx); err != nil || info.Config.MaxBytes != 512<<20 {
		t.Fatalf("manifest store MaxBytes = %v (%v), want 512 MiB", info.Config.MaxBytes, err)
	}
}

// A known path asked with a method it does not serve is 405 naming the methods it does
// (Allow), an unknown path 404, both with the JSON error body.
func TestWrongMethodAndUnknownPath(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name, method, path string
		status             int
		allow              string
	}{
		{"dbt-sync-405-delete", "DELETE", h.syncPath(), 405, "GET, HEAD, POST"},
		{"dbt-sync-job-405-put", "PUT", h.syncPath() + "/sj0000000000000000000000000000", 405, "GET, HEAD"},
		{"dbt-git-integration-405-post", "POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", h.dep), 405, "GET, HEAD, PUT"},
		{"branch-staging-405-get", "GET", h.buildPath("/main/staging"), 405, "PUT"},
		{"dbt-sync-404-unknown-path", "GET", h.syncPath() + "/sj0000000000000000000000000000/nothing", 404, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.api.Call(t, c.method, c.path, apitest.Bearer(h.dev), nil)
			e := r.Error(t)
			if r.Status != c.status || r.Header.Get("Allow") != c.allow {
				t.Errorf("%d Allow %q %+v, want %d Allow %q", r.Status, r.Header.Get("Allow"), e, c.status, c.allow)
			}
		})
	}
}
