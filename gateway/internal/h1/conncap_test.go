package h1_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/gateway/internal/h1"
)

// cappedServer serves h1 with limits on a free loopback port; every request is 200.
func cappedServer(t *testing.T, limits h1.ConnLimits) string {
	t.Helper()
	srv := &h1.Server{Handler: h1.HandlerFunc(func(w *h1.ResponseWriter, r *h1.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
	}), ConnLimits: limits}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String()
}

// held is an open client connection that has had one answer.
type held struct {
	c  net.Conn
	br *bufio.Reader
}

// open dials addr and sends one request; it returns the connection and its answer.
func open(t *testing.T, addr string) (*held, *http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n"+host+"\r\n"); err != nil {
		t.Fatal(err)
	}
	h := &held{c: c, br: bufio.NewReader(c)}
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	return h, resp, string(body)
}

// assertRefused checks the answer of a connection over a cap: 503 with Retry-After,
// Connection: close and the JSON error body naming the limit and its value, then the
// connection's end.
func assertRefused(t *testing.T, h *held, resp *http.Response, body, want string) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: %d close=%v Retry-After %q %s, want 503 with Connection: close and Retry-After",
			resp.StatusCode, resp.Close, resp.Header.Get("Retry-After"), body)
	}
	var e struct {
		Status  int    `json:"status"`
		Message string `json:"message"`
		Code    string `json:"code"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Status != 503 || e.Code == "" || !strings.Contains(e.Message, want) {
		t.Fatalf("over the cap: body %s, want the JSON error naming %q", body, want)
	}
	if n, err := h.br.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the refused connection stayed open (read %d bytes)", n)
	}
}

// servedEventually opens connections until one is served (a closed connection's slot is
// freed once the server has seen it close).
func servedEventually(t *testing.T, addr string) *held {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, resp, body := open(t, addr)
		if resp.StatusCode == 200 {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot freed: %d %s", resp.StatusCode, body)
		}
		_ = h.c.Close()
		time.Sleep(20 * time.Millisecond)
	}
}

// Connections of one client address beyond its cap are answered 503 and closed;
// closing one frees its slot.
func TestConnectionsOverThePerClientCapAreRefusedAndClosed(t *testing.T) {
	addr := cappedServer(t, h1.ConnLimits{Max: 100, PerClient: 3})
	var conns []*held
	for i := 0; i < 3; i++ {
		h, resp, body := open(t, addr)
		if resp.StatusCode != 200 {
			t.Fatalf("connection %d within the cap: %d %s", i, resp.StatusCode, body)
		}
		conns = append(conns, h)
	}
	h, resp, body := open(t, addr)
	assertRefused(t, h, resp, body, "from this client address: the limit is 3")
	_ = conns[0].c.Close()
	servedEventually(t, addr)
	// The connections within the cap keep being served.
	if _, err := io.WriteString(conns[1].c, "GET / HTTP/1.1\r\n"+host+"\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(conns[1].br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a held connection's next request: %v %v", resp, err)
	}
}

// Beyond the total cap every new connection is refused, whoever it is from.
func TestConnectionsOverTheTotalCapAreRefused(t *testing.T) {
	addr := cappedServer(t, h1.ConnLimits{Max: 2, PerClient: 10})
	first, _, _ := open(t, addr)
	open(t, addr)
	h, resp, body := open(t, addr)
	assertRefused(t, h, resp, body, "in total: the limit is 2")
	_ = first.c.Close()
	servedEventually(t, addr)
}

// A trusted proxy carries many clients: the per-client cap does not apply to it, its
// own cap (PerProxy) does.
func TestATrustedProxyIsCappedApart(t *testing.T) {
	addr := cappedServer(t, h1.ConnLimits{Max: 100, PerClient: 2, PerProxy: 5,
		Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	for i := 0; i < 5; i++ {
		if _, resp, body := open(t, addr); resp.StatusCode != 200 {
			t.Fatalf("the proxy's connection %d (per-client cap 2): %d %s", i, resp.StatusCode, body)
		}
	}
	h, resp, body := open(t, addr)
	assertRefused(t, h, resp, body, "from this proxy: the limit is 5")
}
