package access_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// credentialKinds are the columns of the access matrix, in the order of every route's
// want string.
var credentialKinds = []string{
	"none",                    // no Authorization header
	"garbage",                 // a malformed credential in the route's own scheme
	"expired-bearer",          // acme admin's bearer token, expired a minute ago
	"foreign-signature",       // acme admin's bearer token signed by a key the gateway does not know
	"admin-key",               // acme admin's unscoped account API key
	"scoped-key-in-scope",     // acme admin's key scoped to deployment 1, aimed at deployment 1
	"scoped-key-out-of-scope", // the same key aimed at deployment 2
	"personal-key",            // acme admin's personal API key
	"admin",                   // acme users' bearer tokens, one per role
	"developer",
	"ai-bi-user",
	"viewer",
	"embed-token",          // an exchanged embed token of an external user of acme deployment 1
	"other-account-key",    // globex admin's account API key
	"other-account-bearer", // globex admin's bearer token
}

// scheme is the credential a route accepts, which decides what "garbage" looks like.
type scheme int

const (
	schemePublic scheme = iota
	schemeBearer
	schemeAPIKey
	schemeAPIKeyOrBearer
	schemeEmbedToken
)

// accessRoute is one row of the matrix: an operation of openapi.yaml and the status
// each credential kind gets. request builds the concrete call against the objects of a
// deployment scope; it may create fresh objects first when the call consumes one.
type accessRoute struct {
	name    string
	method  string
	path    string // as written in openapi.yaml
	scheme  scheme
	want    string // one status per credential kind
	request func(p *platform, t *testing.T, sc *scope) (path string, body any)
}

