package gateway_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/gateway/internal/app"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
)

// limitedHarness is a harness whose gateway counts its limits in a Redis of its own.
func limitedHarness(t *testing.T, red *devstack.Redis, opts ...func(*gateway.Options)) *harness {
	t.Helper()
	return limitedHarnessWith(t, red, nil, opts...)
}

// limitedHarnessWith is limitedHarness with the gateway's dependencies changed by dep
// first; its replicas count in the same Redis, under the same prefix.
func limitedHarnessWith(t *testing.T, red *devstack.Redis, dep func(*app.Deps), opts ...func(*gateway.Options)) *harness {
	t.Helper()
	ropts, _ := redis.ParseURL(red.URL)
	rdb := redis.NewClient(ropts)
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := devstack.UniqueName(t, "rl") + ":"
	return newHarnessWith(t, dep, append([]func(*gateway.Options){func(o *gateway.Options) {
		o.RateLimiter = ratelimit.New(rdb, prefix)
	}}, opts...)...)
}

// From an address over AUTH_FAILURE_LIMIT (one client behind an office NAT sending bad
// tokens), the valid credentials of everyone else behind it are still served: a bearer
// token (its signature is verified without the identity store), an API key verified
// recently, the same key once its cache entry has expired (looked up again at a bounded
// rate), and a valid key the gateway never verified, within the address's lookup budget.
// What fails is 429, and so is a new key id beyond that budget: checking it would cost
// the identity store a query, which is what the limit bounds.
func TestValidCredentialsAreServedFromAnAddressOverTheFailureLimit(t *testing.T) {
	h := limitedHarness(t, devstack.RedisForTest(t), func(o *gateway.Options) {
		o.AuthFailureLimit = ratelimit.Limit{N: 5, Window: time.Minute}
	})
	acme := h.acme()
	workspace := fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID)
	adminKey := "Api-Key " + acme.APIKeys["admin"]
	if code, _, body := h.do("GET", "/api/v1/groups", adminKey, nil); code != 200 {
		t.Fatalf("the admin's key before the flood: %d %s", code, body)
	}
	for i := 1; i <= 5; i++ {
		if code, _, _ := h.do("GET", workspace, "Bearer not-a-token-"+strconv.Itoa(i), nil); code != 401 {
			t.Fatalf("bad token %d: %d, want 401", i, code)
		}
	}
	code, hdr, body := h.do("GET", workspace, "Bearer not-a-token-6", nil)
	if code != 429 || hdr.Get("Retry-After") == "" || !strings.Contains(string(body), "more than 5 failed authentications per 1m0s") ||
		strings.Contains(string(body), "AUTH_FAILURE_LIMIT") {
		t.Fatalf("over the limit: %d %s (Retry-After %q), want 429 naming the limit and its value, not the setting", code, body, hdr.Get("Retry-After"))
	}
	assertErrorBody(t, body, 429)
	// A bearer token the gateway has never seen: verified, served.
	admin := h.token(acme.Users["admin"].ID, time.Hour)
	if code, _, body := h.do("GET", workspace, "Bearer "+admin, nil); code != 200 {
		t.Fatalf("the admin's valid bearer token from the throttled address: %d %s, want 200", code, body)
	}
	// An API key verified a moment ago: served from the cache.
	if code, _, body := h.do("GET", "/api/v1/groups", adminKey, nil); code != 200 {
		t.Fatalf("the admin's recently verified API key from the throttled address: %d %s, want 200", code, body)
	}
	// Its cache entry expired: looked up again, served.
	h.clock.advance(2 * time.Minute)
	if code, _, body := h.do("GET", "/api/v1/groups", adminKey, nil); code != 200 {
		t.Fatalf("the admin's API key from the throttled address after its cache entry expired: %d %s, want 200", code, body)
	}
	// A valid key never verified here: within the address's lookup budget (5 per minute).
	if code, _, body := h.do("GET", "/api/v1/groups", "Api-Key "+acme.APIKeys["adminScoped"], nil); code != 200 {
		t.Fatalf("a valid API key never verified, from the throttled address: %d %s, want 200", code, body)
	}
	// Failures stay throttled; new key ids use up the rest of the budget, and beyond it
	// are refused unlooked-up, while the keys verified before are still served.
	for i := 0; i < 8; i++ {
		_, raw, _ := credentials.NewAPIKey()
		if code, _, _ := h.do("GET", "/api/v1/groups", "Api-Key "+raw, nil); code != 429 {
			t.Errorf("unknown API key %d from the throttled address: %d, want 429", i, code)
		}
	}
	if code, _, _ := h.do("GET", "/api/v1/groups", "Bearer still-not-a-token", nil); code != 429 {
		t.Errorf("a bad bearer token from the throttled address: %d, want 429", code)
	}
	h.clock.advance(2 * time.Minute)
	if code, _, body := h.do("GET", "/api/v1/groups", adminKey, nil); code != 200 {
		t.Fatalf("the admin's API key after the budget was spent on guesses: %d %s, want 200", code, body)
	}
}

