package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
)

func TestHandler(t *testing.T) {
	var logs bytes.Buffer
	api := http.NewServeMux()
	api.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	api.HandleFunc("GET /boom", func(w http.ResponseWriter, r *http.Request) { panic("kaboom") })
	api.HandleFunc("/", server.NotFound)
	failing := errors.New("down")
	o := server.Options{
		Service: "test-svc", Logger: logging.New(&logs, "info", "test-svc"), Registry: obs.NewRegistry(), API: api,
		Checks: []server.Check{{Name: "db", Check: func(context.Context) error { return failing }}},
	}
	srv := httptest.NewServer(server.Handler(o))
	defer srv.Close()
	internal := httptest.NewServer(server.Internal(o))
	defer internal.Close()
	getFrom := func(base, p string) (int, string, http.Header) {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	get := func(p string) (int, string, http.Header) { return getFrom(srv.URL, p) }
	if code, _, hdr := get("/items/3"); code != 204 || hdr.Get("X-Request-Id") == "" {
		t.Fatalf("route: %d, request id %q", code, hdr.Get("X-Request-Id"))
	}
	if code, body, _ := get("/boom"); code != 500 || !strings.Contains(body, "internal error") || strings.Contains(body, "kaboom") {
		t.Fatalf("panic: %d %s", code, body)
	}
	if code, body, _ := get("/nope"); code != 404 || !strings.Contains(body, `"status":404`) {
		t.Fatalf("unknown path: %d %s", code, body)
	}
	if code, _, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	// Readiness, metrics and the forced collection are only on the internal listener.
	for _, p := range []string{"/readyz", "/metrics"} {
		if code, body, _ := get(p); code != 404 || strings.Contains(body, "test_svc") {
			t.Fatalf("public %s: %d %s", p, code, body)
		}
	}
	postTo := func(base string) int {
		resp, err := http.Post(base+"/debug/gc", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := postTo(srv.URL); code != 404 {
		t.Fatalf("public POST /debug/gc: %d, want 404", code)
	}
	if code := postTo(internal.URL); code != 204 {
		t.Fatalf("internal POST /debug/gc: %d, want 204", code)
	}
	if code, _, _ := getFrom(internal.URL, "/healthz"); code != 200 {
		t.Fatalf("internal healthz %d", code)
	}
	if code, body, _ := getFrom(internal.URL, "/readyz"); code != 503 || !strings.Contains(body, `"db":"unavailable"`) || strings.Contains(body, "down") {
		t.Fatalf("readyz: %d %s", code, body)
	}
	_, metrics, _ := getFrom(internal.URL, "/metrics")
	if !strings.Contains(metrics, `test_svc_http_requests_total{code="204",method="GET",route="GET /items/{id}"} 1`) ||
		!strings.Contains(metrics, `test_svc_http_request_duration_seconds_bucket`) || !strings.Contains(metrics, "go_gc_heap_live_bytes") {
		t.Fatalf("metrics missing the route-labelled series:\n%s", metrics)
	}
	if !strings.Contains(logs.String(), `"request_id"`) || !strings.Contains(logs.String(), `"route":"GET /items/{id}"`) {
		t.Fatalf("log lines lack request_id/route: %s", logs.String())
	}
}

func TestGracefulShutdownFinishesInFlightRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(300 * time.Millisecond) // a request still running when SIGTERM arrives
		_, _ = w.Write([]byte("done"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- server.Serve(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), ln, h, 5*time.Second)
	}()
	respc := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			respc <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		respc <- string(b)
	}()
	<-started
	cancel()
	if got := <-respc; got != "done" {
		t.Fatalf("in-flight request got %q", got)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestRunAllServesEveryListenerAndStopsThemTogether(t *testing.T) {
	addr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	pub, internal := addr(), addr()
	text := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, s) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		errc <- server.RunAll(ctx, log, time.Second,
			server.Listener{Name: "public", Addr: pub, Handler: text("api")},
			server.Listener{Name: "internal", Addr: internal, Handler: text("ops")})
	}()
	get := func(a string) string {
		for i := 0; i < 100; i++ {
			resp, err := http.Get("http://" + a)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return string(b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s never answered", a)
		return ""
	}
	if got := get(pub); got != "api" {
		t.Fatalf("public: %q", got)
	}
	if got := get(internal); got != "ops" {
		t.Fatalf("internal: %q", got)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("RunAll: %v", err)
	}
	// A listener that cannot bind fails the whole process and leaves nothing listening.
	busy, _ := net.Listen("tcp", "127.0.0.1:0")
	defer busy.Close()
	free := addr()
	err := server.RunAll(context.Background(), log, time.Second,
		server.Listener{Name: "public", Addr: free, Handler: text("api")},
		server.Listener{Name: "internal", Addr: busy.Addr().String(), Handler: text("ops")})
	if err == nil || !strings.Contains(err.Error(), "internal listener") {
		t.Fatalf("RunAll on a busy address: %v", err)
	}
	if ln, err := net.Listen("tcp", free); err != nil {
		t.Fatalf("public address still held after the failure: %v", err)
	} else {
		ln.Close()
	}
}
