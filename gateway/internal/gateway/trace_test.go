package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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

// clientTraceparent is a client's W3C trace context, with flags 00 (not sampled).
const (
	clientTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientTraceparent = "00-" + clientTraceID + "-00f067aa0ba902b7-00"
)

// recordSpans installs a recording tracer provider with the platform's propagators.
func recordSpans(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })
	return rec, tp
}

// gatewaySpan sends one request with a client's trace context and baggage and returns
// the gateway's span and the fields the service received.
func gatewaySpan(t *testing.T, traceparent string, opts ...func(*gateway.Options)) (sdktrace.ReadOnlySpan, http.Header) {
	rec, tp := recordSpans(t)
	h := newHarness(t, opts...)
	acme := h.acme()
	code, _, body := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID), "Bearer "+acme.Users["viewer"].Bearer, nil,
		"traceparent", traceparent, "tracestate", "vendor=client", "baggage", "tenant=someone-else")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var e echoed
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	_ = tp.ForceFlush(t.Context())
	for _, s := range rec.Ended() {
		if s.Name() == "workspace" {
			return s, http.Header(e.Headers)
		}
	}
	t.Fatalf("no gateway span among %d", len(rec.Ended()))
	return nil, nil
}

// A client must not choose the audit event's traceId, nor turn tracing off with flags
// 00. From a peer that is no trusted proxy, the gateway's
// span is a new, sampled root whose only tie to the client's context is a link; the
// service continues the gateway's trace, and no client baggage reaches it.
func TestClientTraceContextIsOnlyALinkOfANewTrace(t *testing.T) {
	span, fwd := gatewaySpan(t, clientTraceparent)
	sc := span.SpanContext()
	if sc.TraceID().String() == clientTraceID || span.Parent().IsValid() {
		t.Fatalf("gateway span trace %s parent %v: continued the client's %s", sc.TraceID(), span.Parent(), clientTraceID)
	}
	if !sc.IsSampled() {
		t.Fatal("the client's flags 00 turned the gateway's span unsampled")
	}
	links := span.Links()
	if len(links) != 1 || links[0].SpanContext.TraceID().String() != clientTraceID {
		t.Fatalf("links %+v, want one to the client's trace context", links)
	}
	if tp := fwd.Get("Traceparent"); !strings.Contains(tp, sc.TraceID().String()) || !strings.HasSuffix(tp, "-01") {
		t.Fatalf("the service received traceparent %q, want the gateway's sampled trace %s", tp, sc.TraceID())
	}
	for _, name := range []string{"Baggage", "Tracestate"} {
		if v := fwd.Values(name); len(v) != 0 {
			t.Fatalf("the service received the client's %s %q", name, v)
		}
	}
}

// A trusted proxy's (the ingress's) trace context is continued: its trace id is the
// gateway span's, its span the parent, its sampling decision kept. Its baggage is still
// dropped.
func TestTrustedProxyTraceContextIsContinued(t *testing.T) {
	span, fwd := gatewaySpan(t, strings.TrimSuffix(clientTraceparent, "-00")+"-01", func(o *gateway.Options) { o.TrustedProxies, _ = gateway.ParsePrefixes([]string{"127.0.0.1"}) })
	if got := span.SpanContext().TraceID().String(); got != clientTraceID || span.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("gateway span trace %s parent %s, want the proxy's trace %s continued", got, span.Parent().SpanID(), clientTraceID)
	}
	if len(span.Links()) != 0 {
		t.Fatalf("links %+v on a continued trace", span.Links())
	}
	if tp := fwd.Get("Traceparent"); !strings.Contains(tp, clientTraceID) {
		t.Fatalf("the service received traceparent %q, want the proxy's trace", tp)
	}
	if v := fwd.Values("Baggage"); len(v) != 0 {
		t.Fatalf("the service received the proxy's baggage %q", v)
	}
}