// Failures are counted per credential as well as per address: one API key tried with
// wrong secrets from many addresses (each under its own limit) is throttled, and its
// right secret is still served, whether the gateway verified it recently or not.
func TestFailuresAreCountedPerCredentialAcrossAddresses(t *testing.T) {
	h := limitedHarness(t, devstack.RedisForTest(t), func(o *gateway.Options) {
		o.AuthFailureLimit = ratelimit.Limit{N: 5, Window: time.Minute}
		o.TrustedProxies, _ = gateway.ParsePrefixes([]string{"127.0.0.1"})
	})
	acme := h.acme()
	key := acme.APIKeys["admin"]
	id, _, _ := credentials.ParseAPIKey(key)
	wrong := "Api-Key pk_" + id + "_" + strings.Repeat("B", 43)
	from := func(i int, authz string) (int, []byte) {
		c := apitest.New(h.gw.URL)
		req, err := c.Request("GET", "/api/v1/groups", authz, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
		r := c.Send(t, req)
		return r.Status, r.Body
	}
	for i := 1; i <= 5; i++ {
		if code, _ := from(i, wrong); code != 401 {
			t.Fatalf("wrong secret %d: %d, want 401", i, code)
		}
	}
	if code, body := from(6, wrong); code != 429 || !strings.Contains(string(body), "this credential") {
		t.Fatalf("wrong secret from a sixth address: %d %s, want 429 naming the credential", code, body)
	}
	if code, body := from(7, "Api-Key "+key); code != 200 {
		t.Fatalf("the key's right secret: %d %s, want 200", code, body)
	}
	// Once the gateway's caches have forgotten the key, its owner is still served: knowing
	// a key's id and failing with it does not lock its owner out.
	h.clock.advance(2 * time.Minute)
	if code, body := from(9, "Api-Key "+key); code != 200 {
		t.Fatalf("the key's right secret after the caches expired: %d %s, want 200", code, body)
	}
	if code, _ := from(8, "Bearer some-other-bad-token"); code != 401 {
		t.Fatalf("another credential from a fresh address: %d, want 401", code)
	}
}

// Limits are never lifted because Redis, where they are counted, is down: generate-
// session and the exchange are refused with 503 and Retry-After, and a failed
// authentication that cannot be counted is 503 too. Routes without a limit still work.
func TestLimitsRefuseWhenTheirCounterIsUnavailable(t *testing.T) {
	red := devstack.RedisForTest(t)
	h := limitedHarness(t, red, func(o *gateway.Options) {
		o.GenerateSessionLimit = ratelimit.Limit{N: 100, Window: time.Minute}
		o.ExchangeLimit = ratelimit.Limit{N: 100, Window: time.Minute}
		o.AuthFailureLimit = ratelimit.Limit{N: 100, Window: time.Minute}
	})
	acme := h.acme()
	gen := map[string]any{"deploymentId": acme.Deployments[0].ID}
	if code, _, body := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+acme.APIKeys["admin"], gen); code != 200 {
		t.Fatalf("with Redis up: %d %s", code, body)
	}
	if err := red.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, method, path, authz string
		body                      any
	}{
		{"generate-session", "POST", "/api/v1/embed/generate-session", "Api-Key " + acme.APIKeys["admin"], gen},
		{"exchange", "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": "x"}},
		{"failed authentication", "GET", "/api/v1/groups", "Bearer not-a-token", nil},
	} {
		code, hdr, body := h.do(c.method, c.path, c.authz, c.body)
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Errorf("%s with Redis down: %d %s (Retry-After %q), want 503 with Retry-After", c.name, code, body, hdr.Get("Retry-After"))
			continue
		}
		assertErrorBody(t, body, 503)
	}
	if code, _, body := h.do("GET", "/api/v1/groups", "Api-Key "+acme.APIKeys["admin"], nil); code != 200 {
		t.Fatalf("a route without a limit, with Redis down: %d %s", code, body)
	}
}

// Behind a proxy with no trusted proxies listed, every client would count as the proxy's
// one address (one client's failures throttling all): the gateway refuses to start.
func TestGatewayBehindAProxyRefusesAnEmptyTrustedProxyList(t *testing.T) {
	one, _ := gateway.ParsePrefixes([]string{"10.2.3.4"})
	for _, c := range []struct {
		behind  bool
		trusted []string
		ok      bool
	}{
		{behind: true, trusted: nil, ok: false},
		{behind: true, trusted: []string{"10.2.3.4"}, ok: true},
		{behind: false, trusted: nil, ok: true},
	} {
		trusted := one
		if c.trusted == nil {
			trusted = nil
		}
		err := gateway.CheckProxies(c.behind, trusted)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "GATEWAY_TRUSTED_PROXIES")) {
			t.Errorf("behind a proxy %v, trusted %v: %v", c.behind, c.trusted, err)
		}
	}
}
