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
	h := server.Handler(server.Options{
		Service: "test-svc", Logger: logging.New(&logs, "info", "test-svc"), Registry: obs.NewRegistry(), API: api,
		Checks: []server.Check{{Name: "db", Check: func(context.Context) error { return failing }}},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(p string) (int, string, http.Header) {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
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
	if code, body, _ := get("/readyz"); code != 503 || !strings.Contains(body, `"db":"unavailable"`) || strings.Contains(body, "down") {
		t.Fatalf("readyz: %d %s", code, body)
	}
	_, metrics, _ := get("/metrics")
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