// Where the matrix expects what, and why (spec, openapi.yaml, service READMEs):
//   - bearer routes: an API key or embed token is the wrong scheme (401); another
//     account's bearer reaches a deployment it does not own (404, never 403).
//   - folder F of each acme scope grants edit to developer, ai-bi-user and viewer; a viewer
//     is capped at view, so it reads but does not write (403); manage (delete, permissions)
//     stays with the admin and the creator.
//   - bulk-move answers 200 for every well-formed request, the viewer's item failing inside;
//     so does import (a viewer's item is a conflict inside); export reads what the caller
//     can view, so every role reads folder F's.
//   - dbt-sync and /build need developer; the git integration needs admin.
//   - generate-session: only an admin's account key (personal 403, out of scope 403,
//     another account's deployment 404); exchange, JWKS and the document are public and
//     ignore whatever credential is sent.
//   - revoke: any admin key (scope not checked: the spec's rule 4), an admin bearer, or an
//     internal admin's embed token; other roles and an external user's embed token 403;
//     another account's admin gets the same 204 (and its revoke touches nothing of acme,
//     see cross-object).
//   - a key scoped to deployment 1 acts on deployment 1 only, on every embed route but
//     revoke: it lists and bulk-revokes that deployment's sessions (another deployment
//     named: 403), sees the tenant users minted in that deployment only (a user with a
//     session in another deployment: 404, and its mint, dry run included, 403
//     key_out_of_scope: users are the account's, not a deployment's), reads catalogs
//     and settings; what belongs to the whole account (settings, catalog entries and
//     definitions, external users) it cannot change (403 key_out_of_scope), nor can a
//     personal key (403 personal_key).
//   - embed-tenant admin: an admin's account key only (a bearer is the wrong scheme,
//     personal 403); another account does not know acme's tenant (404).
//   - account catalogs: an admin's key or an admin bearer read them; writes need an
//     unscoped account key or a bearer; another account lists its own catalog and cannot
//     delete acme's entries (404).
//   - embed grants: workspace routes with a user's bearer token only; a workbook's or a
//     folder's need manage on it (folder F grants edit, so only the admin), the root's and
//     a tenant's workbook listing the admin role.
//   - the viewer's dashboards: the embed token only (every other credential is 401); the
//     matrix's embed user opens the embeddable workbook of its deployment, which grants
//     allEmbedUsers read.
//   - group members, of either catalog: memberships are the account's, so listing and
//     changing them needs an admin's unscoped account key (scoped 403 key_out_of_scope,
//     personal 403 personal_key), or on the account's catalog an admin bearer; another
//     account does not know acme's tenant or group (404).
var accessRoutes = []accessRoute{
	//                                                                                                        none garb expd forg akey sin  sout pkey admn devl aibi view embd okey obrr
	{"create-folder", "POST", "/api/v1/deployments/{deploymentId}/folders", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders"), map[string]any{"name": p.unique("matrix folder")}
		}},
	{"get-folder", "GET", "/api/v1/deployments/{deploymentId}/folders/{folderId}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders/%d", sc.folder), nil
		}},
	{"rename-folder", "PATCH", "/api/v1/deployments/{deploymentId}/folders/{folderId}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders/%d", sc.folder), map[string]any{"name": p.unique("renamed folder")}
		}},
	{"delete-folder", "DELETE", "/api/v1/deployments/{deploymentId}/folders/{folderId}", schemeBearer, "401 401 401 401 401 401 401 401 204 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders/%d", p.sharedFolder(t, sc)), nil
		}},
	{"get-folder-permissions", "GET", "/api/v1/deployments/{deploymentId}/folders/{folderId}/permissions", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders/%d/permissions", sc.folder), nil
		}},
	{"set-folder-permissions", "PUT", "/api/v1/deployments/{deploymentId}/folders/{folderId}/permissions", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders/%d/permissions", sc.folder), p.editGrants()
		}},
	{"list-workspace", "GET", "/api/v1/deployments/{deploymentId}/workspace", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace?folderId=%d", sc.folder), nil
		}},
	{"move", "POST", "/api/v1/deployments/{deploymentId}/workspace/move", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace/move"), map[string]any{"type": "WORKBOOK", "id": p.freshWorkbook(t, sc), "folderId": nil}
		}},
	{"bulk-move", "POST", "/api/v1/deployments/{deploymentId}/workspace/bulk-move", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace/bulk-move"), map[string]any{"items": []any{map[string]any{"type": "WORKBOOK", "id": p.freshWorkbook(t, sc)}}, "folderId": nil}
		}},
	{"bulk-delete", "POST", "/api/v1/deployments/{deploymentId}/workspace/bulk-delete", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace/bulk-delete"), map[string]any{"items": []any{map[string]any{"type": "WORKBOOK", "id": p.freshWorkbook(t, sc)}}}
		}},
	{"list-trash", "GET", "/api/v1/deployments/{deploymentId}/workspace/trash", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace/trash"), nil
		}},
	{"restore-trash", "POST", "/api/v1/deployments/{deploymentId}/workspace/trash/restore", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace/trash/restore"), map[string]any{"items": []any{map[string]any{"type": "WORKBOOK", "id": p.trashedWorkbook(t, sc)}}}
		}},
	{"purge-trash", "POST", "/api/v1/deployments/{deploymentId}/workspace/trash/purge", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace/trash/purge"), map[string]any{"items": []any{map[string]any{"type": "WORKBOOK", "id": p.trashedWorkbook(t, sc)}}}
		}},
	{"export-workspace", "GET", "/api/v1/deployments/{deploymentId}/workspace/export", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace/export?folderId=%d", sc.folder), nil
		}},
	{"import-workspace", "POST", "/api/v1/deployments/{deploymentId}/workspace/import", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			key := strings.ReplaceAll(p.unique("matrix-report"), " ", "-")
			return sc.path("/workspace/import"), map[string]any{"folderId": sc.folder, "bundle": map[string]any{
				"format": "analytics-workspace-bundle/1", "items": []any{map[string]any{"type": "REPORT", "key": key, "name": key}}}}
		}},
	{"create-workbook", "POST", "/api/v1/deployments/{deploymentId}/workbooks", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks"), map[string]any{"name": p.unique("matrix workbook"), "folderId": sc.folder}
		}},
	{"get-workbook", "GET", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d", sc.workbook), nil
		}},
	{"publish-workbook", "POST", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/publish", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d/publish", sc.workbook), nil
		}},
	{"update-workbook", "PATCH", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d", sc.workbook), map[string]any{"name": p.unique("renamed workbook")}
		}},
	{"delete-workbook", "DELETE", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}", schemeBearer, "401 401 401 401 401 401 401 401 204 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d", p.freshWorkbook(t, sc)), nil
		}},
	{"unpublish-workbook", "POST", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/unpublish", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			p.must(t, "POST", sc.path("/workbooks/%d/publish", sc.workbook), "Bearer "+sc.admin, nil, 200)
			return sc.path("/workbooks/%d/unpublish", sc.workbook), nil
		}},
	{"list-dashboard-versions", "GET", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/dashboard/versions", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d/dashboard/versions", sc.workbook), nil
		}},
	{"get-dashboard-version", "GET", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/dashboard/versions/{versionNumber}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d/dashboard/versions/%d", sc.workbook, p.publishedVersion(t, sc)), nil
		}},
	{"restore-dashboard-version", "POST", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/dashboard/versions/{versionNumber}/restore", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d/dashboard/versions/%d/restore", sc.workbook, p.publishedVersion(t, sc)), nil
		}},
	// Promotion: from the scope's workbook into the account's other deployment's shared
	// folder (edit for every acme role); a viewer cannot create there (403).
	{"preview-workbook-promotion", "POST", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/promotion-previews", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			to := p.otherAcme(sc)
			return sc.path("/workbooks/%d/promotion-previews", sc.workbook), map[string]any{"targetDeploymentId": to.dep, "targetFolderId": to.folder}
		}},
	{"promote-workbook", "POST", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/promotions", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			to, wb := p.otherAcme(sc), p.freshWorkbook(t, sc)
			body := map[string]any{"targetDeploymentId": to.dep, "targetFolderId": to.folder}
			body["sourceHash"] = p.must(t, "POST", sc.path("/workbooks/%d/promotion-previews", wb), "Bearer "+sc.admin, body, 200)["sourceHash"]
			return sc.path("/workbooks/%d/promotions", wb), body
		}},
	{"list-workbook-promotions", "GET", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/promotions", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d/promotions", sc.workbook), nil
		}},
	{"duplicate-workbook", "POST", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/duplicate", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d/duplicate", sc.workbook), map[string]any{"folderId": sc.folder, "deep": true}
		}},
	{"duplicate-folder", "POST", "/api/v1/deployments/{deploymentId}/folders/{folderId}/duplicate", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders/%d/duplicate", p.sharedFolder(t, sc)), map[string]any{"folderId": sc.folder}
		}},
	{"add-favorite", "PUT", "/api/v1/deployments/{deploymentId}/workspace/favorites/{type}/{itemId}", schemeBearer, "401 401 401 401 401 401 401 401 204 204 204 204 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace/favorites/workbook/%d", sc.workbook), nil
		}},
	{"remove-favorite", "DELETE", "/api/v1/deployments/{deploymentId}/workspace/favorites/{type}/{itemId}", schemeBearer, "401 401 401 401 401 401 401 401 204 204 204 204 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workspace/favorites/workbook/%d", sc.workbook), nil
		}},
	{"create-report", "POST", "/api/v1/deployments/{deploymentId}/reports", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/reports"), map[string]any{"name": p.unique("matrix report"), "folderId": sc.folder}
		}},
	// Create-or-replace by key: a fresh key each call, so every allowed call creates (201),
	// with the create's roles; the folder F of the scope is the destination.
	{"put-folder-by-key", "PUT", "/api/v1/deployments/{deploymentId}/folders/by-key/{key}", schemeBearer, "401 401 401 401 401 401 401 401 201 201 201 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders/by-key/%s", p.key("matrix-folder")), map[string]any{"name": "by key", "parentId": sc.folder}
		}},
	{"put-workbook-by-key", "PUT", "/api/v1/deployments/{deploymentId}/workbooks/by-key/{key}", schemeBearer, "401 401 401 401 401 401 401 401 201 201 201 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/by-key/%s", p.key("matrix-workbook")), map[string]any{"name": "by key", "folderId": sc.folder}
		}},
	{"put-report-by-key", "PUT", "/api/v1/deployments/{deploymentId}/reports/by-key/{key}", schemeBearer, "401 401 401 401 401 401 401 401 201 201 201 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/reports/by-key/%s", p.key("matrix-report")), map[string]any{"name": "by key", "folderId": sc.folder}
		}},
	{"get-report", "GET", "/api/v1/deployments/{deploymentId}/reports/{reportId}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 200 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/reports/%d", sc.report), nil
		}},
	{"update-report", "PATCH", "/api/v1/deployments/{deploymentId}/reports/{reportId}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 200 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/reports/%d", sc.report), map[string]any{"name": p.unique("renamed report")}
		}},
	{"delete-report", "DELETE", "/api/v1/deployments/{deploymentId}/reports/{reportId}", schemeBearer, "401 401 401 401 401 401 401 401 204 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/reports/%d", id(t, p.must(t, "POST", sc.path("/reports"), "Bearer "+sc.admin, map[string]any{"name": p.unique("deletable"), "folderId": sc.folder}, 200))), nil
		}},
	{"start-dbt-sync", "POST", "/api/v1/deployments/{deploymentId}/dbt-sync", schemeBearer, "401 401 401 401 401 401 401 401 202 202 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/dbt-sync"), map[string]any{"source": "manifest", "manifest": smallManifest("orders"), "branchName": sc.branch}
		}},
	{"list-dbt-syncs", "GET", "/api/v1/deployments/{deploymentId}/dbt-sync", schemeBearer, "401 401 401 401 401 401 401 401 200 200 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/dbt-sync"), nil
		}},
	{"get-dbt-sync", "GET", "/api/v1/deployments/{deploymentId}/dbt-sync/{syncJobId}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/dbt-sync/%s", sc.syncJob), nil
		}},
	// Cancel on a finished job is 409 for the roles that may cancel; retry of a failed
	// manifest job queues a new one.
	{"cancel-dbt-sync", "POST", "/api/v1/deployments/{deploymentId}/dbt-sync/{syncJobId}/cancel", schemeBearer, "401 401 401 401 401 401 401 401 409 409 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/dbt-sync/%s/cancel", sc.syncJob), nil
		}},
	{"retry-dbt-sync", "POST", "/api/v1/deployments/{deploymentId}/dbt-sync/{syncJobId}/retry", schemeBearer, "401 401 401 401 401 401 401 401 202 202 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/dbt-sync/%s/retry", sc.failedJob), nil
		}},
	{"get-dbt-git-integration", "GET", "/api/v1/deployments/{deploymentId}/dbt-git-integration", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/dbt-git-integration"), nil
		}},
	{"put-dbt-git-integration", "PUT", "/api/v1/deployments/{deploymentId}/dbt-git-integration", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/dbt-git-integration"), p.gitIntegration()
		}},
	// The push webhook is public: its signature is the credential, so whatever
	// Authorization a sender adds, an unsigned push is the same 401.
	{"push-dbt-git-webhook", "POST", "/api/v1/deployments/{deploymentId}/dbt-git-integration/webhook", schemePublic, "401 401 401 401 401 401 401 401 401 401 401 401 401 401 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/dbt-git-integration/webhook"), map[string]any{"ref": "refs/heads/main", "after": "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"}
		}},
	{"list-branches", "GET", "/build/api/v1/deployments/{deploymentId}/branches", schemeBearer, "401 401 401 401 401 401 401 401 200 200 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.buildPath(""), nil
		}},
	{"get-branch", "GET", "/build/api/v1/deployments/{deploymentId}/branches/{branchName}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.buildPath("/" + sc.branch), nil
		}},
	{"list-branch-files", "GET", "/build/api/v1/deployments/{deploymentId}/branches/{branchName}/files", schemeBearer, "401 401 401 401 401 401 401 401 200 200 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.buildPath("/" + sc.branch + "/files"), nil
		}},
	{"get-branch-file", "GET", "/build/api/v1/deployments/{deploymentId}/branches/{branchName}/files/{path}", schemeBearer, "401 401 401 401 401 401 401 401 200 200 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.buildPath("/" + sc.branch + "/files/model/cubes/orders.yml"), nil
		}},
	{"list-branch-versions", "GET", "/build/api/v1/deployments/{deploymentId}/branches/{branchName}/versions", schemeBearer, "401 401 401 401 401 401 401 401 200 200 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.buildPath("/" + sc.branch + "/versions"), nil
		}},
	{"open-branch", "POST", "/build/api/v1/deployments/{deploymentId}/branches/{branchName}/open", schemeBearer, "401 401 401 401 401 401 401 401 200 200 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.buildPath("/" + sc.branch + "/open"), nil
		}},
	{"set-branch-staging", "PUT", "/build/api/v1/deployments/{deploymentId}/branches/{branchName}/staging", schemeBearer, "401 401 401 401 401 401 401 401 200 200 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.buildPath("/" + sc.branch + "/staging"), map[string]any{"enabled": true}
		}},
	{"get-workbook-embed-access", "GET", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/embed-access", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d/embed-access", sc.workbook), nil
		}},
	{"set-workbook-embed-access", "PUT", "/api/v1/deployments/{deploymentId}/workbooks/{workbookId}/embed-access", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/workbooks/%d/embed-access", sc.workbook), p.tenantGrant()
		}},
	{"get-folder-embed-access", "GET", "/api/v1/deployments/{deploymentId}/folders/{folderId}/embed-access", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders/%d/embed-access", sc.folder), nil
		}},
	{"set-folder-embed-access", "PUT", "/api/v1/deployments/{deploymentId}/folders/{folderId}/embed-access", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/folders/%d/embed-access", sc.folder), p.tenantGrant()
		}},
	// The matrix writes no grant on the root ({} is what it has), so it changes nothing.
	{"get-root-embed-access", "GET", "/api/v1/deployments/{deploymentId}/embed-access", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return sc.path("/embed-access"), nil }},
	{"set-root-embed-access", "PUT", "/api/v1/deployments/{deploymentId}/embed-access", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/embed-access"), map[string]any{}
		}},
	{"list-embed-tenant-workbooks", "GET", "/api/v1/deployments/{deploymentId}/embed-tenants/{embedTenantName}/workbooks", schemeBearer, "401 401 401 401 401 401 401 401 200 403 403 403 401 401 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return sc.path("/embed-tenants/%s/workbooks?first=5", p.tenantA), nil
		}},
	{"list-embed-dashboards", "GET", "/api/v1/embed/dashboards", schemeEmbedToken, "401 401 401 401 401 401 401 401 401 401 401 401 200 401 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed/dashboards?first=5", nil
		}},
	{"get-embed-dashboard", "GET", "/api/v1/embed/dashboards/{publicId}", schemeEmbedToken, "401 401 401 401 401 401 401 401 401 401 401 401 200 401 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed/dashboards/" + p.scopes["acme-1"].publicID, nil
		}},
	{"generate-session", "POST", "/api/v1/embed/generate-session", schemeAPIKey, "401 401 401 401 200 200 403 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed/generate-session", map[string]any{"deploymentId": sc.dep, "externalId": "matrix-user"}
		}},
	{"exchange-session", "POST", "/api/v1/embed/session/exchange", schemePublic, "200 200 200 200 200 200 200 200 200 200 200 200 200 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed/session/exchange", map[string]any{"sessionId": p.mint(t, sc.dep)}
		}},
	{"revoke-session", "POST", "/api/v1/embed/session/revoke", schemeAPIKeyOrBearer, "401 401 401 401 204 204 204 204 204 403 403 403 403 204 204",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed/session/revoke", map[string]any{"sessionId": p.mint(t, sc.dep)}
		}},
	// Session control: admins' keys and bearers (no embed token); a scoped key lists and
	// revokes inside its scope: naming another deployment is 403, any other selector
	// resolves inside the scope (the out-of-scope user's session is not revoked, see
	// runMatrix); another account's admin sees and revokes only its own sessions.
	{"list-sessions", "GET", "/api/v1/embed/sessions", schemeAPIKeyOrBearer, "401 401 401 401 200 200 403 200 200 403 403 403 403 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return fmt.Sprintf("/api/v1/embed/sessions?first=5&deploymentId=%d", sc.dep), nil
		}},
	{"revoke-sessions", "POST", "/api/v1/embed/sessions/revoke", schemeAPIKeyOrBearer, "401 401 401 401 200 200 200 200 200 403 403 403 403 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			ext := strings.ReplaceAll(p.unique("matrix-revoked"), " ", "-")
			p.mintWith(t, adminKey(p), map[string]any{"deploymentId": sc.dep, "externalId": ext, "embedTenantName": p.tenantA})
			return "/api/v1/embed/sessions/revoke", map[string]any{"externalId": ext, "tenant": p.tenantA}
		}},
	{"describe-session", "GET", "/api/v1/embed/session", schemeEmbedToken, "401 401 401 401 401 401 401 401 401 401 401 401 200 401 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return "/api/v1/embed/session", nil }},
	{"ai-credentials", "POST", "/api/v1/embed/session/ai-credentials", schemeEmbedToken, "401 401 401 401 401 401 401 401 401 401 401 401 200 401 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed/session/ai-credentials", nil
		}},
	{"embed-jwks", "GET", "/api/v1/embed/.well-known/jwks.json", schemePublic, "200 200 200 200 200 200 200 200 200 200 200 200 200 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed/.well-known/jwks.json", nil
		}},
	{"data-api-token", "POST", "/api/v1/deployments/{deploymentId}/token", schemeEmbedToken, "401 401 401 401 401 401 401 401 401 401 401 401 200 401 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return sc.path("/token"), nil }},
	// A tenant's external users: an admin's account key, like the tenant catalogs; a scoped
	// key sees the users all of whose sessions are in its deployments (another is 404, as one
	// that does not exist; see cross-object for a user of both deployments);
	// deleting a user, whose sessions may be in any deployment, needs an unscoped key.
	{"list-tenant-users", "GET", "/api/v1/embed-tenants/{embedTenantName}/users", schemeAPIKey, "401 401 401 401 200 200 200 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/users?first=5", nil
		}},
	{"get-tenant-user", "GET", "/api/v1/embed-tenants/{embedTenantName}/users/{externalId}", schemeAPIKey, "401 401 401 401 200 200 404 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/users/" + p.freshTenantUser(t, sc.dep), nil
		}},
	{"delete-tenant-user", "DELETE", "/api/v1/embed-tenants/{embedTenantName}/users/{externalId}", schemeAPIKey, "401 401 401 401 200 403 403 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/users/" + p.freshTenantUser(t, sc.dep), nil
		}},
	{"list-tenant-groups", "GET", "/api/v1/embed-tenants/{embedTenantName}/groups", schemeAPIKey, "401 401 401 401 200 200 200 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/groups", nil
		}},
	{"delete-tenant-group", "DELETE", "/api/v1/embed-tenants/{embedTenantName}/groups/{id}", schemeAPIKey, "401 401 401 401 204 403 403 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/groups/" + p.freshTenantDefinition(t, "groups"), nil
		}},
	{"list-tenant-group-members", "GET", "/api/v1/embed-tenants/{embedTenantName}/groups/{id}/users", schemeAPIKey, "401 401 401 401 200 403 403 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/groups/" + p.tenantGroupID + "/users?first=5", nil
		}},
	{"add-tenant-group-members", "POST", "/api/v1/embed-tenants/{embedTenantName}/groups/{id}/users", schemeAPIKey, "401 401 401 401 200 403 403 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/groups/" + p.tenantGroupID + "/users",
				map[string]any{"externalIds": []string{p.freshTenantUser(t, p.scopes["acme-1"].dep)}}
		}},
	{"remove-tenant-group-member", "DELETE", "/api/v1/embed-tenants/{embedTenantName}/groups/{id}/users/{externalId}", schemeAPIKey, "401 401 401 401 204 403 403 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/groups/" + p.tenantGroupID + "/users/" + p.freshTenantMember(t, p.tenantA, p.tenantGroupID), nil
		}},
	{"list-tenant-user-attributes", "GET", "/api/v1/embed-tenants/{embedTenantName}/user-attributes", schemeAPIKey, "401 401 401 401 200 200 200 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/user-attributes", nil
		}},
	{"delete-tenant-user-attribute", "DELETE", "/api/v1/embed-tenants/{embedTenantName}/user-attributes/{id}", schemeAPIKey, "401 401 401 401 204 403 403 403 401 401 401 401 401 404 401",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed-tenants/" + p.tenantA + "/user-attributes/" + p.freshTenantDefinition(t, "user-attributes"), nil
		}},
	// The account-wide embed settings: admins by key or bearer, each account its own;
	// replacing them needs an unscoped account key (a scoped key key_out_of_scope, a
	// personal key personal_key) or a bearer. The matrix writes {} (no settings, as the
	// seed has), so it changes nothing.
	{"get-embed-settings", "GET", "/api/v1/embed/settings", schemeAPIKeyOrBearer, "401 401 401 401 200 200 200 200 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return "/api/v1/embed/settings", nil }},
	{"put-embed-settings", "PUT", "/api/v1/embed/settings", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/embed/settings", map[string]any{}
		}},
	// The audit trail: admins only; a scoped key aimed at another deployment is 403; another
	// account's admin reads its own (empty for acme's deployment), never acme's events.
	{"list-audit-events", "GET", "/api/v1/audit", schemeAPIKeyOrBearer, "401 401 401 401 200 200 403 200 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return fmt.Sprintf("/api/v1/audit?deploymentId=%d", sc.dep), nil
		}},
	// Webhooks (embed-svc, beside the trail they deliver): admins, as the audit trail; a key
	// scoped to deployment 1 creates and sees webhooks of its deployments only (deployment
	// 2's: 403 on create, 404 otherwise); another account names a deployment it does not
	// own (404) and never sees acme's webhooks (404). A ping stays pending (its receiver
	// never answers), so redelivering it is 409 delivery_pending for whoever may.
	{"list-webhooks", "GET", "/api/v1/webhooks", schemeAPIKeyOrBearer, "401 401 401 401 200 200 200 200 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return "/api/v1/webhooks", nil }},
	{"create-webhook", "POST", "/api/v1/webhooks", schemeAPIKeyOrBearer, "401 401 401 401 201 201 403 201 201 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/webhooks", map[string]any{"url": "https://hooks.example.com/matrix", "events": []string{"*"}, "deploymentIds": []int64{sc.dep}}
		}},
	{"get-webhook", "GET", "/api/v1/webhooks/{id}", schemeAPIKeyOrBearer, "401 401 401 401 200 200 404 200 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/webhooks/" + p.webhook(t, sc), nil
		}},
	{"update-webhook", "PATCH", "/api/v1/webhooks/{id}", schemeAPIKeyOrBearer, "401 401 401 401 200 200 404 200 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/webhooks/" + p.webhook(t, sc), map[string]any{"description": "matrix"}
		}},
	{"delete-webhook", "DELETE", "/api/v1/webhooks/{id}", schemeAPIKeyOrBearer, "401 401 401 401 204 204 404 204 204 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/webhooks/" + p.freshWebhook(t, sc), nil
		}},
	{"rotate-webhook-secret", "POST", "/api/v1/webhooks/{id}/secret/rotate", schemeAPIKeyOrBearer, "401 401 401 401 200 200 404 200 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/webhooks/" + p.webhook(t, sc) + "/secret/rotate", nil
		}},
	{"ping-webhook", "POST", "/api/v1/webhooks/{id}/ping", schemeAPIKeyOrBearer, "401 401 401 401 202 202 404 202 202 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/webhooks/" + p.webhook(t, sc) + "/ping", nil
		}},
	{"list-webhook-deliveries", "GET", "/api/v1/webhooks/{id}/deliveries", schemeAPIKeyOrBearer, "401 401 401 401 200 200 404 200 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/webhooks/" + p.webhook(t, sc) + "/deliveries", nil
		}},
	{"redeliver-webhook-delivery", "POST", "/api/v1/webhooks/{id}/deliveries/{deliveryId}/redeliver", schemeAPIKeyOrBearer, "401 401 401 401 409 409 404 409 409 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			id := p.webhook(t, sc)
			ping := p.must(t, "POST", "/api/v1/webhooks/"+id+"/ping", adminBearer(p), nil, 202)
			dlv, _ := ping["id"].(string)
			return "/api/v1/webhooks/" + id + "/deliveries/" + dlv + "/redeliver", nil
		}},
	// API keys, served by the gateway: managing them is account-wide, so an admin's bearer
	// or unscoped account key only (scoped 403 key_out_of_scope, personal 403
	// personal_key); another account lists and creates its own, and acme's key is 404.
	{"list-api-keys", "GET", "/api/v1/api-keys", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return "/api/v1/api-keys", nil }},
	{"create-api-key", "POST", "/api/v1/api-keys", schemeAPIKeyOrBearer, "401 401 401 401 201 403 403 403 201 403 403 403 401 201 201",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/api-keys", map[string]any{"name": "matrix", "kind": "account", "expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
		}},
	{"get-api-key", "GET", "/api/v1/api-keys/{id}", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/api-keys/" + p.freshAPIKey(t), nil
		}},
	{"revoke-api-key", "DELETE", "/api/v1/api-keys/{id}", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/api-keys/" + p.freshAPIKey(t), nil
		}},
	{"rotate-api-key", "POST", "/api/v1/api-keys/{id}/rotate", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/api-keys/" + p.freshAPIKey(t) + "/rotate", nil
		}},
	// Service accounts, served by the gateway: managed as the API keys are (an admin's
	// bearer or unscoped account key); another account does not know acme's (404).
	{"list-service-accounts", "GET", "/api/v1/service-accounts", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return "/api/v1/service-accounts", nil }},
	{"create-service-account", "POST", "/api/v1/service-accounts", schemeAPIKeyOrBearer, "401 401 401 401 201 403 403 403 201 403 403 403 401 201 201",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/service-accounts", map[string]any{"name": "matrix", "role": "viewer"}
		}},
	{"get-service-account", "GET", "/api/v1/service-accounts/{id}", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return fmt.Sprintf("/api/v1/service-accounts/%d", p.freshServiceAccount(t)), nil
		}},
	{"delete-service-account", "DELETE", "/api/v1/service-accounts/{id}", schemeAPIKeyOrBearer, "401 401 401 401 204 403 403 403 204 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return fmt.Sprintf("/api/v1/service-accounts/%d", p.freshServiceAccount(t)), nil
		}},
	{"list-service-account-secrets", "GET", "/api/v1/service-accounts/{id}/secrets", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return fmt.Sprintf("/api/v1/service-accounts/%d/secrets", p.freshServiceAccount(t)), nil
		}},
	{"create-service-account-secret", "POST", "/api/v1/service-accounts/{id}/secrets", schemeAPIKeyOrBearer, "401 401 401 401 201 403 403 403 201 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return fmt.Sprintf("/api/v1/service-accounts/%d/secrets", p.freshServiceAccount(t)), nil
		}},
	{"get-service-account-secret", "GET", "/api/v1/service-accounts/{id}/secrets/{clientId}", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			sa, clientID, _ := p.freshClientSecret(t)
			return fmt.Sprintf("/api/v1/service-accounts/%d/secrets/%s", sa, clientID), nil
		}},
	{"revoke-service-account-secret", "DELETE", "/api/v1/service-accounts/{id}/secrets/{clientId}", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			sa, clientID, _ := p.freshClientSecret(t)
			return fmt.Sprintf("/api/v1/service-accounts/%d/secrets/%s", sa, clientID), nil
		}},
	{"rotate-service-account-secret", "POST", "/api/v1/service-accounts/{id}/secrets/{clientId}/rotate", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			sa, clientID, _ := p.freshClientSecret(t)
			return fmt.Sprintf("/api/v1/service-accounts/%d/secrets/%s/rotate", sa, clientID), nil
		}},
	// The token endpoint is public: the client's id and secret are in the form body, and
	// whatever bearer token or API key is sent beside them is ignored.
	{"oauth-token", "POST", "/api/v1/oauth/token", schemePublic, "200 200 200 200 200 200 200 200 200 200 200 200 200 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			_, clientID, secret := p.freshClientSecret(t)
			return "/api/v1/oauth/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}}
		}},
	{"list-groups", "GET", "/api/v1/groups", schemeAPIKeyOrBearer, "401 401 401 401 200 200 200 200 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return "/api/v1/groups", nil }},
	{"create-group", "POST", "/api/v1/groups", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/groups", map[string]any{"name": p.unique("matrix-group")}
		}},
	{"delete-group", "DELETE", "/api/v1/groups/{id}", schemeAPIKeyOrBearer, "401 401 401 401 204 403 403 403 204 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/groups/" + p.freshCatalogEntry(t, "groups"), nil
		}},
	{"list-group-members", "GET", "/api/v1/groups/{id}/users", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/groups/" + p.acmeGroupID + "/users?first=5", nil
		}},
	{"add-group-members", "POST", "/api/v1/groups/{id}/users", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/groups/" + p.acmeGroupID + "/users", map[string]any{"externalIds": []string{p.freshTenantUser(t, p.scopes["acme-1"].dep)}}
		}},
	{"remove-group-member", "DELETE", "/api/v1/groups/{id}/users/{externalId}", schemeAPIKeyOrBearer, "401 401 401 401 204 403 403 403 204 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/groups/" + p.acmeGroupID + "/users/" + p.freshTenantMember(t, "", p.acmeGroupID), nil
		}},
	{"list-user-attributes", "GET", "/api/v1/user-attributes", schemeAPIKeyOrBearer, "401 401 401 401 200 200 200 200 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return "/api/v1/user-attributes", nil }},
	{"create-user-attribute", "POST", "/api/v1/user-attributes", schemeAPIKeyOrBearer, "401 401 401 401 200 403 403 403 200 403 403 403 401 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/user-attributes", map[string]any{"name": p.unique("matrix_attr"), "type": "string"}
		}},
	{"delete-user-attribute", "DELETE", "/api/v1/user-attributes/{id}", schemeAPIKeyOrBearer, "401 401 401 401 204 403 403 403 204 403 403 403 401 404 404",
		func(p *platform, t *testing.T, sc *scope) (string, any) {
			return "/api/v1/user-attributes/" + p.freshCatalogEntry(t, "user-attributes"), nil
		}},
	{"openapi-document", "GET", "/api/v1/openapi.json", schemePublic, "200 200 200 200 200 200 200 200 200 200 200 200 200 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return "/api/v1/openapi.json", nil }},
	{"api-docs", "GET", "/api/v1/docs", schemePublic, "200 200 200 200 200 200 200 200 200 200 200 200 200 200 200",
		func(p *platform, t *testing.T, sc *scope) (string, any) { return "/api/v1/docs", nil }},
}

