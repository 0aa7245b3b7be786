package gateway_test

import (
	"crypto/ed25519"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/gateway/internal/app"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/embedauth"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/gateway/internal/store"
)

// budgetHarness is a gateway whose account budgets are plans (per minute) and which
// counts what reaches its upstreams.
func budgetHarness(t *testing.T, red *devstack.Redis, plans gateway.PlanLimits, opts ...func(*gateway.Options)) (*harness, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	h := limitedHarnessWith(t, red, func(d *app.Deps) {
		for name, us := range d.Upstreams {
			target := us[0]
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				u := *target
				u.Path = r.URL.Path
				r.URL, r.RequestURI, r.Host = &u, "", u.Host
				resp, err := http.DefaultTransport.RoundTrip(r)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				defer resp.Body.Close()
				for k, v := range resp.Header {
					w.Header()[k] = v
				}
				w.WriteHeader(resp.StatusCode)
				buf := make([]byte, 32<<10)
				for {
					n, err := resp.Body.Read(buf)
					_, _ = w.Write(buf[:n])
					if err != nil {
						return
					}
				}
			}))
			t.Cleanup(proxy.Close)
			pu, _ := url.Parse(proxy.URL)
			d.Upstreams[name] = []*url.URL{pu}
		}
	}, append([]func(*gateway.Options){func(o *gateway.Options) { o.PlanLimits = plans }}, opts...)...)
	return h, &hits
}

var rateLimitField = regexp.MustCompile(`^"([a-z-]+)";r=(\d+);t=(\d+)`)

// remaining reads the first policy of a RateLimit field: its name, r and t.
func remaining(t *testing.T, hdr http.Header) (string, int, int) {
	t.Helper()
	m := rateLimitField.FindStringSubmatch(hdr.Get("RateLimit"))
	if m == nil {
		t.Fatalf("RateLimit %q (RateLimit-Policy %q): not a draft-09 field", hdr.Get("RateLimit"), hdr.Get("RateLimit-Policy"))
	}
	r, _ := strconv.Atoi(m[2])
	tt, _ := strconv.Atoi(m[3])
	return m[1], r, tt
}

