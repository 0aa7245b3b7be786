package app_test

import (
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/idempotency"
)

func (e *env) postWithKey(t *testing.T, path, auth, key string, body any) resp {
	t.Helper()
	req, err := e.api.Request("POST", path, auth, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(idempotency.Header, key)
	return resp{e.api.Send(t, req)}
}

// TestEmbedPOSTsRetriedWithTheirKeyActOnce: through the gateway, a retried
// generate-session answers the same session id (one mint) while that id could be
// exchanged, and a new one after; the catalog's creates answer their first answer.
func TestEmbedPOSTsRetriedWithTheirKeyActOnce(t *testing.T) {
	e := newEnv(t)
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	mint := map[string]any{"deploymentId": dep, "externalId": "idem-user", "creatorMode": true}

	t.Run("generate-session-replayed-within-the-session-ids-lifetime", func(t *testing.T) {
		first := e.postWithKey(t, "/api/v1/embed/generate-session", key, "gs-1", mint)
		again := e.postWithKey(t, "/api/v1/embed/generate-session", key, "gs-1", mint)
		if first.Status != 200 || again.Status != 200 || string(first.Body) != string(again.Body) || again.Header.Get(idempotency.ReplayedHeader) != "true" {
			t.Fatalf("first %d %s; retry %d %s (replayed %q)", first.Status, first.Body, again.Status, again.Body, again.Header.Get(idempotency.ReplayedHeader))
		}
		e.clock.Advance(6 * time.Minute) // past the session id's 5 minutes
		later := e.postWithKey(t, "/api/v1/embed/generate-session", key, "gs-1", mint)
		if later.Status != 200 || later.Header.Get(idempotency.ReplayedHeader) != "" || string(later.Body) == string(first.Body) {
			t.Fatalf("after the window: %d %s (replayed %q)", later.Status, later.Body, later.Header.Get(idempotency.ReplayedHeader))
		}
	})
	for _, c := range []struct{ name, path string }{{"create-group", "/api/v1/groups"}, {"create-user-attribute", "/api/v1/user-attributes"}} {
		t.Run(c.name+"-replayed", func(t *testing.T) {
			body := map[string]any{"name": "idem-" + c.name}
			if c.path == "/api/v1/user-attributes" {
				body["type"] = "string"
			}
			first := e.postWithKey(t, c.path, key, c.name, body)
			again := e.postWithKey(t, c.path, key, c.name, body)
			if first.Status != 200 || string(again.Body) != string(first.Body) || again.Status != 200 || again.Header.Get(idempotency.ReplayedHeader) != "true" {
				t.Fatalf("first %d %s; retry %d %s", first.Status, first.Body, again.Status, again.Body)
			}
			other := e.postWithKey(t, c.path, key, c.name, map[string]any{"name": "another", "type": "string"})
			if other.Status != 422 || other.Error(t).Code != "idempotency_key_reused" {
				t.Fatalf("another body: %d %s", other.Status, other.Body)
			}
		})
	}
	t.Run("exchange-ignores-the-key", func(t *testing.T) {
		sid := e.mint(t, map[string]any{"deploymentId": dep, "externalId": "idem-x", "creatorMode": true})
		first := e.postWithKey(t, "/api/v1/embed/session/exchange", "", "ex-1", map[string]any{"sessionId": sid})
		again := e.postWithKey(t, "/api/v1/embed/session/exchange", "", "ex-1", map[string]any{"sessionId": sid})
		if first.Status != 200 || again.Status != 401 || again.Header.Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("exchange %d, again %d %s: a used id must stay used", first.Status, again.Status, again.Body)
		}
	})
}