// TestHostileAccess runs one stack for the whole suite: the matrix, the cross-object
// cases and the smuggled headers all feed the log that the last subtest scans.
func TestHostileAccess(t *testing.T) {
	p := startPlatform(t)

	t.Run("every-route-of-the-document-is-in-the-matrix", func(t *testing.T) { p.checkCoverage(t) })
	t.Run("matrix", func(t *testing.T) { p.runMatrix(t) })
	t.Run("cross-object", func(t *testing.T) { p.runCrossObject(t) })
	t.Run("smuggled-identity-headers-are-ignored", func(t *testing.T) { p.runSmuggling(t) })
	t.Run("secrets-never-reach-the-logs", func(t *testing.T) { p.scanLogs(t) })
}

func (p *platform) checkCoverage(t *testing.T) {
	r := p.call(t, "GET", "/api/v1/openapi.json", "", nil, nil)
	if r.status != 200 {
		t.Fatalf("openapi.json: %d", r.status)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "post", "put", "patch", "delete":
				documented[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	inMatrix := map[string]bool{}
	for _, rt := range accessRoutes {
		key := rt.method + " " + rt.path
		if inMatrix[key] {
			t.Errorf("%s is twice in the matrix", key)
		}
		inMatrix[key] = true
		if !documented[key] {
			t.Errorf("%s is in the matrix but not in openapi.yaml", key)
		}
		if n := len(strings.Fields(rt.want)); n != len(credentialKinds) {
			t.Errorf("%s: %d expected statuses, want one per credential kind (%d)", rt.name, n, len(credentialKinds))
		}
	}
	var missing []string
	for key := range documented {
		if !inMatrix[key] {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	for _, key := range missing {
		t.Errorf("%s is in openapi.yaml but not in the access matrix", key)
	}
}

func (p *platform) runMatrix(t *testing.T) {
	for _, rt := range accessRoutes {
		want := strings.Fields(rt.want)
		for i, kind := range credentialKinds {
			if i >= len(want) {
				break
			}
			wantStatus, _ := strconv.Atoi(want[i])
			t.Run(fmt.Sprintf("%s-%d-%s", rt.name, wantStatus, kind), func(t *testing.T) {
				sc := p.scopes["acme-1"]
				if kind == "scoped-key-out-of-scope" {
					sc = p.scopes["acme-2"]
				}
				path, body := rt.request(p, t, sc)
				r := p.call(t, rt.method, path, p.authorization(t, kind, rt.scheme), body, nil)
				if r.status != wantStatus {
					t.Fatalf("%s %s as %s: got %d, want %d: %s", rt.method, path, kind, r.status, wantStatus, r.body)
				}
				if r.status == 401 && r.header.Get("WWW-Authenticate") == "" {
					t.Errorf("401 without WWW-Authenticate")
				}
				if r.status >= 400 {
					assertErrorBody(t, r)
				}
				if rt.name == "revoke-sessions" && r.status == 200 {
					// Another account revokes nothing of acme; a scoped key's selector resolves
					// inside its scope, so the user of deployment 2 keeps its session.
					want := 1
					if kind == "scoped-key-out-of-scope" || strings.HasPrefix(kind, "other-account") {
						want = 0
					}
					if got := revokedCount(t, r); got != want {
						t.Errorf("revoke-sessions as %s revoked %d, want %d: %s", kind, got, want, r.body)
					}
				}
				if rt.name == "bulk-move" && r.status == 200 {
					// The viewer's item fails inside the 200 with the single move's 403.
					want := 0
					if kind == "viewer" {
						want = 403
					}
					if got := bulkItemStatus(t, r); got != want {
						t.Errorf("bulk-move item status for %s: got %d, want %d (0 = moved): %s", kind, got, want, r.body)
					}
				}
			})
		}
	}
}

// crossObjectCase addresses an object of another deployment or account from acme
// deployment 1 or with acme's credentials.
type crossObjectCase struct {
	name   string
	method string
	authz  func(p *platform) string
	target func(p *platform, t *testing.T) (path string, body any)
	want   int
	check  func(t *testing.T, p *platform, r response)
}

func adminBearer(p *platform) string  { return "Bearer " + p.acme.Users["admin"].Bearer }
func adminKey(p *platform) string     { return "Api-Key " + p.acme.APIKeys["admin"] }
func globexKey(p *platform) string    { return "Api-Key " + p.globex.APIKeys["admin"] }
func embedBearer(p *platform) string  { return "Bearer " + p.embedToken }
func globexBearer(p *platform) string { return "Bearer " + p.globex.Users["admin"].Bearer }
func scopedKey(p *platform) string    { return "Api-Key " + p.acme.APIKeys["adminScoped"] }

var crossObjectCases = []crossObjectCase{
	{"create-folder-404-other-account-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["globex"].path("/folders"), map[string]any{"name": "x"}
	}, 404, nil},
	{"create-folder-404-unknown-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/deployments/987654321/folders", map[string]any{"name": "x"}
	}, 404, nil},
	{"create-folder-404-parent-in-other-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders"), map[string]any{"name": "x", "parentId": p.scopes["acme-2"].folder}
	}, 404, nil},
	{"create-folder-404-parent-in-other-account", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders"), map[string]any{"name": "x", "parentId": p.scopes["globex"].folder}
	}, 404, nil},
	{"get-folder-404-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d", p.scopes["acme-2"].folder), nil
	}, 404, nil},
	{"get-folder-404-other-account", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d", p.scopes["globex"].folder), nil
	}, 404, nil},
	{"rename-folder-404-other-deployment", "PATCH", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d", p.scopes["acme-2"].folder), map[string]any{"name": "stolen"}
	}, 404, nil},
	{"rename-folder-404-other-account", "PATCH", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d", p.scopes["globex"].folder), map[string]any{"name": "stolen"}
	}, 404, nil},
	{"delete-folder-404-other-deployment", "DELETE", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d", p.scopes["acme-2"].emptyFolder), nil
	}, 404, nil},
	{"delete-folder-404-other-account", "DELETE", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d", p.scopes["globex"].emptyFolder), nil
	}, 404, nil},
	{"get-folder-permissions-404-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d/permissions", p.scopes["acme-2"].folder), nil
	}, 404, nil},
	{"set-folder-permissions-404-other-account", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d/permissions", p.scopes["globex"].folder), map[string]any{"grants": []any{}}
	}, 404, nil},
	{"list-workspace-404-folder-of-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workspace?folderId=%d", p.scopes["acme-2"].folder), nil
	}, 404, nil},
	{"list-workspace-404-folder-of-other-account", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workspace?folderId=%d", p.scopes["globex"].folder), nil
	}, 404, nil},
	{"move-404-item-of-other-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workspace/move"), map[string]any{"type": "WORKBOOK", "id": p.scopes["acme-2"].workbook, "folderId": nil}
	}, 404, nil},
	{"move-404-item-of-other-account", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workspace/move"), map[string]any{"type": "REPORT", "id": p.scopes["globex"].report, "folderId": nil}
	}, 404, nil},
	{"move-404-destination-in-other-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workspace/move"), map[string]any{"type": "WORKBOOK", "id": p.scopes["acme-1"].workbook, "folderId": p.scopes["acme-2"].folder}
	}, 404, nil},
	{"move-404-destination-in-other-account", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workspace/move"), map[string]any{"type": "FOLDER", "id": p.scopes["acme-1"].emptyFolder, "folderId": p.scopes["globex"].folder}
	}, 404, nil},
	{"bulk-move-200-items-of-other-deployment-and-account-fail-404", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workspace/bulk-move"), map[string]any{"folderId": nil, "items": []any{
			map[string]any{"type": "WORKBOOK", "id": p.scopes["acme-2"].workbook},
			map[string]any{"type": "FOLDER", "id": p.scopes["globex"].folder},
			map[string]any{"type": "REPORT", "id": p.scopes["globex"].report},
		}}
	}, 200, func(t *testing.T, p *platform, r response) {
		var out struct {
			Moved  []json.RawMessage `json:"moved"`
			Failed []struct {
				ID    int64 `json:"id"`
				Error struct {
					Status int `json:"status"`
				} `json:"error"`
			} `json:"failed"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil || len(out.Moved) != 0 || len(out.Failed) != 3 {
			t.Fatalf("want 0 moved and 3 failed: %s", r.body)
		}
		for _, f := range out.Failed {
			if f.Error.Status != 404 {
				t.Errorf("item %d: status %d, want 404", f.ID, f.Error.Status)
			}
		}
	}},
	{"bulk-move-200-destination-in-other-deployment-fails-404", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workspace/bulk-move"), map[string]any{"folderId": p.scopes["acme-2"].folder,
			"items": []any{map[string]any{"type": "WORKBOOK", "id": p.scopes["acme-1"].workbook}}}
	}, 200, func(t *testing.T, p *platform, r response) {
		if got := bulkItemStatus(t, r); got != 404 {
			t.Errorf("item status %d, want 404: %s", got, r.body)
		}
	}},
	{"create-workbook-404-folder-of-other-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks"), map[string]any{"name": "x", "folderId": p.scopes["acme-2"].folder}
	}, 404, nil},
	{"create-report-404-folder-of-other-account", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/reports"), map[string]any{"name": "x", "folderId": p.scopes["globex"].folder}
	}, 404, nil},
	{"get-workbook-404-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d", p.scopes["acme-2"].workbook), nil
	}, 404, nil},
	{"get-workbook-404-other-account", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d", p.scopes["globex"].workbook), nil
	}, 404, nil},
	{"get-workbook-404-a-report-id", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d", p.scopes["acme-1"].report), nil
	}, 404, nil},
	{"publish-workbook-404-other-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/publish", p.scopes["acme-2"].workbook), nil
	}, 404, nil},
	{"publish-workbook-404-other-account", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/publish", p.scopes["globex"].workbook), nil
	}, 404, nil},
	{"update-workbook-404-other-deployment", "PATCH", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d", p.scopes["acme-2"].workbook), map[string]any{"name": "x"}
	}, 404, nil},
	{"delete-report-404-other-account", "DELETE", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/reports/%d", p.scopes["globex"].report), nil
	}, 404, nil},
	{"list-dashboard-versions-404-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/dashboard/versions", p.scopes["acme-2"].workbook), nil
	}, 404, nil},
	{"restore-dashboard-version-404-other-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		// Version 1 whether or not it is kept: publishing there first would change what
		// rejected-cross-object-requests-change-nothing holds still.
		return p.scopes["acme-1"].path("/workbooks/%d/dashboard/versions/1/restore", p.scopes["acme-2"].workbook), nil
	}, 404, nil},
	{"restore-dashboard-version-404-other-account", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		// Version 1 whether or not it is kept: publishing there first would change what
		// rejected-cross-object-requests-change-nothing holds still.
		return p.scopes["acme-1"].path("/workbooks/%d/dashboard/versions/1/restore", p.scopes["globex"].workbook), nil
	}, 404, nil},
	{"preview-promotion-404-into-other-account", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/promotion-previews", p.scopes["acme-1"].workbook), map[string]any{"targetDeploymentId": p.scopes["globex"].dep}
	}, 404, nil},
	{"preview-promotion-404-into-other-account-folder", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/promotion-previews", p.scopes["acme-1"].workbook),
			map[string]any{"targetDeploymentId": p.scopes["acme-2"].dep, "targetFolderId": p.scopes["globex"].folder}
	}, 404, nil},
	{"duplicate-workbook-404-other-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/duplicate", p.scopes["acme-2"].workbook), nil
	}, 404, nil},
	{"duplicate-folder-404-into-other-account-folder", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d/duplicate", p.scopes["acme-1"].emptyFolder), map[string]any{"folderId": p.scopes["globex"].folder}
	}, 404, nil},
	{"unpublish-workbook-404-other-account", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/unpublish", p.scopes["globex"].workbook), nil
	}, 404, nil},
	{"favorite-404-other-deployment", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workspace/favorites/workbook/%d", p.scopes["acme-2"].workbook), nil
	}, 404, nil},
	{"get-report-404-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/reports/%d", p.scopes["acme-2"].report), nil
	}, 404, nil},
	{"get-report-404-other-account", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/reports/%d", p.scopes["globex"].report), nil
	}, 404, nil},
	{"get-dbt-sync-404-job-of-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/dbt-sync/%s", p.scopes["acme-2"].syncJob), nil
	}, 404, nil},
	{"get-dbt-sync-404-job-of-other-account", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/dbt-sync/%s", p.scopes["globex"].syncJob), nil
	}, 404, nil},
	{"cancel-dbt-sync-404-job-of-other-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/dbt-sync/%s/cancel", p.scopes["acme-2"].syncJob), nil
	}, 404, nil},
	{"retry-dbt-sync-404-job-of-other-account", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/dbt-sync/%s/retry", p.scopes["globex"].failedJob), nil
	}, 404, nil},
	{"start-dbt-sync-404-other-account-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["globex"].path("/dbt-sync"), map[string]any{"source": "manifest", "manifest": smallManifest("orders")}
	}, 404, nil},
	{"get-dbt-git-integration-404-other-account-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["globex"].path("/dbt-git-integration"), nil
	}, 404, nil},
	{"put-dbt-git-integration-404-other-account-deployment", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["globex"].path("/dbt-git-integration"), p.gitIntegration()
	}, 404, nil},
	{"list-branches-404-other-account-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["globex"].buildPath(""), nil
	}, 404, nil},
	{"get-branch-404-branch-of-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].buildPath("/" + p.scopes["acme-2"].branch), nil
	}, 404, nil},
	{"list-branch-files-404-branch-of-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].buildPath("/" + p.scopes["acme-2"].branch + "/files"), nil
	}, 404, nil},
	{"get-branch-file-404-branch-of-other-account", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].buildPath("/" + p.scopes["globex"].branch + "/files/model/cubes/orders.yml"), nil
	}, 404, nil},
	{"list-branch-versions-404-branch-of-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].buildPath("/" + p.scopes["acme-2"].branch + "/versions"), nil
	}, 404, nil},
	{"open-branch-404-branch-of-other-deployment", "POST", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].buildPath("/" + p.scopes["acme-2"].branch + "/open"), nil
	}, 404, nil},
	{"set-branch-staging-404-branch-of-other-account", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].buildPath("/" + p.scopes["globex"].branch + "/staging"), map[string]any{"enabled": true}
	}, 404, nil},
	{"generate-session-404-other-account-deployment", "POST", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/generate-session", map[string]any{"deploymentId": p.scopes["globex"].dep, "externalId": "x"}
	}, 404, nil},
	{"generate-session-404-branch-of-other-deployment", "POST", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/generate-session", map[string]any{"deploymentId": p.scopes["acme-1"].dep, "externalId": "x", "branchName": p.scopes["acme-2"].branch}
	}, 404, nil},
	{"generate-session-404-internal-user-of-other-account", "POST", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/generate-session", map[string]any{"deploymentId": p.scopes["acme-1"].dep, "internalId": p.globex.Users["admin"].Username}
	}, 404, nil},
	{"data-api-token-404-other-deployment", "POST", embedBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-2"].path("/token"), nil
	}, 404, nil},
	{"data-api-token-404-other-account-deployment", "POST", embedBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["globex"].path("/token"), nil
	}, 404, nil},
	{"list-tenant-groups-404-tenant-of-other-account", "GET", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed-tenants/" + p.globexTenant + "/groups", nil
	}, 404, nil},
	{"list-tenant-user-attributes-404-tenant-of-other-account", "GET", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed-tenants/" + p.globexTenant + "/user-attributes", nil
	}, 404, nil},
	{"delete-tenant-group-404-id-of-other-tenant", "DELETE", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed-tenants/" + p.tenantB + "/groups/" + p.tenantGroupID, nil
	}, 404, nil},
	{"delete-tenant-user-attribute-404-id-of-other-tenant", "DELETE", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed-tenants/" + p.tenantB + "/user-attributes/" + p.tenantAttrID, nil
	}, 404, nil},
	{"delete-tenant-group-404-other-account-key", "DELETE", globexKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed-tenants/" + p.tenantA + "/groups/" + p.tenantGroupID, nil
	}, 404, nil},
	{"delete-tenant-group-404-through-own-tenant-name", "DELETE", globexKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed-tenants/" + p.globexTenant + "/groups/" + p.tenantGroupID, nil
	}, 404, nil},
	{"delete-group-404-group-of-other-account", "DELETE", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/groups/" + p.globexGroupID, nil
	}, 404, nil},
	{"delete-group-404-group-of-other-account-bearer", "DELETE", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/groups/" + p.globexGroupID, nil
	}, 404, nil},
	{"delete-user-attribute-404-attribute-of-other-account", "DELETE", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/user-attributes/" + p.globexAttrID, nil
	}, 404, nil},
	{"delete-group-404-tenant-group-id-on-account-route", "DELETE", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/groups/" + p.tenantGroupID, nil
	}, 404, nil},
	// Embed grants: an object of another deployment or account is 404 on every grant route,
	// and a grant naming it changes nothing (the snapshot reads its embed access).
	{"get-workbook-embed-access-404-other-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/embed-access", p.scopes["acme-2"].workbook), nil
	}, 404, nil},
	{"set-workbook-embed-access-404-other-account", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/embed-access", p.scopes["globex"].workbook), map[string]any{"allEmbedUsers": "read"}
	}, 404, nil},
	{"set-workbook-embed-access-404-a-report-id", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/workbooks/%d/embed-access", p.scopes["acme-1"].report), map[string]any{"allEmbedUsers": "read"}
	}, 404, nil},
	{"get-folder-embed-access-404-other-account", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d/embed-access", p.scopes["globex"].folder), nil
	}, 404, nil},
	{"set-folder-embed-access-404-other-deployment", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d/embed-access", p.scopes["acme-2"].folder), map[string]any{"allEmbedUsers": "read"}
	}, 404, nil},
	{"set-folder-embed-access-404-a-workbook-id", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-1"].path("/folders/%d/embed-access", p.scopes["acme-1"].workbook), map[string]any{"allEmbedUsers": "read"}
	}, 404, nil},
	{"set-root-embed-access-404-other-account-deployment", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["globex"].path("/embed-access"), map[string]any{"allEmbedUsers": "read"}
	}, 404, nil},
	{"list-embed-tenant-workbooks-404-other-account-deployment", "GET", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["globex"].path("/embed-tenants/%s/workbooks", p.globexTenant), nil
	}, 404, nil},
	{"set-workbook-embed-access-400-invalid-tenant-changes-nothing", "PUT", adminBearer, func(p *platform, t *testing.T) (string, any) {
		return p.scopes["acme-2"].path("/workbooks/%d/embed-access", p.scopes["acme-2"].workbook),
			map[string]any{"tenants": []any{map[string]any{"embedTenantName": "Not A Tenant", "access": "read"}}}
	}, 400, nil},
	// The viewer's dashboards: an embed token of acme deployment 1 never sees another
	// deployment's or account's dashboard, whatever public id it sends; each is the one 404.
	{"get-embed-dashboard-404-other-deployment", "GET", embedBearer, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/dashboards/" + p.scopes["acme-2"].publicID, nil
	}, 404, wantDashboardNotFound(func(p *platform) string { return p.scopes["acme-2"].publicID })},
	{"get-embed-dashboard-404-other-account", "GET", embedBearer, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/dashboards/" + p.scopes["globex"].publicID, nil
	}, 404, wantDashboardNotFound(func(p *platform) string { return p.scopes["globex"].publicID })},
	{"list-embed-dashboards-200-own-deployment-only", "GET", embedBearer, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/dashboards?first=200", nil
	}, 200, func(t *testing.T, p *platform, r response) {
		var page struct {
			Items []struct {
				PublicID string `json:"publicId"`
			} `json:"items"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatalf("%v: %s", err, r.body)
		}
		own := false
		for _, it := range page.Items {
			own = own || it.PublicID == p.scopes["acme-1"].publicID
			if it.PublicID == p.scopes["acme-2"].publicID || it.PublicID == p.scopes["globex"].publicID {
				t.Errorf("the embed token of deployment 1 lists %s of another deployment: %s", it.PublicID, r.body)
			}
		}
		if !own {
			t.Errorf("the embed token does not list its own deployment's embeddable dashboard %s: %s", p.scopes["acme-1"].publicID, r.body)
		}
	}},
	// Group members: another account's group, a tenant's group on the account's route or
	// under another tenant, and another account's user are 404, and nothing is added.
	{"add-group-members-404-group-of-other-account", "POST", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/groups/" + p.globexGroupID + "/users", map[string]any{"externalIds": []string{p.freshTenantUser(t, p.scopes["acme-1"].dep)}}
	}, 404, nil},
	{"list-group-members-404-tenant-group-id-on-account-route", "GET", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/groups/" + p.tenantGroupID + "/users", nil
	}, 404, nil},
	{"add-tenant-group-members-404-group-of-other-tenant", "POST", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed-tenants/" + p.tenantB + "/groups/" + p.tenantGroupID + "/users", map[string]any{"externalIds": []string{p.freshTenantUser(t, p.scopes["acme-1"].dep)}}
	}, 404, nil},
	{"add-tenant-group-members-404-user-of-other-account", "POST", adminKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed-tenants/" + p.tenantB + "/groups/" + p.tenantBGroupID + "/users", map[string]any{"externalIds": []string{"globex-user"}}
	}, 404, nil},
	{"remove-group-member-404-through-other-account-key", "DELETE", globexKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/groups/" + p.acmeGroupID + "/users/" + p.freshTenantMember(t, "", p.acmeGroupID), nil
	}, 404, nil},
	{"revoke-sessions-403-scoped-key-names-another-deployment", "POST", scopedKey, func(p *platform, t *testing.T) (string, any) {
		p.outOfScopeSession = p.mint(t, p.scopes["acme-2"].dep)
		return "/api/v1/embed/sessions/revoke", map[string]any{"deploymentId": p.scopes["acme-2"].dep}
	}, 403, func(t *testing.T, p *platform, r response) {
		if got := p.call(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": p.outOfScopeSession}, nil); got.status != 200 {
			t.Fatalf("deployment 2's session after the scoped key's refused revoke: exchange %d, want 200: %s", got.status, got.body)
		}
	}},
	// An external user is the account's, recorded with every deployment it was minted in: a
	// key scoped to deployment 1 neither mints for (dry run included) nor reads one with a
	// session in deployment 2.
	{"generate-session-403-scoped-key-user-of-other-deployment", "POST", scopedKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/generate-session", map[string]any{"deploymentId": p.scopes["acme-1"].dep,
			"externalId": p.freshTenantUser(t, p.scopes["acme-2"].dep), "embedTenantName": p.tenantA}
	}, 403, wantCode("key_out_of_scope")},
	{"generate-session-dry-run-403-scoped-key-user-of-other-deployment", "POST", scopedKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/generate-session", map[string]any{"deploymentId": p.scopes["acme-1"].dep, "dryRun": true,
			"externalId": p.freshTenantUser(t, p.scopes["acme-2"].dep), "embedTenantName": p.tenantA}
	}, 403, wantCode("key_out_of_scope")},
	{"get-tenant-user-404-scoped-key-user-also-of-other-deployment", "GET", scopedKey, func(p *platform, t *testing.T) (string, any) {
		ext := p.freshTenantUser(t, p.scopes["acme-1"].dep)
		p.mintWith(t, adminKey(p), map[string]any{"deploymentId": p.scopes["acme-2"].dep, "externalId": ext, "embedTenantName": p.tenantA})
		return "/api/v1/embed-tenants/" + p.tenantA + "/users/" + ext, nil
	}, 404, nil},
	{"revoke-204-other-account-leaves-the-session-alive", "POST", globexKey, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/session/revoke", map[string]any{"sessionId": p.embedSessionID}
	}, 204, func(t *testing.T, p *platform, r response) {
		if got := p.call(t, "GET", "/api/v1/embed/session", embedBearer(p), nil, nil); got.status != 200 {
			t.Fatalf("acme's embed token after globex's revoke: %d, want 200: %s", got.status, got.body)
		}
	}},
	{"revoke-204-other-account-bearer-leaves-the-session-alive", "POST", globexBearer, func(p *platform, t *testing.T) (string, any) {
		return "/api/v1/embed/session/revoke", map[string]any{"sessionId": p.embedSessionID}
	}, 204, func(t *testing.T, p *platform, r response) {
		if got := p.call(t, "GET", "/api/v1/embed/session", embedBearer(p), nil, nil); got.status != 200 {
			t.Fatalf("acme's embed token after globex's revoke: %d, want 200: %s", got.status, got.body)
		}
	}},
}

