// Package logging builds the JSON slog logger every process uses and carries the
// per-request fields (request id, route) through the context so every line of a
// request has request_id, trace_id and route.
package logging

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

type ctxKey struct{}

// RequestInfo is the per-request state log lines read. Route is filled in once the
// router has matched, which is after the logger was put in the context.
type RequestInfo struct {
	ID    string
	Route string
}

// WithRequest returns a context carrying info.
func WithRequest(ctx context.Context, info *RequestInfo) context.Context {
	return context.WithValue(ctx, ctxKey{}, info)
}

// Request returns the request info in ctx, or nil.
func Request(ctx context.Context) *RequestInfo {
	info, _ := ctx.Value(ctxKey{}).(*RequestInfo)
	return info
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	if info := Request(ctx); info != nil {
		return info.ID
	}
	return ""
}

// New returns a JSON logger writing to w at the given level ("debug", "info", "warn",
// "error"), tagging every line with the service name.
func New(w io.Writer, level, service string) *slog.Logger {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		lvl = slog.LevelInfo
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
	return slog.New(contextHandler{h}).With("service", service)
}

// contextHandler adds request_id, route and trace_id from the record's context.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if info := Request(ctx); info != nil {
		if info.ID != "" {
			r.AddAttrs(slog.String("request_id", info.ID))
		}
		if info.Route != "" {
			r.AddAttrs(slog.String("route", info.Route))
		}
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}
