package workspace

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

const base = "/api/v1/deployments/{deploymentId}"

// The route classes whose requests in flight fair bounds per account
// (WORKSPACE_MAX_INFLIGHT_PER_ACCOUNT): each class counts on its own. ClassImport is the
// class of POST .../workspace/import, to be guarded with fair.Guard(ClassImport) where it
// is registered.
const (
	ClassBulkMove = "bulk_move"
	ClassPublish  = "publish"
	ClassImport   = "import"
)

// NewHTTPHandler routes the workspace API to the endpoints (MakeEndpoints) through
// httpx.Handle: every body bounded at MaxBodyBytes, every error through errs.Encoder, the
// expensive routes bounded per account by fair (nil: unbounded) before their body is
// read. idem (nil: none) deduplicates every POST by its Idempotency-Key. The caller wraps
// the handler in identity.Require.
func NewHTTPHandler(e Endpoints, logger *slog.Logger, fair *fairshare.Limiter, idem *idempotency.Middleware) http.Handler {
	r := httpx.NewRouter()
	o := httpx.HandleOptions{Logger: logger, MaxBody: MaxBodyBytes, Encode: encodeResponse}
	if idem != nil {
		o.Wrap = idem.Wrap
	}
	httpx.Handle(r, "POST", base+"/folders", e.CreateFolder, decodeCreateFolderRequest, o)
	httpx.Handle(r, "GET", base+"/folders/{folderId}", e.GetFolder, decodeFolderRequest, o)
	httpx.Handle(r, "PATCH", base+"/folders/{folderId}", e.UpdateFolder, decodeUpdateFolderRequest, o)
	httpx.Handle(r, "DELETE", base+"/folders/{folderId}", deleteFolder(e), decodeDeleteFolderRequest, o)
	httpx.Handle(r, "GET", base+"/folders/{folderId}/permissions", e.GetPermissions, decodeFolderRequest, o)
	httpx.Handle(r, "PUT", base+"/folders/{folderId}/permissions", e.SetPermissions, decodeSetPermissionsRequest, o)
	httpx.Handle(r, "GET", base+"/workspace", listOrSearch(e), decodeListRequest, o)
	httpx.Handle(r, "PUT", base+"/workspace/favorites/{type}/{itemId}", e.Favorite, decodeFavoriteRequest(true), o)
	httpx.Handle(r, "DELETE", base+"/workspace/favorites/{type}/{itemId}", e.Favorite, decodeFavoriteRequest(false), o)
	httpx.Handle(r, "POST", base+"/workspace/move", e.Move, decodeMoveRequest, o)
	httpx.Handle(r, "POST", base+"/workspace/bulk-move", e.BulkMove, decodeBulkMoveRequest, o.WithAdmit(fair.Guard(ClassBulkMove)))
	httpx.Handle(r, "POST", base+"/workbooks", e.CreateItem, decodeCreateItemRequest(TypeWorkbook), o)
	httpx.Handle(r, "GET", base+"/workbooks/{workbookId}", e.GetItem, decodeItemRequest(TypeWorkbook, "workbookId"), o)
	httpx.Handle(r, "PATCH", base+"/workbooks/{workbookId}", e.UpdateItem, decodeUpdateItemRequest(TypeWorkbook, "workbookId"), o)
	httpx.Handle(r, "DELETE", base+"/workbooks/{workbookId}", e.DeleteItem, decodeItemRequest(TypeWorkbook, "workbookId"), o)
	httpx.Handle(r, "POST", base+"/workbooks/{workbookId}/publish", e.Publish, decodePublishRequest, o.WithAdmit(fair.Guard(ClassPublish)))
	httpx.Handle(r, "POST", base+"/workbooks/{workbookId}/unpublish", e.Unpublish, decodeItemRequest(TypeWorkbook, "workbookId"), o)
	registerVersions(r, e, o, fair)
	httpx.Handle(r, "POST", base+"/reports", e.CreateItem, decodeCreateItemRequest(TypeReport), o)
	httpx.Handle(r, "GET", base+"/reports/{reportId}", e.GetItem, decodeItemRequest(TypeReport, "reportId"), o)
	httpx.Handle(r, "PATCH", base+"/reports/{reportId}", e.UpdateItem, decodeUpdateItemRequest(TypeReport, "reportId"), o)
	httpx.Handle(r, "DELETE", base+"/reports/{reportId}", e.DeleteItem, decodeItemRequest(TypeReport, "reportId"), o)
	httpx.Handle(r, "GET", base+"/embed-access", e.GetEmbedAccess, decodeEmbedAccessRequest(""), o)
	httpx.Handle(r, "PUT", base+"/embed-access", e.PutEmbedAccess, decodePutEmbedAccessRequest(""), o)
	httpx.Handle(r, "GET", base+"/folders/{folderId}/embed-access", e.GetEmbedAccess, decodeEmbedAccessRequest(TypeFolder), o)
	httpx.Handle(r, "PUT", base+"/folders/{folderId}/embed-access", e.PutEmbedAccess, decodePutEmbedAccessRequest(TypeFolder), o)
	httpx.Handle(r, "GET", base+"/workbooks/{workbookId}/embed-access", e.GetEmbedAccess, decodeEmbedAccessRequest(TypeWorkbook), o)
	httpx.Handle(r, "PUT", base+"/workbooks/{workbookId}/embed-access", e.PutEmbedAccess, decodePutEmbedAccessRequest(TypeWorkbook), o)
	httpx.Handle(r, "GET", base+"/embed-tenants/{embedTenantName}/workbooks", e.TenantWorkbooks, decodeTenantWorkbooksRequest, o)
	registerTrash(r, e, o, fair)
	registerTransfer(r, e, o, fair)
	// The embed viewer's read path: an embed token, whose session names the deployment.
	httpx.Handle(r, "GET", "/api/v1/embed/dashboards", e.EmbedDashboards, decodeEmbedDashboardsRequest, o)
	httpx.Handle(r, "GET", "/api/v1/embed/dashboards/{publicId}", e.EmbedDashboard, decodeEmbedDashboardRequest, o)
	registerKeys(r, e.KeyEndpoints, o)
	registerPromotion(r, e.PromotionEndpoints, o, fair)
	return r
}