// wantCode checks that an error answer carries code.
func wantCode(code string) func(t *testing.T, p *platform, r response) {
	return func(t *testing.T, p *platform, r response) {
		var e struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal(r.body, &e); err != nil || e.Code != code {
			t.Errorf("code of %s: want %s", r.body, code)
		}
	}
}

// wantDashboardNotFound checks the viewer's one 404: code not_found and the message
// naming the id it was asked for, nothing else.
func wantDashboardNotFound(publicID func(p *platform) string) func(t *testing.T, p *platform, r response) {
	return func(t *testing.T, p *platform, r response) {
		want := fmt.Sprintf(`{"status":404,"code":"not_found","message":"dashboard %s not found"}`, publicID(p))
		if got := strings.TrimSpace(string(r.body)); got != want {
			t.Errorf("body %s, want %s", got, want)
		}
	}
}

// auditOfAcme are queries that name acme's events: another account gets an empty page.
func auditOfAcme(p *platform) []string {
	acme := p.scopes["acme-1"]
	return []string{
		fmt.Sprintf("/api/v1/audit?deploymentId=%d", acme.dep),
		fmt.Sprintf("/api/v1/audit?targetType=folder&targetId=%d", acme.folder),
		fmt.Sprintf("/api/v1/audit?actor=%d", p.acme.Users["admin"].ID),
		"/api/v1/audit?action=workspace.*",
	}
}

