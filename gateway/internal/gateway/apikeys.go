package gateway

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/analyticsco/platform/gateway/internal/apikeys"
	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
)

// apiKeysPath is the collection of the account's API keys, which the gateway serves
// itself: it owns the identity store they live in.
const apiKeysPath = "/api/v1/api-keys"

// apiKeyRoutes are the API-key operations (OwnRoutes).
var apiKeyRoutes = []string{
	"GET " + apiKeysPath, "POST " + apiKeysPath,
	"GET " + apiKeysPath + "/{id}", "DELETE " + apiKeysPath + "/{id}",
	"POST " + apiKeysPath + "/{id}/rotate",
}

// serveAPIKeys answers the API-key routes for an authenticated principal: an admin's
// bearer token or an unscoped admin account key (apikeys.Authorize).
func (g *Gateway) serveAPIKeys(w *h1.ResponseWriter, r *h1.Request, p *identity.Principal) {
	ctx := r.Context()
	if g.o.APIKeys == nil {
		httpx.WriteError(w, http.StatusNotFound, "no route for "+r.URL.Path)
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, apiKeysPath), "/")
	id, action, _ := strings.Cut(rest, "/")
	var allow string
	switch {
	case rest == "":
		allow = "GET, POST"
	case action == "" && validKeyID(id):
		allow = "GET, DELETE"
	case action == "rotate" && validKeyID(id):
		allow = "POST"
	default:
		httpx.WriteError(w, http.StatusNotFound, "API key "+logging.Cut(id, 64)+" not found")
		return
	}
	method := r.Method
	if !slices.Contains(strings.Split(allow, ", "), method) {
		w.Header().Set("Allow", allow)
		httpx.WriteError(w, http.StatusMethodNotAllowed, "method "+logging.Cut(r.Method, 32)+" is not allowed on "+r.URL.Path+"; allowed: "+allow)
		return
	}
	c, err := apikeys.Authorize(p)
	if err != nil {
		g.writeAPIKeyError(w, r, err)
		return
	}
	svc := g.o.APIKeys
	switch {
	case rest == "" && method == http.MethodGet:
		page, err := httpx.ParsePage(&http.Request{URL: &url.URL{Path: r.URL.Path, RawQuery: r.URL.RawQuery}})
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		keys, err := svc.List(ctx, c)
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		after, err := httpx.AfterCursor[string](page.After)
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		out, err := httpx.Paginate(keys, func(k apikeys.Key) string { return k.ID }, after, page.First)
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	case rest == "":
		g.idempotent(w, r, p, "POST "+apiKeysPath, func(w http.ResponseWriter, body io.Reader) {
			var req apikeys.CreateRequest
			if err := decodeBodyFrom(r, body, &req, false); err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			out, err := svc.Create(ctx, c, req)
			if err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			w.Header().Set("Location", apiKeysPath+"/"+out.ID)
			writeJSON(w, http.StatusCreated, out)
		})
	case action == "rotate":
		g.idempotent(w, r, p, "POST "+apiKeysPath+"/{id}/rotate", func(w http.ResponseWriter, body io.Reader) {
			var none struct{}
			if err := decodeBodyFrom(r, body, &none, true); err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			out, err := svc.Rotate(ctx, c, id)
			if err != nil {
				g.writeAPIKeyError(w, r, err)
				return
			}
			writeJSON(w, http.StatusOK, out)
		})
	case method == http.MethodGet:
		k, err := svc.Get(ctx, c, id)
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, k)
	default:
		k, err := svc.Revoke(ctx, c, id)
		if err != nil {
			g.writeAPIKeyError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, k)
	}
}

// validKeyID: a key id as credentials makes them (16 lower-case hex characters).
func validKeyID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// decodeBody decodes the JSON body strictly (the API's conventions); optional allows
// an empty one.
// idempotent runs act, the answer of a POST the gateway serves itself, through the
// Idempotency-Key middleware: the body streams through its hash to act's decoder.
func (g *Gateway) idempotent(w *h1.ResponseWriter, r *h1.Request, p *identity.Principal, route string, act func(http.ResponseWriter, io.Reader)) {
	method, pattern, _ := strings.Cut(route, " ")
	if g.o.Idempotency == nil {
		act(w, r.Body)
		return
	}
	req, err := http.NewRequestWithContext(identity.NewContext(r.Context(), p), method, r.URL.Path, io.NopCloser(r.Body))
	if err != nil {
		act(w, r.Body)
		return
	}
	req.URL.RawQuery = r.URL.RawQuery
	req.Header[idempotency.Header] = r.Header.Values(idempotency.Header)
	if len(req.Header[idempotency.Header]) == 0 {
		delete(req.Header, idempotency.Header)
	}
	g.o.Idempotency.Wrap(method, pattern, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		act(w, req.Body)
	})).ServeHTTP(w, req)
}

// decodeBodyFrom is decodeBody reading the body from body (r's, through a hash).
func decodeBodyFrom(r *h1.Request, body io.Reader, dst any, optional bool) error {
	if !r.HasBody() {
		if optional {
			return nil
		}
		return errs.Invalidf("request body is empty: a JSON object is required")
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return errs.Statusf(http.StatusUnsupportedMediaType, "Content-Type must be application/json")
	}
	if err := httpx.DecodeJSONBody(body, dst); err != nil {
		if status, msg, ok := clientError(r); ok {
			return errs.Statusf(status, "%s", msg)
		}
		return err
	}
	return nil
}

func (g *Gateway) writeAPIKeyError(w http.ResponseWriter, r *h1.Request, err error) {
	errs.Write(r.Context(), w, g.o.Logger, err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store") // a create or rotate answer carries a secret
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
