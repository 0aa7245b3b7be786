// Package server runs a service's HTTP servers the same way everywhere: request ids,
// logs, metrics and spans around the API and /healthz on the public listener;
// /healthz, /readyz and /metrics on a separate internal listener (INTERNAL_ADDR) that
// only the cluster's probes and Prometheus reach; and a graceful shutdown of both when
// the context ends (SIGINT or SIGTERM in main).
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/obs"
)

// Check is one readiness check of a dependency.
type Check struct {
	Name  string
	Check func(context.Context) error
}

// Options configure Handler and Run.
type Options struct {
	Service  string // e.g. "workspace-svc"
	Logger   *slog.Logger
	Registry *prometheus.Registry
	API      http.Handler // the service's routes
	Checks   []Check      // readiness checks, each run with a short timeout
}

// RequestIDHeader is the header that carries the request id: the gateway assigns it to
// every request, answers it to the client and forwards it to the service.
const RequestIDHeader = "X-Request-Id"

// ClientRequestIDHeader carries, from the gateway to a service, the X-Request-Id the
// client sent (when ValidRequestID keeps it): logged and audited beside the platform's
// own id, never in its place.
const ClientRequestIDHeader = "X-Client-Request-Id"

// MaxRequestIDBytes bounds a kept request id.
const MaxRequestIDBytes = 64

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidRequestID reports whether id is short and safe enough to keep: 1 to
// MaxRequestIDBytes letters, digits, dots, underscores and hyphens.
func ValidRequestID(id string) bool { return validRequestID.MatchString(id) }

// NewRequestID returns a random 16-byte hex id.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RequestID returns the request's id header if it is well formed, or a fresh one. A
// service behind the gateway gets the gateway's id here; the gateway itself never
// takes a client's (see ClientRequestID).
func RequestID(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); ValidRequestID(id) {
		return id
	}
	return NewRequestID()
}

// ClientRequestID returns the client's own request id the gateway forwarded in
// ClientRequestIDHeader, or "" when there is none or it is not well formed.
func ClientRequestID(r *http.Request) string {
	if id := r.Header.Get(ClientRequestIDHeader); ValidRequestID(id) {
		return id
	}
	return ""
}

// Health answers liveness: 200 whenever the process serves HTTP at all.
func Health(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Handler builds the process's public root handler: the API and /healthz. Readiness and
// metrics are never on it (see Internal): their answers describe dependencies and
// internals, and a metrics scrape is not free.
func Handler(o Options) http.Handler {
	metrics := obs.NewHTTPMetrics(o.Registry, o.Service)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", Health)
	api := instrument(o, metrics)
	mux.Handle("/", otelhttp.NewHandler(api, o.Service, otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		if r.Pattern != "" { // otelhttp renames the span with this once routing has happened
			return r.Pattern
		}
		return obs.MethodLabel(r.Method)
	})))
	return mux
}

func instrument(o Options, metrics *obs.HTTPMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		outer := r
		info := &logging.RequestInfo{ID: RequestID(r), ClientID: ClientRequestID(r)}
		w.Header().Set(RequestIDHeader, info.ID)
		rec := &obs.StatusRecorder{ResponseWriter: w}
		ctx := logging.WithRequest(r.Context(), info)
		r = r.WithContext(ctx)
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				o.Logger.ErrorContext(ctx, "panic", "panic", v, "stack", string(stack()))
				if rec.Status == 0 {
					httpx.WriteError(rec, http.StatusInternalServerError, "internal error (request id "+info.ID+")")
				}
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			info.Route = route
			outer.Pattern = r.Pattern // read by otelhttp to name the span after the route
			elapsed := time.Since(start)
			metrics.Observe(route, r.Method, rec.Code(), elapsed)
			level := slog.LevelInfo
			if rec.Code() >= 500 {
				level = slog.LevelError
			}
			o.Logger.Log(ctx, level, "request", "method", obs.MethodLabel(r.Method), "path", logging.Path(r.URL.Path), "status", rec.Code(),
				"duration_ms", float64(elapsed.Microseconds())/1000)
		}()
		o.API.ServeHTTP(rec, r)
	})
}

