package obs

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns a registry with the Go runtime and process collectors. Besides
// the usual go_* series it exports go_gc_heap_live_bytes, the heap the last collection
// found alive: the figure that shows a leak, where the in-use heap mostly shows garbage
// waiting for the next collection.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// HTTPMetrics are <service>_http_requests_total{route,method,code} and
// <service>_http_request_duration_seconds{route,method}.
type HTTPMetrics struct {
	Requests *prometheus.CounterVec
	Duration *prometheus.HistogramVec
}

// NewHTTPMetrics registers the HTTP metrics of service (a name such as "workspace_svc").
func NewHTTPMetrics(reg prometheus.Registerer, service string) *HTTPMetrics {
	prefix := MetricPrefix(service)
	m := &HTTPMetrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_http_requests_total",
			Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    prefix + "_http_request_duration_seconds",
			Help:    "HTTP request latency by route and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method"}),
	}
	reg.MustRegister(m.Requests, m.Duration)
	return m
}

// MetricPrefix turns a service name such as "workspace-svc" into "workspace_svc".
func MetricPrefix(service string) string { return strings.ReplaceAll(service, "-", "_") }

// Observe records one request. route must come from the route table (never the client's
// path); the method is bounded by MethodLabel and the code by CodeLabel.
func (m *HTTPMetrics) Observe(route, method string, code int, elapsed time.Duration) {
	method = MethodLabel(method)
	m.Requests.WithLabelValues(route, method, CodeLabel(code)).Inc()
	m.Duration.WithLabelValues(route, method).Observe(elapsed.Seconds())
}

// MethodLabel is the method as a label or span attribute: one of the standard methods, or
// OTHER for anything else a client sends (a method is any token, of any length, so it
// would otherwise mint a new time series per request).
func MethodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "OTHER"
}

// CodeLabel is a status code as a label: the handlers write only codes from 100 to 599.
func CodeLabel(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return codeLabels[code-100]
}

// codeLabels are the labels of the codes 100 to 599, built once: a label per request
// costs no allocation.
var codeLabels = func() (l [500]string) {
	for i := range l {
		l[i] = strconv.Itoa(100 + i)
	}
	return l
}()

// StatusRecorder remembers the status code a handler wrote.
type StatusRecorder struct {
	http.ResponseWriter
	Status int
}

// WriteHeader records the status.
func (s *StatusRecorder) WriteHeader(code int) {
	if s.Status == 0 {
		s.Status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (s *StatusRecorder) Write(b []byte) (int, error) {
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *StatusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Code is the status written, 200 when the handler wrote nothing.
func (s *StatusRecorder) Code() int {
	if s.Status == 0 {
		return http.StatusOK
	}
	return s.Status
}