// An account's budget is spent by its bearer tokens and API keys together, whichever
// gateway replica serves them (one Redis); its headers tell the quota and what is left;
// over it the answer is 429 rate_limited with Retry-After, and the service never sees
// the request. Another account has its own budget.
func TestAccountBudgetIsSharedAcrossReplicasAndRefusedBeforeTheService(t *testing.T) {
	h, hits := budgetHarness(t, devstack.RedisForTest(t), gateway.PlanLimits{store.PlanEnterprise: {N: 6, Window: time.Minute}, store.PlanPremium: {N: 100, Window: time.Minute}})
	_, other := h.replica()
	acme := h.acme()
	groups := "/api/v1/groups"
	bearer := "Bearer " + acme.Users["admin"].Bearer
	key := "Api-Key " + acme.APIKeys["admin"]
	for i := 1; i <= 6; i++ {
		gw, authz := h.gw.URL, bearer
		if i%2 == 0 {
			gw, authz = other.URL, key
		}
		code, hdr, body := h.doAt(gw, "GET", groups, authz, nil)
		if code != 200 {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
		if got := hdr.Get("RateLimit-Policy"); got != `"account";q=6;w=60` {
			t.Fatalf("request %d: RateLimit-Policy %q", i, got)
		}
		name, r, reset := remaining(t, hdr)
		if name != "account" || r != 6-i || reset < 1 || reset > 60 {
			t.Fatalf("request %d: RateLimit %q, want account r=%d", i, hdr.Get("RateLimit"), 6-i)
		}
	}
	before := hits.Load()
	code, hdr, body := h.doAt(other.URL, "GET", groups, bearer, nil)
	if code != 429 {
		t.Fatalf("7th request: %d %s, want 429", code, body)
	}
	assertErrorBody(t, body, 429)
	if !strings.Contains(string(body), `"code":"rate_limited"`) {
		t.Errorf("429 body %s: want code rate_limited", body)
	}
	if !strings.Contains(string(body), "policy account (6 requests per 1m0s) is spent for this account") {
		t.Errorf("429 body %s: want the policy, its quota and window named", body)
	}
	ra, err := strconv.Atoi(hdr.Get("Retry-After"))
	if err != nil || ra < 9 || ra > 11 { // one unit of 6 a minute comes back every 10 s
		t.Errorf("Retry-After %q, want about 10", hdr.Get("Retry-After"))
	}
	if name, r, _ := remaining(t, hdr); name != "account" || r != 0 || hdr.Get("RateLimit-Policy") != `"account";q=6;w=60` {
		t.Errorf("429 headers: RateLimit %q RateLimit-Policy %q", hdr.Get("RateLimit"), hdr.Get("RateLimit-Policy"))
	}
	if hits.Load() != before {
		t.Errorf("the refused request reached a service (%d hits, want %d)", hits.Load(), before)
	}
	// globex is another account, on another plan.
	code, hdr, _ = h.do("GET", "/api/v1/groups", "Api-Key "+h.globex().APIKeys["admin"], nil)
	if _, r, _ := remaining(t, hdr); code != 200 || r != 99 {
		t.Errorf("another account: %d %q, want 200 with 99 left", code, hdr.Get("RateLimit"))
	}
}

// Embed session tokens spend a budget of their own: the viewers of an account do not
// spend its admins' budget, nor the other way round.
func TestEmbedTokensSpendTheirOwnBudget(t *testing.T) {
	red := devstack.RedisForTest(t)
	ropts, _ := redis.ParseURL(red.URL)
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	ek := &embedKeys{keys: map[string]ed25519.PrivateKey{}}
	ek.rotate(t)
	jwks := httptest.NewServer(ek)
	defer jwks.Close()
	h, _ := budgetHarness(t, red, gateway.PlanLimits{store.PlanEnterprise: {N: 3, Window: time.Minute}}, func(o *gateway.Options) {
		ek.signer = o.Signer
		keys := auth.NewKeySet(nil, jwks.URL).WithRequestDecorator(embedauth.SignedRequest(o.Signer)).WithMinRefresh(0)
		o.Embed = embedauth.New(keys, "https://embed.test", rdb, o.Auth, nil)
	})
	acme := h.acme()
	embed := "Bearer " + ek.token(t, token.Claims{Registered: token.Registered{Subject: "viewer-1"}, SessionID: "sid-viewer",
		AccountID: acme.ID, DeploymentID: acme.Deployments[0].ID, Branch: "main", Tenant: "acme-north"})
	for i := 1; i <= 3; i++ {
		code, hdr, body := h.do("GET", "/api/v1/embed/dashboards", embed, nil)
		if name, r, _ := remaining(t, hdr); code != 200 || name != "embed" || r != 3-i {
			t.Fatalf("embed request %d: %d %q %s", i, code, hdr.Get("RateLimit"), body)
		}
	}
	if code, _, body := h.do("GET", "/api/v1/embed/dashboards", embed, nil); code != 429 || !strings.Contains(string(body), "policy embed (3 requests per 1m0s) is spent for this account's embed session tokens") {
		t.Fatalf("4th embed request: %d %s, want 429 naming the embed policy", code, body)
	}
	code, hdr, body := h.do("GET", "/api/v1/groups", "Api-Key "+acme.APIKeys["admin"], nil)
	if name, r, _ := remaining(t, hdr); code != 200 || name != "account" || r != 2 {
		t.Fatalf("the admin, after the viewers spent theirs: %d %q %s, want 200 with account r=2", code, hdr.Get("RateLimit"), body)
	}
}

// Routes cost what the route table says: a bulk move 10 of the budget, a manifest
// upload 20, a read 1; a request that costs more than what is left is refused and
// spends nothing, while a cheaper one still fits.
func TestRoutesCostWhatTheTableSays(t *testing.T) {
	h, hits := budgetHarness(t, devstack.RedisForTest(t), gateway.PlanLimits{store.PlanEnterprise: {N: 35, Window: time.Minute}})
	acme := h.acme()
	dep := acme.Deployments[0].ID
	bearer := "Bearer " + acme.Users["admin"].Bearer
	steps := []struct {
		name, method, path string
		body               any
		want, left         int
	}{
		{"bulk-move-200", "POST", fmt.Sprintf("/api/v1/deployments/%d/workspace/bulk-move", dep), map[string]any{"items": []any{}}, 200, 25},
		{"dbt-sync-upload-200", "POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), map[string]any{}, 200, 5},
		{"dbt-sync-list-200", "GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), nil, 200, 4},
		{"bulk-move-429-costs-more-than-left", "POST", fmt.Sprintf("/api/v1/deployments/%d/workspace/bulk-move", dep), map[string]any{"items": []any{}}, 429, 4},
		{"folders-get-200", "GET", fmt.Sprintf("/api/v1/deployments/%d/folders", dep), nil, 200, 3},
	}
	for _, s := range steps {
		before := hits.Load()
		code, hdr, body := h.do(s.method, s.path, bearer, s.body)
		if code != s.want {
			t.Fatalf("%s: %d %s", s.name, code, body)
		}
		if _, r, _ := remaining(t, hdr); r != s.left {
			t.Fatalf("%s: RateLimit %q, want r=%d", s.name, hdr.Get("RateLimit"), s.left)
		}
		if s.want == 429 {
			if !strings.Contains(string(body), "this request costs 10") || hits.Load() != before {
				t.Fatalf("%s: %s (upstream hits %d→%d): want the cost named and no upstream hit", s.name, body, before, hits.Load())
			}
		}
	}
}

// An account's own override replaces its plan's budget, and the change poller picks it
// up without a restart. What was spent carries over as time (GCRA keeps when the budget
// is whole again): the 12 s of one request under 5/1m are 20 units of 1000/10m.
func TestAccountOverrideTakesEffect(t *testing.T) {
	h, _ := budgetHarness(t, devstack.RedisForTest(t), gateway.PlanLimits{store.PlanFree: {N: 5, Window: time.Minute}})
	initech := h.initech()
	key := "Api-Key " + initech.APIKeys["admin"]
	if code, hdr, body := h.do("GET", "/api/v1/groups", key, nil); code != 200 || hdr.Get("RateLimit-Policy") != `"account";q=5;w=60` {
		t.Fatalf("on the plan's budget: %d %q %s", code, hdr.Get("RateLimit-Policy"), body)
	}
	since := time.Now().Add(-time.Second)
	acct, err := h.st.Account(t.Context(), initech.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.UpsertAccount(t.Context(), store.AccountSpec{Name: acct.Name, Plan: acct.Plan, DefaultEmbedTenant: acct.DefaultEmbedTenant,
		ExternalUserLimit: acct.ExternalUserLimit, RateLimit: "1000/10m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.UpsertAccount(t.Context(), store.AccountSpec{Name: acct.Name, Plan: acct.Plan, RateLimit: "1000"}); err == nil {
		t.Fatal("a malformed override was stored")
	}
	if err := h.authn.Evict(t.Context(), since); err != nil { // what the change poller does every second
		t.Fatal(err)
	}
	code, hdr, body := h.do("GET", "/api/v1/groups", key, nil)
	if name, r, _ := remaining(t, hdr); code != 200 || hdr.Get("RateLimit-Policy") != `"account";q=1000;w=600` || name != "account" || r < 970 {
		t.Fatalf("with the override: %d %q %q %s", code, hdr.Get("RateLimit-Policy"), hdr.Get("RateLimit"), body)
	}
}

// On generate-session the API key's limit and the account budget both apply: both are
// listed, the one with the least remaining first; refused by the key's limit, the
// account's budget is not spent.
func TestGenerateSessionListsBothPolicies(t *testing.T) {
	h, _ := budgetHarness(t, devstack.RedisForTest(t), gateway.PlanLimits{store.PlanEnterprise: {N: 100, Window: time.Minute}},
		func(o *gateway.Options) { o.GenerateSessionLimit = ratelimit.Limit{N: 2, Window: time.Minute} })
	acme := h.acme()
	gen := map[string]any{"deploymentId": acme.Deployments[0].ID}
	key := "Api-Key " + acme.APIKeys["admin"]
	code, hdr, body := h.do("POST", "/api/v1/embed/generate-session", key, gen)
	if code != 200 || hdr.Get("RateLimit-Policy") != `"generate-session";q=2;w=60, "account";q=100;w=60` ||
		!regexp.MustCompile(`^"generate-session";r=1;t=\d+, "account";r=99;t=\d+$`).MatchString(hdr.Get("RateLimit")) {
		t.Fatalf("generate-session: %d %q %q %s", code, hdr.Get("RateLimit-Policy"), hdr.Get("RateLimit"), body)
	}
	h.do("POST", "/api/v1/embed/generate-session", key, gen)
	code, hdr, body = h.do("POST", "/api/v1/embed/generate-session", key, gen)
	if code != 429 || !strings.Contains(string(body), "policy generate-session (2 requests per 1m0s) is spent for this API key") || hdr.Get("Retry-After") == "" {
		t.Fatalf("3rd generate-session: %d %s", code, body)
	}
	code, hdr, _ = h.do("GET", "/api/v1/groups", key, nil)
	if _, r, _ := remaining(t, hdr); code != 200 || r != 97 {
		t.Fatalf("the account after a refused generate-session: %d %q, want r=97", code, hdr.Get("RateLimit"))
	}
}

// With Redis down the account budgets fail open (served, no headers, a warning and a
// metric), while generate-session keeps refusing with 503.
func TestAccountBudgetFailsOpenWithoutRedis(t *testing.T) {
	red := devstack.RedisForTest(t)
	h, _ := budgetHarness(t, red, gateway.PlanLimits{store.PlanEnterprise: {N: 100, Window: time.Minute}},
		func(o *gateway.Options) { o.GenerateSessionLimit = ratelimit.Limit{N: 100, Window: time.Minute} })
	acme := h.acme()
	if err := red.Stop(); err != nil {
		t.Fatal(err)
	}
	code, hdr, body := h.do("GET", "/api/v1/groups", "Api-Key "+acme.APIKeys["admin"], nil)
	if code != 200 || hdr.Get("RateLimit") != "" {
		t.Fatalf("the account budget with Redis down: %d %q %s, want 200 without RateLimit", code, hdr.Get("RateLimit"), body)
	}
	// The failed decision paused the budgets: the next requests do not wait for Redis.
	start := time.Now()
	for i := 0; i < 5; i++ {
		if code, _, body := h.do("GET", "/api/v1/groups", "Api-Key "+acme.APIKeys["admin"], nil); code != 200 {
			t.Fatalf("request %d after the pause began: %d %s", i, code, body)
		}
	}
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Errorf("5 requests during the pause took %s: they waited for Redis", took)
	}
	gen := map[string]any{"deploymentId": acme.Deployments[0].ID}
	if code, _, body := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+acme.APIKeys["admin"], gen); code != 503 {
		t.Fatalf("generate-session with Redis down: %d %s, want 503", code, body)
	}
}
