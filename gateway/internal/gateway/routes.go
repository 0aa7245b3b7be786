package gateway

import (
	"path"
	"strconv"
	"strings"
)

// service names the upstream a route goes to.
type service int

const (
	svcNone service = iota
	svcWorkspace
	svcEmbed
	svcDBTSync
)

func (s service) String() string {
	switch s {
	case svcWorkspace:
		return "workspace-svc"
	case svcEmbed:
		return "embed-svc"
	case svcDBTSync:
		return "dbtsync-svc"
	}
	return "gateway"
}

// policy is the credential a route accepts. What the authenticated caller may do there
// (roles, key kinds, plans) is the service's rule, decided where it is audited.
type policy int

const (
	policyPublic          policy = iota // no credential (the credential is in the body)
	policyBearer                        // a user's bearer token
	policyGenerateSession               // an API key (the deployment, in the body, is embed-svc's to check)
	policyRevoke                        // an API key, a user's bearer token or an embed token
	policyTenantAdmin                   // an API key
	policyAccountAdmin                  // an API key or a user's bearer token
	policyEmbedToken                    // an embed session token
	// policySigned: no credential; the body's signature, which the service verifies,
	// authenticates the request. The gateway attaches the path's deployment (an unknown
	// one is the service's own 401) and limits the route per deployment.
	policySigned
)

// rateLimit is how a route is rate limited.
type rateLimit int

const (
	limitNone          rateLimit = iota
	limitPerKey                  // generate-session: per API key
	limitPerClient               // the session exchange: per client address
	limitPerDeployment           // dbt push webhooks: per deployment (senders share a few addresses)
)

// route is the outcome of matching a request path.
type route struct {
	name         string // metrics and log label
	svc          service
	policy       policy
	deploymentID int64 // the {deploymentId} of the path, 0 when there is none
	bigBody      bool  // manifest uploads and workspace imports: the big-body limit applies
	tokenBody    bool  // the token endpoint: its own, small body limit applies
	limit        rateLimit
	// writeCost is what a POST, PUT, PATCH or DELETE of the route spends of the account
	// budget (0: 1); reads cost 1. The table is in docs/rate-limits.md.
	writeCost int64
}

// Route costs above 1 (docs/rate-limits.md).
const (
	costBulkMove     = 10 // POST .../workspace/bulk-move, bulk-delete, trash/restore, trash/purge: up to a page of items
	costImport       = 20 // POST .../workspace/import: a whole tree written
	costPromotion    = 10 // POST .../workbooks/{id}/promotions: a workbook and its reports written in another deployment
	costDuplicate    = 10 // POST .../folders/{id}/duplicate: a subtree copied
	costManifestSync = 20 // POST .../dbt-sync: a manifest upload and a sync job
)

