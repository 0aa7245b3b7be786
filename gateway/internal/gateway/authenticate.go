package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/obs"
)

// authenticate authorizes r for rt, answering the failure itself (ok false). A client
// address or credential over AUTH_FAILURE_LIMIT is still served when its credential
// verifies (from a throttled address, an API key the caches do not hold is looked up at
// a bounded rate: auth.Throttled); what fails then is 429.
func (g *Gateway) authenticate(w *h1.ResponseWriter, r *h1.Request, rt route) (*identity.Principal, bool) {
	var throttle authThrottle
	throttled := false
	ctx := r.Context()
	if rt.policy != policyPublic {
		if throttle, throttled = g.authThrottled(r); throttled && throttle.addr != "" {
			ctx = auth.Throttled(ctx, g.lookupBudget(throttle.addr))
		}
	}
	p, err := g.authorize(ctx, r, rt)
	switch {
	case err == nil:
		return p, true
	case throttled && (isAuthFailure(err) || errors.Is(err, auth.ErrNotCached)):
		g.writeAuthThrottled(w, throttle)
	case isAuthFailure(err) && rt.policy != policySigned && g.countFailedAuth(r.Context(), w, r):
	default:
		g.writeAuthError(w, r, rt, err)
	}
	return nil, false
}

// The gateway's authorization failures are the one error type (*errs.Error); a 401's
// challenge depends on the route, so writeAuthError adds it.
func unauthorized(msg string) error { return errs.Unauthorizedf("%s", msg) }
func notFound(msg string) error     { return errs.NotFoundf("%s", msg) }

// forbiddenCode is forbidden for a named rule.
func forbiddenCode(code, msg string) error { return errs.Forbiddenf("%s", msg).WithCode(code) }

func (g *Gateway) writeAuthError(w *h1.ResponseWriter, r *h1.Request, rt route, err error) {
	e, isErr := errs.As(err)
	switch {
	case isErr && e.StatusCode() < http.StatusInternalServerError: // a refusal: the client's answer
		if e.Kind == errs.Unauthorized && rt.policy != policySigned {
			// A signed route has no scheme to ask for: its answer is the service's own.
			w.Header().Set("WWW-Authenticate", challenge(rt.policy))
		}
		errs.WriteBody(w, e.StatusCode(), e.Code, e.Message)
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
		errs.Internal(r.Context(), w, g.o.Logger, err, "method", obs.MethodLabel(r.Method), "path", logging.Path(r.URL.Path))
	}
}

// isAuthFailure: the credential was missing or wrong (a 401), not a dependency failure.
func isAuthFailure(err error) bool {
	if e, ok := errs.As(err); ok {
		return e.Kind == errs.Unauthorized
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
func credential(r *h1.Request) (scheme, value string) {
	return parseCredential(r.Header.Get("Authorization"))
}

// parseCredential splits an Authorization value into its scheme (lower case) and value.
func parseCredential(h string) (scheme, value string) {
	scheme, value, ok := strings.Cut(h, " ")
	if !ok {
		return "", ""
	}
	switch {
	case strings.EqualFold(scheme, "bearer"):
		scheme = "bearer"
	case strings.EqualFold(scheme, "api-key"):
		scheme = "api-key"
	default:
		scheme = strings.ToLower(scheme)
	}
	return scheme, strings.TrimSpace(value)
}

func (g *Gateway) authorize(ctx context.Context, r *h1.Request, rt route) (*identity.Principal, error) {
	if rt.policy == policyPublic {
		return &identity.Principal{Credential: identity.CredentialNone}, nil
	}
	if rt.policy == policySigned {
		return g.signedRoute(ctx, rt.deploymentID)
	}
	scheme, value := credential(r)
	if value == "" {
		return nil, unauthorized(missingCredential(rt.policy))
	}
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
	if rt.deploymentID > 0 {
		// A scoped credential (an API key, a service account's token) is checked against
		// its scope.
		if err := g.attachDeployment(ctx, p, rt.deploymentID, len(p.KeyScope) > 0); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// signedRoute is the anonymous principal of a route a signature authenticates, with the
// path's deployment attached. An unknown deployment is answered as the service answers a
// signature that does not verify: the same 401, so a sender learns nothing of which.
func (g *Gateway) signedRoute(ctx context.Context, deploymentID int64) (*identity.Principal, error) {
	d, err := g.o.Auth.Deployment(ctx, deploymentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthorized(errs.PushUnverified)
	}
	if err != nil {
		return nil, err
	}
	return &identity.Principal{Credential: identity.CredentialNone, Account: identity.Account{ID: d.AccountID},
		Deployment: &identity.Deployment{ID: deploymentID, ProductionBranch: d.ProductionBranch}}, nil
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
func (g *Gateway) attachDeployment(ctx context.Context, p *identity.Principal, deploymentID int64, checkScope bool) error {
	d, err := g.o.Auth.Deployment(ctx, deploymentID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.AccountID != p.Account.ID) {
		return notFound(fmt.Sprintf("deployment %d not found", deploymentID))
	}
	if err != nil {
		return err
	}
	if p.Credential == identity.CredentialEmbed && (p.Embed == nil || p.Embed.DeploymentID != deploymentID) {
		return notFound(fmt.Sprintf("deployment %d not found", deploymentID))
	}
	if checkScope && !p.InScope(deploymentID) {
		what := "API key"
		if p.Credential == identity.CredentialBearer {
			what = "token"
		}
		return forbiddenCode(errs.CodeKeyOutOfScope, fmt.Sprintf("this %s is scoped to other deployments than %d", what, deploymentID))
	}
	p.Deployment = &identity.Deployment{ID: deploymentID, ProductionBranch: d.ProductionBranch}
	return nil
}