// decodeEmbedAccessRequest reads the object of an embed-access route: the root (t ""),
// or the folder or workbook of the path.
func decodeEmbedAccessRequest(t ItemType) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		sc, err := scopeOf(r)
		if err != nil {
			return nil, err
		}
		obj := EmbedObject{Type: t}
		switch t {
		case TypeFolder:
			obj.ID, err = pathID(r, "folderId")
		case TypeWorkbook:
			obj.ID, err = pathID(r, "workbookId")
		}
		if err != nil {
			return nil, err
		}
		return embedAccessRequest{scope: sc, Object: obj}, nil
	}
}

// decodePutEmbedAccessRequest reads a PUT of embed access: the grants (allEmbedUsers,
// tenants, groups; a missing key is no entry) and, ignored, the inherited list of a GET's
// answer, so that answer can be sent back as it is.
func decodePutEmbedAccessRequest(t ItemType) kithttp.DecodeRequestFunc {
	return func(ctx context.Context, r *http.Request) (any, error) {
		er, err := decodeEmbedAccessRequest(t)(ctx, r)
		if err != nil {
			return nil, err
		}
		var body struct {
			AllEmbedUsers embedaccess.Access        `json:"allEmbedUsers"`
			Tenants       []embedaccess.TenantEntry `json:"tenants"`
			Groups        []embedaccess.GroupEntry  `json:"groups"`
			Inherited     json.RawMessage           `json:"inherited"`
		}
		if err := httpx.DecodeJSON(r, &body); err != nil {
			return nil, err
		}
		g := embedaccess.Grants{AllEmbedUsers: body.AllEmbedUsers, Tenants: body.Tenants, Groups: body.Groups}
		return putEmbedAccessRequest{embedAccessRequest: er.(embedAccessRequest), Grants: g}, nil
	}
}

func decodeTenantWorkbooksRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	tenant := r.PathValue("embedTenantName")
	if err := validTenantPath(tenant); err != nil {
		return nil, err
	}
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	in := TenantWorkbooksInput{AccessSource: r.URL.Query().Get("accessSource"), First: pg.First, After: pg.After}
	if in.AccessSource != "" && !slices.Contains(TenantAccessSources, in.AccessSource) {
		return nil, badAccessSource(in.AccessSource)
	}
	return tenantWorkbooksRequest{scope: sc, Tenant: tenant, In: in}, nil
}

func decodeEmbedDashboardsRequest(_ context.Context, r *http.Request) (any, error) {
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	return embedDashboardsRequest{P: identity.FromContext(r.Context()), First: pg.First, After: pg.After}, nil
}

// decodeEmbedDashboardRequest passes the public id on as sent: the service answers a
// malformed one as it answers an unknown one.
func decodeEmbedDashboardRequest(_ context.Context, r *http.Request) (any, error) {
	return embedDashboardRequest{P: identity.FromContext(r.Context()), PublicID: r.PathValue("publicId")}, nil
}

// encodeResponse is httpx.EncodeResponse, a bulk move's failures answered as their
// single moves would have been.
func encodeResponse(ctx context.Context, w http.ResponseWriter, resp any) error {
	if v, ok := resp.(createdAnswer); ok {
		httpx.WriteJSON(w, http.StatusCreated, v.Body)
		return nil
	}
	if v, ok := resp.(BulkMoveResult); ok {
		resp = encodeBulkMoveResult(v)
	}
	return httpx.EncodeResponse(ctx, w, resp)
}

type bulkFailureBody struct {
	Type  ItemType  `json:"type"`
	ID    int64     `json:"id"`
	Error errs.Body `json:"error"`
}

// encodeBulkMoveResult answers each failed item with the status, code and message its
// single move would have been answered with.
func encodeBulkMoveResult(r BulkMoveResult) map[string]any {
	failed := make([]bulkFailureBody, len(r.Failed))
	for i, f := range r.Failed {
		failed[i] = bulkFailureBody{Type: f.Ref.Type, ID: f.Ref.ID, Error: errs.BodyOf(f.Err)}
	}
	return map[string]any{"moved": r.Moved, "failed": failed}
}

func scopeOf(r *http.Request) (scope, error) {
	deploymentID, err := identity.DeploymentFromPath(r)
	if err != nil {
		return scope{}, err
	}
	return scope{P: identity.FromContext(r.Context()), DeploymentID: deploymentID}, nil
}

func pathID(r *http.Request, name string) (int64, error) {
	raw := r.PathValue(name)
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, errs.Invalidf("%s in the path must be a positive integer, not %q", name, raw)
	}
	return id, nil
}

func decodeCreateFolderRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	var body struct {
		Name     *string  `json:"name"`
		ParentID *int64   `json:"parentId"`
		Position *float64 `json:"position"`
		Key      *string  `json:"key"`
	}
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	if body.Name == nil {
		return nil, errs.Invalidf("name is required")
	}
	if err := decodeKeyFields(body.Key, nil); err != nil {
		return nil, err
	}
	in := CreateFolderInput{Name: *body.Name, Position: body.Position}
	if body.Key != nil {
		in.Key = *body.Key
	}
	if body.ParentID != nil {
		if *body.ParentID <= 0 {
			return nil, errs.Invalidf("parentId must be a positive integer; omit it to create at the workspace root")
		}
		in.ParentID = *body.ParentID
	}
	return createFolderRequest{scope: sc, In: in}, nil
}

func decodeFolderRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	id, err := pathID(r, "folderId")
	if err != nil {
		return nil, err
	}
	return folderRequest{scope: sc, ID: id}, nil
}

