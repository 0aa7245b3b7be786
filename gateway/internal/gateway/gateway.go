// Package gateway is the platform's front door: it matches a route, authenticates the
// credential the route accepts, checks that a deployment in the path belongs to the
// caller's account and key scope, signs the verified principal for the service, and
// proxies the request. It never reads a body to decide anything: what an authenticated
// caller may do is the service's rule.
package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/mongox"
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
	// RateLimiter counts generate-session per API key and exchange per client address;
	// nil or zero limits disable it.
	RateLimiter          *ratelimit.Limiter
	GenerateSessionLimit ratelimit.Limit
	ExchangeLimit        ratelimit.Limit
	// AuthFailureLimit bounds failed authentications per client address (zero: off).
	AuthFailureLimit ratelimit.Limit
	// TrustedProxies are the peers whose X-Forwarded-For names the client (the ingress);
	// from anyone else the header is ignored.
	TrustedProxies []netip.Prefix
	// BodyTimeout bounds how long a client may take to send its request body (default
	// 30s); UploadTimeout does the same on the manifest upload route (default 10m).
	BodyTimeout   time.Duration
	UploadTimeout time.Duration
}

// Gateway is the HTTP handler of the public API.
type Gateway struct {
	o       Options
	proxies map[service]http.Handler
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	signed  *signedIdentities
	blocked *auth.Cache[string, time.Time] // client addresses over AuthFailureLimit; nil: no limit
}

type ctxKey int

const ctxClientBody ctxKey = 0

// clientBody remembers why reading the client's body failed, so a proxy error caused
// by the client (too slow, too large) is answered as the client's fault.
type clientBody struct {
	io.ReadCloser
	err error
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// clientError maps a failure to read the client's body to its answer.
func clientError(r *http.Request) (int, string, bool) {
	cb, _ := r.Context().Value(ctxClientBody).(*clientBody)
	if cb == nil || cb.err == nil {
		return 0, "", false
	}
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(cb.err, &mbe):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than the limit of %d bytes for this route", mbe.Limit), true
	case errors.As(cb.err, &ne) && ne.Timeout():
		return http.StatusRequestTimeout, "the request body did not arrive in time", true
	}
	return http.StatusBadRequest, "the request body could not be read", true
}

