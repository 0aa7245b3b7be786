package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
)

// logLines decodes the JSON lines of buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %.200q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func handlerLogging(t *testing.T) (http.Handler, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	api := http.NewServeMux()
	api.HandleFunc("/", server.NotFound)
	return server.Handler(server.Options{Service: "test-svc", Logger: logging.New(&logs, "info", "test-svc"),
		Registry: obs.NewRegistry(), API: api}), &logs
}

// A request's method and path are the client's, of any length up to the header limit:
// the request log line carries the method as its metric label and a bounded path.
func TestRequestLogLineBoundsMethodAndPath(t *testing.T) {
	h, logs := handlerLogging(t)
	method := strings.Repeat("A", 60_000)
	path := "/" + strings.Repeat("p", 60_000)
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Method = method
	h.ServeHTTP(httptest.NewRecorder(), req)
	if logs.Len() > 2048 {
		t.Fatalf("one request with a 60 KB method and path wrote a %d-byte log line", logs.Len())
	}
	lines := logLines(t, logs)
	got := lines[len(lines)-1]
	if got["method"] != "OTHER" || len(got["path"].(string)) > logging.MaxPathBytes+3 || !strings.HasPrefix(path, strings.TrimSuffix(got["path"].(string), "...")) {
		t.Fatalf("logged method %.40v, path %.300v", got["method"], got["path"])
	}
}

// Behind the gateway, a service logs the gateway's request id and, apart from it, the
// client's own id the gateway forwarded; a client id that is not short and safe is not
// kept.
func TestServiceLogsTheClientRequestIDApartFromThePlatformsOwn(t *testing.T) {
	for _, tc := range []struct {
		name, client, want string
	}{
		{"short-and-safe-kept", "incident-4711", "incident-4711"},
		{"too-long-dropped", strings.Repeat("x", server.MaxRequestIDBytes+1), ""},
		{"unsafe-dropped", "a b\"}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, logs := handlerLogging(t)
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			req.Header.Set(server.RequestIDHeader, "gw-0123")
			req.Header.Set(server.ClientRequestIDHeader, tc.client)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			line := logLines(t, logs)[0]
			got, _ := line["client_request_id"].(string)
			if line["request_id"] != "gw-0123" || got != tc.want || rec.Header().Get(server.RequestIDHeader) != "gw-0123" {
				t.Fatalf("request_id %v, client_request_id %q (want %q), answered %q", line["request_id"], got, tc.want, rec.Header().Get(server.RequestIDHeader))
			}
		})
	}
}

// POST /debug/gc forces two collections on demand; the internal port is reachable from
// Prometheus and the probes, so only a caller on the same host (the soak) may ask.
func TestForcedCollectionAnswersOnlyLoopbackCallers(t *testing.T) {
	h := server.InternalHandler(obs.NewRegistry(), nil)
	for _, tc := range []struct {
		peer string
		want int
	}{
		{"127.0.0.1:40000", http.StatusNoContent},
		{"[::1]:40000", http.StatusNoContent},
		{"10.1.2.3:40000", http.StatusNotFound},
		{"[2001:db8::1]:40000", http.StatusNotFound},
		{"192.0.2.1:40000", http.StatusNotFound},
	} {
		req := httptest.NewRequest(http.MethodPost, "/debug/gc", nil)
		req.RemoteAddr = tc.peer
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("POST /debug/gc from %s: %d, want %d", tc.peer, rec.Code, tc.want)
		}
	}
}
