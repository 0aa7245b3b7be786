package embed

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	httptransport "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/identity"
)

// ClassMint is generate-session's route class in the fair-share bound.
const ClassMint = "mint"

// MaxBodyBytes bounds every request body the service reads.
const MaxBodyBytes = 1 << 20

// RegisterRoutes adds the embed API's routes to r (embed-svc's one router, shared with
// the audit trail's route; identity.Require around it) through httpx.Handle: each route to
// its endpoint through its decoder, every body bounded at MaxBodyBytes, every error
// through the platform's one encoder (errs.Encoder). generate-session is bounded per
// account by fair (EMBED_MAX_INFLIGHT_PER_ACCOUNT; nil: unbounded) before its body is read.
// idem (nil: none) deduplicates the POSTs by their Idempotency-Key (IdempotencyOptions
// names those that take none).
func RegisterRoutes(r *httpx.Router, e Endpoints, logger *slog.Logger, fair *fairshare.Limiter, idem *idempotency.Middleware) {
	o := httpx.HandleOptions{Logger: logger, MaxBody: MaxBodyBytes, Encode: encodeResponse}
	if idem != nil {
		o.Wrap = idem.Wrap
	}
	httpx.Handle(r, "POST", "/api/v1/embed/generate-session", e.GenerateSession, decodeGenerateSessionHTTP, o.WithAdmit(fair.Guard(ClassMint)))
	httpx.Handle(r, "POST", "/api/v1/embed/session/exchange", e.ExchangeSession, decodeSessionIDRequest, o)
	httpx.Handle(r, "POST", "/api/v1/embed/session/revoke", e.RevokeSession, decodeSessionIDRequest, o)
	httpx.Handle(r, "GET", "/api/v1/embed/session", e.SessionInfo, decodePrincipalRequest, o)
	httpx.Handle(r, "POST", "/api/v1/embed/session/ai-credentials", e.AICredentials, decodePrincipalRequest, o)
	httpx.Handle(r, "GET", "/api/v1/embed/.well-known/jwks.json", e.JWKS, decodePrincipalRequest, o)
	httpx.Handle(r, "POST", "/api/v1/deployments/{deploymentId}/token", e.DataToken, decodeDataTokenRequest, o)
	httpx.Handle(r, "GET", "/api/v1/embed-tenants/{embedTenantName}/users", e.ListUsers, decodeListUsers, o)
	httpx.Handle(r, "GET", "/api/v1/embed-tenants/{embedTenantName}/users/{externalId}", e.GetUser, decodeUserRequest, o)
	httpx.Handle(r, "DELETE", "/api/v1/embed-tenants/{embedTenantName}/users/{externalId}", e.DeleteUser, decodeUserRequest, o)
	httpx.Handle(r, "GET", "/api/v1/embed/sessions", e.ListSessions, decodeListSessions, o)
	httpx.Handle(r, "POST", "/api/v1/embed/sessions/revoke", e.RevokeSessions, decodeRevokeSessions, o)
	httpx.Handle(r, "GET", "/api/v1/embed/settings", e.GetSettings, decodePrincipalRequest, o)
	httpx.Handle(r, "PUT", "/api/v1/embed/settings", e.PutSettings, decodePutSettings, o)
	for _, base := range []string{"/api/v1/embed-tenants/{embedTenantName}/groups/{id}/users", "/api/v1/groups/{id}/users"} {
		httpx.Handle(r, "GET", base, e.ListMembers, decodeListMembers, o)
		httpx.Handle(r, "POST", base, e.AddMembers, decodeAddMembers, o)
		httpx.Handle(r, "DELETE", base+"/{externalId}", e.RemoveMember, decodeRemoveMember, o)
	}
	for _, c := range []struct{ path, kind string }{{"groups", KindGroup}, {"user-attributes", KindAttribute}} {
		httpx.Handle(r, "GET", "/api/v1/embed-tenants/{embedTenantName}/"+c.path, e.ListDefinitions, decodeListDefinitions(c.kind), o)
		httpx.Handle(r, "DELETE", "/api/v1/embed-tenants/{embedTenantName}/"+c.path+"/{id}", e.DeleteDefinition, decodeDeleteDefinition(c.kind), o)
		httpx.Handle(r, "GET", "/api/v1/"+c.path, e.ListDefinitions, decodeListDefinitions(c.kind), o)
		httpx.Handle(r, "POST", "/api/v1/"+c.path, e.CreateDefinition, decodeCreateDefinition(c.kind), o)
		httpx.Handle(r, "DELETE", "/api/v1/"+c.path+"/{id}", e.DeleteDefinition, decodeDeleteDefinition(c.kind), o)
	}
}

// IdempotencyOptions are o with the embed API's rules: the exchange (single use by
// design: a second exchange must fail) and the revokes (idempotent already) take no key,
// and generate-session's answer is replayed only while its session id could be
// exchanged (SessionIDTTL).
func IdempotencyOptions(o idempotency.Options) idempotency.Options {
	o.Exclude = []string{"POST /api/v1/embed/session/exchange", "POST /api/v1/embed/session/revoke", "POST /api/v1/embed/sessions/revoke"}
	o.TTL = map[string]time.Duration{"POST /api/v1/embed/generate-session": SessionIDTTL}
	return o
}

func decodeGenerateSessionHTTP(_ context.Context, r *http.Request) (any, error) {
	var req GenerateSessionRequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return nil, err
	}
	return generateSessionRequest{P: identity.FromContext(r.Context()), Body: req}, nil
}