func (p *platform) runCrossObject(t *testing.T) {
	// What the other deployment and account hold, read by their owners, before and after:
	// a rejected request changes nothing.
	before := p.snapshot(t)
	for _, c := range crossObjectCases {
		t.Run(c.name, func(t *testing.T) {
			path, body := c.target(p, t)
			r := p.call(t, c.method, path, c.authz(p), body, nil)
			if r.status != c.want {
				t.Fatalf("%s %s: got %d, want %d: %s", c.method, path, r.status, c.want, r.body)
			}
			if r.status >= 400 {
				assertErrorBody(t, r)
				// Another deployment's object is indistinguishable from a missing one.
				if r.status == 404 && strings.Contains(string(r.body), "forbidden") {
					t.Errorf("404 body hints at access: %s", r.body)
				}
			}
			if c.check != nil {
				c.check(t, p, r)
			}
		})
	}
	t.Run("audit-events-of-another-account-are-never-read", func(t *testing.T) {
		// acme's trail has the events of the fixtures (folders, workbooks, sync jobs) ...
		for _, q := range auditOfAcme(p)[:2] {
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				var own struct{ Items []map[string]any }
				r := p.call(t, "GET", q, adminBearer(p), nil, nil)
				if r.status == 200 && json.Unmarshal(r.body, &own) == nil && len(own.Items) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s as acme's admin: no event within 20 s: %d %s", q, r.status, r.body)
				}
			}
		}
		// ... and globex's admin, with either credential, reads none of them.
		for _, authz := range []string{globexKey(p), globexBearer(p)} {
			for _, q := range auditOfAcme(p) {
				r := p.call(t, "GET", q, authz, nil, nil)
				var pg struct {
					Items []struct {
						AccountID int64 `json:"accountId"`
					}
				}
				if r.status != 200 || json.Unmarshal(r.body, &pg) != nil {
					t.Fatalf("%s as globex: %d %s", q, r.status, r.body)
				}
				for _, ev := range pg.Items {
					if ev.AccountID != p.globex.ID {
						t.Fatalf("%s as globex read an event of account %d: %s", q, ev.AccountID, r.body)
					}
				}
				if strings.Contains(q, "deploymentId") || strings.Contains(q, "targetId") {
					if len(pg.Items) != 0 {
						t.Fatalf("%s as globex: %d events, want none", q, len(pg.Items))
					}
				}
			}
		}
	})
	t.Run("rejected-cross-object-requests-change-nothing", func(t *testing.T) {
		after := p.snapshot(t)
		for key, b := range before {
			if after[key] != b {
				t.Errorf("%s changed:\nbefore %s\nafter  %s", key, b, after[key])
			}
		}
	})
}

