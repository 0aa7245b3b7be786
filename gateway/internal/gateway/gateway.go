// Package gateway is the platform's front door: it matches a route, authenticates the
// credential the route accepts, checks that a deployment in the path belongs to the
// caller's account and key scope, signs the verified principal for the service, and
// proxies the request. It never reads a forwarded body to decide anything: what an
// authenticated caller may do is the service's rule. The routes it serves itself (the
// document, and the account's API keys, which live in its identity store) it answers
// like a service.
package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/gateway/internal/apikeys"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/gateway/internal/serviceaccounts"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
)

// EmbedAuthenticator verifies embed session tokens (signature, expiry and revocation).
type EmbedAuthenticator interface {
	Embed(ctx context.Context, token string) (*identity.Principal, error)
}

// Options configure the gateway handler.
type Options struct {
	Auth            *auth.Authenticator
	Embed           EmbedAuthenticator // nil: embed tokens are not accepted
	Signer          *identity.Signer
	Upstreams       map[string][]*url.URL // replicas of "workspace-svc", "embed-svc", "dbtsync-svc"
	BodyLimit       int64
	BigBodyLimit    int64
	UpstreamTimeout time.Duration
	DialTimeout     time.Duration
	OpenAPIJSON     []byte
	// APIReference serves the interactive reference of the document at /api/v1/docs
	// (nil: that path is 404).
	APIReference http.Handler
	Logger       *slog.Logger
	Metrics      *obs.HTTPMetrics
	// RateLimiter counts generate-session per API key, exchange per client address and
	// the account budgets (docs/rate-limits.md); nil or zero limits disable it.
	RateLimiter          *ratelimit.Limiter
	GenerateSessionLimit ratelimit.Limit
	ExchangeLimit        ratelimit.Limit
	DbtWebhookLimit      ratelimit.Limit // dbt push webhooks per deployment
	// AuthFailureLimit bounds failed authentications per client address (zero: off).
	AuthFailureLimit ratelimit.Limit
	// PlanLimits are the account budgets by plan, spent per account and credential kind
	// (nil: no account budget); LimitMetrics counts the limits' refusals (nil: none).
	PlanLimits   PlanLimits
	LimitMetrics *LimitMetrics
	// TrustedProxies are the peers whose X-Forwarded-For names the client (the ingress);
	// from anyone else the header is ignored.
	TrustedProxies []netip.Prefix
	// BodyTimeout bounds how long a client may take to send its request body (default
	// 30s); UploadTimeout does the same on the manifest upload route (default 10m).
	BodyTimeout   time.Duration
	UploadTimeout time.Duration
	// MaxURIBytes bounds the request target of a routed request (414 beyond; default
	// 8 KiB, nginx's).
	MaxURIBytes int
	// APIKeys serves /api/v1/api-keys (nil: those paths are 404).
	APIKeys *apikeys.Service
	// ServiceAccounts serves /api/v1/service-accounts and /api/v1/oauth/token (nil:
	// those paths are 404).
	ServiceAccounts *serviceaccounts.Service
	// TokenBodyLimit bounds the form body of /api/v1/oauth/token (default 8 KiB).
	TokenBodyLimit int64
	// Idempotency deduplicates the POSTs the gateway serves itself (create and rotate
	// an API key) by their Idempotency-Key (nil: none).
	Idempotency *idempotency.Middleware
}

// Gateway is the handler of the public API, served by the gateway's own HTTP/1.1
// server (h1).
type Gateway struct {
	o       Options
	proxies map[service]*forwarder
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	signed  *signedIdentities
	blocked *auth.Cache[string, time.Time] // client addresses over AuthFailureLimit; nil: no limit
	// budgetsPausedUntil (unix ns): until then the account budgets are not checked, a
	// decision having failed (withinRateLimit).
	budgetsPausedUntil atomic.Int64
	// traceFields are the trace-context fields of a client's request, never forwarded.
	traceFields []string
}