// withinRateLimit applies the per-credential limits; it answers 429 itself when over.
func (g *Gateway) withinRateLimit(w http.ResponseWriter, r *http.Request, rt route, p *identity.Principal) bool {
	if g.o.RateLimiter == nil {
		return true
	}
	var key, who string
	var limit ratelimit.Limit
	switch rt.limit {
	case limitPerKey:
		key, who, limit = "gs:"+p.KeyID, "this API key", g.o.GenerateSessionLimit
	case limitPerClient:
		key, who, limit = "ex:"+g.clientAddr(r), "this client address", g.o.ExchangeLimit
	default:
		return true
	}
	if !limit.Enabled() {
		return true
	}
	d, err := g.o.RateLimiter.Allow(r.Context(), key, limit)
	if err != nil {
		// Counting failed (Redis unreachable): refused with 503, never served unlimited.
		// Both limited routes keep their sessions in the same Redis, so they could not be
		// served anyway.
		g.o.Logger.WarnContext(r.Context(), "rate limit not checked", "err", err)
		writeLimitUnavailable(w)
		return false
	}
	w.Header().Set("X-RateLimit-Limit", strconv.FormatInt(limit.N, 10))
	w.Header().Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
	if d.Allowed {
		return true
	}
	secs := int64((d.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	httpx.WriteError(w, http.StatusTooManyRequests,
		fmt.Sprintf("rate limit of %d requests per %s exceeded for %s; retry in %d s", limit.N, limit.Window, who, secs))
	return false
}

// New builds the gateway.
func New(o Options) (*Gateway, error) {
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.UploadTimeout <= 0 {
		o.UploadTimeout = 10 * time.Minute
	}
	g := &Gateway{o: o, proxies: map[service]http.Handler{}, tracer: otel.Tracer("gateway"), prop: otel.GetTextMapPropagator(),
		signed: newSignedIdentities(time.Now)}
	if o.AuthFailureLimit.Enabled() && o.RateLimiter != nil {
		g.blocked = newBlockedClients()
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          2048,
		MaxIdleConnsPerHost:   512,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: o.UpstreamTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // pass bodies through as the service encoded them
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
	pool := &bufferPool{}
	for _, s := range []service{svcWorkspace, svcEmbed, svcDBTSync} {
		targets := o.Upstreams[s.String()]
		if len(targets) == 0 {
			return nil, fmt.Errorf("gateway: no upstream URL for %s", s)
		}
		g.proxies[s] = newForwarder(targets, transport, pool, g.prop, g.upstreamError(s))
	}
	return g, nil
}

// bufferPool recycles the 32 KiB copy buffers (held by pointer, so Put does not allocate).
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() *[]byte {
	if v := b.p.Get(); v != nil {
		return v.(*[]byte)
	}
	buf := make([]byte, 32<<10)
	return &buf
}

func (b *bufferPool) Put(buf *[]byte) { b.p.Put(buf) }

// ServeHTTP handles one request. It is one function on purpose (past 80 lines): it is the
// hot path of every request, read top to bottom as the pipeline it is (route, body
// limits, authentication, rate limit, signed identity, proxy), and its deferred metrics,
// span and log see every early return.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
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
	ctx = g.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
	rt, matched := match(r.URL.Path)
	info.Route = rt.name
	if !matched {
		info.Route = "unmatched"
	}
	ctx, span := g.tracer.Start(ctx, info.Route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", obs.MethodLabel(r.Method))))
	rec := &obs.StatusRecorder{ResponseWriter: w}
	w.Header().Set("X-Content-Type-Options", "nosniff") // an answer is what its Content-Type says, never sniffed
	w.Header().Set(server.RequestIDHeader, rid)
	defer func() {
		code := rec.Code()
		span.SetAttributes(attribute.Int("http.response.status_code", code))
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
	for k := range r.Header {
		if strings.HasPrefix(k, identity.HeaderPrefix) {
			delete(r.Header, k)
		}
	}
	r = r.WithContext(ctx)
	if !matched {
		if !g.serveOwn(rec, r) {
			httpx.WriteError(rec, http.StatusNotFound, "no route for "+r.URL.Path)
		}
		return
	}
	limit := g.o.BodyLimit
	if rt.bigBody {
		limit = g.o.BigBodyLimit
	}
	if r.ContentLength > limit {
		httpx.WriteError(rec, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than the limit of %d bytes for this route", limit))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		// A slow client may hold a connection only so long: the body must arrive within
		// the route's time, after which reading it fails and the answer is 408.
		timeout := g.o.BodyTimeout
		if rt.bigBody {
			timeout = g.o.UploadTimeout
		}
		_ = http.NewResponseController(rec).SetReadDeadline(time.Now().Add(timeout))
		cb := &clientBody{ReadCloser: http.MaxBytesReader(rec, r.Body, limit)}
		r.Body = cb
		r = r.WithContext(context.WithValue(r.Context(), ctxClientBody, cb))
	}
	p, ok := g.authenticate(rec, r, rt)
	if !ok || !g.withinRateLimit(rec, r, rt, p) {
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
		httpx.Internal(rec, r, g.o.Logger, err)
		return
	}
	r.Header.Set(identity.Header, hdr)
	r.Header.Set(server.RequestIDHeader, rid)
	if clientRID != "" {
		r.Header.Set(server.ClientRequestIDHeader, clientRID)
	}
	g.proxies[rt.svc].ServeHTTP(rec, r)
}

// authenticate authorizes r for rt, answering the failure itself (ok false). A client
// address or credential over AUTH_FAILURE_LIMIT is still served when its credential
// verifies (from a throttled address, API keys from the caches only); what fails then
// is 429.
func (g *Gateway) authenticate(w http.ResponseWriter, r *http.Request, rt route) (*identity.Principal, bool) {
	var throttle authThrottle
	throttled := false
	if rt.policy != policyPublic {
		if throttle, throttled = g.authThrottled(r); throttled && throttle.cacheOnly {
			r = r.WithContext(auth.CacheOnly(r.Context()))
		}
	}
	p, err := g.authorize(r, rt)
	switch {
	case err == nil:
		return p, true
	case throttled && (isAuthFailure(err) || errors.Is(err, auth.ErrNotCached)):
		g.writeAuthThrottled(w, throttle)
	case isAuthFailure(err) && g.countFailedAuth(r.Context(), w, r):
	default:
		g.writeAuthError(w, r, rt, err)
	}
	return nil, false
}

// serveOwn answers the gateway's own routes, both public like the document they are
// about: the document (/api/v1/openapi.json) and its interactive reference
// (/api/v1/docs). It reports whether r was one of them.
func (g *Gateway) serveOwn(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path == "/api/v1/openapi.json" && len(g.o.OpenAPIJSON) > 0 {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r)
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(g.o.OpenAPIJSON)
		return true
	}
	if r.URL.Path == "/api/v1/docs" && g.o.APIReference != nil {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r)
			return true
		}
		g.o.APIReference.ServeHTTP(w, r)
		return true
	}
	return false
}

// methodNotAllowed is the 405 of a read-only route of the gateway's own.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "GET, HEAD")
	httpx.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path)
}

