package gateway

import (
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/gateway/internal/serviceaccounts"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
)

// serviceAccountsPath is the collection of the account's service accounts, and
// oauthTokenPath the client-credentials token endpoint: both the gateway's own, as the
// service accounts live in its identity store and it signs their tokens.
const (
	serviceAccountsPath = "/api/v1/service-accounts"
	oauthTokenPath      = "/api/v1/oauth/token"
)

// serviceAccountRoutes are the service-account operations (OwnRoutes).
var serviceAccountRoutes = []string{
	"GET " + serviceAccountsPath, "POST " + serviceAccountsPath,
	"GET " + serviceAccountsPath + "/{id}", "DELETE " + serviceAccountsPath + "/{id}",
	"GET " + serviceAccountsPath + "/{id}/secrets", "POST " + serviceAccountsPath + "/{id}/secrets",
	"GET " + serviceAccountsPath + "/{id}/secrets/{clientId}", "DELETE " + serviceAccountsPath + "/{id}/secrets/{clientId}",
	"POST " + serviceAccountsPath + "/{id}/secrets/{clientId}/rotate",
	"POST " + oauthTokenPath,
}

// serveServiceAccounts answers the service-account routes for an authenticated
// principal: an admin's bearer token or an unscoped admin account key
// (serviceaccounts.Authorize).
func (g *Gateway) serveServiceAccounts(w *h1.ResponseWriter, r *h1.Request, p *identity.Principal) {
	ctx := r.Context()
	svc := g.o.ServiceAccounts
	if svc == nil {
		httpx.WriteError(w, http.StatusNotFound, "no route for "+r.URL.Path)
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, serviceAccountsPath), "/")
	parts := strings.Split(rest, "/")
	var saID int64
	if rest != "" {
		id, ok := parseID(parts[0])
		if !ok {
			httpx.WriteError(w, http.StatusNotFound, "service account "+logging.Cut(parts[0], 64)+" not found")
			return
		}
		saID = id
	}
	var allow string
	switch {
	case rest == "":
		allow = "GET, POST"
	case len(parts) == 1:
		allow = "GET, DELETE"
	case len(parts) == 2 && parts[1] == "secrets":
		allow = "GET, POST"
	case len(parts) >= 3 && parts[1] == "secrets" && !serviceaccounts.ValidClientID(parts[2]):
		httpx.WriteError(w, http.StatusNotFound, "client secret "+logging.Cut(parts[2], 64)+" not found")
		return
	case len(parts) == 3 && parts[1] == "secrets":
		allow = "GET, DELETE"
	case len(parts) == 4 && parts[1] == "secrets" && parts[3] == "rotate":
		allow = "POST"
	default:
		httpx.WriteError(w, http.StatusNotFound, "no route for "+r.URL.Path)
		return
	}
	method := r.Method
	if !slices.Contains(strings.Split(allow, ", "), method) {
		w.Header().Set("Allow", allow)
		httpx.WriteError(w, http.StatusMethodNotAllowed, "method "+logging.Cut(r.Method, 32)+" is not allowed on "+r.URL.Path+"; allowed: "+allow)
		return
	}
	c, err := serviceaccounts.Authorize(p)
	if err != nil {
		g.writeAPIKeyError(w, r, err)
		return
	}
	var none struct{}
	switch {
	case rest == "" && method == http.MethodGet:
		list, err := svc.List(ctx, c)
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		writePage(g, w, r, list, func(sa serviceaccounts.ServiceAccount) int64 { return sa.ID })
	case rest == "":
		g.idempotent(w, r, p, "POST "+serviceAccountsPath, func(w http.ResponseWriter, body io.Reader) {
			var req serviceaccounts.CreateRequest
			if err := decodeBodyFrom(r, body, &req, false); err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			out, err := svc.Create(ctx, c, req)
			if err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			w.Header().Set("Location", serviceAccountsPath+"/"+strconv.FormatInt(out.ID, 10))
			writeJSON(w, http.StatusCreated, out)
		})
	case len(parts) == 1 && method == http.MethodGet:
		out, err := svc.Get(ctx, c, saID)
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	case len(parts) == 1:
		if err := svc.Delete(ctx, c, saID); err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case len(parts) == 2 && method == http.MethodGet:
		list, err := svc.Secrets(ctx, c, saID)
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		writePage(g, w, r, list, func(s serviceaccounts.Secret) string { return s.ClientID })
	case len(parts) == 2:
		g.idempotent(w, r, p, "POST "+serviceAccountsPath+"/{id}/secrets", func(w http.ResponseWriter, body io.Reader) {
			if err := decodeBodyFrom(r, body, &none, true); err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			out, err := svc.CreateSecret(ctx, c, saID)
			if err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			w.Header().Set("Location", serviceAccountsPath+"/"+strconv.FormatInt(saID, 10)+"/secrets/"+out.ClientID)
			writeJSON(w, http.StatusCreated, out)
		})
	case len(parts) == 3 && method == http.MethodGet:
		out, err := svc.GetSecret(ctx, c, saID, parts[2])
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	case len(parts) == 3:
		out, err := svc.RevokeSecret(ctx, c, saID, parts[2])
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	default:
		g.idempotent(w, r, p, "POST "+serviceAccountsPath+"/{id}/secrets/{clientId}/rotate", func(w http.ResponseWriter, body io.Reader) {
			if err := decodeBodyFrom(r, body, &none, true); err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			out, err := svc.RotateSecret(ctx, c, saID, parts[2])
			if err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			writeJSON(w, http.StatusOK, out)
		})
	}
}

