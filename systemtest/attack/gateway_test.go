package attack_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// seriesSet is the set of series (name and labels) a process's /metrics exposes.
func seriesSet(t *testing.T, addr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	set := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			set[line[:strings.LastIndexByte(line, ' ')]] = true
		}
	}
	return set
}

const tokenChars = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randomToken(r *rand.Rand, max int) string {
	b := make([]byte, 1+r.IntN(max))
	for i := range b {
		b[i] = tokenChars[r.IntN(len(tokenChars))]
	}
	return string(b)
}

// flood sends n anonymous requests with random methods to random and real paths.
func flood(t *testing.T, base string, n int, seed uint64) {
	t.Helper()
	paths := []string{"/api/v1/embed/session/exchange", "/api/v1/embed/.well-known/jwks.json", "/api/v1/openapi.json",
		"/api/v1/deployments/1/workspace", "/build/api/v1/x"}
	var wg sync.WaitGroup
	var failures sync.Map
	client := apitest.New(base)
	client.HTTP.Timeout = requestTimeout
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := w; i < n; i += 16 {
				method := randomToken(r, 2000)
				path := paths[r.IntN(len(paths))]
				if r.IntN(2) == 0 {
					path = "/" + strings.ReplaceAll(randomToken(r, 200), "%", "p") + "/" + randomToken(r, 50)
				}
				req, err := client.Request(method, path, "", nil)
				if err != nil {
					continue // a path the client itself refuses to send
				}
				resp := client.DoRequest(req)
				if resp.Err != nil {
					failures.Store(resp.Err.Error(), true)
					continue
				}
				if resp.Status >= 500 {
					failures.Store(fmt.Sprintf("%s %s: %d", method[:min(len(method), 20)], path, resp.Status), true)
				}
			}
		}(w)
	}
	wg.Wait()
	failures.Range(func(k, _ any) bool { t.Errorf("flood: %v", k); return true })
}

// Were the HTTP method a metric label, random methods would mint a new series per request
// until the gateway ran out of memory. 10,000 requests with random methods and
// paths must not add a single series to any process.
func TestRandomMethodsAndPathsAddNoSeries(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	flood(t, s.Gateway, 500, 1) // every (route, OTHER, status) the flood can produce exists now
	// The gateway's own JWKS refresh (every 2 s here) is a GET of embed-svc's JWKS route.
	if r := newAPI(s).call("GET", "/api/v1/embed/.well-known/jwks.json", "", nil); r.status != 200 {
		t.Fatalf("jwks: %s", r)
	}
	// The audit trail's first write (the seed's catalog events) makes its MongoDB series:
	// wait for it, so the comparison sees only what the flood could add.
	admin := "Bearer " + s.Seed.Accounts["acme"].Users["admin"].Bearer
	apitest.Eventually(t, 30*time.Second, "the seed's audit events stored", func() (bool, string) {
		r := newAPI(s).call("GET", "/api/v1/audit?first=1", admin, nil)
		items, _ := r.body["items"].([]any)
		return r.status == 200 && len(items) > 0, r.String()
	})
	before := map[string]map[string]bool{}
	for _, p := range s.Processes() {
		before[p.Name] = seriesSet(t, p.InternalAddr)
	}
	flood(t, s.Gateway, 10_000, 2)
	for _, p := range s.Processes() {
		after := seriesSet(t, p.InternalAddr)
		if len(after) != len(before[p.Name]) {
			var added []string
			for k := range after {
				if !before[p.Name][k] {
					added = append(added, k)
				}
			}
			sort.Strings(added)
			if len(added) > 10 {
				added = added[:10]
			}
			t.Errorf("%s: %d series before 10,000 random requests, %d after; new: %v", p.Name, len(before[p.Name]), len(after), added)
		}
	}
}

// callFrom sends a request as a client behind the ingress: the peer is the test (127.0.0.1,
// configured as a trusted proxy) and X-Forwarded-For carries xff.
func callFrom(t *testing.T, base, method, path, authz, xff string, body string) apitest.Response {
	t.Helper()
	c := apitest.New(base)
	c.HTTP.Timeout = requestTimeout
	req, err := c.Request(method, path, authz, body)
	if err != nil {
		t.Fatal(err)
	}
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	return c.Send(t, req)
}

