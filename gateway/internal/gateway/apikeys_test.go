package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/gateway/internal/apikeys"
	"github.com/analyticsco/platform/gateway/internal/app"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
)

// apiKey is a key as the API answers it.
type apiKey struct {
	ID    string  `json:"id"`
	Name  string  `json:"name"`
	Kind  string  `json:"kind"`
	Scope []int64 `json:"scope"`
	Owner struct {
		Type string `json:"type"`
		ID   int64  `json:"id"`
	} `json:"owner"`
	CreatedAt              *time.Time `json:"createdAt"`
	ExpiresAt              *time.Time `json:"expiresAt"`
	LastUsedAt             *time.Time `json:"lastUsedAt"`
	RevokedAt              *time.Time `json:"revokedAt"`
	RotatedAt              *time.Time `json:"rotatedAt"`
	Token                  string     `json:"token"`
	PreviousTokenExpiresAt *time.Time `json:"previousTokenExpiresAt"`
}

type keyPage struct {
	Items    []apiKey `json:"items"`
	PageInfo struct {
		HasNextPage bool    `json:"hasNextPage"`
		EndCursor   *string `json:"endCursor"`
	} `json:"pageInfo"`
}

const testOverlap = 5 * time.Second

// keysHarness is the harness with the API-key limits of these tests and the audit
// events in memory; the revocation poller and the last-use flush run only when a test
// runs them.
func keysHarness(t *testing.T, limits apikeys.Limits) (*harness, *audit.Memory) {
	t.Helper()
	rec := &audit.Memory{Service: "gateway"}
	h := newHarnessWith(t, func(d *app.Deps) {
		d.APIKeys, d.Audit, d.LastUsedFlush = limits, rec, time.Hour
	})
	return h, rec
}

func defaultTestLimits() apikeys.Limits {
	return apikeys.Limits{Overlap: testOverlap, Retention: time.Hour, MaxTTL: 48 * time.Hour, MaxNameBytes: 32, MaxScope: 3}
}

// createKey creates a key through the API as the caller and returns it with its token.
func (h *harness) createKey(authz string, body map[string]any) apiKey {
	h.t.Helper()
	code, hdr, raw := h.do("POST", "/api/v1/api-keys", authz, body)
	if code != 201 {
		h.t.Fatalf("create %v: %d %s", body, code, raw)
	}
	var k apiKey
	mustJSON(h.t, raw, &k)
	if hdr.Get("Location") != "/api/v1/api-keys/"+k.ID || hdr.Get("Cache-Control") != "no-store" {
		h.t.Fatalf("create: Location %q Cache-Control %q", hdr.Get("Location"), hdr.Get("Cache-Control"))
	}
	return k
}

// generate is a request with an API key on an API-key route (the echo service answers
// 200 when the gateway lets it through).
func (h *harness) generate(key string) int {
	h.t.Helper()
	code, _, _ := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+key, map[string]any{"deploymentId": h.acme().Deployments[0].ID})
	return code
}

func (h *harness) keysOf(accountID int64) int {
	h.t.Helper()
	ks, err := h.st.APIKeys(context.Background(), accountID, time.Time{})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(ks)
}