// writePage answers one page of items (the API's first/after pagination).
func writePage[T any, K comparable](g *Gateway, w *h1.ResponseWriter, r *h1.Request, items []T, key func(T) K) {
	page, err := httpx.ParsePage(&http.Request{URL: &url.URL{Path: r.URL.Path, RawQuery: r.URL.RawQuery}})
	if err != nil {
		g.writeAPIKeyError(w, r, err)
		return
	}
	after, err := httpx.AfterCursor[K](page.After)
	if err != nil {
		g.writeAPIKeyError(w, r, err)
		return
	}
	out, err := httpx.Paginate(items, key, after, page.First)
	if err != nil {
		g.writeAPIKeyError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// serveOAuthToken is the client-credentials token endpoint (RFC 6749 §4.4): a public
// route, the client authenticating with its id and secret in the form body or by HTTP
// Basic. A failed client authentication counts against the client address's failure
// limit (AUTH_FAILURE_LIMIT) as any 401 does; over it, the answer is 429.
func (g *Gateway) serveOAuthToken(w *h1.ResponseWriter, r *h1.Request) {
	svc := g.o.ServiceAccounts
	if svc == nil || !svc.Issues() {
		httpx.WriteError(w, http.StatusNotFound, "no route for "+r.URL.Path+": this gateway issues no tokens (it has no token signing key)")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		httpx.WriteError(w, http.StatusMethodNotAllowed, "method "+logging.Cut(r.Method, 32)+" is not allowed on "+r.URL.Path+"; allowed: POST")
		return
	}
	req, oerr := g.decodeTokenRequest(r)
	var tok serviceaccounts.Token
	var err error
	if oerr != nil {
		err = oerr
	} else {
		tok, err = svc.IssueToken(r.Context(), req)
	}
	if err == nil {
		w.Header().Set("Pragma", "no-cache")
		writeJSON(w, http.StatusOK, tok)
		return
	}
	var oe *serviceaccounts.OAuthError
	if !errors.As(err, &oe) {
		g.writeAuthError(w, r, route{policy: policyPublic}, err)
		return
	}
	if oe.Status == http.StatusUnauthorized {
		if t, throttled := g.authThrottled(r); throttled {
			g.writeAuthThrottled(w, t)
			return
		}
		if g.countFailedAuth(r.Context(), w, r) {
			return
		}
		if oe.Basic {
			w.Header().Set("WWW-Authenticate", `Basic realm="platform"`)
		}
	}
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, oe.Status, struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}{oe.Code, oe.Description})
}

func invalidTokenRequest(desc string) *serviceaccounts.OAuthError {
	return &serviceaccounts.OAuthError{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

// decodeTokenRequest reads the form-encoded body of a token request (its size bounded
// by OAUTH_TOKEN_BODY_LIMIT) and the client's HTTP Basic credentials, if any.
func (g *Gateway) decodeTokenRequest(r *h1.Request) (serviceaccounts.TokenRequest, *serviceaccounts.OAuthError) {
	var req serviceaccounts.TokenRequest
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return req, invalidTokenRequest("Content-Type must be application/x-www-form-urlencoded")
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		if status, msg, ok := clientError(r); ok {
			return req, &serviceaccounts.OAuthError{Status: status, Code: "invalid_request", Description: msg}
		}
		return req, invalidTokenRequest("the request body could not be read")
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return req, invalidTokenRequest("the body is not form-encoded")
	}
	for name, vs := range form {
		if len(vs) > 1 {
			return req, invalidTokenRequest("parameter " + strconv.Quote(logging.Cut(name, 32)) + " is given more than once")
		}
	}
	req.GrantType, req.Scope = form.Get("grant_type"), form.Get("scope")
	req.ClientID, req.ClientSecret = form.Get("client_id"), form.Get("client_secret")
	// Another scheme (a bearer token, an API key) is no client authentication: it is
	// ignored, as on every public route.
	if scheme, value, _ := strings.Cut(r.Header.Get("Authorization"), " "); strings.EqualFold(scheme, "basic") {
		req.Basic = true
		if req.ClientSecret != "" {
			return req, invalidTokenRequest("the client authenticates one way only: HTTP Basic or client_secret in the body, not both")
		}
		dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
		id, secret, ok := strings.Cut(string(dec), ":")
		if err != nil || !ok {
			return req, &serviceaccounts.OAuthError{Status: http.StatusUnauthorized, Code: "invalid_client", Description: "the HTTP Basic credentials are malformed", Basic: true}
		}
		// RFC 6749 §2.3.1: both are form-encoded before Basic encodes them.
		if id, err = url.QueryUnescape(id); err == nil {
			secret, err = url.QueryUnescape(secret)
		}
		if err != nil {
			return req, &serviceaccounts.OAuthError{Status: http.StatusUnauthorized, Code: "invalid_client", Description: "the HTTP Basic credentials are malformed", Basic: true}
		}
		if req.ClientID != "" && req.ClientID != id {
			return req, invalidTokenRequest("client_id in the body differs from the HTTP Basic one")
		}
		req.ClientID, req.ClientSecret = id, secret
	}
	return req, nil
}