// match maps a path to its route. Paths that are not in their clean form are not
// matched, so "/api/v1/deployments/1/../2/folders" can never be checked against one
// deployment and served for another, and neither are paths with a (percent-encoded)
// control character.
func match(p string) (route, bool) {
	if !cleanPath(p) {
		return route{}, false
	}
	switch {
	case strings.HasPrefix(p, "/api/v1/deployments/"):
		idPart, rest, _ := strings.Cut(strings.TrimPrefix(p, "/api/v1/deployments/"), "/")
		deploymentID, ok := parseID(idPart)
		if !ok || rest == "" {
			return route{}, false
		}
		first, _, _ := strings.Cut(rest, "/")
		switch first {
		case "workspace", "folders", "workbooks", "reports":
			// The embed grants of a folder or a workbook (.../{id}/embed-access) are served
			// with the object, by workspace-svc.
			r := route{name: first, svc: svcWorkspace, policy: policyBearer, deploymentID: deploymentID}
			switch rest {
			case "workspace/bulk-move", "workspace/bulk-delete", "workspace/trash/restore", "workspace/trash/purge":
				r.writeCost = costBulkMove
			case "workspace/import":
				// A bundle: the big-body limit, which workspace-svc's own import limit
				// (WORKSPACE_IMPORT_MAX_BYTES) sits under.
				r.writeCost, r.bigBody = costImport, true
			}
			switch seg := strings.Split(rest, "/"); {
			case len(seg) == 3 && seg[0] == "workbooks" && seg[2] == "promotions":
				r.writeCost = costPromotion
			case len(seg) == 3 && seg[0] == "folders" && seg[2] == "duplicate":
				r.writeCost = costDuplicate
			}
			return r, true
		case "embed-access":
			// The grants on the deployment's root.
			if rest == "embed-access" {
				return route{name: "embed-access", svc: svcWorkspace, policy: policyBearer, deploymentID: deploymentID}, true
			}
		case "embed-tenants":
			// A tenant's effective access to the deployment's workbooks; the embed tenants'
			// own routes (/api/v1/embed-tenants/...) are embed-svc's.
			return route{name: "embed-tenant-workbooks", svc: svcWorkspace, policy: policyBearer, deploymentID: deploymentID}, true
		case "dbt-sync":
			r := route{name: "dbt-sync", svc: svcDBTSync, policy: policyBearer, deploymentID: deploymentID, bigBody: rest == "dbt-sync"}
			if r.bigBody {
				r.writeCost = costManifestSync
			}
			return r, true
		case "dbt-git-integration":
			if rest == "dbt-git-integration/webhook" {
				return route{name: "dbt-git-webhook", svc: svcDBTSync, policy: policySigned, deploymentID: deploymentID, limit: limitPerDeployment}, true
			}
			return route{name: "dbt-git-integration", svc: svcDBTSync, policy: policyBearer, deploymentID: deploymentID}, true
		case "token":
			if rest == "token" {
				return route{name: "data-token", svc: svcEmbed, policy: policyEmbedToken, deploymentID: deploymentID}, true
			}
		}
		return route{}, false
	case strings.HasPrefix(p, "/build/api/v1/"):
		r := route{name: "build", svc: svcDBTSync, policy: policyBearer}
		if rest, ok := strings.CutPrefix(p, "/build/api/v1/deployments/"); ok {
			idPart, _, _ := strings.Cut(rest, "/")
			deploymentID, ok := parseID(idPart)
			if !ok {
				return route{}, false
			}
			r.deploymentID = deploymentID
		}
		return r, true
	case p == "/api/v1/embed/generate-session":
		return route{name: "generate-session", svc: svcEmbed, policy: policyGenerateSession, limit: limitPerKey}, true
	case p == "/api/v1/embed/session/revoke":
		return route{name: "revoke", svc: svcEmbed, policy: policyRevoke}, true
	case p == "/api/v1/embed/sessions", p == "/api/v1/embed/sessions/revoke":
		// The operator's session control follows the spec's revoke rules.
		return route{name: strings.TrimPrefix(p, "/api/v1/embed/"), svc: svcEmbed, policy: policyRevoke}, true
	case p == "/api/v1/embed/session/exchange":
		return route{name: "session/exchange", svc: svcEmbed, policy: policyPublic, limit: limitPerClient}, true
	case p == "/api/v1/embed/.well-known/jwks.json":
		return route{name: ".well-known/jwks.json", svc: svcEmbed, policy: policyPublic}, true
	case p == "/api/v1/embed/settings":
		return route{name: "embed-settings", svc: svcEmbed, policy: policyAccountAdmin}, true
	case p == "/api/v1/embed/dashboards", strings.HasPrefix(p, "/api/v1/embed/dashboards/"):
		// The viewer's read path: workspace-svc keeps the dashboards and their grants, and
		// reads the session's deployment, tenant and narrowing from the signed principal.
		// Every id, malformed ones included, is the service's to answer, after the token.
		return route{name: "embed-dashboards", svc: svcWorkspace, policy: policyEmbedToken}, true
	case p == "/api/v1/embed/session", p == "/api/v1/embed/session/ai-credentials":
		return route{name: strings.TrimPrefix(p, "/api/v1/embed/"), svc: svcEmbed, policy: policyEmbedToken}, true
	case strings.HasPrefix(p, "/api/v1/embed-tenants/"):
		return route{name: "embed-tenants", svc: svcEmbed, policy: policyTenantAdmin}, true
	case p == "/api/v1/groups", strings.HasPrefix(p, "/api/v1/groups/"):
		return route{name: "groups", svc: svcEmbed, policy: policyAccountAdmin}, true
	case p == "/api/v1/user-attributes", strings.HasPrefix(p, "/api/v1/user-attributes/"):
		return route{name: "user-attributes", svc: svcEmbed, policy: policyAccountAdmin}, true
	case p == apiKeysPath, strings.HasPrefix(p, apiKeysPath+"/"):
		// The gateway's own: the keys live in its identity store (serveAPIKeys).
		return route{name: "api-keys", svc: svcNone, policy: policyAccountAdmin}, true
	case p == serviceAccountsPath, strings.HasPrefix(p, serviceAccountsPath+"/"):
		// The gateway's own, like the API keys (serveServiceAccounts).
		return route{name: "service-accounts", svc: svcNone, policy: policyAccountAdmin}, true
	case p == oauthTokenPath:
		// The credential is in the body or HTTP Basic (serveOAuthToken).
		return route{name: "oauth-token", svc: svcNone, policy: policyPublic, tokenBody: true}, true
	case p == "/api/v1/audit":
		// The audit trail is served by its owner, embed-svc's audit module.
		return route{name: "audit", svc: svcEmbed, policy: policyAccountAdmin}, true
	case p == "/api/v1/webhooks", strings.HasPrefix(p, "/api/v1/webhooks/"):
		// The audit trail's webhooks, served by embed-svc beside the trail they deliver.
		return route{name: "webhooks", svc: svcEmbed, policy: policyAccountAdmin}, true
	}
	return route{}, false
}

// cleanPath: p is in its clean form (no dot or empty segments) and holds no control
// character.
func cleanPath(p string) bool {
	if p == "" || path.Clean(p) != p {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return false
		}
	}
	return true
}

func parseID(s string) (int64, bool) {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}

// OwnRoutes are the routes the gateway answers itself instead of forwarding: the API
// document and its reference, each GET (and HEAD) only (serveOwn), the account's API
// keys (serveAPIKeys), its service accounts and their token endpoint
// (serveServiceAccounts, serveOAuthToken). The routes test compares them with
// openapi.yaml, and the gateway's tests request each one.
func OwnRoutes() []string {
	out := append([]string{"GET /api/v1/openapi.json", "GET /api/v1/docs"}, apiKeyRoutes...)
	return append(out, serviceAccountRoutes...)
}