// TestAPIKeyLifecycle: a key created over the API works at once, is listed and read
// without its secret, rotates to a new secret while the old one works for the overlap
// and then stops, is revoked, stays listed for the retention, and its lastUsedAt
// advances with one write per flush, not one per request. Every change is audited.
func TestAPIKeyLifecycle(t *testing.T) {
	h, rec := keysHarness(t, defaultTestLimits())
	acme := h.acme()
	admin := "Bearer " + acme.Users["admin"].Bearer
	dep := acme.Deployments[0].ID

	k := h.createKey(admin, map[string]any{"name": "ci", "kind": "account", "scope": []int64{dep, dep}})
	if !strings.HasPrefix(k.Token, "pk_"+k.ID+"_") || k.Kind != "account" || len(k.Scope) != 1 || k.Scope[0] != dep ||
		k.Owner.Type != "user" || k.Owner.ID != acme.Users["admin"].ID || k.CreatedAt == nil || k.ExpiresAt == nil ||
		k.LastUsedAt != nil || k.RevokedAt != nil {
		t.Fatalf("created key %+v", k)
	}
	if d := k.ExpiresAt.Sub(*k.CreatedAt); d < 47*time.Hour || d > 48*time.Hour+time.Second {
		t.Fatalf("a key created without expiresAt expires %s after its creation, want API_KEY_MAX_TTL (48h here)", d)
	}
	t.Run("create-201-then-used", func(t *testing.T) {
		if code := h.generate(k.Token); code != 200 {
			t.Fatalf("the new key on generate-session: %d", code)
		}
	})
	t.Run("list-and-get-200-without-secret", func(t *testing.T) {
		code, _, raw := h.do("GET", "/api/v1/api-keys", admin, nil)
		if code != 200 || strings.Contains(string(raw), k.Token[20:]) || strings.Contains(string(raw), "secret") {
			t.Fatalf("list: %d %s", code, raw)
		}
		var page keyPage
		mustJSON(t, raw, &page)
		found := false
		for _, it := range page.Items {
			found = found || it.ID == k.ID
			if it.Token != "" {
				t.Fatalf("a listed key carries a token: %+v", it)
			}
		}
		if !found || len(page.Items) != 4 { // the seed's three and this one
			t.Fatalf("list: %d keys, %s", len(page.Items), raw)
		}
		code, _, raw = h.do("GET", "/api/v1/api-keys?first=2", admin, nil)
		mustJSON(t, raw, &page)
		if code != 200 || len(page.Items) != 2 || !page.PageInfo.HasNextPage {
			t.Fatalf("first page of 2: %d %s", code, raw)
		}
		code, _, raw = h.do("GET", "/api/v1/api-keys/"+k.ID, admin, nil)
		var got apiKey
		mustJSON(t, raw, &got)
		if code != 200 || got.ID != k.ID || got.Name != "ci" || got.Token != "" {
			t.Fatalf("get: %d %s", code, raw)
		}
		if strings.Contains(string(raw), `"createdAt":"`) && !strings.Contains(string(raw), ".") {
			t.Fatalf("timestamps without milliseconds: %s", raw)
		}
	})
	t.Run("rotate-200-old-secret-works-during-the-overlap-then-stops", func(t *testing.T) {
		code, _, raw := h.do("POST", "/api/v1/api-keys/"+k.ID+"/rotate", admin, nil)
		if code != 200 {
			t.Fatalf("rotate: %d %s", code, raw)
		}
		var r apiKey
		mustJSON(t, raw, &r)
		if r.ID != k.ID || r.Token == k.Token || !strings.HasPrefix(r.Token, "pk_"+k.ID+"_") || r.RotatedAt == nil || r.PreviousTokenExpiresAt == nil {
			t.Fatalf("rotated: %+v", r)
		}
		if d := r.PreviousTokenExpiresAt.Sub(*r.RotatedAt); d < testOverlap-time.Second || d > testOverlap+time.Second {
			t.Fatalf("the old secret stops %s after the rotation, want the overlap %s", d, testOverlap)
		}
		// The old secret's record is cached: the new one is read again once, and works.
		if code := h.generate(r.Token); code != 200 {
			t.Fatalf("the new secret right after the rotation: %d", code)
		}
		if code := h.generate(k.Token); code != 200 {
			t.Fatalf("the old secret during the overlap: %d", code)
		}
		h.clock.set(testOverlap + time.Second)
		defer func() { h.clock.set(0) }()
		if code := h.generate(k.Token); code != 401 {
			t.Fatalf("the old secret after the overlap: %d, want 401", code)
		}
		if code := h.generate(r.Token); code != 200 {
			t.Fatalf("the new secret after the overlap: %d", code)
		}
		k.Token = r.Token
	})
	t.Run("last-used-at-advances-with-one-write-per-flush", func(t *testing.T) {
		_, _ = h.authn.FlushLastUsed(t.Context(), h.st) // what the requests above marked
		before := h.lastUsed(admin, k.ID)
		// Later than every use above (the rotation's ran the clock past the overlap).
		h.clock.set(2 * testOverlap)
		defer func() { h.clock.set(0) }()
		for range 20 {
			if code := h.generate(k.Token); code != 200 {
				t.Fatalf("use: %d", code)
			}
		}
		n, err := h.authn.FlushLastUsed(t.Context(), h.st)
		if err != nil || n != 1 {
			t.Fatalf("a flush after 20 requests with one key wrote %d keys (%v), want 1", n, err)
		}
		after := h.lastUsed(admin, k.ID)
		if after == nil || (before != nil && !after.After(*before)) {
			t.Fatalf("lastUsedAt %v after the flush, %v before", after, before)
		}
		if n, _ := h.authn.FlushLastUsed(t.Context(), h.st); n != 0 {
			t.Fatalf("a flush with no use since wrote %d keys", n)
		}
	})
	t.Run("revoke-200-then-401-and-listed-for-the-retention", func(t *testing.T) {
		since := time.Now()
		code, _, raw := h.do("DELETE", "/api/v1/api-keys/"+k.ID, admin, nil)
		var rk apiKey
		mustJSON(t, raw, &rk)
		if code != 200 || rk.RevokedAt == nil {
			t.Fatalf("revoke: %d %s", code, raw)
		}
		if err := h.authn.Evict(t.Context(), since.Add(-time.Second)); err != nil { // the poller's work
			t.Fatal(err)
		}
		if code := h.generate(k.Token); code != 401 {
			t.Fatalf("revoked key: %d, want 401", code)
		}
		if code, _, raw := h.do("DELETE", "/api/v1/api-keys/"+k.ID, admin, nil); code != 200 {
			t.Fatalf("revoking twice: %d %s", code, raw)
		}
		code, _, raw = h.do("POST", "/api/v1/api-keys/"+k.ID+"/rotate", admin, nil)
		if code != 409 {
			t.Fatalf("rotating a revoked key: %d %s, want 409", code, raw)
		}
		assertErrorBody(t, raw, 409)
		if code, _, _ := h.do("GET", "/api/v1/api-keys/"+k.ID, admin, nil); code != 200 {
			t.Fatalf("a revoked key within the retention: %d", code)
		}
		h.clock.set(2 * time.Hour) // past the retention (an hour here)
		defer func() { h.clock.set(0) }()
		if code, _, _ := h.do("GET", "/api/v1/api-keys/"+k.ID, admin, nil); code != 404 {
			t.Fatalf("a revoked key past the retention: %d, want 404", code)
		}
		_, _, raw = h.do("GET", "/api/v1/api-keys", admin, nil)
		if strings.Contains(string(raw), k.ID) {
			t.Fatalf("a key revoked past the retention is listed: %s", raw)
		}
	})
	t.Run("expiry-401-and-rotate-409", func(t *testing.T) {
		exp := time.Now().Add(time.Minute).UTC()
		e := h.createKey(admin, map[string]any{"name": "short", "kind": "account", "expiresAt": exp.Format(time.RFC3339Nano)})
		if code := h.generate(e.Token); code != 200 {
			t.Fatalf("before its expiry: %d", code)
		}
		h.clock.set(2 * time.Minute)
		defer func() { h.clock.set(0) }()
		if code := h.generate(e.Token); code != 401 {
			t.Fatalf("after its expiry: %d, want 401", code)
		}
		code, _, raw := h.do("POST", "/api/v1/api-keys/"+e.ID+"/rotate", admin, nil)
		if code != 409 {
			t.Fatalf("rotating an expired key: %d %s, want 409", code, raw)
		}
	})
	t.Run("the-key-manages-keys-too", func(t *testing.T) {
		// An admin's unscoped account key (the seed's) is the other credential allowed.
		nk := h.createKey("Api-Key "+acme.APIKeys["admin"], map[string]any{"name": "by-key", "kind": "personal",
			"owner": map[string]any{"type": "user", "id": acme.Users["developer"].ID}})
		if nk.Kind != "personal" || nk.Owner.ID != acme.Users["developer"].ID {
			t.Fatalf("created by a key: %+v", nk)
		}
	})
	t.Run("audited", func(t *testing.T) {
		var creates, rotates, revokes, refused int
		for _, ev := range rec.Events() {
			if ev.AccountID != acme.ID || ev.Target.Type != "api_key" || ev.RequestID == "" {
				t.Fatalf("event %+v", ev)
			}
			switch {
			case ev.Outcome.Result == audit.Failure:
				refused++
			case ev.Action == apikeys.ActionCreate:
				creates++
			case ev.Action == apikeys.ActionRotate:
				rotates++
				if ev.Target.ID != k.ID || ev.Actor.Type != audit.ActorUser {
					t.Fatalf("rotate event %+v", ev)
				}
			case ev.Action == apikeys.ActionRevoke:
				revokes++
			}
		}
		if creates != 3 || rotates != 1 || revokes != 2 || refused != 2 {
			t.Fatalf("events: %d creates, %d rotates, %d revokes, %d refused; want 3, 1, 2, 2: %+v", creates, rotates, revokes, refused, rec.Events())
		}
	})
}

