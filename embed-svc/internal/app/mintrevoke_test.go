package app_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/store/redisstore"
	"github.com/analyticsco/platform/embed-svc/revocation"
)

// beforeSave decorates the service's session store at its Redis client: armed, it runs
// its function once, just before the first command that makes a session id exchangeable
// (a single command, not the reservation's pipeline, naming a session id key), with
// that key. A mint sends that command after it has inserted the session's record, so
// the function runs exactly between the record insert and the save.
type beforeSave struct {
	armed atomic.Bool
	fn    func(key string)
}

func (h *beforeSave) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *beforeSave) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *beforeSave) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.Load() {
			for _, a := range cmd.Args()[1:] {
				if key, ok := a.(string); ok && strings.HasPrefix(key, redisstore.SessionPrefix) && h.armed.CompareAndSwap(true, false) {
					h.fn(key)
					break
				}
			}
		}
		return next(ctx, cmd)
	}
}

// TestSessionRevokedDuringItsMintStaysRevoked: a bulk revoke of the user's sessions that
// runs while the user's mint is under way, after the session's record is written and
// before its id is made exchangeable, counts the session and ends it for good: the mint
// answers its id (minted, then revoked), an exchange of it is the contract's 401
// session_id_invalid, the list shows it revoked and its marker stays. A reservation lost
// otherwise before the save (no marker) makes the mint a 503 whose id was never usable.
func TestSessionRevokedDuringItsMintStaysRevoked(t *testing.T) {
	e := newEnv(t)
	hook := &beforeSave{}
	e.rdb.AddHook(hook)
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	api := apitest.New(e.gw.URL)
	ctx := context.Background()

	t.Run("revoked-in-bulk-between-record-and-save", func(t *testing.T) {
		ext, tenant := uid("mid-mint"), tname("midmint")
		var revoke apitest.Response
		var pendingKey string
		hook.fn = func(k string) {
			pendingKey = k
			// The HTTP client of the test, called from the mint's own request: the revoke
			// runs to its end while the mint waits on its save.
			revoke = api.Do("POST", "/api/v1/embed/sessions/revoke", key, map[string]any{"externalId": ext, "tenant": tenant})
		}
		hook.armed.Store(true)
		mint := e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": tenant})
		if hook.armed.Load() {
			t.Fatal("the mint sent no save of its session id")
		}
		if revoke.Err != nil || revoke.Status != 200 {
			t.Fatalf("the bulk revoke during the mint = %s", revoke)
		}
		var counted struct{ Revoked int }
		if err := json.Unmarshal(revoke.Body, &counted); err != nil || counted.Revoked != 1 {
			t.Fatalf("the bulk revoke during the mint counted %s, want the mint's session (1)", revoke.Body)
		}
		if mint.Status != 200 {
			t.Fatalf("the mint whose session was revoked before its save = %d %s, want 200 with its (revoked) id", mint.Status, mint.Body)
		}
		var out struct{ SessionID string }
		mint.json(t, &out)
		sid := embed.PublicSessionHandle(out.SessionID)
		if pendingKey != redisstore.SessionPrefix+sid {
			t.Fatalf("the hook ran on %q, not the minted id's key", pendingKey)
		}
		ex := e.do(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": out.SessionID})
		if ex.Status != 401 || ex.Error(t).Code != "session_id_invalid" {
			t.Fatalf("exchange of the id revoked during its mint = %d %s, want 401 session_id_invalid", ex.Status, ex.Body)
		}
		r := e.do(t, "GET", "/api/v1/embed/sessions?"+url.Values{"externalId": {ext}, "tenant": {tenant}}.Encode(), key, nil)
		var l sessionList
		r.json(t, &l)
		if r.Status != 200 || len(l.Items) != 1 || l.Items[0].State != embed.StateRevoked || l.Items[0].RevokedAt == nil {
			t.Fatalf("list of the user's sessions = %d %s, want its one session revoked", r.Status, r.Body)
		}
		if n, err := e.rdb.Exists(ctx, revocation.SessionKey(sid)).Result(); err != nil || n != 1 {
			t.Fatalf("the revocation marker after the mint: %d %v", n, err)
		}
		if n, err := e.rdb.Exists(ctx, redisstore.SessionPrefix+sid).Result(); err != nil || n != 0 {
			t.Fatalf("the session id key after the mint: %d %v", n, err)
		}
		again := api.Do("POST", "/api/v1/embed/sessions/revoke", key, map[string]any{"externalId": ext, "tenant": tenant})
		if again.Status != 200 || !strings.Contains(string(again.Body), `"revoked":0`) {
			t.Fatalf("a second bulk revoke = %s, want 0 revoked", again)
		}
	})

	t.Run("reservation-lost-before-the-save", func(t *testing.T) {
		ext := uid("lost")
		hook.fn = func(k string) {
			if err := e.rdb.Del(ctx, k).Err(); err != nil {
				t.Errorf("delete the reservation: %v", err)
			}
		}
		hook.armed.Store(true)
		mint := e.do(t, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": dep, "externalId": ext})
		if hook.armed.Load() {
			t.Fatal("the mint sent no save of its session id")
		}
		if mint.Status != 503 || mint.Header.Get("Retry-After") == "" || mint.Error(t).Code == "" {
			t.Fatalf("the mint whose reservation was lost = %d %s, want 503 with Retry-After", mint.Status, mint.Body)
		}
		r := e.do(t, "GET", "/api/v1/embed/sessions?"+url.Values{"externalId": {ext}}.Encode(), key, nil)
		var l sessionList
		r.json(t, &l)
		if r.Status != 200 || len(l.Items) != 1 || l.Items[0].State == embed.StatePending || l.Items[0].State == embed.StateActive {
			t.Fatalf("list of the user's sessions = %d %s, want its one session neither pending nor active", r.Status, r.Body)
		}
	})
}
