package app_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/gatewaytest"
	"github.com/analyticsco/platform/libs/idempotency"
	idemstore "github.com/analyticsco/platform/libs/idempotency/mongostore"
	"github.com/analyticsco/platform/libs/mongox"
)

// newReplicatedEnv is two workspace-svc instances on one database behind the real
// gateway, which spreads requests over both.
func newReplicatedEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, 2)
	e.stack = gatewaytest.Start(t, gatewaytest.Options{MongoURI: e.mongoURI, Upstreams: map[string]string{"workspace-svc": strings.Join(e.direct, ",")}, SigningKey: e.key})
	e.api = apitest.New(e.stack.URL)
	return e
}

// post sends a POST with an Idempotency-Key (raw header value) through the gateway.
func (e *env) postWithKey(t *testing.T, path, bearer, key string, body any) apitest.Response {
	t.Helper()
	req, err := e.api.Request("POST", path, authz(bearer), body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(idempotency.Header, key)
	return e.api.Send(t, req)
}

// TestEveryPOSTRetriedWithItsKeyActsOnce: on every POST route of workspace-svc, the
// same key and body sent four times over two replicas acts once (one audit event) and
// every retry answers the first answer, marked Idempotent-Replayed.
func TestEveryPOSTRetriedWithItsKeyActsOnce(t *testing.T) {
	e := newReplicatedEnv(t)
	dep := e.dep("acme", 0)
	admin := e.bearer("acme", "admin")
	folder := e.mkFolder(t, dep, admin, "Idem", 0)
	wb := e.mkItem(t, dep, admin, "workbooks", "WB", 0)
	rep := e.mkItem(t, dep, admin, "reports", "R", 0)
	if r := e.do(t, "PATCH", depPath(dep, fmt.Sprintf("/workbooks/%d", wb)), admin, map[string]any{"dashboardDraft": map[string]any{"title": "T"}}); r.Status != 200 {
		t.Fatalf("draft: %d %s", r.Status, r.Body)
	}
	cases := []struct {
		route, path, action string
		body                any
	}{
		{"create-folder", "/folders", "workspace.folder.create", map[string]any{"name": "Once"}},
		{"create-workbook", "/workbooks", "workspace.workbook.create", map[string]any{"name": "Once"}},
		{"create-report", "/reports", "workspace.report.create", map[string]any{"name": "Once"}},
		{"move", "/workspace/move", "workspace.items.move", map[string]any{"type": "WORKBOOK", "id": wb, "folderId": folder}},
		{"bulk-move", "/workspace/bulk-move", "workspace.items.move", map[string]any{"folderId": nil, "items": []any{ref("REPORT", rep)}}},
		{"publish", fmt.Sprintf("/workbooks/%d/publish", wb), "workspace.workbook.publish", map[string]any{}},
		{"unpublish", fmt.Sprintf("/workbooks/%d/unpublish", wb), "workspace.workbook.unpublish", nil},
		{"duplicate-workbook", fmt.Sprintf("/workbooks/%d/duplicate", wb), "workspace.workbook.duplicate", map[string]any{"deep": true}},
		{"duplicate-folder", fmt.Sprintf("/folders/%d/duplicate", folder), "workspace.folder.duplicate", map[string]any{}},
	}
	for _, c := range cases {
		t.Run(c.route, func(t *testing.T) {
			e.audit.Reset()
			key := "ws-" + c.route
			first := e.postWithKey(t, depPath(dep, c.path), admin, key, c.body)
			if first.Status != 200 || first.Header.Get(idempotency.ReplayedHeader) != "" {
				t.Fatalf("first: %d %s (replayed %q)", first.Status, first.Body, first.Header.Get(idempotency.ReplayedHeader))
			}
			for i := range 3 {
				again := e.postWithKey(t, depPath(dep, c.path), admin, `"`+key+`"`, c.body)
				if again.Status != first.Status || string(again.Body) != string(first.Body) || again.Header.Get(idempotency.ReplayedHeader) != "true" {
					t.Fatalf("retry %d: %d %s replayed %q; first %d %s", i, again.Status, again.Body, again.Header.Get(idempotency.ReplayedHeader), first.Status, first.Body)
				}
			}
			n := 0
			for _, ev := range e.audit.Events() {
				if ev.Action == c.action {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d %s events, want 1: the retries acted", n, c.action)
			}
		})
	}
	t.Run("create-folder-422-another-body", func(t *testing.T) {
		r := e.postWithKey(t, depPath(dep, "/folders"), admin, "ws-create-folder", map[string]any{"name": "Other"})
		if r.Status != 422 || r.Error(t).Code != "idempotency_key_reused" {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
	})
	t.Run("create-folder-422-another-route", func(t *testing.T) {
		r := e.postWithKey(t, depPath(dep, "/reports"), admin, "ws-create-folder", map[string]any{"name": "Once"})
		if r.Status != 422 || r.Error(t).Code != "idempotency_key_reused" {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
	})
	t.Run("another-user-has-its-own-keys", func(t *testing.T) {
		e.audit.Reset()
		r := e.postWithKey(t, depPath(dep, "/folders"), e.bearer("acme", "developer"), "ws-create-folder", map[string]any{"name": "Once"})
		if r.Header.Get(idempotency.ReplayedHeader) != "" || len(e.audit.Events()) != 1 {
			t.Fatalf("another credential was answered the first's answer: %d %s", r.Status, r.Body)
		}
	})
	t.Run("create-folder-400-invalid-key", func(t *testing.T) {
		e.audit.Reset()
		for _, k := range []string{strings.Repeat("k", 256), "bad key", "clé"} {
			r := e.postWithKey(t, depPath(dep, "/folders"), admin, k, map[string]any{"name": "Never"})
			if r.Status != 400 || r.Error(t).Code != "invalid_idempotency_key" {
				t.Errorf("key %q: %d %s", k, r.Status, r.Body)
			}
		}
		if evs := e.audit.Events(); len(evs) != 0 {
			t.Fatalf("an invalid key acted: %+v", evs)
		}
	})
}

// TestKeyHeldByARunningRequestIs409UntilItsLeaseLapses: a claim of a request still
// running on another replica answers a retry 409 with Retry-After, nothing done; once its
// lease has lapsed (its process died), the key is free and the retry acts.
func TestKeyHeldByARunningRequestIs409UntilItsLeaseLapses(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin := e.bearer("acme", "admin")
	ctx := context.Background()
	client, err := mongox.Connect(ctx, e.mongoURI, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(ctx) })
	records := client.Database(e.database).Collection(idemstore.Collection)
	claim := func(key string, lease time.Time) {
		t.Helper()
		_, err := records.InsertOne(ctx, bson.D{{Key: "acct", Value: strconv.FormatInt(e.acme().ID, 10)},
			{Key: "cred", Value: "user:" + strconv.FormatInt(e.user("acme", "admin").ID, 10)}, {Key: "key", Value: key},
			{Key: "token", Value: "elsewhere"}, {Key: "running", Value: true}, {Key: "lease", Value: lease}, {Key: "exp", Value: time.Now().Add(time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	body := map[string]any{"name": "Held"}
	t.Run("create-folder-409-key-in-use", func(t *testing.T) {
		claim("held", time.Now().Add(time.Minute))
		e.audit.Reset()
		r := e.postWithKey(t, depPath(dep, "/folders"), admin, "held", body)
		if r.Status != 409 || r.Error(t).Code != "idempotency_key_in_use" || r.Header.Get("Retry-After") == "" || len(e.audit.Events()) != 0 {
			t.Fatalf("got %d %s Retry-After %q, %d events", r.Status, r.Body, r.Header.Get("Retry-After"), len(e.audit.Events()))
		}
	})
	t.Run("create-folder-200-after-a-lapsed-lease", func(t *testing.T) {
		claim("lapsed", time.Now().Add(-time.Second))
		e.audit.Reset()
		r := e.postWithKey(t, depPath(dep, "/folders"), admin, "lapsed", body)
		if r.Status != 200 || len(e.audit.Events()) != 1 {
			t.Fatalf("got %d %s, %d events", r.Status, r.Body, len(e.audit.Events()))
		}
	})
}
