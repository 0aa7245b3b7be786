// Package obs sets up tracing and HTTP metrics the same way in every process.
package obs

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// SetupTracing installs the global tracer provider and W3C propagators. Spans are
// exported over OTLP/HTTP when endpoint (OTEL_EXPORTER_OTLP_ENDPOINT) is set; the
// exporter reads the other standard OTEL_* variables itself. Without an endpoint spans
// are still created, so trace ids reach the logs and the trace context propagates.
func SetupTracing(ctx context.Context, service, endpoint string) (shutdown func(context.Context) error, err error) {
	res := resource.NewSchemaless(semconv.ServiceName(service))
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if endpoint != "" {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(2*time.Second)))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		return errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx))
	}, nil
}