// authError is an authorization failure with its status, message and, for a named rule,
// its code ("": the status's).
type authError struct {
	status int
	msg    string
	code   string
}

func (e *authError) Error() string { return e.msg }

func unauthorized(msg string) error { return &authError{status: http.StatusUnauthorized, msg: msg} }
func notFound(msg string) error     { return &authError{status: http.StatusNotFound, msg: msg} }

// forbiddenCode is forbidden for a named rule.
func forbiddenCode(code, msg string) error {
	return &authError{status: http.StatusForbidden, msg: msg, code: code}
}

func (g *Gateway) writeAuthError(w http.ResponseWriter, r *http.Request, rt route, err error) {
	var ae *authError
	switch {
	case errors.As(err, &ae):
		if ae.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", challenge(rt.policy))
		}
		httpx.WriteCodedError(w, ae.status, ae.code, ae.msg)
	case errors.Is(err, auth.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", challenge(rt.policy))
		httpx.WriteError(w, http.StatusUnauthorized, "invalid credentials: "+strings.TrimPrefix(err.Error(), "unauthenticated: "))
	case mongox.Unavailable(err) || errors.Is(err, auth.ErrUnavailable):
		g.o.Logger.WarnContext(r.Context(), "identity store unavailable", "err", err)
		w.Header().Set("Retry-After", "1")
		httpx.WriteError(w, http.StatusServiceUnavailable, "authentication is temporarily unavailable; retry shortly")
	default:
		if status, msg, ok := clientError(r); ok {
			httpx.WriteError(w, status, msg)
			return
		}
		httpx.Internal(w, r, g.o.Logger, err)
	}
}

// isAuthFailure: the credential was missing or wrong (a 401), not a dependency failure.
func isAuthFailure(err error) bool {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.status == http.StatusUnauthorized
	}
	return errors.Is(err, auth.ErrUnauthenticated)
}

func challenge(p policy) string {
	switch p {
	case policyGenerateSession, policyTenantAdmin:
		return `Api-Key realm="platform"`
	case policyRevoke, policyAccountAdmin:
		return `Api-Key realm="platform", Bearer realm="platform"`
	}
	return `Bearer realm="platform"`
}

// credential splits the Authorization header into its scheme and value.
func credential(r *http.Request) (scheme, value string) {
	h := r.Header.Get("Authorization")
	scheme, value, ok := strings.Cut(h, " ")
	if !ok {
		return "", ""
	}
	return strings.ToLower(scheme), strings.TrimSpace(value)
}