func (h *harness) lastUsed(authz, id string) *time.Time {
	h.t.Helper()
	code, _, raw := h.do("GET", "/api/v1/api-keys/"+id, authz, nil)
	if code != 200 {
		h.t.Fatalf("get %s: %d %s", id, code, raw)
	}
	var k apiKey
	mustJSON(h.t, raw, &k)
	return k.LastUsedAt
}

// TestAPIKeyRefusals: who may not manage keys gets the platform's 403 codes, another
// account's key is 404, and every bad input is a 4xx naming the rule, with nothing
// created and the refusal audited.
func TestAPIKeyRefusals(t *testing.T) {
	h, rec := keysHarness(t, defaultTestLimits())
	acme, globex := h.acme(), h.globex()
	admin := "Bearer " + acme.Users["admin"].Bearer
	ownKey := h.createKey(admin, map[string]any{"name": "own", "kind": "account"})
	rec.Reset()
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name, method, path, authz string
		body                      any
		status                    int
		code, message             string
	}{
		{"create-401-no-credential", "POST", "", "", map[string]any{"name": "x", "kind": "account"}, 401, "unauthenticated", ""},
		{"create-403-developer-bearer", "POST", "", "Bearer " + acme.Users["developer"].Bearer, map[string]any{"name": "x", "kind": "account"}, 403, "forbidden", "admin role"},
		{"create-403-personal-key", "POST", "", "Api-Key " + acme.APIKeys["personal"], map[string]any{"name": "x", "kind": "account"}, 403, "personal_key", ""},
		{"create-403-scoped-key", "POST", "", "Api-Key " + acme.APIKeys["adminScoped"], map[string]any{"name": "x", "kind": "account"}, 403, "key_out_of_scope", ""},
		{"list-403-scoped-key", "GET", "", "Api-Key " + acme.APIKeys["adminScoped"], nil, 403, "key_out_of_scope", ""},
		{"create-400-name-missing", "POST", "", admin, map[string]any{"kind": "account"}, 400, "invalid_request", "name is required"},
		{"create-400-name-over-its-bound", "POST", "", admin, map[string]any{"name": strings.Repeat("n", 33), "kind": "account"}, 400, "invalid_request", "limit of 32"},
		{"create-400-name-with-control-characters", "POST", "", admin, map[string]any{"name": "a\nb", "kind": "account"}, 400, "invalid_request", "control"},
		{"create-400-kind", "POST", "", admin, map[string]any{"name": "x", "kind": "root"}, 400, "invalid_request", "kind must be account or personal"},
		{"create-400-scope-of-another-account", "POST", "", admin, map[string]any{"name": "x", "kind": "account", "scope": []int64{globex.Deployments[0].ID}}, 400, "invalid_request", "not a deployment of this account"},
		{"create-400-scope-unknown-deployment", "POST", "", admin, map[string]any{"name": "x", "kind": "account", "scope": []int64{999999}}, 400, "invalid_request", "deployment 999999"},
		{"create-400-scope-over-its-bound", "POST", "", admin, map[string]any{"name": "x", "kind": "account", "scope": []int64{1, 2, 3, 4}}, 400, "invalid_request", "limit of 3"},
		{"create-400-expiry-in-the-past", "POST", "", admin, map[string]any{"name": "x", "kind": "account", "expiresAt": "2020-01-01T00:00:00Z"}, 400, "invalid_request", "not in the future"},
		{"create-400-expiry-beyond-the-maximum", "POST", "", admin, map[string]any{"name": "x", "kind": "account", "expiresAt": time.Now().Add(49 * time.Hour).UTC().Format(time.RFC3339)}, 400, "invalid_request", "beyond the limit of 48h"},
		{"create-400-owner-of-another-account", "POST", "", admin, map[string]any{"name": "x", "kind": "account", "expiresAt": future, "owner": map[string]any{"type": "user", "id": globex.Users["admin"].ID}}, 400, "invalid_request", "not a user of this account"},
		{"create-400-owner-person-as-service-account", "POST", "", admin, map[string]any{"name": "x", "kind": "account", "owner": map[string]any{"type": "serviceAccount", "id": acme.Users["viewer"].ID}}, 400, "invalid_request", "not a service account"},
		{"create-400-unknown-field", "POST", "", admin, map[string]any{"name": "x", "kind": "account", "secret": "mine"}, 400, "invalid_request", "unknown field"},
		{"create-400-not-an-object", "POST", "", admin, []int{1}, 400, "invalid_request", ""},
		{"create-400-scope-not-ids", "POST", "", admin, map[string]any{"name": "x", "kind": "account", "scope": "all"}, 400, "invalid_request", "scope"},
		{"get-404-another-accounts-key", "GET", "/" + ownKey.ID, "Bearer " + globex.Users["admin"].Bearer, nil, 404, "not_found", ""},
		{"revoke-404-another-accounts-key", "DELETE", "/" + ownKey.ID, "Bearer " + globex.Users["admin"].Bearer, nil, 404, "not_found", ""},
		{"rotate-404-another-accounts-key", "POST", "/" + ownKey.ID + "/rotate", "Bearer " + globex.Users["admin"].Bearer, nil, 404, "not_found", ""},
		{"get-404-malformed-id", "GET", "/not-a-key-id", admin, nil, 404, "not_found", ""},
		{"get-404-unknown-id", "GET", "/0123456789abcdef", admin, nil, 404, "not_found", ""},
		{"rotate-400-body-not-empty", "POST", "/" + ownKey.ID + "/rotate", admin, map[string]any{"overlap": "1h"}, 400, "invalid_request", "unknown field"},
		{"put-405", "PUT", "/" + ownKey.ID, admin, map[string]any{}, 405, "method_not_allowed", ""},
	}
	before := h.keysOf(acme.ID)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, raw := h.do(c.method, "/api/v1/api-keys"+c.path, c.authz, c.body)
			if code != c.status {
				t.Fatalf("%d %s, want %d", code, raw, c.status)
			}
			assertErrorBody(t, raw, c.status)
			var e struct{ Code, Message string }
			_ = json.Unmarshal(raw, &e)
			if e.Code != c.code || !strings.Contains(e.Message, c.message) {
				t.Fatalf("%s: code %q message %q, want %q containing %q", raw, e.Code, e.Message, c.code, c.message)
			}
		})
	}
	if after := h.keysOf(acme.ID); after != before {
		t.Fatalf("refused requests changed the account's keys: %d, then %d", before, after)
	}
	if code, _, _ := h.do("GET", "/api/v1/api-keys/"+ownKey.ID, admin, nil); code != 200 {
		t.Fatalf("the key another account tried to revoke: %d", code)
	}
	if code := h.generate(ownKey.Token); code != 200 {
		t.Fatalf("the key another account tried to rotate or revoke stopped working: %d", code)
	}
	t.Run("create-415-not-json", func(t *testing.T) {
		code, _, raw := h.do("POST", "/api/v1/api-keys", admin, nil, "Content-Type", "text/plain")
		if code != 400 && code != 415 {
			t.Fatalf("%d %s", code, raw)
		}
	})
	var refusedCreates int
	for _, ev := range rec.Events() {
		if ev.Action == apikeys.ActionCreate && ev.Outcome.Result == audit.Failure && ev.Outcome.Status >= 400 {
			refusedCreates++
		}
	}
	if refusedCreates == 0 {
		t.Fatalf("no refused create was audited: %+v", rec.Events())
	}
}

