package app_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/embed-svc/internal/keys"
	"github.com/analyticsco/platform/embed-svc/internal/store/webhookstore"
	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
	"github.com/analyticsco/platform/libs/mongox"
)

// testWebhookLimits are the webhooks API's limits in the app tests: a low limit to reach,
// and the local stack's receivers allowed.
var testWebhookLimits = webhooks.Limits{MaxSubscriptions: 4, AllowedHosts: []string{"127.0.0.1", "receiver.local"}}

type hookView struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	Events         []string `json:"events"`
	DeploymentIDs  []int64  `json:"deploymentIds"`
	Enabled        bool     `json:"enabled"`
	IncludeRefused bool     `json:"includeRefused"`
	Description    string   `json:"description"`
	DisabledReason *string  `json:"disabledReason"`
	DisabledAt     *string  `json:"disabledAt"`
	CreatedAt      string   `json:"createdAt"`
	UpdatedAt      string   `json:"updatedAt"`
	Secret         string   `json:"secret"`
}

type deliveryView struct {
	ID            string  `json:"id"`
	EventID       string  `json:"eventId"`
	Type          string  `json:"type"`
	Sequence      int64   `json:"sequence"`
	Status        string  `json:"status"`
	Attempts      int     `json:"attempts"`
	CreatedAt     string  `json:"createdAt"`
	NextAttemptAt *string `json:"nextAttemptAt"`
	FinishedAt    *string `json:"finishedAt"`
	LastAttempt   *struct {
		Status  *int   `json:"status"`
		Error   string `json:"error"`
		Excerpt string `json:"excerpt"`
	} `json:"lastAttempt"`
}

type page[T any] struct {
	Items    []T `json:"items"`
	PageInfo struct {
		HasNextPage bool    `json:"hasNextPage"`
		EndCursor   *string `json:"endCursor"`
	} `json:"pageInfo"`
}

func wantError(t *testing.T, r resp, status int, code, inMessage string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	e := r.Error(t)
	if e.Code != code || !strings.Contains(e.Message, inMessage) {
		t.Fatalf("error %+v, want code %s and a message with %q", e, code, inMessage)
	}
}