// clientError maps a failure to read the client's body to its answer, so that a proxy
// error caused by the client (too slow, too large, malformed) is answered as the
// client's fault.
func clientError(r *h1.Request) (int, string, bool) {
	err := r.Body.Err()
	if err == nil {
		return 0, "", false
	}
	var tle *h1.TooLargeError
	var perr *h1.Error
	var ne net.Error
	switch {
	case errors.As(err, &tle):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than the limit of %d bytes for this route", tle.Limit), true
	case errors.As(err, &ne) && ne.Timeout():
		return http.StatusRequestTimeout, "the request body did not arrive in time", true
	case errors.As(err, &perr):
		return perr.Status, perr.Msg, true
	}
	return http.StatusBadRequest, "the request body could not be read", true
}

// New builds the gateway.
func New(o Options) (*Gateway, error) {
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.UploadTimeout <= 0 {
		o.UploadTimeout = 10 * time.Minute
	}
	if o.MaxURIBytes <= 0 {
		o.MaxURIBytes = 8 << 10
	}
	if o.TokenBodyLimit <= 0 {
		o.TokenBodyLimit = 8 << 10
	}
	g := &Gateway{o: o, proxies: map[service]*forwarder{}, tracer: otel.Tracer("gateway"), prop: otel.GetTextMapPropagator(),
		signed: newSignedIdentities(time.Now)}
	// A client's trace fields never go upstream, baggage included whatever the
	// propagator writes: only the gateway's own trace context does.
	g.traceFields = append([]string{"traceparent", "tracestate", "baggage"}, g.prop.Fields()...)
	if o.AuthFailureLimit.Enabled() && o.RateLimiter != nil {
		g.blocked = newBlockedClients()
	}
	uo := h1.UpstreamOptions{DialTimeout: o.DialTimeout, Timeout: o.UpstreamTimeout, MaxIdle: 512, IdleTimeout: 90 * time.Second}
	for _, s := range []service{svcWorkspace, svcEmbed, svcDBTSync} {
		targets := o.Upstreams[s.String()]
		if len(targets) == 0 {
			return nil, fmt.Errorf("gateway: no upstream URL for %s", s)
		}
		g.proxies[s] = newForwarder(targets, uo, g.upstreamError(s))
	}
	return g, nil
}

// CloseIdle closes the idle connections to the services (at shutdown).
func (g *Gateway) CloseIdle() {
	for _, f := range g.proxies {
		f.closeIdle()
	}
}