// TestAPIKeyPerAccountBound: an account keeps at most API_KEY_MAX_PER_ACCOUNT live keys:
// one more is 400 api_key_limit, and nothing is created; a revoked key frees its place.
func TestAPIKeyPerAccountBound(t *testing.T) {
	l := defaultTestLimits()
	l.MaxPerAccount = 4 // the seed gives acme three
	h, _ := keysHarness(t, l)
	acme := h.acme()
	admin := "Bearer " + acme.Users["admin"].Bearer
	k := h.createKey(admin, map[string]any{"name": "fourth", "kind": "account"})
	before := h.keysOf(acme.ID)
	code, _, raw := h.do("POST", "/api/v1/api-keys", admin, map[string]any{"name": "fifth", "kind": "account"})
	if code != 400 || !strings.Contains(string(raw), `"code":"api_key_limit"`) || !strings.Contains(string(raw), "4 live API keys") {
		t.Fatalf("a fifth key: %d %s, want 400 api_key_limit naming the limit", code, raw)
	}
	if after := h.keysOf(acme.ID); after != before {
		t.Fatalf("the refused create left a key: %d, then %d", before, after)
	}
	if code, _, raw := h.do("DELETE", "/api/v1/api-keys/"+k.ID, admin, nil); code != 200 {
		t.Fatalf("revoke: %d %s", code, raw)
	}
	h.createKey(admin, map[string]any{"name": "fifth", "kind": "account"})
	// Another account's keys do not count against this one's bound.
	h.createKey("Bearer "+h.globex().Users["admin"].Bearer, map[string]any{"name": "globex", "kind": "account"})
}

