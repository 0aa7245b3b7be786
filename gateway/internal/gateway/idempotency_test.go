package gateway_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/idempotency"
)

// TestAPIKeyPOSTsRetriedWithTheirKeyActOnce: create and rotate, sent to one gateway and
// retried on another replica with the same Idempotency-Key, act once (one key, one
// audit event) and answer the first answer again, marked Idempotent-Replayed.
func TestAPIKeyPOSTsRetriedWithTheirKeyActOnce(t *testing.T) {
	h, rec := keysHarness(t, defaultTestLimits())
	_, other := h.replica()
	acme := h.acme()
	admin := "Bearer " + acme.Users["admin"].Bearer
	send := func(base, path, key string, body any) apitest.Response {
		t.Helper()
		req, err := apitest.New(base).Request("POST", path, admin, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(idempotency.Header, key)
		return apitest.New(base).Send(t, req)
	}
	count := func(action string) int {
		n := 0
		for _, ev := range rec.Events() {
			if ev.Action == action {
				n++
			}
		}
		return n
	}
	t.Run("api-keys-create-replayed-on-another-replica", func(t *testing.T) {
		before := h.keysOf(acme.ID)
		body := map[string]any{"name": "idem", "kind": "account"}
		first := send(h.gw.URL, "/api/v1/api-keys", "create-1", body)
		again := send(other.URL, "/api/v1/api-keys", "create-1", body)
		if first.Status != http.StatusCreated || again.Status != first.Status || string(again.Body) != string(first.Body) ||
			again.Header.Get(idempotency.ReplayedHeader) != "true" || again.Header.Get("Location") != first.Header.Get("Location") || again.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("first %d %s; retry %d %s %v", first.Status, first.Body, again.Status, again.Body, again.Header)
		}
		if after := h.keysOf(acme.ID); after != before+1 {
			t.Fatalf("keys %d, then %d: want one more", before, after)
		}
		if n := count("platform.api_key.create"); n != 1 {
			t.Fatalf("%d create events, want 1", n)
		}
		reused := send(other.URL, "/api/v1/api-keys", "create-1", map[string]any{"name": "another", "kind": "account"})
		if reused.Status != 422 || reused.Error(t).Code != "idempotency_key_reused" {
			t.Fatalf("another body: %d %s", reused.Status, reused.Body)
		}
	})
	t.Run("api-keys-rotate-replayed", func(t *testing.T) {
		k := h.createKey(admin, map[string]any{"name": "rot", "kind": "account"})
		first := send(h.gw.URL, "/api/v1/api-keys/"+k.ID+"/rotate", "rotate-1", nil)
		again := send(other.URL, "/api/v1/api-keys/"+k.ID+"/rotate", "rotate-1", nil)
		if first.Status != 200 || string(again.Body) != string(first.Body) || again.Header.Get(idempotency.ReplayedHeader) != "true" {
			t.Fatalf("first %d %s; retry %d %s", first.Status, first.Body, again.Status, again.Body)
		}
	})
	t.Run("api-keys-create-400-invalid-key", func(t *testing.T) {
		before := h.keysOf(acme.ID)
		r := send(h.gw.URL, "/api/v1/api-keys", strings.Repeat("k", 256), map[string]any{"name": "never", "kind": "account"})
		if r.Status != 400 || r.Error(t).Code != "invalid_idempotency_key" || h.keysOf(acme.ID) != before {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
	})
}

func TestServiceAccountPOSTsRetriedWithTheirKeyActOnce(t *testing.T) {
	h, rec, _ := saHarness(t, nil)
	admin := "Bearer " + h.acme().Users["admin"].Bearer
	send := func(path, key string, body any) apitest.Response {
		t.Helper()
		req, err := apitest.New(h.gw.URL).Request("POST", path, admin, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(idempotency.Header, key)
		return apitest.New(h.gw.URL).Send(t, req)
	}
	count := func(action string) int {
		n := 0
		for _, ev := range rec.Events() {
			if ev.Action == action {
				n++
			}
		}
		return n
	}
	body := map[string]any{"name": "ci", "role": "developer"}
	first := send("/api/v1/service-accounts", "sa-1", body)
	again := send("/api/v1/service-accounts", "sa-1", body)
	if first.Status != http.StatusCreated || again.Status != first.Status || string(again.Body) != string(first.Body) ||
		again.Header.Get(idempotency.ReplayedHeader) != "true" || count("platform.service_account.create") != 1 {
		t.Fatalf("first %d %s; retry %d %s; %d create events", first.Status, first.Body, again.Status, again.Body, count("platform.service_account.create"))
	}
	var sa struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(first.Body, &sa); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/service-accounts/" + strconv.FormatInt(sa.ID, 10) + "/secrets"
	s1 := send(path, "secret-1", nil)
	s2 := send(path, "secret-1", nil)
	if s1.Status != http.StatusCreated || string(s2.Body) != string(s1.Body) || count("platform.service_account_secret.create") != 1 {
		t.Fatalf("secret: first %d %s; retry %d %s", s1.Status, s1.Body, s2.Status, s2.Body)
	}
	if r := send("/api/v1/service-accounts", "sa-1", map[string]any{"name": "other", "role": "viewer"}); r.Status != 422 || r.Error(t).Code != "idempotency_key_reused" {
		t.Fatalf("another body: %d %s", r.Status, r.Body)
	}
}
