package attack_test

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// From an address over AUTH_FAILURE_LIMIT, an API key the gateway's cache has forgotten
// (entries live AUTH_CACHE_TTL, 2 s here) must not be 429 for as long as someone behind
// the same address keeps failing: it is looked up again at a bounded rate and served;
// what fails is still 429.
func TestValidAPIKeyIsServedFromAThrottledAddressAfterItsCacheEntryExpired(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: []string{"AUTH_FAILURE_LIMIT=10/1m", "GATEWAY_TRUSTED_PROXIES=127.0.0.1", "AUTH_CACHE_TTL=2s"}})
	const throttled = "203.0.113.61"
	acme := s.Seed.Accounts["acme"]
	workspace := fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID)
	key := apitest.APIKey(acme.APIKeys["admin"])
	if r := callFrom(t, s.Gateway, "GET", "/api/v1/groups", key, throttled, ""); r.Status != 200 {
		t.Fatalf("the admin's key before the flood: %d %s", r.Status, r.Body)
	}
	for i := 0; i < 11; i++ {
		callFrom(t, s.Gateway, "GET", workspace, "Bearer x", throttled, "")
	}
	if r := callFrom(t, s.Gateway, "GET", workspace, "Bearer x", throttled, ""); r.Status != 429 {
		t.Fatalf("bad tokens past the failure limit: %d %s, want 429", r.Status, r.Body)
	}
	for round := 1; round <= 2; round++ {
		time.Sleep(2500 * time.Millisecond) // past the cache TTL
		if r := callFrom(t, s.Gateway, "GET", "/api/v1/groups", key, throttled, ""); r.Status != 200 {
			t.Fatalf("round %d: the admin's key from the throttled address after its cache entry expired: %d %s, want 200", round, r.Status, r.Body)
		}
		if r := callFrom(t, s.Gateway, "GET", workspace, "Bearer x", throttled, ""); r.Status != 429 {
			t.Fatalf("round %d: a bad token from the throttled address: %d %s, want 429", round, r.Status, r.Body)
		}
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	guess := "Api-Key pk_" + hex.EncodeToString(id[:]) + "_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	if r := callFrom(t, s.Gateway, "GET", "/api/v1/groups", guess, throttled, ""); r.Status != 429 {
		t.Fatalf("a guessed key id from the throttled address: %d %s, want 429", r.Status, r.Body)
	}
}

// A client's traceparent trace id must not become the audit event's traceId, or a caller
// could give its events another request's trace. The gateway starts a trace of its
// own for a client that is no trusted proxy; the event records that trace.
func TestClientTraceparentNeverBecomesTheAuditTraceId(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	var rid [6]byte
	_, _ = rand.Read(rid[:])
	clientRID := "f7-" + hex.EncodeToString(rid[:])
	c := apitest.New(s.Gateway)
	req, err := c.Request("POST", fmt.Sprintf("/api/v1/deployments/%d/folders", acme.Deployments[0].ID),
		apitest.Bearer(acme.Users["admin"].Bearer), map[string]any{"name": "t7-" + clientRID})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+clientTrace+"-00f067aa0ba902b7-01")
	req.Header.Set("baggage", "tenant=globex")
	req.Header.Set("X-Request-Id", clientRID)
	if r := c.Send(t, req); r.Status >= 300 {
		t.Fatalf("folder creation: %d %s", r.Status, r.Body)
	}
	admin := apitest.Bearer(acme.Users["admin"].Bearer)
	var traceID string
	apitest.Eventually(t, 30*time.Second, "the folder creation in the trail", func() (bool, string) {
		r := a.call("GET", "/api/v1/audit?first=200&action=workspace.folder.create", admin, nil)
		if r.status != 200 {
			return false, r.String()
		}
		var pg struct {
			Items []struct {
				ClientRequestID *string `json:"clientRequestId"`
				TraceID         *string `json:"traceId"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(r.raw), &pg); err != nil {
			t.Fatal(err)
		}
		for _, e := range pg.Items {
			if e.ClientRequestID != nil && *e.ClientRequestID == clientRID {
				if e.TraceID != nil {
					traceID = *e.TraceID
				}
				return true, ""
			}
		}
		return false, "no event with the client's request id"
	})
	if traceID == clientTrace {
		t.Fatalf("the audit event's traceId is the client's %s", clientTrace)
	}
	if len(traceID) != 32 {
		t.Fatalf("the audit event's traceId %q, want the platform's own trace id", traceID)
	}
}

// One address must not hold every descriptor the gateway has. Past
// GATEWAY_MAX_CONNS_PER_CLIENT (3 here) a connection from the same address is answered
// 503 with Connection: close and the JSON error naming the limit and its value (not the
// setting), then closed; closing one frees its slot.
func TestConnectionsPastTheGatewaysPerClientCapAreRefused(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: []string{"GATEWAY_MAX_CONNS_PER_CLIENT=3"}})
	addr := strings.TrimPrefix(s.Gateway, "http://")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	var refused *http.Response
	var body []byte
	var rest *bufio.Reader
	for i := 0; i < 4 && refused == nil; i++ {
		c, err := net.DialTimeout("tcp", addr, requestTimeout)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		_ = c.SetDeadline(time.Now().Add(requestTimeout))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("connection %d: no answer: %v", i+1, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusServiceUnavailable {
			refused, body, rest = resp, b, br
		} else if resp.StatusCode != 200 {
			t.Fatalf("connection %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	if refused == nil {
		t.Fatal("a fourth connection from one address was served, past a cap of 3")
	}
	var e struct {
		Status  int    `json:"status"`
		Message string `json:"message"`
		Code    string `json:"code"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Status != 503 || e.Code == "" || !refused.Close ||
		!strings.Contains(e.Message, "the limit is 3") || strings.Contains(e.Message, "GATEWAY_") || refused.Header.Get("X-Request-Id") == "" {
		t.Fatalf("over the cap: close=%v X-Request-Id %q %s, want 503, Connection: close and the JSON error naming the limit of 3",
			refused.Close, refused.Header.Get("X-Request-Id"), body)
	}
	if _, err := rest.ReadByte(); err == nil {
		t.Fatal("the refused connection stayed open")
	}
	for _, c := range held {
		_ = c.Close()
	}
	held = nil
	apitest.Eventually(t, 10*time.Second, "a slot freed once the connections closed", func() (bool, string) {
		// The gateway may still count a closed connection for a moment, and then closes
		// the new one unanswered: that is a try, not a failure.
		resp, err := http.Get(s.Gateway + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
}