// Internal builds the handler of the internal listener: /healthz, /readyz (o.Checks),
// /metrics (o.Registry) and, from loopback only, POST /debug/gc (ForceGC). Anything
// else is a JSON 404.
func Internal(o Options) http.Handler {
	return InternalHandler(o.Registry, o.Checks)
}

// InternalHandler is Internal for a process that has no Options (the gateway).
func InternalHandler(reg prometheus.Gatherer, checks []Check) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", Health)
	mux.Handle("GET /readyz", Ready(checks))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST /debug/gc", LoopbackOnly(ForceGC))
	mux.HandleFunc("/", NotFound)
	return mux
}

// Ready answers 200 when every check passes and 503 naming the failures otherwise.
func Ready(checks []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		results := make(map[string]string, len(checks))
		var mu sync.Mutex
		var wg sync.WaitGroup
		failed := false
		for _, c := range checks {
			wg.Add(1)
			go func(c Check) {
				defer wg.Done()
				status := "ok"
				if err := c.Check(ctx); err != nil {
					// The answer names the dependency, never its error text (hosts, replica
					// sets); the log has it.
					status = "unavailable"
					slog.WarnContext(ctx, "readiness check failed", "check", c.Name, "err", err)
				}
				mu.Lock()
				results[c.Name] = status
				if status != "ok" {
					failed = true
				}
				mu.Unlock()
			}(c)
		}
		wg.Wait()
		code := http.StatusOK
		status := "ready"
		if failed {
			code, status = http.StatusServiceUnavailable, "not ready"
		}
		httpx.WriteJSON(w, code, map[string]any{"status": status, "checks": results})
	})
}

// SignalContext is canceled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Run serves h on addr until ctx ends, then shuts down gracefully within timeout.
func Run(ctx context.Context, logger *slog.Logger, addr string, h http.Handler, timeout time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return Serve(ctx, logger, ln, h, timeout)
}

// Listener is one address a process serves and its handler.
type Listener struct {
	Name    string // "public" or "internal", for the logs
	Addr    string
	Handler http.Handler
	// Server, when set, serves the listener instead of a net/http server for Handler
	// (the gateway's own HTTP/1.1 server).
	Server Server
}

// Server serves a listener until Shutdown (graceful, within its context) or Close;
// *http.Server is one.
type Server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// RunAll serves every listener until ctx ends, then shuts them all down gracefully
// within timeout. If one cannot listen or fails, the others are shut down and its
// error is returned: a process never runs with half of its listeners.
func RunAll(ctx context.Context, logger *slog.Logger, timeout time.Duration, ls ...Listener) error {
	lns := make([]net.Listener, 0, len(ls))
	for _, l := range ls {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			for _, o := range lns {
				_ = o.Close()
			}
			return fmt.Errorf("%s listener %s: %w", l.Name, l.Addr, err)
		}
		lns = append(lns, ln)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(ls))
	for i, l := range ls {
		go func(l Listener, ln net.Listener) {
			log := logger.With("listener", l.Name)
			srv := l.Server
			if srv == nil {
				srv = newHTTPServer(l.Handler, log)
			}
			err := serveWith(ctx, log, ln, srv, timeout)
			if err != nil {
				err = fmt.Errorf("%s listener: %w", l.Name, err)
			}
			cancel() // one listener ending ends the process
			errc <- err
		}(l, lns[i])
	}
	var first error
	for range ls {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Serve is Run on an existing listener.
func Serve(ctx context.Context, logger *slog.Logger, ln net.Listener, h http.Handler, timeout time.Duration) error {
	return serveWith(ctx, logger, ln, newHTTPServer(h, logger), timeout)
}

func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // uploads of large manifests
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// serveWith serves ln with srv until ctx ends, then shuts it down gracefully within
// timeout.
func serveWith(ctx context.Context, logger *slog.Logger, ln net.Listener, srv Server, timeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down", "timeout", timeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