func decodeSessionIDRequest(_ context.Context, r *http.Request) (any, error) {
	var body struct {
		SessionID *string `json:"sessionId"`
	}
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	if body.SessionID == nil || *body.SessionID == "" {
		return nil, errs.Invalidf("sessionId is required")
	}
	return sessionIDRequest{P: identity.FromContext(r.Context()), SessionID: *body.SessionID}, nil
}

func decodePrincipalRequest(_ context.Context, r *http.Request) (any, error) {
	return principalRequest{P: identity.FromContext(r.Context())}, nil
}

func decodeDataTokenRequest(_ context.Context, r *http.Request) (any, error) {
	deploymentID, err := identity.DeploymentFromPath(r)
	if err != nil {
		return nil, err
	}
	return dataTokenRequest{P: identity.FromContext(r.Context()), DeploymentID: deploymentID}, nil
}

func scopeOf(r *http.Request) string {
	if t := r.PathValue("embedTenantName"); t != "" {
		return t
	}
	return AccountScope
}

func decodeListDefinitions(kind string) httptransport.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		pg, err := httpx.ParsePage(r)
		if err != nil {
			return nil, err
		}
		q := ListQuery{Scope: scopeOf(r), Kind: kind, First: pg.First, After: pg.After}
		return listDefinitionsRequest{P: identity.FromContext(r.Context()), Query: q}, nil
	}
}

func decodeCreateDefinition(kind string) httptransport.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		var in DefinitionInput
		if err := httpx.DecodeJSON(r, &in); err != nil {
			return nil, err
		}
		return createDefinitionRequest{P: identity.FromContext(r.Context()), Kind: kind, Body: in}, nil
	}
}

// decodeListUsers reads the page and search of a tenant's user list.
func decodeListUsers(_ context.Context, r *http.Request) (any, error) {
	v := r.URL.Query()
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	q := UserQuery{First: pg.First, After: pg.After, Q: v.Get("q")}
	return listUsersRequest{P: identity.FromContext(r.Context()), Tenant: r.PathValue("embedTenantName"), Query: q}, nil
}

func decodeUserRequest(_ context.Context, r *http.Request) (any, error) {
	return userRequest{P: identity.FromContext(r.Context()), Tenant: r.PathValue("embedTenantName"), ExternalID: r.PathValue("externalId")}, nil
}

// decodeListSessions reads the filters and page of GET /api/v1/embed/sessions.
func decodeListSessions(_ context.Context, r *http.Request) (any, error) {
	v := r.URL.Query()
	q := SessionQuery{ID: v.Get("id"), Tenant: v.Get("tenant"), ExternalID: v.Get("externalId"), InternalID: v.Get("internalId"),
		State: v.Get("state")}
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	q.First = pg.First
	if raw := v.Get("deploymentId"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n <= 0 {
			return nil, errs.Invalidf("deploymentId must be a positive integer, not %q", raw)
		}
		q.DeploymentID = n
	}
	if pg.After != "" {
		c, err := DecodeSessionCursor(pg.After)
		if err != nil {
			return nil, err
		}
		q.After = c
	}
	return listSessionsRequest{P: identity.FromContext(r.Context()), Query: q}, nil
}

// decodeRevokeSessions strictly decodes a bulk revoke.
func decodeRevokeSessions(_ context.Context, r *http.Request) (any, error) {
	var in RevokeSessionsRequest
	if err := httpx.DecodeJSON(r, &in); err != nil {
		return nil, err
	}
	return revokeSessionsRequest{P: identity.FromContext(r.Context()), Body: in}, nil
}

// decodePutSettings strictly decodes the account-wide settings (unknown keys are 400).
func decodePutSettings(_ context.Context, r *http.Request) (any, error) {
	var in AccountSettings
	if err := httpx.DecodeJSON(r, &in); err != nil {
		return nil, err
	}
	return putSettingsRequest{P: identity.FromContext(r.Context()), Body: in}, nil
}

// decodeListMembers reads the page of a group's member list.
func decodeListMembers(_ context.Context, r *http.Request) (any, error) {
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	return listMembersRequest{P: identity.FromContext(r.Context()), Scope: scopeOf(r), Group: r.PathValue("id"),
		Query: UserQuery{First: pg.First, After: pg.After}}, nil
}

// decodeAddMembers strictly decodes {"externalIds": [...]}.
func decodeAddMembers(_ context.Context, r *http.Request) (any, error) {
	var in GroupMembersInput
	if err := httpx.DecodeJSON(r, &in); err != nil {
		return nil, err
	}
	return addMembersRequest{P: identity.FromContext(r.Context()), Scope: scopeOf(r), Group: r.PathValue("id"), Body: in}, nil
}

func decodeRemoveMember(_ context.Context, r *http.Request) (any, error) {
	return removeMemberRequest{P: identity.FromContext(r.Context()), Scope: scopeOf(r), Group: r.PathValue("id"), ExternalID: r.PathValue("externalId")}, nil
}

func decodeDeleteDefinition(kind string) httptransport.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		return deleteDefinitionRequest{P: identity.FromContext(r.Context()), Scope: scopeOf(r), Kind: kind, ID: r.PathValue("id")}, nil
	}
}

// encodeResponse is httpx.EncodeResponse with embed's caching: its answers are
// credentials (no-store), but for the JWKS a verifier may keep a minute.
func encodeResponse(ctx context.Context, w http.ResponseWriter, resp any) error {
	switch resp.(type) {
	case httpx.NoContent: // 204: no body to cache
	case JWKSet:
		// Short enough that a rotation's new key is seen well within the publish delay.
		w.Header().Set("Cache-Control", "public, max-age=60")
	default:
		w.Header().Set("Cache-Control", "no-store")
	}
	return httpx.EncodeResponse(ctx, w, resp)
}