// Per-client limits (the exchange limit, the failed-authentication throttle) are keyed on
// the real client address, not on the connection address (the ingress, shared by every
// viewer).
func TestPerClientLimitsUseTheRealClientAddress(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: []string{
		"GATEWAY_TRUSTED_PROXIES=127.0.0.1", "RATE_LIMIT_EXCHANGE=5/1m", "AUTH_FAILURE_LIMIT=10/1m",
	}})
	exchange := `{"sessionId":"not-a-session-id-at-all-0000000000000000000000"}`

	t.Run("ExchangeLimitPerClientBehindTheIngress", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			if r := callFrom(t, s.Gateway, "POST", "/api/v1/embed/session/exchange", "", "203.0.113.1", exchange); r.Status != 401 {
				t.Fatalf("exchange %d of client A: %d", i+1, r.Status)
			}
		}
		if r := callFrom(t, s.Gateway, "POST", "/api/v1/embed/session/exchange", "", "203.0.113.1", exchange); r.Status != 429 {
			t.Fatalf("client A over its limit: want 429, got %d", r.Status)
		}
		// Another viewer behind the same ingress is not throttled by A.
		if r := callFrom(t, s.Gateway, "POST", "/api/v1/embed/session/exchange", "", "203.0.113.2", exchange); r.Status != 401 {
			t.Fatalf("client B behind the same ingress: want its own bucket (401), got %d", r.Status)
		}
		// A forged hop in front of the real client's address changes nothing: the nearest
		// untrusted address is the client.
		if r := callFrom(t, s.Gateway, "POST", "/api/v1/embed/session/exchange", "", "198.51.100.7, 203.0.113.1", exchange); r.Status != 429 {
			t.Fatalf("client A with a forged first hop: want 429, got %d", r.Status)
		}
	})

	t.Run("FailedAuthenticationIsThrottledPerClient", func(t *testing.T) {
		acme := s.Seed.Accounts["acme"]
		path := fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID)
		bad := "Api-Key pk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
		for i := 0; i < 10; i++ {
			if r := callFrom(t, s.Gateway, "GET", path, bad, "203.0.113.9", ""); r.Status != 401 {
				t.Fatalf("failure %d: want 401, got %d", i+1, r.Status)
			}
		}
		r := callFrom(t, s.Gateway, "GET", path, bad, "203.0.113.9", "")
		if r.Status != 429 || r.Header.Get("Retry-After") == "" {
			t.Fatalf("over AUTH_FAILURE_LIMIT: want 429 with Retry-After, got %d", r.Status)
		}
		// Another client is unaffected.
		if r := callFrom(t, s.Gateway, "GET", path, apitest.Bearer(acme.Users["admin"].Bearer), "203.0.113.10", ""); r.Status != 200 {
			t.Fatalf("another client: want 200, got %d", r.Status)
		}
	})
}

// A forwarded identity is bound to its target, so a header on its way to one service
// cannot be replayed against any other. A header signed for workspace-svc (here with the
// stack's own key, as the gateway signs) is refused by embed-svc and dbtsync-svc, and
// accepted by workspace-svc.
func TestForwardedIdentityReplayedToAnotherServiceIs401(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	signer, err := identity.NewSigner(s.Secrets()[0])
	if err != nil {
		t.Fatal(err)
	}
	acme := s.Seed.Accounts["acme"]
	admin := acme.Users["admin"]
	dep := acme.Deployments[0]
	hdr, err := signer.Sign(&identity.Principal{Credential: identity.CredentialBearer, Audience: "workspace-svc",
		Account:    identity.Account{ID: acme.ID, Plan: acme.Plan, EmbeddingEnabled: acme.EmbeddingEnabled},
		User:       &identity.User{ID: admin.ID, Username: admin.Username, Email: admin.Email, Role: admin.Role},
		Deployment: &identity.Deployment{ID: dep.ID, ProductionBranch: dep.ProductionBranch}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(proc, path string) int {
		c := apitest.New("http://" + s.Process(proc).Addr)
		req, err := c.Request("GET", path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(identity.Header, hdr)
		return c.Send(t, req).Status
	}
	if code := get("workspace-svc-1", fmt.Sprintf("/api/v1/deployments/%d/workspace", dep.ID)); code != 200 {
		t.Fatalf("the service it was signed for: want 200, got %d", code)
	}
	if code := get("embed-svc-1", "/api/v1/groups"); code != 401 {
		t.Errorf("replayed to embed-svc: want 401, got %d", code)
	}
	if code := get("dbtsync-svc-1", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep.ID)); code != 401 {
		t.Errorf("replayed to dbtsync-svc: want 401, got %d", code)
	}
}

// Metrics and readiness describe internals (dependency state, every series)
// and a scrape is not free, so no public listener serves them: not the gateway's, and
// not a service's. The internal listener does, and names a failing dependency without
// its error text.
func TestOperationalEndpointsOnlyOnTheInternalListener(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	get := func(url string) (int, string) {
		r := apitest.New(url).Call(t, "GET", "", "", nil)
		return r.Status, string(r.Body)
	}
	for _, p := range s.Processes() {
		for _, path := range []string{"/metrics", "/readyz"} {
			// A service answers any path without a gateway identity 401, the worker 404.
			if code, body := get("http://" + p.Addr + path); (code != 404 && code != 401) || strings.Contains(body, "go_goroutines") || strings.Contains(body, "mongodb") {
				t.Errorf("%s public %s: %d %.200s", p.Name, path, code, body)
			}
			if code, body := get("http://" + p.InternalAddr + path); code != 200 {
				t.Errorf("%s internal %s: %d %.200s", p.Name, path, code, body)
			}
		}
		if code, _ := get("http://" + p.Addr + "/healthz"); code != 200 {
			t.Errorf("%s public /healthz: %d", p.Name, code)
		}
	}
	// Through the gateway, the operational paths are unknown routes like any other
	// (401 first under the API prefixes, which need credentials).
	for _, path := range []string{"/metrics", "/readyz", "/api/v1/metrics", "/build/api/v1/readyz"} {
		if code, body := get(s.Gateway + path); (code != 404 && code != 401) || strings.Contains(body, "go_goroutines") || strings.Contains(body, "checks") {
			t.Errorf("gateway %s: %d %.200s", path, code, body)
		}
	}
	// A dependency down: the internal answer names it, never its error text (hosts, ports).
	if err := s.Redis.Stop(); err != nil {
		t.Fatal(err)
	}
	code, body := get("http://" + s.Process("embed-svc-1").InternalAddr + "/readyz")
	if code != 503 || !strings.Contains(body, `"redis":"unavailable"`) || strings.Contains(body, "127.0.0.1") || strings.Contains(body, "refused") {
		t.Errorf("embed-svc /readyz with Redis down: %d %s", code, body)
	}
}