// snapshot reads the objects of acme deployment 2 and of globex with their owners'
// credentials.
func (p *platform) snapshot(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"acme-2", "globex"} {
		sc := p.scopes[name]
		for _, path := range []string{
			sc.path("/folders/%d", sc.folder), sc.path("/folders/%d", sc.emptyFolder), sc.path("/folders/%d/permissions", sc.folder),
			sc.path("/workbooks/%d", sc.workbook), sc.path("/reports/%d", sc.report), sc.path("/workspace"),
			sc.buildPath("/" + sc.branch),
			sc.path("/workbooks/%d/embed-access", sc.workbook), sc.path("/folders/%d/embed-access", sc.folder), sc.path("/embed-access"),
		} {
			r := p.call(t, "GET", path, "Bearer "+sc.admin, nil, nil)
			out[path] = fmt.Sprintf("%d %s", r.status, withoutLeaseExpiry(r.body))
		}
	}
	for _, path := range []string{"/api/v1/groups", "/api/v1/user-attributes", "/api/v1/groups/" + p.globexGroupID + "/users"} {
		r := p.call(t, "GET", path, globexKey(p), nil, nil)
		out["globex "+path] = fmt.Sprintf("%d %s", r.status, r.body)
	}
	for _, path := range []string{
		"/api/v1/embed-tenants/" + p.tenantA + "/groups?first=200", "/api/v1/embed-tenants/" + p.tenantA + "/user-attributes?first=200",
		"/api/v1/embed-tenants/" + p.tenantB + "/groups/" + p.tenantBGroupID + "/users",
	} {
		r := p.call(t, "GET", path, adminKey(p), nil, nil)
		out[path] = fmt.Sprintf("%d %s", r.status, r.body)
	}
	return out
}

// withoutLeaseExpiry drops the serving lease of a branch document, which moves on its
// own as leases expire; everything else must stay byte for byte.
func withoutLeaseExpiry(body []byte) string {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return string(body)
	}
	delete(m, "leaseExpiresAt")
	delete(m, "served")
	out, _ := json.Marshal(m)
	return string(out)
}

func (p *platform) runSmuggling(t *testing.T) {
	forged := map[string]string{
		"X-Platform-Identity":   "v1.eyJhY2NvdW50Ijp7ImlkIjoxfSwidXNlciI6eyJpZCI6MSwicm9sZSI6ImFkbWluIn19.c2lnbmF0dXJl",
		"X-Platform-User":       strconv.FormatInt(p.acme.Users["admin"].ID, 10),
		"X-Platform-Role":       "admin",
		"X-Platform-Account":    strconv.FormatInt(p.acme.ID, 10),
		"X-Platform-Credential": "api_key",
		"X-Forwarded-For":       "127.0.0.1",
		"X-Real-Ip":             "127.0.0.1",
		"X-Forwarded-User":      p.acme.Users["admin"].Username,
		"X-Remote-User":         p.acme.Users["admin"].Username,
		"X-User-Id":             strconv.FormatInt(p.acme.Users["admin"].ID, 10),
		"X-Account-Id":          strconv.FormatInt(p.acme.ID, 10),
		"X-Api-Key":             p.acme.APIKeys["admin"],
	}
	acme1 := p.scopes["acme-1"]
	cases := []struct {
		name   string
		method string
		path   string
		authz  string
		body   any
		want   int
	}{
		{"list-workspace-401-no-credential", "GET", acme1.path("/workspace"), "", nil, 401},
		{"create-folder-401-no-credential", "POST", acme1.path("/folders"), "", map[string]any{"name": "smuggled"}, 401},
		{"generate-session-401-no-credential", "POST", "/api/v1/embed/generate-session", "", map[string]any{"deploymentId": acme1.dep, "externalId": "x"}, 401},
		{"list-groups-401-garbage-bearer", "GET", "/api/v1/groups", "Bearer garbage", nil, 401},
		{"get-folder-permissions-403-viewer", "GET", acme1.path("/folders/%d/permissions", acme1.folder), "Bearer " + p.acme.Users["viewer"].Bearer, nil, 403},
		{"get-dbt-git-integration-403-developer", "GET", acme1.path("/dbt-git-integration"), "Bearer " + p.acme.Users["developer"].Bearer, nil, 403},
		{"list-groups-403-viewer", "GET", "/api/v1/groups", "Bearer " + p.acme.Users["viewer"].Bearer, nil, 403},
		{"generate-session-403-personal-key", "POST", "/api/v1/embed/generate-session", "Api-Key " + p.acme.APIKeys["personal"], map[string]any{"deploymentId": acme1.dep, "externalId": "x"}, 403},
		{"get-folder-404-other-account-bearer", "GET", acme1.path("/folders/%d", acme1.folder), "Bearer " + p.globex.Users["admin"].Bearer, nil, 404},
		{"describe-session-401-user-bearer", "GET", "/api/v1/embed/session", "Bearer " + p.acme.Users["admin"].Bearer, nil, 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := p.call(t, c.method, c.path, c.authz, c.body, forged)
			if r.status != c.want {
				t.Fatalf("%s %s with identity headers: got %d, want %d: %s", c.method, c.path, r.status, c.want, r.body)
			}
		})
	}
	t.Run("embed-session-describes-the-token-not-the-headers", func(t *testing.T) {
		// The embed session describes the token's user, not the headers'.
		r := p.call(t, "GET", "/api/v1/embed/session", embedBearer(p), nil, forged)
		if r.status != 200 || strings.Contains(string(r.body), p.acme.Users["admin"].Username) {
			t.Fatalf("describe-session with forged headers: %d %s", r.status, r.body)
		}
	})
	// A request that skips the gateway carries no identity the service trusts, forged or not.
	for _, svc := range []struct{ name, path string }{
		{"workspace-svc-1", acme1.path("/workspace")},
		{"embed-svc-1", "/api/v1/groups"},
		{"dbtsync-svc-1", acme1.path("/dbt-sync")},
	} {
		t.Run(svc.name+"-401-bypassing-the-gateway", func(t *testing.T) {
			direct := apitest.New("http://" + p.s.Process(svc.name).Addr)
			req, err := direct.Request("GET", svc.path, "Bearer "+p.acme.Users["admin"].Bearer, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range forged {
				req.Header.Set(k, v)
			}
			resp := direct.Send(t, req)
			if resp.Status != 401 {
				t.Fatalf("%s directly with forged identity: %d, want 401: %s", svc.name, resp.Status, resp.Body)
			}
		})
	}
}

func (p *platform) scanLogs(t *testing.T) {
	logs := p.s.Logs()
	// The scan means something only if requests were logged at all.
	for _, want := range []string{"[gateway] ", "[embed-svc-1] ", "[workspace-svc-1] ", `"status":401`} {
		if !strings.Contains(logs, want) {
			t.Fatalf("logs hold no %q: the scan would prove nothing", want)
		}
	}
	var secrets []string
	for _, acct := range []stacktest.Account{p.acme, p.globex, p.s.Seed.Accounts["initech"]} {
		for _, u := range acct.Users {
			secrets = append(secrets, u.Bearer)
		}
		for _, k := range acct.APIKeys {
			secrets = append(secrets, k)
		}
	}
	secrets = append(secrets, p.s.Secrets()...)
	secrets = append(secrets, p.handedOut()...)
	var parts []string
	for _, s := range secrets {
		parts = append(parts, secretParts(s)...)
	}
	for _, s := range parts {
		if strings.Contains(logs, s) {
			line := ""
			for _, l := range strings.Split(logs, "\n") {
				if strings.Contains(l, s) {
					line = l
					break
				}
			}
			t.Errorf("a secret (%.12s…) appears in the logs: %s", s, line)
		}
	}
	if len(parts) < 30 {
		t.Fatalf("only %d secrets collected", len(parts))
	}
}

