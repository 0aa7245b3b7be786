package workspace

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/httpx"
)

type (
	promotionRequest struct {
		itemRequest
		In PromotionInput
	}
	promotionsRequest struct {
		itemRequest
		First int
		After string
	}
	duplicateRequest struct {
		itemRequest
		In DuplicateInput
	}
)

// PromotionEndpoints are the endpoints of promotions and duplicates.
type PromotionEndpoints struct {
	PreviewPromotion, Promote, Promotions endpoint.Endpoint
	DuplicateWorkbook, DuplicateFolder    endpoint.Endpoint
}

func makePromotionEndpoints(s Service) PromotionEndpoints {
	return PromotionEndpoints{
		PreviewPromotion: func(ctx context.Context, req any) (any, error) {
			r := req.(promotionRequest)
			return s.PreviewPromotion(ctx, r.P, r.DeploymentID, r.ID, r.In)
		},
		Promote: func(ctx context.Context, req any) (any, error) {
			r := req.(promotionRequest)
			return s.Promote(ctx, r.P, r.DeploymentID, r.ID, r.In)
		},
		Promotions: func(ctx context.Context, req any) (any, error) {
			r := req.(promotionsRequest)
			return s.Promotions(ctx, r.P, r.DeploymentID, r.ID, r.First, r.After)
		},
		DuplicateWorkbook: func(ctx context.Context, req any) (any, error) {
			r := req.(duplicateRequest)
			return s.DuplicateWorkbook(ctx, r.P, r.DeploymentID, r.ID, r.In)
		},
		DuplicateFolder: func(ctx context.Context, req any) (any, error) {
			r := req.(duplicateRequest)
			return s.DuplicateFolder(ctx, r.P, r.DeploymentID, r.ID, r.In)
		},
	}
}

// registerPromotion routes promotions and duplicates. A promotion and a duplicate write
// many items: they are bounded per account with publishes (ClassPublish).
func registerPromotion(r *httpx.Router, e PromotionEndpoints, o httpx.HandleOptions, fair *fairshare.Limiter) {
	heavy := o.WithAdmit(fair.Guard(ClassPublish))
	httpx.Handle(r, "POST", base+"/workbooks/{workbookId}/promotion-previews", e.PreviewPromotion, decodePromotionRequest(false), o)
	httpx.Handle(r, "POST", base+"/workbooks/{workbookId}/promotions", e.Promote, decodePromotionRequest(true), heavy)
	httpx.Handle(r, "GET", base+"/workbooks/{workbookId}/promotions", e.Promotions, decodePromotionsRequest, o)
	httpx.Handle(r, "POST", base+"/workbooks/{workbookId}/duplicate", e.DuplicateWorkbook, decodeDuplicateRequest(TypeWorkbook, "workbookId"), heavy)
	httpx.Handle(r, "POST", base+"/folders/{folderId}/duplicate", e.DuplicateFolder, decodeDuplicateRequest(TypeFolder, "folderId"), heavy)
}

// decodePromotionRequest reads {"targetDeploymentId", "targetFolderId"?} and, for a
// promotion (withHash), the preview's "sourceHash".
func decodePromotionRequest(withHash bool) kithttp.DecodeRequestFunc {
	return func(ctx context.Context, r *http.Request) (any, error) {
		ir, err := decodeItemRequest(TypeWorkbook, "workbookId")(ctx, r)
		if err != nil {
			return nil, err
		}
		var body struct {
			TargetDeploymentID *int64  `json:"targetDeploymentId"`
			TargetFolderID     *int64  `json:"targetFolderId"`
			SourceHash         *string `json:"sourceHash"`
		}
		if err := httpx.DecodeJSON(r, &body); err != nil {
			return nil, err
		}
		if body.TargetDeploymentID == nil || *body.TargetDeploymentID <= 0 {
			return nil, errs.Invalidf("targetDeploymentId is required: a positive integer")
		}
		in := PromotionInput{TargetDeploymentID: *body.TargetDeploymentID}
		if body.TargetFolderID != nil {
			if *body.TargetFolderID <= 0 {
				return nil, errs.Invalidf("targetFolderId must be a positive integer, or null for the target's workspace root")
			}
			in.TargetFolderID = *body.TargetFolderID
		}
		if withHash {
			if body.SourceHash == nil {
				return nil, errs.Invalidf("sourceHash is required: the sourceHash a promotion preview answered")
			}
			if b, err := hex.DecodeString(*body.SourceHash); err != nil || len(b) != 32 {
				return nil, errs.Invalidf("sourceHash must be 64 lowercase hexadecimal digits (a SHA-256), as a promotion preview answers it")
			}
			in.SourceHash = *body.SourceHash
		}
		return promotionRequest{itemRequest: ir.(itemRequest), In: in}, nil
	}
}

func decodePromotionsRequest(ctx context.Context, r *http.Request) (any, error) {
	ir, err := decodeItemRequest(TypeWorkbook, "workbookId")(ctx, r)
	if err != nil {
		return nil, err
	}
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	return promotionsRequest{itemRequest: ir.(itemRequest), First: pg.First, After: pg.After}, nil
}

// decodeDuplicateRequest reads {"folderId"?, "name"?, "deep"?}: folderId absent puts the
// copy beside the original, null at the workspace root. An empty body is {}.
func decodeDuplicateRequest(t ItemType, param string) kithttp.DecodeRequestFunc {
	return func(ctx context.Context, r *http.Request) (any, error) {
		ir, err := decodeItemRequest(t, param)(ctx, r)
		if err != nil {
			return nil, err
		}
		req := duplicateRequest{itemRequest: ir.(itemRequest)}
		if r.ContentLength == 0 {
			return req, nil
		}
		var body struct {
			FolderID json.RawMessage `json:"folderId"`
			Name     *string         `json:"name"`
			Deep     *bool           `json:"deep"`
		}
		if err := httpx.DecodeJSON(r, &body); err != nil {
			return nil, err
		}
		if body.FolderID != nil {
			var id *int64
			if err := json.Unmarshal(body.FolderID, &id); err != nil {
				return nil, errs.Invalidf("folderId must be a positive integer, or null for the workspace root")
			}
			if req.In.FolderID, err = destination(id); err != nil {
				return nil, err
			}
			req.In.FolderSet = true
		}
		req.In.Name = body.Name
		if body.Deep != nil {
			if t != TypeWorkbook {
				return nil, errs.Invalidf("deep is a workbook duplicate's: a folder's duplicate copies everything in it")
			}
			req.In.Deep = *body.Deep
		}
		return req, nil
	}
}
