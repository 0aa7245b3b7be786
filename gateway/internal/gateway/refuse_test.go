package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/h1"
)

// syncBuffer is a log destination written from the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A request refused before any route for a limit of the server (a header section over
// its size, a connection over a cap) is answered with the limit and its value; the
// setting that sets it is named in the operator's log only.
func TestRefusalsNameTheLimitToTheClientAndTheSettingInTheLog(t *testing.T) {
	var log syncBuffer
	u, _ := url.Parse("http://127.0.0.1:1")
	gw, err := gateway.New(gateway.Options{Logger: slog.New(slog.NewJSONHandler(&log, nil)),
		Upstreams: map[string][]*url.URL{"workspace-svc": {u}, "embed-svc": {u}, "dbtsync-svc": {u}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &h1.Server{Handler: h1.HandlerFunc(func(w *h1.ResponseWriter, r *h1.Request) {}), OnError: gw.Refuse,
		Limits: h1.Limits{MaxHeaderBytes: 256}, ConnLimits: h1.ConnLimits{PerClient: 1}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	send := func(raw string) (*http.Response, string, net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), c
	}
	for _, c := range []struct {
		name, raw, message, setting string
		status                      int
		hold                        bool
	}{
		{"header section over its limit", "GET / HTTP/1.1\r\nHost: a\r\nX-A: " + strings.Repeat("a", 300) + "\r\n\r\n",
			"the header fields are larger than the limit of 256 bytes", "GATEWAY_MAX_HEADER_BYTES", 431, false},
		{"second connection of one address", "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
			"too many connections from this client address: the limit is 1", "GATEWAY_MAX_CONNS_PER_CLIENT", 503, true},
	} {
		if c.hold {
			// One connection held open, served: once the earlier ones are gone, it is.
			deadline := time.Now().Add(5 * time.Second)
			for {
				resp, _, held := send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
				if resp.StatusCode == 200 {
					break
				}
				_ = held.Close()
				if time.Now().After(deadline) {
					t.Fatalf("no connection served: %d", resp.StatusCode)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		resp, body, conn := send(c.raw)
		var e struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
			Code    string `json:"code"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != c.status || e.Status != c.status || e.Code == "" ||
			!strings.Contains(e.Message, c.message) || strings.Contains(e.Message, "GATEWAY_") || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: %d %s, want %d naming %q and no setting", c.name, resp.StatusCode, body, c.status, c.message)
		}
		if !strings.Contains(log.String(), `"setting":"`+c.setting+`"`) {
			t.Errorf("%s: the log names no %s:\n%s", c.name, c.setting, log.String())
		}
		_ = conn.Close()
	}
}