func decodeUpdateFolderRequest(ctx context.Context, r *http.Request) (any, error) {
	fr, err := decodeFolderRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	var body struct {
		Name            *string  `json:"name"`
		Position        *float64 `json:"position"`
		Key             *string  `json:"key"`
		ExpectedVersion *int64   `json:"expectedVersion"`
	}
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	if body.Name == nil && body.Position == nil && body.Key == nil {
		return nil, errs.Invalidf("nothing to update: send name, position or key")
	}
	if err := decodeKeyFields(body.Key, body.ExpectedVersion); err != nil {
		return nil, err
	}
	f := fr.(folderRequest)
	return updateFolderRequest{scope: f.scope, ID: f.ID, In: UpdateFolderInput{Name: body.Name, Position: body.Position,
		Key: body.Key, ExpectedVersion: body.ExpectedVersion}}, nil
}

func decodeSetPermissionsRequest(ctx context.Context, r *http.Request) (any, error) {
	fr, err := decodeFolderRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	var body struct {
		Grants *[]struct {
			UserID *int64  `json:"userId"`
			Level  *string `json:"level"`
		} `json:"grants"`
	}
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	if body.Grants == nil {
		return nil, errs.Invalidf("grants is required (an empty array removes every grant)")
	}
	grants := make([]Grant, 0, len(*body.Grants))
	for i, g := range *body.Grants {
		if g.UserID == nil {
			return nil, errs.Invalidf("grants[%d].userId is required", i)
		}
		if g.Level == nil {
			return nil, errs.Invalidf("grants[%d].level is required", i)
		}
		grants = append(grants, Grant{UserID: *g.UserID, Level: *g.Level})
	}
	f := fr.(folderRequest)
	return setPermissionsRequest{scope: f.scope, ID: f.ID, Grants: grants}, nil
}

// decodeListRequest reads GET /workspace: a listing of one folder's children, or, when
// any of q, type, createdBy, favorites or sort is given, a search (searchRequest).
func decodeListRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	req := listRequest{scope: sc, First: pg.First, After: pg.After}
	var folder *int64
	if raw := q.Get("folderId"); raw != "" {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			return nil, errs.Invalidf("folderId must be a positive integer, not %q; omit it for the workspace root", raw)
		}
		req.Folder, folder = id, &id
	}
	in := SearchInput{Folder: folder, Q: strings.TrimSpace(q.Get("q")), Sort: q.Get("sort"), First: req.First, After: req.After}
	// Names are valid UTF-8 (JSON makes them so) and a pattern with a NUL byte or invalid
	// UTF-8 is refused by MongoDB: such a q matches nothing and is a client's error.
	if !utf8.ValidString(in.Q) || strings.ContainsFunc(in.Q, unicode.IsControl) {
		return nil, errs.Invalidf("q must be text: valid UTF-8 without control characters (such as NUL, tab or newline)")
	}
	if n := len([]rune(in.Q)); n > MaxNameLength {
		return nil, errs.Invalidf("q must be at most %d characters, not %d", MaxNameLength, n)
	}
	if raw := q.Get("type"); raw != "" {
		if !ItemType(raw).Valid() {
			return nil, errs.Invalidf("type must be one of FOLDER, WORKBOOK, REPORT, not %q", raw)
		}
		in.Type = ItemType(raw)
	}
	switch raw := q.Get("createdBy"); raw {
	case "":
	case "me":
		in.CreatedByMe = true
	default:
		return nil, errs.Invalidf("createdBy must be me, not %q", raw)
	}
	switch raw := q.Get("favorites"); raw {
	case "", "false":
	case "true":
		in.Favorites = true
	default:
		return nil, errs.Invalidf("favorites must be true or false, not %q", raw)
	}
	if in.Sort != "" && !slices.Contains(SearchSorts, in.Sort) {
		return nil, errs.Invalidf("sort must be one of %s, not %q", strings.Join(SearchSorts, ", "), in.Sort)
	}
	if in.Q != "" || in.Type != "" || in.CreatedByMe || in.Favorites || in.Sort != "" {
		return searchRequest{scope: sc, In: in}, nil
	}
	return req, nil
}

// listOrSearch sends a listing or a search to its endpoint.
func listOrSearch(e Endpoints) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		if _, ok := req.(searchRequest); ok {
			return e.Search(ctx, req)
		}
		return e.List(ctx, req)
	}
}
