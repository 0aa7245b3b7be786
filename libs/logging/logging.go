// Package logging builds the JSON slog logger every process uses and carries the
// per-request fields (request id, route) through the context so every line of a
// request has request_id, trace_id and route.
package logging

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
)

type ctxKey struct{}

// RequestInfo is the per-request state log lines read. Route is filled in once the
// router has matched, which is after the logger was put in the context. ID is the
// platform's own request id (the gateway assigns it); ClientID is the X-Request-Id a
// client sent, when it was short and safe enough to keep: a client chooses it, so it
// never stands in for the platform's id.
type RequestInfo struct {
	ID       string
	ClientID string
	Route    string
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

// ClientRequestID returns the client's own request id in ctx, or "".
func ClientRequestID(ctx context.Context) string {
	if info := Request(ctx); info != nil {
		return info.ClientID
	}
	return ""
}

// MaxPathBytes is how much of a request path a log line carries: a path is the
// client's, up to the header limit long, and a request must not buy a log line of that
// size.
const MaxPathBytes = 256

// Path is a request path as a log line carries it: cut to MaxPathBytes, with "..."
// marking the cut.
func Path(p string) string {
	if c := Cut(p, MaxPathBytes); len(c) < len(p) {
		return c + "..."
	}
	return p
}

// Cut is s cut to at most n bytes, at a rune boundary.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
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
		if info.ClientID != "" {
			r.AddAttrs(slog.String("client_request_id", info.ClientID))
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
