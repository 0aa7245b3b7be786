package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/gatewaytest"
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
	counter  *mongox.CommandCounter
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
	e := &env{audit: &audit.Memory{Service: app.ServiceName}, counter: &mongox.CommandCounter{}, mongoURI: uri, database: devstack.UniqueName(t, "ws"), key: gatewaytest.NewSigningKey(), limits: limits}
	for i := 0; i < instances; i++ {
		var counter *mongox.CommandCounter
		if i == 0 {
			counter = e.counter
		}
		e.direct = append(e.direct, e.startInstance(t, counter))
	}
	e.stack = gatewaytest.Start(t, gatewaytest.Options{MongoURI: uri, Upstreams: map[string]string{"workspace-svc": e.direct[0]},
		SigningKey: e.key, UpstreamTimeout: upstreamTimeout})
	return e
}

func (e *env) startInstance(t *testing.T, counter *mongox.CommandCounter) string {
	t.Helper()
	ctx := context.Background()
	client, err := mongox.Connect(ctx, e.mongoURI, counter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	signer, err := identity.NewSigner(e.key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Deps{Mongo: client, Database: e.database, Signer: signer,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: obs.NewRegistry(), Limits: e.limits, Audit: e.audit})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (e *env) acme() gatewaytest.SeedAccount { return e.stack.Seed.Accounts["acme"] }

func (e *env) dep(account string, i int) int64 {
	return e.stack.Seed.Accounts[account].Deployments[i].ID
}

func (e *env) bearer(account, user string) string {
	return e.stack.Seed.Accounts[account].Users[user].Bearer
}

func (e *env) user(account, user string) gatewaytest.SeedUser {
	return e.stack.Seed.Accounts[account].Users[user]
}

// response is a decoded answer.
type response struct {
	Status int
	Body   []byte
	Header http.Header
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("status %d, body %q is not a JSON object: %v", r.Status, r.Body, err)
	}
	return m
}

func (r response) errorBody(t *testing.T) (int, string) {
	m := r.json(t)
	st, _ := m["status"].(float64)
	msg, _ := m["message"].(string)
	return int(st), msg
}

func call(t *testing.T, base, method, path, bearer string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Body: raw, Header: resp.Header}
}

func (e *env) do(t *testing.T, method, path, bearer string, body any) response {
	t.Helper()
	return call(t, e.stack.URL, method, path, bearer, body)
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
	return int64(r.json(t)["id"].(float64))
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
	return int64(r.json(t)["id"].(float64))
}

func ref(typ string, id int64) map[string]any { return map[string]any{"type": typ, "id": id} }

func callWithType(t *testing.T, url, bearer, contentType, body string) response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Body: raw}
}

func jsonBody(v any) io.Reader {
	raw, _ := json.Marshal(v)
	return bytes.NewReader(raw)
}