// TestAPIKeyChangesReachEveryReplica: two gateway replicas on one identity store, each
// polling its changes as in production (AUTH_REVOCATION_POLL, 1 s). A key created on
// one works on the other; a rotation's new secret works on the other at once; a
// revocation on one is refused by both within the bound.
func TestAPIKeyChangesReachEveryReplica(t *testing.T) {
	h, _ := keysHarness(t, defaultTestLimits())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.authn.WatchChanges(ctx, time.Second)
	other, otherSrv := h.replica()
	go other.Auth.WatchChanges(ctx, time.Second)
	acme := h.acme()
	admin := "Bearer " + acme.Users["admin"].Bearer
	onOther := func(key string) int {
		code, _ := h.onServer(otherSrv, "POST", "/api/v1/embed/generate-session", "Api-Key "+key, map[string]any{"deploymentId": acme.Deployments[0].ID})
		return code
	}
	k := h.createKey(admin, map[string]any{"name": "replicated", "kind": "account"})
	if code := onOther(k.Token); code != 200 {
		t.Fatalf("a key created on one replica, on the other: %d", code)
	}
	code, _, raw := h.do("POST", "/api/v1/api-keys/"+k.ID+"/rotate", admin, nil)
	var r apiKey
	mustJSON(t, raw, &r)
	if code != 200 {
		t.Fatalf("rotate: %d %s", code, raw)
	}
	if code := onOther(r.Token); code != 200 {
		t.Fatalf("the rotated secret on the other replica at once: %d", code)
	}
	if code := onOther(k.Token); code != 200 {
		t.Fatalf("the old secret on the other replica during the overlap: %d", code)
	}
	code, _ = h.onServer(otherSrv, "DELETE", "/api/v1/api-keys/"+k.ID, admin, nil)
	if code != 200 {
		t.Fatalf("revoke on the other replica: %d", code)
	}
	revoked := time.Now()
	for _, srv := range []*gatewayServer{h.gw, otherSrv} {
		for {
			c, _ := h.onServer(srv, "POST", "/api/v1/embed/generate-session", "Api-Key "+r.Token, map[string]any{"deploymentId": acme.Deployments[0].ID})
			if c == 401 {
				break
			}
			// The bound is one poll (1 s); the deadline leaves the poll's own query and a
			// loaded machine room, and the time taken is logged.
			if time.Since(revoked) > 2*time.Second {
				t.Fatalf("%s still serves a key revoked %s ago (%d)", srv.URL, time.Since(revoked), c)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("the revocation was refused by both replicas %s after it", time.Since(revoked).Round(time.Millisecond))
}

// onServer is do against another gateway replica.
func (h *harness) onServer(srv *gatewayServer, method, path, authz string, body any) (int, []byte) {
	h.t.Helper()
	saved := h.gw
	h.gw = srv
	defer func() { h.gw = saved }()
	code, _, raw := h.do(method, path, authz, body)
	return code, raw
}

// TestPlatformctlKeysUseTheAPIsRules: platformctl's key creation is the API's code: the
// same refusals, and its keys are listed like any other.
func TestPlatformctlKeysUseTheAPIsRules(t *testing.T) {
	h, _ := keysHarness(t, defaultTestLimits())
	acme := h.acme()
	svc := apikeys.New(h.st, nil, defaultTestLimits(), nil)
	_, err := svc.Create(t.Context(), apikeys.Operator(acme.ID), apikeys.CreateRequest{Name: "x", Kind: "root",
		Owner: &apikeys.Owner{Type: apikeys.OwnerUser, ID: acme.Users["admin"].ID}})
	if err == nil || !strings.Contains(err.Error(), "kind must be account or personal") {
		t.Fatalf("platformctl with a bad kind: %v", err)
	}
	out, err := svc.Create(t.Context(), apikeys.Operator(acme.ID), apikeys.CreateRequest{Name: "ops", Kind: identity.KeyAccount,
		Owner: &apikeys.Owner{Type: apikeys.OwnerUser, ID: acme.Users["admin"].ID}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, raw := h.do("GET", "/api/v1/api-keys/"+out.ID, "Bearer "+acme.Users["admin"].Bearer, nil)
	if !strings.Contains(string(raw), `"name":"ops"`) {
		t.Fatalf("platformctl's key over the API: %s", raw)
	}
	if _, err := svc.Rotate(t.Context(), apikeys.Operator(h.globex().ID), out.ID); err == nil {
		t.Fatal("a rotation in another account than the key's succeeded")
	}
	if _, err := h.st.APIKey(t.Context(), out.ID); err != nil {
		t.Fatal(err)
	}
}
