package gateway_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
)

func TestRateLimits(t *testing.T) {
	h := limitedHarness(t, devstack.RedisForTest(t), func(o *gateway.Options) {
		o.GenerateSessionLimit = ratelimit.Limit{N: 3, Window: time.Minute}
		o.ExchangeLimit = ratelimit.Limit{N: 2, Window: time.Minute}
	})
	acme := h.acme()
	gen := map[string]any{"deploymentId": acme.Deployments[0].ID}
	for i := 1; i <= 3; i++ {
		code, hdr, _ := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+acme.APIKeys["admin"], gen)
		want := fmt.Sprintf(`"generate-session";r=%d;t=`, 3-i)
		if code != 200 || !strings.HasPrefix(hdr.Get("RateLimit"), want) || hdr.Get("RateLimit-Policy") != `"generate-session";q=3;w=60` ||
			hdr.Get("X-RateLimit-Remaining") != "" {
			t.Fatalf("request %d: %d RateLimit %q RateLimit-Policy %q, want %s…", i, code, hdr.Get("RateLimit"), hdr.Get("RateLimit-Policy"), want)
		}
	}
	code, hdr, body := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+acme.APIKeys["admin"], gen)
	if code != 429 {
		t.Fatalf("over the limit: %d %s", code, body)
	}
	assertErrorBody(t, body, 429)
	if ra, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
		t.Fatalf("Retry-After = %q", hdr.Get("Retry-After"))
	}
	// The limit is per credential: another key of the account is unaffected.
	if code, _, _ := h.do("POST", "/api/v1/embed/generate-session", "Api-Key "+acme.APIKeys["adminScoped"], gen); code != 200 {
		t.Fatalf("another key: %d", code)
	}
	// Exchange is limited per client address; other routes are not limited.
	for i := 1; i <= 3; i++ {
		code, _, _ := h.do("POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": "x"})
		want := 200
		if i == 3 {
			want = 429
		}
		if code != want {
			t.Fatalf("exchange %d: %d, want %d", i, code, want)
		}
	}
	for i := 0; i < 5; i++ {
		if code, _, _ := h.do("GET", "/api/v1/groups", "Api-Key "+acme.APIKeys["admin"], nil); code != 200 {
			t.Fatalf("unlimited route: %d", code)
		}
	}
}

// TestSlowClientBody: a client that stops sending its body gets 408 once the body
// timeout passes, and the service never sees the request.
func TestSlowClientBody(t *testing.T) {
	h := newHarness(t, func(o *gateway.Options) { o.BodyTimeout = 300 * time.Millisecond })
	acme := h.acme()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/deployments/%d/folders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":",
		acme.Deployments[0].ID, acme.Users["admin"].Bearer)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %d, want 408", resp.StatusCode)
	}
}
