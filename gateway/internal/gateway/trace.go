package gateway

import (
	"context"

	"github.com/analyticsco/platform/gateway/internal/h1"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// serverSpan are the start options of a request's span continuing a trusted proxy's
// trace, and rootSpan those of every other request's, built once.
var (
	serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	rootSpan   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithNewRoot()}
)

// clientTraceContext reads a request's traceparent and tracestate, never its baggage.
var clientTraceContext propagation.TraceContext

// traceParent decides where a request's span starts. Only a peer in TrustedProxies (the
// ingress, whose trace the platform continues) has its traceparent and tracestate
// continued. Anyone else's request starts a new trace of the platform's own, sampled as
// the platform decides (a client's flags cannot turn tracing off), and a valid client
// trace context is kept only as a link of that span: a client can correlate its own
// requests, but never give its audit events and log lines another request's trace id.
// Baggage is never read from a request, so none reaches the services.
func (g *Gateway) traceParent(ctx context.Context, r *h1.Request) (context.Context, []trace.SpanStartOption) {
	if r.Header.Get("traceparent") == "" {
		return ctx, rootSpan
	}
	if g.peerTrusted(r) {
		return clientTraceContext.Extract(ctx, headerCarrier{&r.Header}), serverSpan
	}
	sc := trace.SpanContextFromContext(clientTraceContext.Extract(context.Background(), headerCarrier{&r.Header}))
	if !sc.IsValid() {
		return ctx, rootSpan
	}
	return ctx, []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithNewRoot(),
		trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{clientLink}})}
}

// clientLink marks the link to a client's own trace context.
var clientLink = attribute.String("link.source", "client traceparent")