func (g *Gateway) authorize(r *http.Request, rt route) (*identity.Principal, error) {
	if rt.policy == policyPublic {
		return &identity.Principal{Credential: identity.CredentialNone}, nil
	}
	scheme, value := credential(r)
	if value == "" {
		return nil, unauthorized(missingCredential(rt.policy))
	}
	ctx := r.Context()
	var (
		p   *identity.Principal
		err error
	)
	switch {
	case scheme == "api-key" && acceptsAPIKey(rt.policy):
		p, err = g.o.Auth.APIKey(ctx, value)
	case scheme == "bearer" && rt.policy == policyEmbedToken:
		p, err = g.embed(ctx, value)
	case scheme == "bearer" && rt.policy == policyRevoke:
		p, err = g.o.Auth.Bearer(ctx, value)
		if errors.Is(err, auth.ErrUnauthenticated) && g.o.Embed != nil {
			// Not a user token: it may be an embed session token.
			p, err = g.embed(ctx, value)
		}
	case scheme == "bearer" && acceptsBearer(rt.policy):
		p, err = g.o.Auth.Bearer(ctx, value)
	default:
		return nil, unauthorized(missingCredential(rt.policy))
	}
	if err != nil {
		return nil, err
	}
	// Who may do what with an authenticated credential is the service's rule, decided
	// (and audited) there: the gateway authenticates, routes and checks that a deployment
	// in the path belongs to the caller's account. A deployment in a body (generate-
	// session's) is the service's to check: it asks the identity store (lookup.Client).
	if rt.deployment > 0 {
		if err := g.attachDeployment(ctx, p, rt.deployment, p.Credential == identity.CredentialAPIKey); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (g *Gateway) embed(ctx context.Context, token string) (*identity.Principal, error) {
	if g.o.Embed == nil {
		return nil, unauthorized("embed session tokens are not accepted by this gateway")
	}
	return g.o.Embed.Embed(ctx, token)
}

func acceptsAPIKey(p policy) bool {
	return p == policyGenerateSession || p == policyRevoke || p == policyTenantAdmin || p == policyAccountAdmin
}

func acceptsBearer(p policy) bool {
	return p == policyBearer || p == policyRevoke || p == policyAccountAdmin
}

func missingCredential(p policy) string {
	switch p {
	case policyGenerateSession, policyTenantAdmin:
		return "this endpoint requires an Authorization: Api-Key <key> header"
	case policyRevoke, policyAccountAdmin:
		return "this endpoint requires an admin's Authorization: Api-Key <key> or Bearer <token> header"
	case policyEmbedToken:
		return "this endpoint requires an Authorization: Bearer <embed session token> header"
	}
	return "this endpoint requires an Authorization: Bearer <token> header"
}

// attachDeployment checks that deployment id belongs to the caller's account (404
// otherwise, exactly as for a deployment that does not exist) and, when checkScope, to
// the API key's scope (403), and records it on the principal.
func (g *Gateway) attachDeployment(ctx context.Context, p *identity.Principal, id int64, checkScope bool) error {
	d, err := g.o.Auth.Deployment(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.AccountID != p.Account.ID) {
		return notFound(fmt.Sprintf("deployment %d not found", id))
	}
	if err != nil {
		return err
	}
	if p.Credential == identity.CredentialEmbed && (p.Embed == nil || p.Embed.DeploymentID != id) {
		return notFound(fmt.Sprintf("deployment %d not found", id))
	}
	if checkScope && !p.InScope(id) {
		return forbiddenCode(errs.CodeKeyOutOfScope, fmt.Sprintf("this API key is scoped to other deployments than %d", id))
	}
	p.Deployment = &identity.Deployment{ID: id, ProductionBranch: d.ProductionBranch}
	return nil
}

func (g *Gateway) upstreamError(s service) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		var ne net.Error
		if status, msg, ok := clientError(r); ok {
			httpx.WriteError(w, status, msg)
			return
		}
		switch {
		case errors.Is(err, context.Canceled):
			// The client went away; nobody reads this answer.
			w.WriteHeader(http.StatusBadGateway)
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