// secretParts is the secret itself and the pieces that would leak it on their own: the
// secret half of an API key, the signature of a JWT.
func secretParts(s string) []string {
	out := []string{s}
	if strings.HasPrefix(s, "pk_") {
		if i := strings.LastIndexByte(s, '_'); i > 0 && len(s)-i > 20 {
			out = append(out, s[i+1:])
		}
	}
	if parts := strings.Split(s, "."); len(parts) == 3 && len(parts[2]) >= 40 {
		out = append(out, parts[2])
	}
	return out
}

// ---- the platform under test and its fixtures ----

type platform struct {
	s              *stacktest.Stack
	api            *apitest.Client
	acme, globex   stacktest.Account
	scopes         map[string]*scope
	expired        string
	foreign        string
	gitToken       string
	embedToken     string
	embedSessionID string
	// outOfScopeSession: a session of acme deployment 2 that a key scoped to deployment 1
	// tried to revoke.
	outOfScopeSession string
	tenantA           string // acme creator-mode tenants
	tenantB           string
	globexTenant      string
	tenantGroupID     string // in tenantA
	tenantBGroupID    string
	tenantAttrID      string
	globexGroupID     string
	globexAttrID      string
	acmeGroupID       string // of acme's account catalog
	counter           atomic.Int64
	secrets           []string // credentials minted during the run
}

// scope is the objects created in one deployment by its account's admin.
type scope struct {
	dep         int64
	admin       string // bearer token of the owning account's admin
	folder      int64  // grants edit to acme's developer, ai-bi-user and viewer
	emptyFolder int64
	workbook    int64 // in folder, with a dashboard draft
	report      int64
	syncJob     string
	failedJob   string // a manifest job that failed (no nodes): it can be retried
	branch      string
	// embeddable is a workbook at the root whose dashboard is published with allowEmbed
	// and which grants allEmbedUsers read: what the deployment's embed viewers open.
	embeddable int64
	publicID   string
}

func (sc *scope) path(format string, args ...any) string {
	return fmt.Sprintf("/api/v1/deployments/%d", sc.dep) + fmt.Sprintf(format, args...)
}

func (sc *scope) buildPath(rest string) string {
	return fmt.Sprintf("/build/api/v1/deployments/%d/branches", sc.dep) + rest
}

