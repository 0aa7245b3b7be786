package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/gatewaytest"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/workspace-svc/internal/app"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// env is FerretDB, one or more workspace-svc instances on one database, and the real
// gateway in front of the first.
type env struct {
	audit    *audit.Memory // what every instance recorded
	stack    *gatewaytest.Stack
	api      *apitest.Client // the gateway
	counter  *mongox.CommandCounter
	plan     *mongoplan.Recorder // every query of every instance, checked once at the end
	planned  bool                // the check is registered
	mongoURI string
	database string
	key      string
	direct   []string // workspace-svc instances, for tests that bypass the gateway
	limits   workspace.Limits
}

func newEnv(t *testing.T, instances int) *env {
	t.Helper()
	return newEnvWithLimits(t, instances, workspace.Limits{})
}

// newEnvWithLimits is newEnv with the services' limits set (zero fields: the defaults).
func newEnvWithLimits(t *testing.T, instances int, limits workspace.Limits) *env {
	t.Helper()
	return newEnvWithOptions(t, instances, limits, 0)
}

// newEnvWithOptions is newEnv with limits and, when upstreamTimeout is not zero, for a
// large database: how long the gateway waits for workspace-svc, and FerretDB in its own
// process outside the race detector (it scans a whole collection per command, so a test
// that fills a deployment with 10,000 folders needs both on a loaded machine).
func newEnvWithOptions(t *testing.T, instances int, limits workspace.Limits, upstreamTimeout time.Duration) *env {
	t.Helper()
	var uri string
	if upstreamTimeout > 0 {
		uri = devstack.MongoProcessForTest(t) // a large database: FerretDB outside the race detector
	} else {
		uri = devstack.MongoForTest(t).URI
	}
	e := &env{audit: &audit.Memory{Service: app.ServiceName}, counter: &mongox.CommandCounter{}, plan: mongoplan.NewRecorder(), mongoURI: uri, database: devstack.UniqueName(t, "ws"), key: gatewaytest.NewSigningKey(), limits: limits}
	for i := 0; i < instances; i++ {
		var counter *mongox.CommandCounter
		if i == 0 {
			counter = e.counter
		}
		e.direct = append(e.direct, e.startInstance(t, counter))
	}
	e.stack = gatewaytest.Start(t, gatewaytest.Options{MongoURI: uri, Upstreams: map[string]string{"workspace-svc": e.direct[0]},
		SigningKey: e.key, UpstreamTimeout: upstreamTimeout})
	e.api = apitest.New(e.stack.URL)
	if upstreamTimeout > 0 {
		e.api.HTTP.Timeout = upstreamTimeout // a large deployment: as long as the gateway waits
	}
	return e
}

func (e *env) startInstance(t *testing.T, counter *mongox.CommandCounter) string {
	t.Helper()
	ctx := context.Background()
	client, err := mongox.ConnectWith(ctx, e.mongoURI, mongox.ConnectOptions{Counter: counter, Observe: e.plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	if !e.planned { // before this client's disconnect
		e.planned = true
		t.Cleanup(func() { e.plan.Check(t, client.Database(e.database)) })
	}
	signer, err := identity.NewSigner(e.key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Deps{Mongo: client, Database: e.database, Signer: signer,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: obs.NewRegistry(), Limits: e.limits, Audit: e.audit,
		Deployments: seedDeployments{e}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (e *env) acme() devstack.SeedAccount { return e.stack.Seed.Accounts["acme"] }

func (e *env) dep(account string, i int) int64 {
	return e.stack.Seed.Accounts[account].Deployments[i].ID
}

func (e *env) bearer(account, user string) string {
	return e.stack.Seed.Accounts[account].Users[user].Bearer
}

func (e *env) user(account, user string) devstack.SeedUser {
	return e.stack.Seed.Accounts[account].Users[user]
}

// authz is the Authorization of a bearer token ("" sends none).
func authz(bearer string) string {
	if bearer == "" {
		return ""
	}
	return apitest.Bearer(bearer)
}

// do sends a request through the gateway as the holder of bearer.
func (e *env) do(t *testing.T, method, path, bearer string, body any) apitest.Response {
	t.Helper()
	return e.api.Call(t, method, path, authz(bearer), body)
}

// errorBody is the status and message of an error answer (its code must be set).
func errorBody(t *testing.T, r apitest.Response) (int, string) {
	t.Helper()
	e := r.Error(t)
	return e.Status, e.Message
}

func depPath(dep int64, rest string) string {
	return fmt.Sprintf("/api/v1/deployments/%d%s", dep, rest)
}

// mkFolder creates a folder and returns its id, failing the test otherwise.
func (e *env) mkFolder(t *testing.T, dep int64, bearer, name string, parent int64) int64 {
	t.Helper()
	body := map[string]any{"name": name}
	if parent != 0 {
		body["parentId"] = parent
	}
	r := e.do(t, "POST", depPath(dep, "/folders"), bearer, body)
	if r.Status != 200 {
		t.Fatalf("create folder %q: %d %s", name, r.Status, r.Body)
	}
	return int64(r.Object(t)["id"].(float64))
}

func (e *env) mkItem(t *testing.T, dep int64, bearer, kind, name string, folder int64) int64 {
	t.Helper()
	body := map[string]any{"name": name}
	if folder != 0 {
		body["folderId"] = folder
	}
	r := e.do(t, "POST", depPath(dep, "/"+kind), bearer, body)
	if r.Status != 200 {
		t.Fatalf("create %s %q: %d %s", kind, name, r.Status, r.Body)
	}
	return int64(r.Object(t)["id"].(float64))
}

func ref(typ string, id int64) map[string]any { return map[string]any{"type": typ, "id": id} }