// ServeH1 handles one request. It is one function on purpose (past 80 lines): it is the
// hot path of every request, read top to bottom as the pipeline it is (route, body
// limits, authentication, rate limit, signed identity, proxy), and its deferred metrics,
// span and log see every early return.
func (g *Gateway) ServeH1(w *h1.ResponseWriter, r *h1.Request) {
	start := r.Start
	// The request id is the platform's own, always: a client could otherwise give its
	// requests (and their audit events) the id of someone else's. A client's short and
	// safe X-Request-Id is kept beside it, for the client's own correlation.
	rid := server.NewRequestID()
	clientRID := r.Header.Get(server.RequestIDHeader)
	if !server.ValidRequestID(clientRID) {
		clientRID = ""
	}
	r.Header.Del(server.ClientRequestIDHeader)
	info := &logging.RequestInfo{ID: rid, ClientID: clientRID}
	ctx := logging.WithRequest(r.Context(), info)
	ctx, spanOpts := g.traceParent(ctx, r)
	rt, matched := match(r.URL.Path)
	info.Route = rt.name
	if !matched {
		info.Route = "unmatched"
	}
	ctx, span := g.tracer.Start(ctx, info.Route, spanOpts...)
	w.AddHeader("X-Content-Type-Options", "nosniff") // an answer is what its Content-Type says, never sniffed
	w.AddHeader(server.RequestIDHeader, rid)
	defer func() {
		code := w.Status()
		// Both attributes at the end, in one call: the span's attributes grow once.
		span.SetAttributes(attribute.String("http.request.method", obs.MethodLabel(r.Method)), attribute.Int("http.response.status_code", code))
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
		span.End()
		elapsed := time.Since(start)
		if g.o.Metrics != nil {
			g.o.Metrics.Observe(info.Route, r.Method, code, elapsed)
		}
		if code >= 400 {
			level := slog.LevelInfo
			if code >= 500 {
				level = slog.LevelWarn
			}
			g.o.Logger.Log(ctx, level, "request", "method", obs.MethodLabel(r.Method), "path", logging.Path(r.URL.Path), "status", code,
				"duration_ms", float64(elapsed.Microseconds())/1000)
		}
	}()
	// Identity headers are ours alone: whatever a client sends under that prefix is gone
	// before anything reads the request.
	r.Header.DelPrefix(identity.HeaderPrefix)
	r.SetContext(ctx)
	if !matched {
		if g.serveOwn(w, r) {
			return
		}
		if !cleanPath(r.URL.Path) {
			w.SetClose() // dot or empty segments, or a control character: no client's mistake
		}
		httpx.WriteError(w, http.StatusNotFound, "no route for "+r.URL.Path)
		return
	}
	if !forwardedMethod(r.Method) {
		// Only the methods the API uses go to a service: not TRACE (it would echo the
		// request, credentials included), not CONNECT (the gateway tunnels nothing), no
		// method of WebDAV or anyone's invention. As nginx does after a request it
		// refuses for its form, the connection closes: nothing more on it is trusted.
		w.SetClose()
		w.Header().Set("Allow", forwardedMethods)
		httpx.WriteError(w, http.StatusMethodNotAllowed, "method "+logging.Cut(r.Method, 32)+" is not allowed; the API uses "+forwardedMethods)
		return
	}
	if len(r.Target) > g.o.MaxURIBytes {
		w.SetClose()
		httpx.WriteError(w, http.StatusRequestURITooLong,
			fmt.Sprintf("the request target is longer than the limit of %d bytes", g.o.MaxURIBytes))
		return
	}
	limit := g.o.BodyLimit
	switch {
	case rt.bigBody:
		limit = g.o.BigBodyLimit
	case rt.tokenBody:
		limit = g.o.TokenBodyLimit
	}
	if r.ContentLength > limit {
		httpx.WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than the limit of %d bytes for this route", limit))
		return
	}
	if r.HasBody() {
		// A slow client may hold a connection only so long: the body must arrive within
		// the route's time, after which reading it fails and the answer is 408.
		timeout := g.o.BodyTimeout
		if rt.bigBody {
			timeout = g.o.UploadTimeout
		}
		r.Body.SetTimeout(timeout)
		r.Body.SetLimit(limit)
	}
	p, ok := g.authenticate(w, r, rt)
	if !ok || !g.withinRateLimit(w, r, rt, p) {
		return
	}
	if rt.svc == svcNone {
		p.ClientAddr = g.clientIP(r)
		switch rt.name {
		case "service-accounts":
			g.serveServiceAccounts(w, r, p)
		case "oauth-token":
			g.serveOAuthToken(w, r)
		default:
			g.serveAPIKeys(w, r, p)
		}
		return
	}
	// Public routes get a signed anonymous principal too, so a service can tell a request
	// that came through the gateway from one that bypassed it. The request id travels in
	// X-Request-Id, not in the principal, so the signed header of an unchanged principal
	// can be reused.
	var credKey [sha256.Size]byte // zero: whatever a client sends on a public route is not what the principal rests on
	if rt.policy != policyPublic {
		credKey = credentialKey(credential(r))
	}
	p.Audience = rt.svc.String()
	p.ClientAddr = g.clientIP(r)
	hdr, err := g.signed.header(g.o.Signer, credKey, p)
	if err != nil {
		errs.Internal(ctx, w, g.o.Logger, err)
		return
	}
	g.proxies[rt.svc].forward(w, r, g.forwardedFields(r, hdr, rid, clientRID))
}