func TestWebhooksAPI(t *testing.T) {
	mongo := devstack.MongoForTest(t)
	e := newEnvOn(t, mongo)
	acme, globex := e.acme(), e.globex()
	admin := bearer(acme.Users["admin"].Bearer)
	key := apiKey(acme.APIKeys["admin"])
	scoped := apiKey(acme.APIKeys["adminScoped"])
	dep1, dep2 := acme.Deployments[0].ID, acme.Deployments[1].ID
	client, err := mongox.ConnectWith(context.Background(), mongo.URI, mongox.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database("audit")

	create := func(t *testing.T, auth string, body map[string]any) hookView {
		t.Helper()
		r := e.do(t, "POST", "/api/v1/webhooks", auth, body)
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		var h hookView
		r.json(t, &h)
		return h
	}
	basic := func(n int) map[string]any {
		return map[string]any{"url": fmt.Sprintf("https://hooks.example.com/%d?token=x", n), "events": []string{"workspace.*", "embed.session.revoke"}}
	}

	var first hookView
	t.Run("create-answers-the-subscription-and-its-secret-once", func(t *testing.T) {
		// No event this test causes is a workspace event, so the pings below are the
		// webhook's only deliveries, whenever the dispatcher reads the trail.
		first = create(t, admin, map[string]any{"url": "https://hooks.example.com/a", "events": []string{"workspace.*"}, "description": "ops"})
		if !strings.HasPrefix(first.ID, "wh_") || first.URL != "https://hooks.example.com/a" || !first.Enabled || first.IncludeRefused ||
			first.DeploymentIDs != nil || first.Description != "ops" || first.DisabledReason != nil || first.CreatedAt == "" {
			t.Fatalf("created: %+v", first)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(first.Secret, "whsec_"))
		if !strings.HasPrefix(first.Secret, "whsec_") || err != nil || len(raw) != 32 {
			t.Fatalf("secret %q: want whsec_ and the base64 of 32 bytes", first.Secret)
		}
		// Stored sealed by the embed key box, the id as associated data.
		var doc webhooks.Subscription
		if err := db.Collection(webhookstore.SubscriptionsCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: first.ID}}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		var encKey [32]byte
		copy(encKey[:], "embed-svc-test-key-0123456789abc")
		box, err := keys.ParseEncryptionKey(base64.StdEncoding.EncodeToString(encKey[:]))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := box.Open(doc.Secret, []byte(first.ID))
		if err != nil || string(plain) != string(raw) || strings.Contains(string(doc.Secret), string(raw)) {
			t.Fatalf("the stored secret does not open to the one answered: %v", err)
		}
		if _, err := box.Open(doc.Secret, []byte("wh_other")); err == nil {
			t.Fatal("the sealed secret opens under another id")
		}
		got := e.do(t, "GET", "/api/v1/webhooks/"+first.ID, key, nil)
		if got.Status != 200 || strings.Contains(string(got.Body), "secret") {
			t.Fatalf("get: %d %s (never the secret)", got.Status, got.Body)
		}
	})

	t.Run("create-refusals", func(t *testing.T) {
		long := "https://hooks.example.com/" + strings.Repeat("a", 2048)
		for _, c := range []struct {
			name        string
			auth        string
			body        any
			status      int
			code, inMsg string
		}{
			{"http", admin, map[string]any{"url": "http://hooks.example.com/", "events": []string{"*"}}, 400, "invalid_webhook_url", "https"},
			{"relative", admin, map[string]any{"url": "/hooks", "events": []string{"*"}}, 400, "invalid_webhook_url", "absolute"},
			{"ftp", admin, map[string]any{"url": "ftp://hooks.example.com/", "events": []string{"*"}}, 400, "invalid_webhook_url", "https"},
			{"userinfo", admin, map[string]any{"url": "https://u:p@hooks.example.com/", "events": []string{"*"}}, 400, "invalid_webhook_url", "user name"},
			{"fragment", admin, map[string]any{"url": "https://hooks.example.com/#x", "events": []string{"*"}}, 400, "invalid_webhook_url", "fragment"},
			{"private-address", admin, map[string]any{"url": "https://10.0.0.1/", "events": []string{"*"}}, 400, "invalid_webhook_url", "10.0.0.1"},
			{"loopback-v6", admin, map[string]any{"url": "https://[::1]/", "events": []string{"*"}}, 400, "invalid_webhook_url", "::1"},
			{"too-long", admin, map[string]any{"url": long, "events": []string{"*"}}, 400, "invalid_webhook_url", "2048"},
			{"no-url", admin, map[string]any{"events": []string{"*"}}, 400, "invalid_webhook_url", "required"},
			{"no-events", admin, map[string]any{"url": "https://h.example.com/"}, 400, "invalid_event_pattern", "1 to 20"},
			{"bad-pattern", admin, map[string]any{"url": "https://h.example.com/", "events": []string{"workspace.*.create"}}, 400, "invalid_event_pattern", "workspace.*.create"},
			{"too-many-patterns", admin, map[string]any{"url": "https://h.example.com/", "events": make([]string, 21)}, 400, "invalid_event_pattern", "1 to 20"},
			{"empty-deployments", admin, map[string]any{"url": "https://h.example.com/", "events": []string{"*"}, "deploymentIds": []int64{}}, 400, "invalid_request", "deploymentIds"},
			{"bad-deployment", admin, map[string]any{"url": "https://h.example.com/", "events": []string{"*"}, "deploymentIds": []int64{-1}}, 400, "invalid_request", "positive"},
			{"too-many-deployments", admin, map[string]any{"url": "https://h.example.com/", "events": []string{"*"}, "deploymentIds": make([]int64, 101)}, 400, "invalid_request", "100"},
			{"long-description", admin, map[string]any{"url": "https://h.example.com/", "events": []string{"*"}, "description": strings.Repeat("d", 257)}, 400, "invalid_request", "256"},
			{"unknown-field", admin, map[string]any{"url": "https://h.example.com/", "events": []string{"*"}, "secret": "mine"}, 400, "invalid_request", "secret"},
			{"not-json", admin, "url=x", 415, "unsupported_media_type", "application/json"},
			{"foreign-deployment", admin, map[string]any{"url": "https://h.example.com/", "events": []string{"*"}, "deploymentIds": []int64{globex.Deployments[0].ID}}, 404, "not_found", "deployment"},
			{"unknown-deployment", admin, map[string]any{"url": "https://h.example.com/", "events": []string{"*"}, "deploymentIds": []int64{987654}}, 404, "not_found", "987654"},
			{"scoped-elsewhere", scoped, map[string]any{"url": "https://h.example.com/", "events": []string{"*"}, "deploymentIds": []int64{dep1, dep2}}, 403, "key_out_of_scope", "scoped"},
			{"developer", bearer(acme.Users["developer"].Bearer), basic(1), 403, "forbidden", "admin"},
			{"viewer", bearer(acme.Users["viewer"].Bearer), basic(1), 403, "forbidden", "admin"},
		} {
			t.Run(c.name, func(t *testing.T) {
				var r resp
				if s, ok := c.body.(string); ok {
					req, err := e.api.Request("POST", "/api/v1/webhooks", c.auth, nil)
					if err != nil {
						t.Fatal(err)
					}
					req.Body = ioNopCloser(s)
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					r = resp{e.api.Send(t, req)}
				} else {
					r = e.do(t, "POST", "/api/v1/webhooks", c.auth, c.body)
				}
				wantError(t, r, c.status, c.code, c.inMsg)
			})
		}
		if r := e.do(t, "POST", "/api/v1/webhooks", "", basic(1)); r.Status != 401 {
			t.Fatalf("no credential: %d", r.Status)
		}
	})

	t.Run("http-to-an-allowed-host", func(t *testing.T) {
		h := create(t, admin, map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"embed.*"}, "includeRefused": true, "enabled": false})
		if h.Enabled || !h.IncludeRefused {
			t.Fatalf("created: %+v", h)
		}
		if r := e.do(t, "DELETE", "/api/v1/webhooks/"+h.ID, admin, nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
	})

	var scopedHook hookView
	t.Run("scoped-credential-defaults-to-its-scope-and-sees-only-its-own", func(t *testing.T) {
		scopedHook = create(t, scoped, basic(2))
		if fmt.Sprint(scopedHook.DeploymentIDs) != fmt.Sprint([]int64{dep1}) {
			t.Fatalf("scoped create: deploymentIds %v, want [%d]", scopedHook.DeploymentIDs, dep1)
		}
		wantError(t, e.do(t, "GET", "/api/v1/webhooks/"+first.ID, scoped, nil), 404, "webhook_not_found", "not found")
		wantError(t, e.do(t, "PATCH", "/api/v1/webhooks/"+scopedHook.ID, scoped, map[string]any{"deploymentIds": nil}), 403, "key_out_of_scope", "deploymentIds")
		wantError(t, e.do(t, "PATCH", "/api/v1/webhooks/"+scopedHook.ID, scoped, map[string]any{"deploymentIds": []int64{dep2}}), 403, "key_out_of_scope", "scoped")
		var pg page[hookView]
		e.do(t, "GET", "/api/v1/webhooks", scoped, nil).json(t, &pg)
		if len(pg.Items) != 1 || pg.Items[0].ID != scopedHook.ID {
			t.Fatalf("scoped list: %+v", pg.Items)
		}
	})

	t.Run("limit", func(t *testing.T) {
		// first and scopedHook exist; the limit is testWebhookLimits.MaxSubscriptions (4).
		create(t, key, basic(3))
		create(t, key, basic(4))
		wantError(t, e.do(t, "POST", "/api/v1/webhooks", key, basic(5)), 409, "webhook_limit", "4 webhooks")
		// Another account has its own.
		create(t, apiKey(globex.APIKeys["admin"]), basic(6))
	})

	t.Run("list-pages", func(t *testing.T) {
		var p1, p2 page[hookView]
		e.do(t, "GET", "/api/v1/webhooks?first=3", admin, nil).json(t, &p1)
		if len(p1.Items) != 3 || !p1.PageInfo.HasNextPage || p1.PageInfo.EndCursor == nil {
			t.Fatalf("first page: %+v", p1)
		}
		e.do(t, "GET", "/api/v1/webhooks?first=3&after="+url.QueryEscape(*p1.PageInfo.EndCursor), admin, nil).json(t, &p2)
		if len(p2.Items) != 1 || p2.PageInfo.HasNextPage || p2.Items[0].ID <= p1.Items[2].ID {
			t.Fatalf("second page: %+v", p2)
		}
		for _, it := range append(p1.Items, p2.Items...) {
			if it.Secret != "" {
				t.Fatal("a list shows a secret")
			}
		}
		wantError(t, e.do(t, "GET", "/api/v1/webhooks?after=nope", admin, nil), 400, "invalid_request", "cursor")
		wantError(t, e.do(t, "GET", "/api/v1/webhooks?first=0", admin, nil), 400, "invalid_request", "first")
		var other page[hookView]
		e.do(t, "GET", "/api/v1/webhooks", apiKey(globex.APIKeys["admin"]), nil).json(t, &other)
		if len(other.Items) != 1 {
			t.Fatalf("globex sees %d webhooks, want its 1", len(other.Items))
		}
	})

	t.Run("get-and-not-found", func(t *testing.T) {
		for _, id := range []string{"wh_01JF0000000000000000000000", "nope", "wh_" + strings.Repeat("Z", 26)} {
			wantError(t, e.do(t, "GET", "/api/v1/webhooks/"+id, admin, nil), 404, "webhook_not_found", "not found")
		}
		wantError(t, e.do(t, "GET", "/api/v1/webhooks/"+first.ID, apiKey(globex.APIKeys["admin"]), nil), 404, "webhook_not_found", "not found")
	})

	t.Run("update", func(t *testing.T) {
		var h hookView
		r := e.do(t, "PATCH", "/api/v1/webhooks/"+first.ID, key, map[string]any{"events": []string{"workspace.folder.*"}, "deploymentIds": []int64{dep2},
			"enabled": false, "includeRefused": true, "description": ""})
		if r.Status != 200 {
			t.Fatalf("patch: %d %s", r.Status, r.Body)
		}
		r.json(t, &h)
		if fmt.Sprint(h.Events) != "[workspace.folder.*]" || fmt.Sprint(h.DeploymentIDs) != fmt.Sprint([]int64{dep2}) || h.Enabled || !h.IncludeRefused ||
			h.Description != "" || h.URL != first.URL || h.UpdatedAt < first.UpdatedAt {
			t.Fatalf("patched: %+v", h)
		}
		// The deliverer disabled it; enabling it again starts afresh.
		if _, err := db.Collection(webhookstore.SubscriptionsCollection).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: first.ID}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "disabledAt", Value: time.Now()}, {Key: "disabledReason", Value: "failing"}, {Key: "failingSince", Value: time.Now()}}}}); err != nil {
			t.Fatal(err)
		}
		var dis hookView
		e.do(t, "GET", "/api/v1/webhooks/"+first.ID, admin, nil).json(t, &dis)
		if dis.DisabledReason == nil || *dis.DisabledReason != "failing" || dis.DisabledAt == nil {
			t.Fatalf("disabled: %+v", dis)
		}
		e.do(t, "PATCH", "/api/v1/webhooks/"+first.ID, admin, map[string]any{"enabled": true, "deploymentIds": nil}).json(t, &h)
		if !h.Enabled || h.DisabledReason != nil || h.DisabledAt != nil || h.DeploymentIDs != nil {
			t.Fatalf("enabled again: %+v", h)
		}
		wantError(t, e.do(t, "PATCH", "/api/v1/webhooks/"+first.ID, admin, map[string]any{"url": "http://hooks.example.com/"}), 400, "invalid_webhook_url", "https")
		wantError(t, e.do(t, "PATCH", "/api/v1/webhooks/"+first.ID, admin, map[string]any{"events": []string{}}), 400, "invalid_event_pattern", "1 to 20")
		wantError(t, e.do(t, "PATCH", "/api/v1/webhooks/"+first.ID, admin, map[string]any{"deploymentIds": "all"}), 400, "invalid_request", "deploymentIds")
		wantError(t, e.do(t, "PATCH", "/api/v1/webhooks/"+first.ID, admin, map[string]any{"enabled": "yes"}), 400, "invalid_request", "enabled")
		wantError(t, e.do(t, "PATCH", "/api/v1/webhooks/wh_01JF0000000000000000000000", admin, map[string]any{"enabled": true}), 404, "webhook_not_found", "not found")
		wantError(t, e.do(t, "PATCH", "/api/v1/webhooks/"+first.ID, bearer(acme.Users["developer"].Bearer), map[string]any{"enabled": true}), 403, "forbidden", "admin")
	})

	t.Run("rotate", func(t *testing.T) {
		r := e.do(t, "POST", "/api/v1/webhooks/"+first.ID+"/secret/rotate", admin, nil)
		if r.Status != 200 {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		var out struct {
			Secret                  string `json:"secret"`
			PreviousSecretExpiresAt string `json:"previousSecretExpiresAt"`
		}
		r.json(t, &out)
		until, err := time.Parse(time.RFC3339, out.PreviousSecretExpiresAt)
		if !strings.HasPrefix(out.Secret, "whsec_") || out.Secret == first.Secret || err != nil ||
			until.Sub(e.clock.Now()) < 23*time.Hour || until.Sub(e.clock.Now()) > 25*time.Hour {
			t.Fatalf("rotated: %+v (%v)", out, err)
		}
		var doc webhooks.Subscription
		if err := db.Collection(webhookstore.SubscriptionsCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: first.ID}}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.PrevSecret) == 0 || !doc.PrevUntil.Equal(until) {
			t.Fatalf("stored: previous secret %d bytes until %v", len(doc.PrevSecret), doc.PrevUntil)
		}
		wantError(t, e.do(t, "POST", "/api/v1/webhooks/"+first.ID+"/secret/rotate", scoped, nil), 404, "webhook_not_found", "not found")
	})

	var pings []deliveryView
	t.Run("ping-and-deliveries", func(t *testing.T) {
		for range 2 {
			r := e.do(t, "POST", "/api/v1/webhooks/"+first.ID+"/ping", admin, nil)
			if r.Status != 202 {
				t.Fatalf("ping: %d %s", r.Status, r.Body)
			}
			var d deliveryView
			r.json(t, &d)
			pings = append(pings, d)
		}
		if pings[0].Type != "webhook.ping" || pings[0].Status != "pending" || pings[0].Sequence != 1 || pings[1].Sequence != 2 ||
			!strings.HasPrefix(pings[0].EventID, "ping_") || pings[0].NextAttemptAt == nil || pings[0].FinishedAt != nil {
			t.Fatalf("pings: %+v", pings)
		}
		var pg page[deliveryView]
		e.do(t, "GET", "/api/v1/webhooks/"+first.ID+"/deliveries", admin, nil).json(t, &pg)
		if len(pg.Items) != 2 || pg.Items[0].ID != pings[1].ID || pg.Items[1].ID != pings[0].ID {
			t.Fatalf("deliveries, newest first: %+v", pg.Items)
		}
		var one page[deliveryView]
		e.do(t, "GET", "/api/v1/webhooks/"+first.ID+"/deliveries?first=1", admin, nil).json(t, &one)
		if len(one.Items) != 1 || !one.PageInfo.HasNextPage {
			t.Fatalf("first=1: %+v", one)
		}
		var rest page[deliveryView]
		e.do(t, "GET", "/api/v1/webhooks/"+first.ID+"/deliveries?first=1&after="+url.QueryEscape(*one.PageInfo.EndCursor), admin, nil).json(t, &rest)
		if len(rest.Items) != 1 || rest.Items[0].ID != pings[0].ID {
			t.Fatalf("second page: %+v", rest)
		}
		var failed page[deliveryView]
		e.do(t, "GET", "/api/v1/webhooks/"+first.ID+"/deliveries?status=failed", admin, nil).json(t, &failed)
		if len(failed.Items) != 0 {
			t.Fatalf("failed: %+v", failed.Items)
		}
		if strings.Contains(string(e.do(t, "GET", "/api/v1/webhooks/"+first.ID+"/deliveries", admin, nil).Body), "webhookId") {
			t.Fatal("a delivery's body is shown")
		}
		wantError(t, e.do(t, "GET", "/api/v1/webhooks/"+first.ID+"/deliveries?status=lost", admin, nil), 400, "invalid_request", "status")
		wantError(t, e.do(t, "GET", "/api/v1/webhooks/"+first.ID+"/deliveries?after=x", admin, nil), 400, "invalid_request", "cursor")
		wantError(t, e.do(t, "GET", "/api/v1/webhooks/wh_01JF0000000000000000000000/deliveries", admin, nil), 404, "webhook_not_found", "not found")
		wantError(t, e.do(t, "POST", "/api/v1/webhooks/wh_01JF0000000000000000000000/ping", admin, nil), 404, "webhook_not_found", "not found")
	})

	t.Run("redeliver", func(t *testing.T) {
		path := "/api/v1/webhooks/" + first.ID + "/deliveries/" + pings[0].ID + "/redeliver"
		wantError(t, e.do(t, "POST", path, admin, nil), 409, "delivery_pending", "pending")
		// The deliverer failed it.
		if _, err := db.Collection(webhookstore.DeliveriesCollection).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: pings[0].ID}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "failed"}, {Key: "attempts", Value: 3}, {Key: "doneAt", Value: time.Now()},
				{Key: "last", Value: bson.D{{Key: "at", Value: time.Now()}, {Key: "status", Value: 500}, {Key: "latencyMs", Value: 12}, {Key: "error", Value: "status"}, {Key: "excerpt", Value: "oops"}}}}}}); err != nil {
			t.Fatal(err)
		}
		var failed page[deliveryView]
		e.do(t, "GET", "/api/v1/webhooks/"+first.ID+"/deliveries?status=failed", admin, nil).json(t, &failed)
		if len(failed.Items) != 1 || failed.Items[0].FinishedAt == nil || failed.Items[0].NextAttemptAt != nil || failed.Items[0].LastAttempt == nil ||
			*failed.Items[0].LastAttempt.Status != 500 || failed.Items[0].LastAttempt.Excerpt != "oops" {
			t.Fatalf("failed: %+v", failed.Items)
		}
		r := e.do(t, "POST", path, admin, nil)
		if r.Status != 202 {
			t.Fatalf("redeliver: %d %s", r.Status, r.Body)
		}
		var d deliveryView
		r.json(t, &d)
		if d.Status != "pending" || d.Attempts != 3 || d.NextAttemptAt == nil || d.FinishedAt != nil {
			t.Fatalf("redelivered: %+v", d)
		}
		wantError(t, e.do(t, "POST", "/api/v1/webhooks/"+first.ID+"/deliveries/dlv_01JF0000000000000000000000/redeliver", admin, nil), 404, "delivery_not_found", "not found")
		wantError(t, e.do(t, "POST", "/api/v1/webhooks/"+first.ID+"/deliveries/nope/redeliver", admin, nil), 404, "delivery_not_found", "not found")
		wantError(t, e.do(t, "POST", "/api/v1/webhooks/"+scopedHook.ID+"/deliveries/"+pings[0].ID+"/redeliver", admin, nil), 404, "delivery_not_found", "not found")
	})

	t.Run("idempotency-key", func(t *testing.T) {
		if r := e.do(t, "DELETE", "/api/v1/webhooks/"+scopedHook.ID, scoped, nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		send := func() resp {
			req, err := e.api.Request("POST", "/api/v1/webhooks", key, basic(7))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Idempotency-Key", "hook-7")
			return resp{e.api.Send(t, req)}
		}
		a, b := send(), send()
		var ha, hb hookView
		a.json(t, &ha)
		b.json(t, &hb)
		if a.Status != 201 || b.Status != 201 || ha.ID != hb.ID || ha.Secret != hb.Secret || b.Header.Get("Idempotent-Replayed") == "" {
			t.Fatalf("replay: %d %s / %d %s", a.Status, ha.ID, b.Status, hb.ID)
		}
	})

	t.Run("delete", func(t *testing.T) {
		if r := e.do(t, "DELETE", "/api/v1/webhooks/"+first.ID, admin, nil); r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		wantError(t, e.do(t, "DELETE", "/api/v1/webhooks/"+first.ID, admin, nil), 404, "webhook_not_found", "not found")
		wantError(t, e.do(t, "GET", "/api/v1/webhooks/"+first.ID+"/deliveries", admin, nil), 404, "webhook_not_found", "not found")
		if n, err := db.Collection(webhookstore.DeliveriesCollection).CountDocuments(context.Background(), bson.D{{Key: "sub", Value: first.ID}}); err != nil || n != 0 {
			t.Fatalf("deliveries left: %d %v", n, err)
		}
		// Its slot is free again.
		create(t, admin, basic(8))
	})

	t.Run("audited", func(t *testing.T) {
		want := map[string]bool{"embed.webhook.create": false, "embed.webhook.update": false, "embed.webhook.delete": false,
			"embed.webhook.secret.rotate": false, "embed.webhook.ping": false, "embed.webhook.redeliver": false}
		refused := false
		apitest.Eventually(t, 20*time.Second, "the webhook events in the trail", func() (bool, string) {
			var pg page[struct {
				Action  string `json:"action"`
				Target  struct{ Type, ID string }
				Outcome struct{ Result, Code string }
				Details map[string]any `json:"details"`
			}]
			e.do(t, "GET", "/api/v1/audit?first=200&action=embed.webhook.*", admin, nil).json(t, &pg)
			for _, ev := range pg.Items {
				if ev.Outcome.Result == "success" {
					want[ev.Action] = true
					if strings.Contains(fmt.Sprint(ev.Details), "token=x") {
						t.Fatalf("an event records the URL's query: %+v", ev)
					}
				}
				if ev.Outcome.Result == "failure" && ev.Outcome.Code == "webhook_limit" {
					refused = true
				}
			}
			for _, ok := range want {
				if !ok {
					return false, fmt.Sprint(want, " refused limit: ", refused)
				}
			}
			return refused, fmt.Sprint(want, " refused limit: ", refused)
		})
	})
}

func ioNopCloser(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