func startPlatform(t *testing.T) *platform {
	// The matrix makes a fresh service account for every call that consumes one.
	s := stacktest.Start(t, stacktest.Options{Env: []string{"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "RATE_LIMIT_PLAN_FREE=0", "RATE_LIMIT_PLAN_PREMIUM=0", "RATE_LIMIT_PLAN_ENTERPRISE=0", "SERVICE_ACCOUNT_MAX_PER_ACCOUNT=1000"}})
	p := &platform{s: s, api: apitest.New(s.Gateway), acme: s.Seed.Accounts["acme"], globex: s.Seed.Accounts["globex"],
		scopes: map[string]*scope{}, tenantA: "acme-north", tenantB: "acme-south", globexTenant: "globex-only"}
	_, foreignKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	admin := p.acme.Users["admin"].ID
	p.expired = s.Token(admin, -time.Minute)
	p.foreign = stacktest.SignToken(foreignKey, admin, time.Hour)
	p.gitToken = "ghp_" + strconv.FormatInt(time.Now().UnixNano(), 36) + "accesssuitegittoken"
	p.secrets = append(p.secrets, p.expired, p.foreign, p.gitToken)

	p.scopes["acme-1"] = p.populate(t, p.acme.Deployments[0].ID, p.acme.Users["admin"].Bearer, "access-dep1", true)
	p.scopes["acme-2"] = p.populate(t, p.acme.Deployments[1].ID, p.acme.Users["admin"].Bearer, "access-dep2", true)
	p.scopes["globex"] = p.populate(t, p.globex.Deployments[0].ID, p.globex.Users["admin"].Bearer, "access-globex", false)
	for _, sc := range p.scopes {
		p.waitSync(t, sc)
	}
	p.must(t, "PUT", p.scopes["acme-1"].path("/dbt-git-integration"), adminBearer(p), p.gitIntegration(), 200)

	// The embed token of the matrix: an external user of acme deployment 1.
	p.embedSessionID = p.mint(t, p.scopes["acme-1"].dep)
	p.embedToken = p.exchange(t, p.embedSessionID)
	// A data-API token and AI credentials are secrets too: obtain them so the log scan covers them.
	for _, path := range []string{p.scopes["acme-1"].path("/token"), "/api/v1/embed/session/ai-credentials"} {
		out := p.must(t, "POST", path, embedBearer(p), nil, 200)
		for _, v := range out {
			if s, ok := v.(string); ok && len(s) > 40 {
				p.secrets = append(p.secrets, s)
			}
		}
	}

	// Creator-mode tenants of acme with one group and one attribute definition each, and a
	// tenant of globex.
	for _, tenant := range []string{p.tenantA, p.tenantB} {
		p.mintWith(t, adminKey(p), map[string]any{"deploymentId": p.scopes["acme-1"].dep, "externalId": "access-creator", "creatorMode": true,
			"embedTenantName": tenant, "groupDefinitions": []any{map[string]any{"name": tenant + "-fixture"}},
			"userAttributeDefinitions": []any{map[string]any{"name": "fixture_region", "type": "string"}}})
	}
	p.tenantGroupID = p.definitionID(t, p.tenantA, "groups", p.tenantA+"-fixture")
	p.tenantAttrID = p.definitionID(t, p.tenantA, "user-attributes", "fixture_region")
	p.tenantBGroupID = p.definitionID(t, p.tenantB, "groups", p.tenantB+"-fixture")
	p.mintWith(t, globexKey(p), map[string]any{"deploymentId": p.scopes["globex"].dep, "externalId": "globex-user", "embedTenantName": p.globexTenant})
	p.globexGroupID = p.must(t, "POST", "/api/v1/groups", globexKey(p), map[string]any{"name": "globex-fixture"}, 200)["id"].(string)
	p.globexAttrID = p.must(t, "POST", "/api/v1/user-attributes", globexKey(p), map[string]any{"name": "globex_fixture", "type": "string"}, 200)["id"].(string)
	p.acmeGroupID = p.must(t, "POST", "/api/v1/groups", adminKey(p), map[string]any{"name": "acme-members-fixture"}, 200)["id"].(string)
	return p
}

// populate creates a folder (granting edit to acme's non-admin users when grants), an
// empty folder, a workbook with a draft and a report in the folder, and a dbt sync of a
// one-model manifest to branch.
func (p *platform) populate(t *testing.T, dep int64, admin, branch string, grants bool) *scope {
	sc := &scope{dep: dep, admin: admin, branch: branch}
	bearer := "Bearer " + admin
	sc.folder = id(t, p.must(t, "POST", sc.path("/folders"), bearer, map[string]any{"name": "access " + branch}, 200))
	if grants {
		p.must(t, "PUT", sc.path("/folders/%d/permissions", sc.folder), bearer, p.editGrants(), 200)
	}
	sc.emptyFolder = id(t, p.must(t, "POST", sc.path("/folders"), bearer, map[string]any{"name": "empty " + branch}, 200))
	sc.workbook = id(t, p.must(t, "POST", sc.path("/workbooks"), bearer, map[string]any{"name": "workbook " + branch, "folderId": sc.folder,
		"dashboardDraft": map[string]any{"kind": "CLASSIC", "title": "draft", "widgets": []any{}}}, 200))
	sc.report = id(t, p.must(t, "POST", sc.path("/reports"), bearer, map[string]any{"name": "report " + branch, "folderId": sc.folder}, 200))
	out := p.must(t, "POST", sc.path("/dbt-sync"), bearer, map[string]any{"source": "manifest", "manifest": smallManifest("orders"), "branchName": branch}, 202)
	sc.syncJob, _ = out["syncJobId"].(string)
	noNodes := map[string]any{"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"}}
	out = p.must(t, "POST", sc.path("/dbt-sync"), bearer, map[string]any{"source": "manifest", "manifest": noNodes, "output": "files"}, 202)
	sc.failedJob, _ = out["syncJobId"].(string)
	sc.embeddable = id(t, p.must(t, "POST", sc.path("/workbooks"), bearer, map[string]any{"name": "embeddable " + branch,
		"dashboardDraft": map[string]any{"kind": "CLASSIC", "title": "embedded", "widgets": []any{}}}, 200))
	published := p.must(t, "POST", sc.path("/workbooks/%d/publish", sc.embeddable), bearer, map[string]any{"allowEmbed": true}, 200)
	dash, _ := published["publishedDashboard"].(map[string]any)
	if sc.publicID, _ = dash["publicId"].(string); sc.publicID == "" {
		t.Fatalf("published workbook without a public id: %v", published)
	}
	p.must(t, "PUT", sc.path("/workbooks/%d/embed-access", sc.embeddable), bearer, map[string]any{"allEmbedUsers": "read"}, 200)
	return sc
}

func (p *platform) waitSync(t *testing.T, sc *scope) {
	deadline := time.Now().Add(90 * time.Second)
	for id, want := range map[string]string{sc.syncJob: "succeeded", sc.failedJob: "failed"} {
		for {
			job := p.must(t, "GET", sc.path("/dbt-sync/%s", id), "Bearer "+sc.admin, nil, 200)
			if s := job["status"]; s == want {
				break
			} else if s == "succeeded" || s == "failed" {
				t.Fatalf("fixture sync %s %s, want %s: %v", id, s, want, job)
			}
			if time.Now().After(deadline) {
				t.Fatalf("fixture sync %s did not finish: %v", id, job)
			}
			time.Sleep(50 * time.Millisecond) // polling interval of a deadline loop
		}
	}
}

func (p *platform) editGrants() map[string]any {
	var grants []any
	for _, role := range []string{"developer", "aiBiUser", "viewer"} {
		grants = append(grants, map[string]any{"userId": p.acme.Users[role].ID, "level": "edit"})
	}
	return map[string]any{"grants": grants}
}

// tenantGrant is an object's embed grants letting tenant A read it.
func (p *platform) tenantGrant() map[string]any {
	return map[string]any{"tenants": []any{map[string]any{"embedTenantName": p.tenantA, "access": "read"}}}
}

func (p *platform) gitIntegration() map[string]any {
	return map[string]any{"repoUrl": "https://git.example.com/acme/dbt.git", "branch": "main", "projectPath": ".",
		"credentials": map[string]any{"token": p.gitToken}}
}

func (p *platform) unique(prefix string) string {
	return fmt.Sprintf("%s %d", prefix, p.counter.Add(1))
}

// key is an item key no other call uses.
func (p *platform) key(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, p.counter.Add(1))
}

// sharedFolder is a new folder of sc, created by its admin with the edit grants, for a
// call that deletes it.
func (p *platform) sharedFolder(t *testing.T, sc *scope) int64 {
	f := id(t, p.must(t, "POST", sc.path("/folders"), "Bearer "+sc.admin, map[string]any{"name": p.unique("doomed")}, 200))
	p.must(t, "PUT", sc.path("/folders/%d/permissions", f), "Bearer "+sc.admin, p.editGrants(), 200)
	return f
}

// otherAcme is the scope of acme's other deployment: where sc's workbooks are promoted.
func (p *platform) otherAcme(sc *scope) *scope {
	if sc == p.scopes["acme-1"] {
		return p.scopes["acme-2"]
	}
	return p.scopes["acme-1"]
}

// freshWorkbook is a new workbook in sc's shared folder, for a call that moves it.
func (p *platform) freshWorkbook(t *testing.T, sc *scope) int64 {
	return id(t, p.must(t, "POST", sc.path("/workbooks"), "Bearer "+sc.admin, map[string]any{"name": p.unique("movable"), "folderId": sc.folder}, 200))
}

// freshTenantDefinition upserts a new definition into tenantA through generate-session
// (the only way definitions reach a tenant) and returns its id.
func (p *platform) freshTenantDefinition(t *testing.T, kind string) string {
	name := strings.ReplaceAll(p.unique("def"), " ", "_")
	body := map[string]any{"deploymentId": p.scopes["acme-1"].dep, "externalId": "access-creator", "creatorMode": true, "embedTenantName": p.tenantA}
	if kind == "groups" {
		body["groupDefinitions"] = []any{map[string]any{"name": name}}
	} else {
		body["userAttributeDefinitions"] = []any{map[string]any{"name": name, "type": "string"}}
	}
	p.mintWith(t, adminKey(p), body)
	return p.definitionID(t, p.tenantA, kind, name)
}

func (p *platform) definitionID(t *testing.T, tenant, kind, name string) string {
	after := ""
	for {
		path := "/api/v1/embed-tenants/" + tenant + "/" + kind + "?first=200"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		r := p.call(t, "GET", path, adminKey(p), nil, nil)
		var page struct {
			Items    []struct{ ID, Name string } `json:"items"`
			PageInfo struct {
				HasNextPage bool   `json:"hasNextPage"`
				EndCursor   string `json:"endCursor"`
			} `json:"pageInfo"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("list %s of %s: %d %s", kind, tenant, r.status, r.body)
		}
		for _, it := range page.Items {
			if it.Name == name {
				return it.ID
			}
		}
		if !page.PageInfo.HasNextPage {
			t.Fatalf("definition %q not in %s of %s", name, kind, tenant)
		}
		after = page.PageInfo.EndCursor
	}
}

// freshCatalogEntry creates an account-wide group or attribute of acme, for a call that
// deletes it.
func (p *platform) freshCatalogEntry(t *testing.T, kind string) string {
	body := map[string]any{"name": strings.ReplaceAll(p.unique("doomed"), " ", "_")}
	if kind == "user-attributes" {
		body["type"] = "string"
	}
	out := p.must(t, "POST", "/api/v1/"+kind, adminKey(p), body, 200)
	idv, _ := out["id"].(string)
	return idv
}

// freshAPIKey is a new API key of acme, expiring within the hour, for a call that reads,
// revokes or rotates it.
// freshServiceAccount is a new viewer service account of acme, for a call that reads or
// deletes it.
func (p *platform) freshServiceAccount(t *testing.T) int64 {
	return id(t, p.must(t, "POST", "/api/v1/service-accounts", adminBearer(p), map[string]any{"name": "matrix", "role": "viewer"}, 201))
}

// freshClientSecret is a new client secret of a new service account of acme: the
// service account, the client id and the secret (which the log scan looks for).
func (p *platform) freshClientSecret(t *testing.T) (int64, string, string) {
	sa := p.freshServiceAccount(t)
	out := p.must(t, "POST", fmt.Sprintf("/api/v1/service-accounts/%d/secrets", sa), adminBearer(p), nil, 201)
	clientID, _ := out["clientId"].(string)
	secret, _ := out["clientSecret"].(string)
	p.secrets = append(p.secrets, secret)
	return sa, clientID, secret
}

func (p *platform) freshAPIKey(t *testing.T) string {
	out := p.must(t, "POST", "/api/v1/api-keys", adminBearer(p),
		map[string]any{"name": "matrix", "kind": "account", "expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 201)
	idv, _ := out["id"].(string)
	return idv
}

// matrixWebhooks are the webhooks the matrix reads and changes, one per deployment.
var matrixWebhooks sync.Map // deployment id → webhook id

// webhook is acme's webhook of sc's deployment, made once (by acme's admin).
func (p *platform) webhook(t *testing.T, sc *scope) string {
	if id, ok := matrixWebhooks.Load(sc.dep); ok {
		return id.(string)
	}
	id := p.freshWebhook(t, sc)
	matrixWebhooks.Store(sc.dep, id)
	return id
}

// freshWebhook is a new webhook of acme for sc's deployment, for a call that deletes it.
// The matrix leaves fewer webhooks than an account may have (WEBHOOK_MAX_SUBSCRIPTIONS).
func (p *platform) freshWebhook(t *testing.T, sc *scope) string {
	out := p.must(t, "POST", "/api/v1/webhooks", adminBearer(p),
		map[string]any{"url": "https://hooks.example.com/matrix", "events": []string{"*"}, "deploymentIds": []int64{sc.dep}}, 201)
	id, _ := out["id"].(string)
	return id
}

// freshTenantMember is a new external user of tenant A made a member of groupID, of
// tenant's catalog ("": the account's), for a call that removes it.
func (p *platform) freshTenantMember(t *testing.T, tenant, groupID string) string {
	ext := p.freshTenantUser(t, p.scopes["acme-1"].dep)
	path := "/api/v1/groups/" + groupID + "/users"
	if tenant != "" {
		path = "/api/v1/embed-tenants/" + tenant + "/groups/" + groupID + "/users"
	}
	p.must(t, "POST", path, adminKey(p), map[string]any{"externalIds": []string{ext}}, 200)
	return ext
}

func (p *platform) mint(t *testing.T, dep int64) string {
	return p.mintWith(t, adminKey(p), map[string]any{"deploymentId": dep, "externalId": "access-viewer"})
}

// freshTenantUser mints a session in deployment dep for a new external user of tenant A
// and returns the user's external id.
func (p *platform) freshTenantUser(t *testing.T, dep int64) string {
	ext := p.unique("access-user")
	p.mintWith(t, adminKey(p), map[string]any{"deploymentId": dep, "externalId": ext, "embedTenantName": p.tenantA})
	return strings.ToLower(ext)
}

func (p *platform) mintWith(t *testing.T, authz string, body map[string]any) string {
	out := p.must(t, "POST", "/api/v1/embed/generate-session", authz, body, 200)
	sid, _ := out["sessionId"].(string)
	if sid == "" {
		t.Fatalf("generate-session without sessionId: %v", out)
	}
	p.secrets = append(p.secrets, sid)
	return sid
}

func (p *platform) exchange(t *testing.T, sid string) string {
	out := p.must(t, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": sid}, 200)
	tok, _ := out["token"].(string)
	if tok == "" {
		t.Fatalf("exchange without token: %v", out)
	}
	p.secrets = append(p.secrets, tok)
	return tok
}

func (p *platform) handedOut() []string { return p.secrets }

// authorization is the Authorization header of a credential kind for a route.
func (p *platform) authorization(t *testing.T, kind string, sch scheme) string {
	switch kind {
	case "none":
		return ""
	case "garbage":
		if sch == schemeAPIKey || sch == schemeAPIKeyOrBearer {
			return "Api-Key pk_00000000000000ff_" + strings.Repeat("A", 43)
		}
		return "Bearer not.a.token"
	case "expired-bearer":
		return "Bearer " + p.expired
	case "foreign-signature":
		return "Bearer " + p.foreign
	case "admin-key":
		return "Api-Key " + p.acme.APIKeys["admin"]
	case "scoped-key-in-scope", "scoped-key-out-of-scope":
		return "Api-Key " + p.acme.APIKeys["adminScoped"]
	case "personal-key":
		return "Api-Key " + p.acme.APIKeys["personal"]
	case "admin", "developer", "viewer":
		return "Bearer " + p.acme.Users[kind].Bearer
	case "ai-bi-user":
		return "Bearer " + p.acme.Users["aiBiUser"].Bearer
	case "embed-token":
		return "Bearer " + p.embedToken
	case "other-account-key":
		return "Api-Key " + p.globex.APIKeys["admin"]
	case "other-account-bearer":
		return "Bearer " + p.globex.Users["admin"].Bearer
	}
	t.Fatalf("unknown credential kind %q", kind)
	return ""
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (p *platform) call(t *testing.T, method, path, authz string, body any, headers map[string]string) response {
	t.Helper()
	form, isForm := body.(url.Values)
	if isForm {
		body = form.Encode()
	}
	req, err := p.api.Request(method, path, authz, body)
	if err != nil {
		t.Fatal(err)
	}
	if isForm {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	r := p.api.Send(t, req)
	return response{status: r.Status, header: r.Header, body: r.Body}
}

// publishedVersion publishes the scope's workbook as its admin and answers the version
// number it published: a kept version of its dashboard.
func (p *platform) publishedVersion(t *testing.T, sc *scope) int64 {
	t.Helper()
	w := p.must(t, "POST", sc.path("/workbooks/%d/publish", sc.workbook), "Bearer "+sc.admin, nil, 200)
	d, _ := w["publishedDashboard"].(map[string]any)
	n, _ := d["versionNumber"].(float64)
	if n < 1 {
		t.Fatalf("publish answered no version number: %v", w)
	}
	return int64(n)
}

func (p *platform) must(t *testing.T, method, path, authz string, body any, want int) map[string]any {
	t.Helper()
	r := p.call(t, method, path, authz, body, nil)
	if r.status != want {
		t.Fatalf("fixture %s %s: %d, want %d: %s", method, path, r.status, want, r.body)
	}
	out := map[string]any{}
	if len(r.body) > 0 {
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatalf("fixture %s %s: %v: %s", method, path, err, r.body)
		}
	}
	return out
}

func id(t *testing.T, m map[string]any) int64 {
	t.Helper()
	f, ok := m["id"].(float64)
	if !ok || f <= 0 {
		t.Fatalf("no id in %v", m)
	}
	return int64(f)
}

// assertErrorBody checks the house error body: {"status": <the HTTP status>, "code": one
// of the codes sent with that status, "message": "..."}.
func assertErrorBody(t *testing.T, r response) {
	t.Helper()
	var e struct {
		Status  int    `json:"status"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Status != r.status || e.Message == "" || !codeFits(e.Code, r.status) {
		t.Errorf("error body %s is not {\"status\": %d, \"code\": <a code of %d>, \"message\": ...}", r.body, r.status, r.status)
	}
}

// codeFits reports whether code is sent with status (errs.Codes).
func codeFits(code string, status int) bool {
	statuses, ok := errs.Codes[code]
	if !ok {
		return false
	}
	if statuses == nil {
		return code == errs.DefaultCode(status)
	}
	for _, s := range statuses {
		if s == status {
			return true
		}
	}
	return false
}

// revokedCount is the "revoked" of a bulk revoke's answer.
func revokedCount(t *testing.T, r response) int {
	t.Helper()
	var out struct {
		Revoked *int `json:"revoked"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || out.Revoked == nil {
		t.Fatalf("bulk revoke answer without revoked: %s", r.body)
	}
	return *out.Revoked
}

// bulkItemStatus is the error status of the single item of a bulk-move result, 0 when it moved.
func bulkItemStatus(t *testing.T, r response) int {
	t.Helper()
	var out struct {
		Moved  []json.RawMessage `json:"moved"`
		Failed []struct {
			Error struct {
				Status int `json:"status"`
			} `json:"error"`
		} `json:"failed"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Moved)+len(out.Failed) != 1 {
		t.Fatalf("bulk-move result is not one entry: %s", r.body)
	}
	if len(out.Failed) == 1 {
		return out.Failed[0].Error.Status
	}
	return 0
}

func smallManifest(models ...string) map[string]any {
	nodes := map[string]any{}
	for _, m := range models {
		nodes["model.p."+m] = map[string]any{"resource_type": "model", "name": m, "alias": m, "database": "db", "schema": "s",
			"columns": map[string]any{"id": map[string]any{"name": "id", "data_type": "integer"}}, "config": map[string]any{"materialized": "table"}}
	}
	return map[string]any{"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"}, "nodes": nodes}
}