// forwardedMethods are the methods the gateway forwards.
const forwardedMethods = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

func forwardedMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

func (g *Gateway) upstreamError(s service) func(*h1.ResponseWriter, *h1.Request, error) {
	return func(w *h1.ResponseWriter, r *h1.Request, err error) {
		var ne net.Error
		if w.Committed() {
			// The answer was cut short; its connection closes. Nothing else can be said.
			if !errors.Is(err, h1.ErrClientGone) {
				g.o.Logger.WarnContext(r.Context(), "upstream answer cut short", "service", s.String(), "err", err)
			}
			return
		}
		if status, msg, ok := clientError(r); ok {
			httpx.WriteError(w, status, msg)
			return
		}
		switch {
		case errors.Is(err, syscall.ECONNREFUSED) || isDial(err):
			w.Header().Set("Retry-After", "1")
			httpx.WriteError(w, http.StatusServiceUnavailable, s.String()+" is unavailable; retry shortly")
		case errors.As(err, &ne) && ne.Timeout():
			httpx.WriteError(w, http.StatusGatewayTimeout, s.String()+" did not answer in time")
		default:
			g.o.Logger.WarnContext(r.Context(), "upstream error", "service", s.String(), "err", err)
			httpx.WriteError(w, http.StatusBadGateway, s.String()+" failed to answer")
		}
	}
}

// isDial reports a failure to connect (refused, unreachable, or the dial timeout): the
// service is down, as opposed to slow.
func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// ParseUpstreams parses a comma-separated list of a service's replica base URLs.
func ParseUpstreams(raw string) ([]*url.URL, error) {
	var out []*url.URL
	for _, part := range strings.Split(raw, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		u, err := url.Parse(part)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%q is not an absolute http(s) URL", part)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no URL")
	}
	return out, nil
}

// Refuse answers a request the HTTP/1.1 server refused before any route was matched
// (malformed or ambiguous framing, a head over its limits): the JSON error body with a
// request id, counted and logged like any unmatched request.
func (g *Gateway) Refuse(w *h1.ResponseWriter, r *h1.Request, e *h1.Error) {
	rid := server.NewRequestID()
	w.AddHeader("X-Content-Type-Options", "nosniff")
	w.AddHeader(server.RequestIDHeader, rid)
	httpx.WriteError(w, e.Status, e.Msg)
	if g.o.Metrics != nil {
		g.o.Metrics.Observe("unmatched", r.Method, e.Status, 0)
	}
	ctx := logging.WithRequest(context.Background(), &logging.RequestInfo{ID: rid, Route: "unmatched"})
	if setting, ok := refusalSettings[e.Limit]; ok {
		g.o.Logger.InfoContext(ctx, "request refused", "method", obs.MethodLabel(r.Method), "status", e.Status, "reason", e.Msg, "setting", setting)
		return
	}
	g.o.Logger.InfoContext(ctx, "request refused", "method", obs.MethodLabel(r.Method), "status", e.Status, "reason", e.Msg)
}

// refusalSettings name, for the operator's log, the setting of each h1 limit a refusal
// can be over (h1.Error.Limit); the client's answer names the limit's value only.
var refusalSettings = map[string]string{
	"MaxHeaderBytes": "GATEWAY_MAX_HEADER_BYTES",
	"MaxFieldBytes":  "GATEWAY_MAX_HEADER_FIELD_BYTES",
	"Max":            "GATEWAY_MAX_CONNS",
	"PerClient":      "GATEWAY_MAX_CONNS_PER_CLIENT",
	"PerProxy":       "GATEWAY_MAX_CONNS_PER_PROXY",
}
