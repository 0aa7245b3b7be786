package identity

import (
	"net/http"
	"strconv"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
)

// Require wraps a service's API handler: without a valid forwarded identity the answer
// is 401; with one, the principal is in the request context. When the route has a
// {deploymentId} path value it must be the deployment the gateway checked: anything
// else is answered 404, as for a deployment of another account.
func Require(s *Signer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.Verify(r.Header.Get(Header))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="platform"`)
			httpx.WriteError(w, http.StatusUnauthorized, "missing or invalid identity: requests must come through the gateway")
			return
		}
		r2 := r.WithContext(NewContext(r.Context(), p))
		next.ServeHTTP(w, r2)
		r.Pattern = r2.Pattern // the route label of metrics and logs is read from the outer request

	})
}

// DeploymentFromPath returns the {deploymentId} path value if it is the deployment the
// gateway verified for this principal; otherwise a 404 error (never a hint that the
// deployment exists elsewhere).
func DeploymentFromPath(r *http.Request) (int64, error) {
	raw := r.PathValue("deploymentId")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, errs.NotFoundf("deployment %q not found", raw)
	}
	p := FromContext(r.Context())
	if p == nil || p.Deployment == nil || p.Deployment.ID != id {
		return 0, errs.NotFoundf("deployment %d not found", id)
	}
	return id, nil
}
