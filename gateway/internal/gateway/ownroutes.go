package gateway

import (
	"net/http"
	"strconv"

	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/logging"
)

// serveOwn answers the gateway's own routes, both public like the document they are
// about: the document (/api/v1/openapi.json) and its interactive reference
// (/api/v1/docs). It reports whether r was one of them.
func (g *Gateway) serveOwn(w *h1.ResponseWriter, r *h1.Request) bool {
	if r.URL.Path == "/api/v1/openapi.json" && len(g.o.OpenAPIJSON) > 0 {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r)
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(g.o.OpenAPIJSON)))
		_, _ = w.Write(g.o.OpenAPIJSON)
		return true
	}
	if r.URL.Path == "/api/v1/docs" && g.o.APIReference != nil {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r)
			return true
		}
		// The reference is a net/http handler (conditional and range requests answered by
		// http.ServeContent): it gets a net/http request of its own, the request's fields
		// copied. A page for people, not the API's hot path.
		hr, err := http.NewRequestWithContext(r.Context(), r.Method, r.Target, http.NoBody)
		if err != nil {
			httpx.WriteError(w, http.StatusBadRequest, "the request target cannot be read")
			return true
		}
		for _, f := range r.Header.Fields() {
			hr.Header.Add(f.Name, f.Value)
		}
		hr.Host, hr.RemoteAddr = r.Host, r.RemoteAddr
		g.o.APIReference.ServeHTTP(w, hr)
		return true
	}
	return false
}

// methodNotAllowed is the 405 of a read-only route of the gateway's own.
func methodNotAllowed(w *h1.ResponseWriter, r *h1.Request) {
	w.Header().Set("Allow", "GET, HEAD")
	httpx.WriteError(w, http.StatusMethodNotAllowed, "method "+logging.Cut(r.Method, 32)+" is not allowed on "+r.URL.Path)
}
