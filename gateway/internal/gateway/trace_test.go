package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
)

// TestGatewaySpanIsParentOfServiceSpan: the service's server span (from libs/server, as
// every service uses it) continues the trace the gateway started.
func TestGatewaySpanIsParentOfServiceSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	var svc *httptest.Server
	h := newHarness(t, func(o *gateway.Options) {
		api := http.NewServeMux()
		api.HandleFunc("GET /api/v1/deployments/{deploymentId}/workspace", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
		svc = httptest.NewServer(server.Handler(server.Options{Service: "workspace-svc", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Registry: obs.NewRegistry(), API: identity.Require(o.Signer, api)}))
		u, _ := url.Parse(svc.URL)
		o.Upstreams["workspace-svc"] = []*url.URL{u}
	})
	defer svc.Close()
	acme := h.acme()
	code, _, body := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID), "Bearer "+acme.Users["viewer"].Bearer, nil)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	_ = tp.ForceFlush(t.Context())
	var gw, service sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "workspace":
			gw = s
		case "GET /api/v1/deployments/{deploymentId}/workspace":
			service = s
		}
	}
	if gw == nil || service == nil {
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name())
		}
		t.Fatalf("spans recorded: %v", names)
	}
	if service.Parent().SpanID() != gw.SpanContext().SpanID() || service.SpanContext().TraceID() != gw.SpanContext().TraceID() {
		t.Fatalf("service span parent %s (trace %s), gateway span %s (trace %s)", service.Parent().SpanID(), service.SpanContext().TraceID(),
			gw.SpanContext().SpanID(), gw.SpanContext().TraceID())
	}
}
